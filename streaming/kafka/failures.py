"""Which Kafka failures pass (a broker restarting, a leader moving) and which do not (credentials refused).

librdkafka already reconnects and retries inside each call's timeout; what is left to us is a call that
outlived its timeout while the cluster was away. Those are retried here until a deadline, and a Spark
query that failed on one is restarted by the job (streaming.job.runner). Authentication and authorization
failures are never retried: they need an operator, and a clear error says so.

A client that is not fetching learns of a new leader only from a metadata refresh, which librdkafka makes
every topic.metadata.refresh.interval.ms (5 minutes): until then each try goes to the dead leader again. So
between two tries the client given asks for metadata anew, and the first try after an election succeeds.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import time
from typing import Callable, Iterator, Protocol, TypeVar

from confluent_kafka import KafkaError, KafkaException

from streaming.errors import JobError
from streaming.utc import utc_text

log = logging.getLogger(__name__)

T = TypeVar("T")

SAY_EVERY_S = 10.0  # how often a wait for a cluster that is away is said again
# One try of a call that retrying() repeats while its cluster is away: short, so that the first line saying
# why the job waits comes early in an outage, not when a minute-long timeout ends.
TRY_S = 5.0

TRANSIENT = frozenset({
    KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT,
    KafkaError._TIMED_OUT_QUEUE,  # a request never sent: its broker's connection hung (a frozen node)
    KafkaError._WAIT_COORD, KafkaError.REQUEST_TIMED_OUT, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NETWORK_EXCEPTION, KafkaError.BROKER_NOT_AVAILABLE,
    KafkaError._DESTROY_BROKER,  # a request to a broker that left the metadata (killed, fenced): ask again
    KafkaError.OFFSET_NOT_AVAILABLE,  # a new leader whose high watermark has not caught up yet (retriable in Kafka)
    KafkaError._UNKNOWN_PARTITION,  # a fresh client's metadata, from a broker still loading its own, lacks it
    KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,  # asked a leader that just moved: ask again
})
# What librdkafka's leader lookup for an admin request (ListOffsets) fails with when a partition has no leader
# at all, as while its only broker restarts: _NOENT, which elsewhere means "not found", so only that call
# reads it as a leader not yet elected (streaming.kafka.admin.answered).
LEADERLESS = KafkaError._NOENT
REFUSED = frozenset({
    KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    KafkaError._SSL,  # a TLS handshake that failed on our side: the broker's certificate is not trusted
})
# A broker that wants a client certificate ends the handshake with an alert, which librdkafka reports as a
# transport failure: only its text tells it from a broker that is away.
CERTIFICATE_WANTED_TEXT = ("alert bad certificate", "alert certificate required", "alert handshake failure")
# What to check, by what a refusal says, and the settings that is about.
_REFUSAL_HINTS = (
    (("certificate verify failed",), "the broker's certificate is not trusted: give the CA that signed it with "
                                     "ssl.ca.location", ("ssl.ca.location",)),
    (CERTIFICATE_WANTED_TEXT, "the broker wants a client certificate: give ssl.certificate.location and "
                              "ssl.key.location", ("ssl.certificate.location", "ssl.key.location")),
    (("SASL authentication",), "check sasl.mechanism, sasl.username and sasl.password",
     ("sasl.mechanism", "sasl.username", "sasl.password")),
)
# What the group lookup of a consumer that only reads assigned partitions (and never commits) gets when its
# principal may not describe the group: librdkafka looks the coordinator up anyway and says so once. The
# reads go on; a job needs no group ACL for them.
UNUSED_GROUP_REFUSED = KafkaError.GROUP_AUTHORIZATION_FAILED
# How the codes read in text, for failures that reach the driver as text (a task's traceback in a Java
# exception), and our own timeouts for "no progress while the cluster was away".
TRANSIENT_TEXT = tuple(f"code={KafkaError(c).name()}," for c in TRANSIENT) + (
    "within kafkaConsumer.pollTimeoutMs", "to recover progress")
REFUSED_TEXT = tuple(f"code={KafkaError(c).name()}," for c in REFUSED) + ("SASL authentication error",)


def kafka_error(exc: BaseException | str) -> KafkaError | None:
    """The KafkaError a KafkaException carries, if it carries one."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def is_transient(exc: BaseException | str) -> bool:
    err = kafka_error(exc)
    if err is not None:
        return err.code() in TRANSIENT or (err.retriable() and err.code() not in REFUSED)
    return not is_refused(exc) and any(t in str(exc) for t in TRANSIENT_TEXT)


def is_refused(exc: BaseException | str) -> bool:
    err = kafka_error(exc)
    if err is not None:
        return err.code() in REFUSED
    return any(t in str(exc) for t in REFUSED_TEXT)


def refuses(err: KafkaError) -> bool:
    """An error a client's error callback gets that says the cluster will not have us (not that it is away)."""
    return err.code() in REFUSED or (err.code() == KafkaError._TRANSPORT
                                     and any(t in err.str() for t in CERTIFICATE_WANTED_TEXT))


def refusal_hint(err: KafkaError) -> str:
    """What to check for a refusal, where its text says."""
    return _hint_of(err)[0]


def refusal_keys(err: KafkaError) -> tuple[str, ...]:
    """The settings a refusal is about, where its text says (none: the security settings at large)."""
    return _hint_of(err)[1]


def _hint_of(err: KafkaError) -> tuple[str, tuple[str, ...]]:
    text = err.str()
    for said, hint, keys in _REFUSAL_HINTS:
        if any(t in text for t in said):
            return hint, keys
    return "check the security settings", ()


def is_fatal(exc: BaseException) -> bool:
    """A fatal producer error: that producer instance can do nothing more."""
    err = kafka_error(exc)
    return err is not None and err.fatal()


def timed_out(what: str) -> KafkaException:
    """Our own wait that ran out, spelled as librdkafka's local timeout, so retrying() treats it as one."""
    return KafkaException(KafkaError(KafkaError._TIMED_OUT, what))


def as_kafka(failure: KafkaException | TimeoutError, what: str) -> KafkaException:
    """A failure of a call on ``what``, a future's own timeout spelled as librdkafka's (timed_out)."""
    return failure if isinstance(failure, KafkaException) else timed_out(f"no answer to {what}")


def reason(exc: BaseException) -> str:
    """What a failure says, never empty: a future's timeout carries no message of its own."""
    err = kafka_error(exc)
    if err is not None:  # a broker's error without a message of its own reads "ConsumerGroupDescribe: "
        text = err.str().strip()
        return f"{text} {err.name()}".strip() if not text or text.endswith(":") else text
    return str(exc) or type(exc).__name__


@contextlib.contextmanager
def said_in_one_line(what: str) -> Iterator[None]:
    """A Kafka failure that outlived its retries (or a read that ran out of time), as the one-line error of a
    command, naming what it was doing."""
    try:
        yield
    except (KafkaException, TimeoutError) as exc:
        raise JobError(f"{what}: {reason(exc)}") from exc


class MetadataClient(Protocol):
    """Consumer, Producer and AdminClient alike: each asks for cluster metadata with list_topics."""

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> object: ...


def refresh_metadata(client: MetadataClient, topic: str | None) -> None:
    """Ask ``client``'s cluster for ``topic``'s metadata now (every topic's when None): librdkafka keeps the
    answer, so the client's next request goes to the leader elected since. A cluster that does not answer
    leaves the next try to fail and say so."""
    try:
        client.list_topics(topic, timeout=TRY_S)
    except KafkaException as exc:
        log.debug("metadata refresh for %s failed: %s", topic or "every topic", reason(exc))


def retrying(call: Callable[[], T], what: str, timeout_s: float, *, side: str, client: MetadataClient | None = None,
             topic: str | None = None, renew: Callable[[], None] | None = None, pause_s: float = 1.0,
             say_every_s: float = SAY_EVERY_S, level: int = logging.WARNING,
             abandoned: Callable[[], bool] = lambda: False) -> T:
    """call() until it succeeds, retrying transient failures until timeout_s has passed; between two tries
    ``client`` refreshes its metadata of ``topic`` (a leader that died is replaced in it), or ``renew`` makes
    the client anew where asking the old one again is not safe. While it waits it
    says so on the first failure and then every ``say_every_s``, naming the ``side`` (source or sink) whose
    cluster is away and the reason, rather than a line per try. A future that timed out counts as a
    transient failure. ``abandoned()`` true: whoever waits for the answer is gone, so the failure is raised
    at once."""
    deadline = time.monotonic() + timeout_s
    said = -float("inf")
    since_ms: int | None = None
    while True:
        try:
            return call()
        except (KafkaException, concurrent.futures.TimeoutError) as failure:
            exc = as_kafka(failure, what)
            now = time.monotonic()
            if not is_transient(exc) or now + pause_s > deadline or abandoned():
                if exc is failure:
                    raise
                raise exc from failure
            if since_ms is None:
                since_ms = int(time.time() * 1000)
            if now - said >= say_every_s:
                log.log(level, "waiting for the %s cluster: %s: %s; since %s UTC, retrying for up to %.0fs", side,
                        what, reason(exc), utc_text(since_ms), deadline - now)
                said = now
            if renew is not None:
                renew()
            elif client is not None:
                refresh_metadata(client, topic)
            time.sleep(pause_s)
