"""Work beside the job on a thread of the driver, once every interval until the job stops: the group
offset sync and the topic ACL sync."""

from __future__ import annotations

import threading
from typing import Callable


def every(interval_s: float, stop: threading.Event, name: str, body: Callable[[], object]) -> threading.Thread:
    def rounds() -> None:
        while not stop.wait(interval_s):
            body()
    thread = threading.Thread(target=rounds, name=name, daemon=True)
    thread.start()
    return thread
