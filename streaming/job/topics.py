"""Which source topics the job mirrors, what each sink is called, and topic sync (as MirrorMaker 2 does it).

The sync runs on the driver at start-up and on every trigger: a topic that starts to match the selection gets
its compaction config resolved from its own settings plus --config, and its sink topic created with its
partition count and compaction configs; partitions added to a source are added to its sink. A sink that would
be a source of this job on the same cluster is refused: the job would emit into what it reads.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass
from typing import Mapping

from streaming.cleaner import Overrides
from streaming.errors import JobError, UsageError
from streaming.job.spec import TopicPlan, resolve_compaction_config, sink_topic_settings
from streaming.kafka.admin import Cluster
from streaming.names import names_text
from streaming.partition_id import PartitionId
from streaming.configuration.subscription import StartingOffsets, Subscription, SubscribePattern

log = logging.getLogger(__name__)

TOPIC_FIELD = "{topic}"
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


@dataclass(frozen=True)
class SinkNaming:
    """--sink-topic-template with {topic}, or --sink-topic: one fixed name, for one named source topic."""

    template: str
    given_as: str = "--sink-topic-template"  # the option that named it, for errors

    @classmethod
    def of(cls, sink_topic: str | None, template: str | None, subscription: Subscription) -> "SinkNaming":
        if (sink_topic is None) == (template is None):
            raise UsageError("give --sink-topic (one source topic) or --sink-topic-template (with {topic})")
        if template is not None and TOPIC_FIELD not in template:
            raise UsageError(f"--sink-topic-template must contain {TOPIC_FIELD}, got {template!r}")
        if sink_topic is not None and (isinstance(subscription, SubscribePattern) or len(subscription.names) != 1):
            raise UsageError("--sink-topic names one sink for one --source-topic; with several source topics or "
                             "a pattern, give --sink-topic-template, e.g. '{topic}.compacted'")
        naming = cls(template, "--sink-topic-template") if template is not None else \
            cls(sink_topic.replace("{", "{{").replace("}", "}}"), "--sink-topic")
        for topic in subscription.names:
            naming.sink_of(topic)
        return naming

    def sink_of(self, topic: str) -> str:
        name = self.template.replace("{{", "\0").replace("}}", "\1").replace(TOPIC_FIELD, topic) \
            .replace("\0", "{").replace("\1", "}")
        if not _LEGAL_TOPIC.match(name) or name in (".", ".."):
            raise UsageError(f"sink topic {name!r} (for source topic {topic!r}) is not a legal Kafka topic name")
        return name


class SinkIsSourceError(JobError):
    """A sink would be a source of this job on the same cluster."""


@dataclass
class TopicSync:
    source: Cluster
    sink: Cluster
    subscription: Subscription
    naming: SinkNaming
    overrides: Overrides
    sink_topic_config: Mapping[str, str]
    dead_letter_topic: str | None = None

    def __post_init__(self) -> None:
        self.same_cluster = self.source.cluster_id() == self.sink.cluster_id()
        self.left_out: set[str] = set()
        self.dead_letter_max_message_bytes: int | None = None  # read once the topic is there

    def present(self) -> dict[str, int]:
        """The selected source topics that exist now, with their partition counts."""
        topics = self.source.metadata().topics
        found = {name: len(t.partitions) for name, t in topics.items()
                 if self.subscription.matches(name) and t.error is None and t.partitions}
        missing = [n for n in self.subscription.names if n not in found]
        if missing:
            raise JobError(f"source topic {missing[0]!r} does not exist on the source cluster")
        return found

    def refusal(self, topic: str, present: Mapping[str, int]) -> str | None:
        """Why the topic's sink may not be used: it is a source of this job on the same cluster."""
        sink = self.naming.sink_of(topic)
        if self.same_cluster and (sink in present or self.subscription.matches(sink)):
            return (f"sink topic {sink!r} of source topic {topic!r} is itself a source of this job on the same "
                    f"cluster: the job would emit into what it reads. Choose another {self.naming.given_as}, "
                    f"narrow the source selection, or give --sink-bootstrap-servers of another cluster")
        return None

    def check_starting_offsets(self, starting: StartingOffsets, present: Mapping[str, int]) -> None:
        """Every partition of each topic named, each offset within what the partition holds now: an offset past
        the end would leave the partition unread until it grew that far, one below the start names deleted
        records."""
        for topic in sorted(starting.topics):
            if topic not in present:
                raise UsageError(f"--starting-offsets names topic {topic!r}, which does not exist on the source")
            offsets = {pid.partition: o for pid, o in starting.given.items() if pid.topic == topic}
            if set(offsets) != set(range(present[topic])):
                raise UsageError(f"--starting-offsets must give every partition of {topic!r} (0..{present[topic] - 1}), "
                                 f"got {sorted(offsets)}")
            ranges = self.source.offset_ranges(PartitionId(topic, p) for p in range(present[topic]))
            for p, offset in sorted(offsets.items()):
                low, high = ranges[PartitionId(topic, p)]
                if offset >= 0 and not low <= offset <= high:
                    where = "below the log start" if offset < low else "beyond the log end"
                    raise UsageError(f"--starting-offsets: {topic}-{p} offset {offset} is {where}; the partition holds "
                                     f"offsets {low}..{high} (give one in that range, -2 for earliest or -1 for latest)")

    def refuse_sinks(self, present: Mapping[str, int]) -> None:
        """At start-up, before anything is created or written: any refused sink stops the job."""
        for topic in sorted(present):
            why = self.refusal(topic, present)
            if why:
                raise SinkIsSourceError(why)

    def sync(self, plans: Mapping[str, TopicPlan]) -> dict[str, TopicPlan]:
        """The plans for the topics present now: new topics planned and their sinks created, sinks of
        topics that grew given the new partitions. A topic that appears later with a refused sink is left
        out (an error in the log, once). New topics' configs are read and their sinks made in one request
        each, however many: a whole cluster's start-up."""
        present = self.present()
        out = dict(plans)
        new = []
        for topic, partitions in sorted(present.items()):
            plan = out.get(topic)
            if plan is None:
                why = self.refusal(topic, present)
                if why:
                    if topic not in self.left_out:
                        log.error("source topic %s is not mirrored (its log is kept): %s", topic, why)
                        self.left_out.add(topic)
                    continue
                new.append(topic)
            elif partitions > plan.partitions:
                self.sink.grow_topic(plan.sink, partitions)
                log.info("source topic %s grew to %d partitions; so did its sink %s", topic, partitions, plan.sink)
                out[topic] = dataclasses.replace(plan, partitions=partitions)
        planned = self._plan(new, present)
        for topic, plan in planned.items():  # at start, the run's summary names them (cli.run)
            log.log(logging.INFO if plans else logging.DEBUG, "mirroring %s (%d partitions) into %s", topic,
                    plan.partitions, plan.sink)
        out.update(planned)
        if self.dead_letter_topic and out != plans:
            self.sink.ensure_topic(self.dead_letter_topic, max(p.partitions for p in out.values()), {}, "dead-letter")
            if self.dead_letter_max_message_bytes is None:
                self.dead_letter_max_message_bytes = \
                    self.sink.max_message_bytes_of([self.dead_letter_topic]).get(self.dead_letter_topic)
        return out

    def _plan(self, topics: list[str], present: Mapping[str, int]) -> dict[str, TopicPlan]:
        if not topics:
            return {}
        explicit = self.source.explicit_settings_of(topics)
        plans = {t: TopicPlan(t, self.naming.sink_of(t), resolve_compaction_config(explicit[t], t, self.overrides),
                              present[t]) for t in topics}
        self.sink.ensure_topics({p.sink: (p.partitions, {**sink_topic_settings(explicit[t]), **self.sink_topic_config})
                                 for t, p in plans.items()}, "sink")
        return self._sized(plans)

    def _sized(self, plans: dict[str, TopicPlan]) -> dict[str, TopicPlan]:
        """The plans with their sinks' max.message.bytes, read in one request, and one line for the sinks that take
        smaller records than their sources: a record between the two goes to the dead-letter topic, or stops its
        partition."""
        sinks = self.sink.max_message_bytes_of(sorted(p.sink for p in plans.values()))
        sources = self.source.max_message_bytes_of(sorted(plans)) if sinks else {}
        smaller = [f"{p.sink} ({sinks[p.sink]:,} < {sources[t]:,})" for t, p in sorted(plans.items())
                   if p.sink in sinks and t in sources and sinks[p.sink] < sources[t]]
        if smaller:
            log.warning("sink topics taking smaller records than their sources (max.message.bytes, sink < source): "
                        "%s; a record bigger than its sink takes %s", names_text(smaller),
                        f"goes to the dead-letter topic {self.dead_letter_topic}" if self.dead_letter_topic else
                        "stops its partition there (give --dead-letter-topic, or raise the sink's max.message.bytes)")
        return {t: dataclasses.replace(p, sink_max_message_bytes=sinks.get(p.sink)) for t, p in plans.items()}
