"""The nodes of a broker run in the foreground (`kcompact broker`), kept running: a node that exits is reaped
(no zombie JVM), said in one line with its pid and exit status, and started again after a pause, which is
said too. A user trying failover kills a node and sees the cluster lose it and get it back."""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Callable, Sequence

from streaming.brokers.local.server import LocalKafka, LocalKafkaError

log = logging.getLogger(__name__)

RESTART_AFTER_S = 5.0  # long enough for leaders to move away, as they would from a node that stays down
POLL_S = 0.5


def exit_text(code: int) -> str:
    """Popen's return code as a person reads it: a signal by its name, else the status."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def supervise(nodes: Sequence[LocalKafka], stop: threading.Event, say: Callable[[str], None],
              restart_after_s: float = RESTART_AFTER_S) -> None:
    """Until ``stop`` is set: reap each node that exits, say so, and start it again ``restart_after_s`` later."""
    due: dict[int, float] = {}  # node id -> when it is started again
    while not stop.wait(POLL_S):
        for node in nodes:
            if node.node_id in due:
                if time.monotonic() >= due[node.node_id]:
                    del due[node.node_id]
                    _start_again(node, say)
            elif node.proc is not None and (code := node.proc.poll()) is not None:  # poll() reaps it
                say(f"node {node.node_id} (pid {node.proc.pid}) exited: {exit_text(code)}; starting it again in "
                    f"{restart_after_s:.0f}s")
                due[node.node_id] = time.monotonic() + restart_after_s


def _start_again(node: LocalKafka, say: Callable[[str], None]) -> None:
    try:
        node.start()
    except LocalKafkaError as exc:
        say(f"node {node.node_id} did not start again: {exc}")
        return
    say(f"node {node.node_id} is back (pid {node.pid})")
