"""A single-node Apache Kafka of a test's own, to crash: the session's broker must stay up."""

from __future__ import annotations

from streaming.brokers.choice import start_local_broker


class CrashingBroker:
    """A local Apache Kafka of a test's own (the session's must stay up), killed with SIGKILL and started
    again on the same ports and data."""

    def __init__(self, data_dir) -> None:
        self.broker = start_local_broker(data_dir=data_dir)
        self.server = self.broker.server
        self.bootstrap_servers = self.broker.bootstrap_servers

    def crash(self) -> None:
        self.server.kill()

    def up(self) -> None:
        """On the thread that started the broker: PR_SET_PDEATHSIG is tied to that thread."""
        self.server.start()

    def stop(self) -> None:
        self.broker.stop()
