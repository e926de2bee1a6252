"""The link between two regions for bench_pipeline.py's `wan` shapes: a source broker and a sink broker,
each behind a Toxiproxy proxy that adds the link's latency each way and caps its bandwidth each way. A client
"near" a cluster connects to the broker itself; a client "far" from it goes through its proxy, and so pays
for the link, as a client in the other region would.

The kernel here has no netem, so delay and the cap come from Toxiproxy (built into the cache by
tests/toxiproxy.py, as for the network-fault tests).
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' Toxiproxy harness

from streaming.brokers.broker import Broker
from streaming.brokers.choice import start_local_broker
from tests.toxiproxy import BOTH, TOXIPROXY, Proxy, Toxic, Toxiproxy, in_front_of_nodes


@dataclass(frozen=True)
class Link:
    rtt_ms: int = 50
    mbit_s: int = 200

    @property
    def bytes_per_s(self) -> float:
        return self.mbit_s * 1_000_000 / 8

    @property
    def bdp_bytes(self) -> float:
        """The bandwidth-delay product: what must be in flight, unacknowledged, to keep the link full."""
        return self.bytes_per_s * self.rtt_ms / 1000

    def describe(self) -> str:
        return f"{self.rtt_ms} ms round trip, {self.mbit_s} Mbit/s each way (bandwidth-delay product " \
               f"{self.bdp_bytes / 2**20:.2f} MiB)"


@dataclass(frozen=True)
class WanSite:
    source: Broker
    sink: Broker
    link: Link
    proxies: Toxiproxy

    def bytes_across(self) -> int:
        """Bytes that have crossed the link so far, both ways. Toxiproxy counts a connection's bytes when it
        closes, so this reads until the count stops moving: a side's clients are closed when it ends."""
        last, deadline = -1, time.monotonic() + 15
        while True:
            now = sum(self.proxies.bytes_sent().values())
            if now == last or time.monotonic() > deadline:
                return now
            last = now
            time.sleep(1.0)


def _shape(proxy: Proxy, link: Link) -> None:
    """Half the round trip each way, and the cap each way (Toxiproxy's rate is in KB/s)."""
    proxy.add(Toxic.latency(link.rtt_ms // 2), BOTH)
    proxy.add(Toxic.bandwidth(int(link.bytes_per_s / 1000)), BOTH)


@contextlib.contextmanager
def wan_site(work: Path, link: Link) -> Iterator[WanSite]:
    """Two brokers and the link between their regions; every process stopped by PID when it ends."""
    server = Toxiproxy(TOXIPROXY.ensure(), work / "toxiproxy.log")
    try:
        proxied, proxies = in_front_of_nodes(server, 2, "wan")
        for proxy in proxies:
            _shape(proxy, link)
        source = start_local_broker(data_dir=work / "wan-source", proxied=proxied[0])
        try:
            sink = start_local_broker(data_dir=work / "wan-sink", proxied=proxied[1])
            try:
                yield WanSite(source, sink, link, server)
            finally:
                sink.stop()
        finally:
            source.stop()
    finally:
        server.stop()
