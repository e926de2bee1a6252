"""Toxiproxy for the network-fault tests: built once into the cache, one server per test session, and a
small client of its HTTP API.

Toxiproxy is a TCP proxy whose faults ("toxics") are added and removed at run time: latency, a bandwidth
cap, a blackhole (timeout), connections reset, and more. A node that runs behind it advertises the
proxy's port, so every connection a client makes to that node passes through its proxy (see
streaming.brokers.properties). The kernel here has no netem: delay comes from Toxiproxy.

``python -m tests.toxiproxy`` builds the server (the test set-up runs it): Go fetches version
TOXIPROXY.version from the module proxy and compiles it into ~/.cache/kcompact.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Iterator

from prometheus_client.parser import text_string_to_metric_families

from streaming.brokers.local.server import LOCAL_HOST, Proxied, die_with_parent, free_port
from tests.go_tools import GoTool
from tests.processes import stop, wait_answering


class ToxiproxyError(RuntimeError):
    """Toxiproxy could not be started or driven; the message says why."""


TOXIPROXY = GoTool("Toxiproxy", "github.com/Shopify/toxiproxy/v2/cmd/server", "v2.12.0", "server")


class Stream(Enum):
    """Which way a toxic acts, as Toxiproxy names it: toward the broker, or back to the client."""

    UPSTREAM = "upstream"
    DOWNSTREAM = "downstream"


BOTH = (Stream.UPSTREAM, Stream.DOWNSTREAM)


@dataclass(frozen=True)
class Toxic:
    """One of Toxiproxy's toxics: its type and attributes, as its API takes them."""

    type: str
    attributes: dict[str, int]

    @classmethod
    def latency(cls, ms: int, jitter_ms: int = 0) -> "Toxic":
        return cls("latency", {"latency": ms, "jitter": jitter_ms})

    @classmethod
    def bandwidth(cls, kilobytes_per_s: int) -> "Toxic":
        return cls("bandwidth", {"rate": kilobytes_per_s})

    @classmethod
    def blackhole(cls) -> "Toxic":
        """Nothing passes and nothing is closed: the data stops, as behind a partition (timeout 0)."""
        return cls("timeout", {"timeout": 0})

    @classmethod
    def limit_data(cls, limit: int) -> "Toxic":
        """Each connection closed once it carried ``limit`` bytes: a transfer cut off mid-way."""
        return cls("limit_data", {"bytes": limit})

    @classmethod
    def reset_peer(cls, after_ms: int = 0) -> "Toxic":
        """Connections reset (TCP RST) ``after_ms`` after they carry data."""
        return cls("reset_peer", {"timeout": after_ms})


class Toxiproxy:
    """A running Toxiproxy server and the client of its HTTP API. Stopped by PID."""

    def __init__(self, binary: Path, log_path: Path) -> None:
        self.port = free_port()
        with open(log_path, "ab") as out:  # the child keeps its own descriptor
            self.process = subprocess.Popen([str(binary), "-host", LOCAL_HOST, "-port", str(self.port), "-proxy-metrics"],
                                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            preexec_fn=die_with_parent)  # gone with a test run that is killed
        self.log_path = log_path
        wait_answering(self.process, lambda: self._call("GET", "/version"), ToxiproxyError, 30, ToxiproxyError,
                       f"Toxiproxy on {LOCAL_HOST}:{self.port} (log: {log_path})", pause_s=0.1)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://{LOCAL_HOST}:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            raise ToxiproxyError(f"Toxiproxy refused {method} {path}: {exc.code} {exc.read().decode(errors='replace')}") from exc
        except OSError as exc:
            raise ToxiproxyError(f"Toxiproxy at {LOCAL_HOST}:{self.port} did not answer {method} {path}: {exc}") from exc
        return json.loads(text) if text.strip() else None

    def proxy(self, name: str, upstream: str, port: int | None = None) -> "Proxy":
        """A new proxy on ``port`` (a free one if None) of 127.0.0.1 in front of ``upstream`` (host:port),
        which need not listen yet."""
        listen = f"{LOCAL_HOST}:{port or free_port()}"
        self._call("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True})
        return Proxy(self, name, listen)

    def bytes_sent(self) -> dict[str, int]:
        """Bytes each proxy has passed on so far, both ways (its Prometheus metrics): what crossed a link."""
        request = urllib.request.Request(f"http://{LOCAL_HOST}:{self.port}/metrics")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read().decode()
        except OSError as exc:
            raise ToxiproxyError(f"Toxiproxy at {LOCAL_HOST}:{self.port} did not give its metrics: {exc}") from exc
        sent: dict[str, int] = {}
        for family in text_string_to_metric_families(text):
            if family.name == "toxiproxy_proxy_sent_bytes":
                for sample in family.samples:
                    if sample.name.endswith("_total"):
                        sent[sample.labels["proxy"]] = sent.get(sample.labels["proxy"], 0) + int(sample.value)
        return sent

    def reset(self) -> None:
        """Every proxy enabled and every toxic gone: the network whole again."""
        self._call("POST", "/reset")

    def stop(self) -> None:
        stop(self.process)


@dataclass(frozen=True)
class Proxy:
    server: Toxiproxy
    name: str
    listen: str  # host:port clients connect to

    def add(self, toxic: Toxic, streams: tuple[Stream, ...] = BOTH) -> list[str]:
        """The toxic on each of ``streams``; returns the names to remove them by."""
        names = []
        for stream in streams:
            name = f"{toxic.type}-{stream.value}"
            self.server._call("POST", f"/proxies/{self.name}/toxics",
                              {"name": name, "type": toxic.type, "stream": stream.value, "toxicity": 1.0,
                               "attributes": toxic.attributes})
            names.append(name)
        return names

    def remove(self, names: list[str]) -> None:
        for name in names:
            self.server._call("DELETE", f"/proxies/{self.name}/toxics/{name}")


def in_front_of_nodes(server: Toxiproxy, nodes: int, name: str) -> tuple[list[Proxied], list[Proxy]]:
    """A proxy for each of ``nodes`` nodes yet to start, on ports chosen now (streaming.brokers.local)."""
    proxied = [Proxied(broker=free_port(), proxy=free_port()) for _ in range(nodes)]
    proxies = [server.proxy(f"{name}-{i}", f"{LOCAL_HOST}:{p.broker}", p.proxy) for i, p in enumerate(proxied, 1)]
    return proxied, proxies


@contextlib.contextmanager
def toxic(proxies: list[Proxy], toxic: Toxic, streams: tuple[Stream, ...] = BOTH) -> Iterator[None]:
    """The toxic on every one of ``proxies`` while the block runs."""
    added = [(p, p.add(toxic, streams)) for p in proxies]
    try:
        yield
    finally:
        for p, names in added:
            p.remove(names)


if __name__ == "__main__":
    TOXIPROXY.main()
