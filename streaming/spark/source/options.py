"""The source's options, under the names of Spark's built-in Kafka source, checked when the query starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from streaming.errors import UsageError, UserError
from streaming.job.engine import SourceRead
from streaming.configuration.subscription import StartingOffsets, Subscription, SubscribePattern, subscription_of


KAFKA_PREFIX = "kafka."
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's kafkaConsumer.pollTimeoutMs


class SourceOptionError(UserError, ValueError):
    """An invalid source option; the message names the option."""


@dataclass(frozen=True)
class KafkaSourceOptions:
    subscription: Subscription             # subscribe or subscribePattern
    client_config: dict[str, str]          # librdkafka settings from kafka.* options
    starting_offsets: StartingOffsets = StartingOffsets()
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    # Records per consume() and per Arrow batch. Each message is a few small Python objects: a consume() of 50k
    # made and freed ten megabytes of them at a time, and the small-object allocator gave those pages back to
    # the system and faulted them in again for the next (bench/README.md); 10k is also Spark's Arrow batch size.
    records_per_batch: int = 10_000
    # At most this many tasks read a micro-batch, the small ranges of many partitions sharing one (None: a task
    # per partition with records, as Spark's Kafka source does); the job sets it from its cores.
    max_read_tasks: int | None = None
    # Records fetched by the native path where it can run (streaming.kafka.native.gate); false: confluent-kafka's
    # consume(), a Message per record
    kafka_native: bool = True
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def bootstrap_servers(self) -> str:
        return self.client_config["bootstrap.servers"]

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "KafkaSourceOptions":
        opts = {k: v for k, v in options.items()}
        lower = {k.lower(): k for k in opts}

        def get(name: str) -> str | None:
            key = lower.get(name.lower())
            return None if key is None else opts[key]

        client = {k[len(KAFKA_PREFIX):]: v for k, v in opts.items() if k.lower().startswith(KAFKA_PREFIX)}
        if not client.get("bootstrap.servers"):
            raise SourceOptionError("option 'kafka.bootstrap.servers' is required")
        for forbidden in ("group.id", "enable.auto.commit", "auto.offset.reset"):
            if forbidden in client:
                raise SourceOptionError(f"option 'kafka.{forbidden}' is not supported: offsets live in Spark's "
                                        f"checkpoint (use startingOffsets)")
        client = {"isolation.level": "read_committed", **client}
        subscribe = get("subscribe")
        try:
            subscription = subscription_of([] if subscribe is None else subscribe.split(","), get("subscribePattern"),
                                           "option 'subscribe' (topics, comma-separated)",
                                           "option 'subscribePattern' (a regular expression)")
        except UsageError as exc:
            raise SourceOptionError(str(exc)) from None

        try:
            starting = StartingOffsets.parse(get("startingOffsets") or "earliest", subscription,
                                             "option 'startingOffsets'")
        except UsageError as exc:
            raise SourceOptionError(str(exc)) from None

        max_offsets_value = positive_option("maxOffsetsPerTrigger", get("maxOffsetsPerTrigger"))
        max_read_tasks = positive_option("maxReadTasks", get("maxReadTasks"))
        fail = boolean_option("failOnDataLoss", get("failOnDataLoss"), True)
        kafka_native = boolean_option("kafkaNative", get("kafkaNative"), True)
        poll = get("kafkaConsumer.pollTimeoutMs")
        return cls(subscription=subscription, client_config=client, starting_offsets=starting,
                   max_offsets_per_trigger=max_offsets_value, fail_on_data_loss=fail, max_read_tasks=max_read_tasks,
                   poll_timeout_ms=int(poll) if poll else DEFAULT_POLL_TIMEOUT_MS, kafka_native=kafka_native)


def positive_option(name: str, value: str | None) -> int | None:
    """A source option that is a positive integer when given, refused in one line naming it."""
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise SourceOptionError(f"option '{name}' must be a positive integer, got {value!r}")
    return number


def boolean_option(name: str, value: str | None, default: bool) -> bool:
    """A source option that is true or false (any case), refused in one line naming it."""
    text = (value or str(default)).strip().lower()
    if text not in ("true", "false"):
        raise SourceOptionError(f"option '{name}' must be true or false, got {text!r}")
    return text == "true"


def spark_options(read: SourceRead) -> dict[str, str]:
    """The source's options for what the job reads, under Spark's names; parse() reads them back."""
    subscription = read.subscription
    options = {"kafka.bootstrap.servers": read.bootstrap_servers,
               **({"subscribePattern": subscription.pattern} if isinstance(subscription, SubscribePattern)
                  else {"subscribe": ",".join(subscription.names)}),
               "startingOffsets": read.starting_offsets.to_text(), "failOnDataLoss": str(read.fail_on_data_loss).lower(),
               "kafkaNative": str(read.kafka_native).lower(),
               **{f"{KAFKA_PREFIX}{k}": v for k, v in read.kafka.items()}}
    if read.max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(read.max_offsets_per_trigger)
    if read.max_read_tasks:
        options["maxReadTasks"] = str(read.max_read_tasks)
    return options
