"""The compactor job: ingest micro-batches into the logs, then clean and emit, on every trigger.

Each micro-batch runs two Spark jobs under one driver lock: the append (one task per source partition)
and the compaction stage (a few tasks, two per core, each rolling, cleaning and emitting the partition logs
that have work, in one sink transaction at a time). Spark runs no micro-batch when
no data arrives, so a ticker on the driver runs the compaction stage on those idle triggers too: that is
what bounds the time to erase a key on a quiet topic (KIP-354's max.compaction.lag.ms).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import threading
import time

from streaming.cleaner import CleanerMetrics, CompactionConfig
from streaming.partition_id import PartitionId
from streaming.job import metrics as job_metrics
from streaming.kafka.admin import Cluster
from streaming.job.compact import StageReport
from streaming.job.compaction_stages import CompactionStages
from streaming.job.once import failed_reports, idle_reports, outcome
from streaming.job.engine import Engine, EngineProcessLost, MicroBatch, QueryPlan, RunningQuery, SourceRead
from streaming.job.idle_stages import IdleStages
from streaming.job.task_error import ErrorKind
from streaming.job.topics import TopicSync
from streaming.errors import JobError
from streaming.job.append import LogAppender
from streaming.job.options import RunOptions, Schedules
from streaming.job.progress import Progress, ProgressDisplay, waits
from streaming.log.store_watch import WATCH as STORE_WATCH
from streaming.job.spec import JobSpec
from streaming.job.stage_plan import TASKS_PER_SLOT
from streaming.job.failures import Restarts, StageFailures, explain_failure, state_dir_full, telling_line
from streaming.kafka.failures import is_transient
from streaming.runtime.moments import Moment, reached
from streaming.utc import Outage
from streaming.state.garbage import collect_at_end
from streaming.state.layout import LogDir, list_log_dirs, spark_checkpoint
from streaming.state.stores import open_state_dir

log = logging.getLogger(__name__)

IDLE = "waiting for records"
# Before the first micro-batch: Spark's launch, then its streaming source asking the source for offsets
STARTING_SPARK = "starting Spark"
PLANNING_FIRST = "starting the query: planning the first micro-batch"
PLANNING_AGAIN = "restarting the query from its checkpoint: planning the next micro-batch"
STOP_GRACE_S = 8.0  # the first Ctrl-C waits this long for the batch in flight, then the job stops at once


class StopRequested(RuntimeError):
    """Raised by a micro-batch that starts while the job stops: Spark records no commit for it, so the next
    start reads it again."""


class CompactorJob:
    def __init__(self, engine: Engine, spec: JobSpec, options: RunOptions | None = None,
                 sync: TopicSync | None = None, schedules: Schedules | None = None) -> None:
        """``sync``: the topic sync (None: the spec's topics, fixed); the trigger interval is the spec's."""
        options, schedules = options or RunOptions(), schedules or Schedules()
        self.engine = engine
        self.spec = spec
        self.sync = sync  # None: the topics are the spec's, fixed
        self.trigger_interval_s = spec.trigger_interval_ms / 1000
        self.options = options
        self.state = open_state_dir(spec.state_dir)  # the driver's; tasks open theirs from spec.state_dir
        self.checkpoint_location = options.checkpoint_location or spark_checkpoint(self.state)
        self.starting_offsets = options.starting(spec.mapping.subscription)
        self.clock = time.time
        self.group_sync = schedules.group_sync
        self.acl_sync = schedules.acl_sync
        self.table_sync = schedules.table_sync
        self.lock = threading.RLock()
        default = sync.overrides.over(CompactionConfig()) if sync else CompactionConfig()
        self.appender = LogAppender(spec.state_dir, self._log_configs(), default.log_config, clock=self.clock,
                                    lock=self.lock, audit_keys=spec.settings.erase_audit_keys)
        self.totals = job_metrics.JobCounters()
        self.erase_latency = job_metrics.EraseLatency()
        self.failures = StageFailures()
        self.started = time.monotonic()
        self.last_reports: list[StageReport] = []
        self.last_run_ms: int | None = None
        self.last_metrics: CleanerMetrics | None = None
        self._stop = threading.Event()
        self._stop_signal: int | None = None
        self._closing = False  # the query is being stopped: a micro-batch that starts now is refused
        self._phase = "starting"
        self._ingest_lag: int | None = None
        self._batch_began = time.monotonic()
        self._source = Cluster("source", spec.source_bootstrap, spec.source_kafka)
        self.stages = CompactionStages(engine, self.state, spec)
        self._stage_after_batch = False  # the last compaction stage ran after the last micro-batch
        self.collector = job_metrics.JobMetricsCollector()
        self._switched, self._switched_line = schedules.switched, None

    # ----- the two things done per trigger ----------------------------------------------------------------

    def _log_configs(self) -> dict:
        return {t: p.compaction.log_config for t, p in self.spec.topics.items()}

    def sync_topics(self) -> None:
        """Topic sync before each append and each idle stage: new matching topics and added partitions.
        A cluster that is away only delays it: the topics known so far go on."""
        if self.sync is None:
            return
        try:
            plans = self.sync.sync(self.spec.topics)
        except Exception as exc:  # noqa: BLE001 (the query itself reports a lasting outage)
            log.warning("topic sync failed; going on with the %d topics known: %s", len(self.spec.topics), exc)
            return
        if plans != self.spec.topics:
            changed = [t for t, plan in plans.items() if self.spec.topics.get(t) != plan]
            self.spec = dataclasses.replace(self.spec, topics=plans)
            self.stages.topics_changed(self.spec, changed)
            self.spec.save(self.state)
            self.appender.configs = self._log_configs()

    def on_batch(self, batch: MicroBatch, batch_id: int) -> None:
        with self.lock:
            if self._closing or self._switched_away():
                raise StopRequested(f"batch {batch_id} is read again on the next start")
            self._phase = f"ingesting batch {batch_id}"
            self._batch_began = time.monotonic()
            if not self.totals.batches:
                reached(Moment.FIRST_BATCH, f"batch {batch_id}")
            self._stage_after_batch = False
            self.sync_topics()
            self.appender(batch, batch_id)
            self.stages.quiet.note_appended(self.appender.last_changed, self.appender.last_ends)
            self.totals.batches += 1
            self.totals.ingested += self.appender.last_batch.appended
            self.totals.rejected += self.appender.last_batch.rejected
            self.totals.odd_timestamps += self.appender.last_batch.odd_timestamps
            reached(Moment.BEFORE_CLEAN, f"batch {batch_id}")
            self.compaction_stage()

    def compaction_stage(self, drain: bool = False) -> list[StageReport]:
        """Roll, clean and emit the partition logs of the mirrored topics that have work (stage_plan), many to a
        Spark task; ``drain`` rolls every active segment first (--drain)."""
        with self.lock:
            if self._switched_away():
                return []
            items = self._logs()
            if not items:  # nothing read yet (empty topics): the job waits for records, and says so
                self._phase = IDLE
                return []
            now_ms = int(self.clock() * 1000)
            self._phase = f"cleaning and emitting the {len(items)} partitions due"
            try:
                stage = self.stages.run(self.spec, items, now_ms, drain, lambda: self._closing or self._stop.is_set())
            finally:
                self._phase = IDLE
            self.totals.stage_tasks += stage.tasks
            self.totals.logs_left_alone += len(stage.quiet)
            self._stage_done(stage.ran + stage.quiet, now_ms)
            if self.table_sync:
                self.table_sync.after_stage(self.spec.state_dir, frozenset(self.spec.topics))
                self._tables_synced()
            return stage.ran + stage.quiet

    def _stage_done(self, reports: list[StageReport], now_ms: int) -> None:
        """What the driver keeps of a stage: counters, metrics, failures."""
        with self.lock:
            self.last_reports = reports
            self.totals.stages += 1
            self.totals.passes += sum(r.figures.passes for r in reports)
            self.totals.emitted += sum(r.emitted for r in reports)
            for r in reports:
                self.erase_latency.observe("log", r.erase_log_ms)
                self.erase_latency.observe("sink", r.erase_sink_ms)
            self._write_metrics(reports, now_ms)
            self.last_run_ms = now_ms
            self._stage_after_batch = True
            self.failures.report(reports, now_ms)
            if any(r.error and r.error.kind is ErrorKind.DISK_FULL for r in reports):
                raise state_dir_full(self.spec.state_dir)

    def _switched_away(self) -> bool:
        """A switch marked the state dir while the job ran: it emits nothing more and stops, so the old direction
        never writes over the DR site's new records."""
        if self._switched_line is None and self._switched is not None and (line := self._switched()) is not None:
            self._switched_line = line
            self._stop.set()
        return self._switched_line is not None

    def _nothing_to_do(self) -> bool:
        """--once: nothing new on the source and nothing due (job.once); then no engine starts."""
        now_ms = int(self.clock() * 1000)
        logs = self._logs()
        reports = idle_reports(self.spec, self.state, self.engine, self.checkpoint_location, self._source,
                               logs, self.stages.trusted(d.pid for d in logs), now_ms, self.options.drain)
        if reports is None:
            return False
        log.info("nothing new on the source and no partition due for a pass: ending without starting Spark")
        self._stage_done(reports, now_ms)
        return True

    def _logs(self) -> list[LogDir]:
        return [d for d in list_log_dirs(self.state) if d.pid.topic in self.spec.topics]

    def _tables_synced(self) -> None:  # the tables' states into the document written before the snapshots ran
        with self.lock:
            if (doc := job_metrics.update_tables(self.state, self.table_sync.states())) is not None:
                self.collector.update(doc)

    def _write_metrics(self, reports: list[StageReport], now_ms: int) -> None:
        metrics = CleanerMetrics.of([r.figures for r in reports], now_ms, self.last_run_ms, self.last_metrics)
        self.last_metrics = metrics
        ends = self._source_ends(reports)
        lags = [lag for r in reports
                if (lag := job_metrics.ingest_lag(ends.get(r.pid), r.log_end_offset)) is not None]
        self._ingest_lag = sum(lags) if lags else self._ingest_lag
        doc = job_metrics.MetricsDocument.of(now_ms, metrics, self.totals, reports, ends,
                                             self.group_sync.totals.to_doc() if self.group_sync else None,
                                             self.erase_latency, self.table_sync.states() if self.table_sync else ())
        job_metrics.write_doc(self.state, doc)
        self.collector.update(doc)

    def _source_ends(self, reports: list[StageReport]) -> dict[PartitionId, int]:
        """Where the source partitions end now, for the ingest lag; unknown while the cluster is away."""
        try:
            return self._source.end_offsets(r.pid for r in reports)
        except Exception as exc:  # noqa: BLE001 (a metric is not worth failing a trigger for)
            log.debug("end offsets of the source topics unavailable: %s", exc)
            return {}

    def progress(self) -> Progress:
        """The figures the progress display shows; the phase counts the Spark tasks done in a long stage."""
        t, phase, lag = self.totals, self._phase, self._ingest_lag  # read once: a stage's end sets them meanwhile
        if phase == IDLE and lag:  # the source has records the next micro-batch is to read
            phase = (f"{lag:,} records to read; the last micro-batch began "
                     f"{time.monotonic() - self._batch_began:.0f}s ago")
        done = self.engine.tasks_done()
        if done and phase != IDLE:
            phase += f": {done[0]}/{done[1]} tasks"
        outages = {"the sink cluster": self.failures.sink, "the state store": STORE_WATCH.outage}
        if self.group_sync:
            outages["a cluster of the group sync"] = self.group_sync.outage
        outages.update((f"another writer's transaction to end on {tx.sink}", Outage(tx.since_ms))
                       for tx in self.stages.watch.alarms())
        return Progress(phase, t.ingested, lag, t.passes, t.emitted, time.monotonic() - self.started,
                        waits(outages, int(time.time() * 1000)))

    # ----- running ----------------------------------------------------------------------------------------

    def _query(self) -> RunningQuery:
        read = SourceRead(self.spec.source_bootstrap, self.spec.mapping.subscription, self.starting_offsets,
                          not self.options.allow_data_loss, self.options.max_offsets_per_trigger,
                          self.engine.slots() * TASKS_PER_SLOT, self.spec.source_kafka, self.spec.kafka_native)
        return self.engine.start_query(QueryPlan(read, self.checkpoint_location, self.options.once, self.trigger_interval_s),
                                       self.on_batch)

    def stop(self, signum: int | None = None, _frame=None) -> None:
        """SIGTERM, or the first Ctrl-C: finish the batch in flight, then stop. A second Ctrl-C stops at once:
        the batch in flight is not committed, and the next start reads it again."""
        if self._stop.is_set() and signum == signal.SIGINT:
            _stop_at_once("stopped at once")
        self._stop_signal = signum
        self.engine.stop_begun()
        self._stop.set()  # before the line: a second Ctrl-C that follows what it says stops at once
        if signum == signal.SIGINT:
            print("kcompact: stopping after the current batch (Ctrl-C again stops at once)", file=sys.stderr,
                  flush=True)
            # A batch in flight can wait on a cluster mid-failover: a person at the terminal is not kept waiting
            grace = threading.Timer(STOP_GRACE_S, _stop_at_once,
                                    (f"the batch in flight did not end within {STOP_GRACE_S:.0f}s: stopped at once",))
            grace.daemon = True
            grace.start()

    def run(self) -> int:
        try:
            return self._run()
        except Exception as exc:
            explained = explain_failure(exc, self.spec.state_dir)
            if explained is None:
                raise
            raise explained from exc

    def _run(self) -> int:
        previous = {s: signal.signal(s, self.stop) for s in (signal.SIGTERM, signal.SIGINT)}
        if self.group_sync and not self.options.once:
            self.group_sync.start(self._stop, lambda: self.spec.topics)
        if self.acl_sync:  # at start, then every interval
            self.acl_sync.round(self.spec.topics)
            if not self.options.once:
                self.acl_sync.start(self._stop, lambda: self.spec.topics)
        try:
            if self.options.once and self._nothing_to_do():
                code = outcome(self.last_reports, self.totals.emitted, int(self.clock() * 1000), self.options.drain)
            else:
                self._phase = STARTING_SPARK
                log.info("starting Spark")  # the display waits for the launch, which takes seconds on 2 cores
                self.engine.start()  # before the display: a launch takes the process's stderr for a moment
                self._phase = PLANNING_FIRST  # what the display's first line says
                with ProgressDisplay(self.progress, self.options.live_progress):
                    self._run_query()
                    code = self._final_stage() if self.options.once and not self._stop.is_set() else 0
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        if self._switched_away():  # the DR site is the writer: nothing more is synced to it either
            raise JobError(self._switched_line)
        if self.table_sync:  # the tables as the run leaves the state
            self.table_sync.finish(self.spec.state_dir, frozenset(self.spec.topics))
            self._tables_synced()
        if self.group_sync and self.options.once:  # one round, after everything this run emits
            self.group_sync.round(self.spec.topics)
            job_metrics.update_group_sync(self.state, self.group_sync.totals.to_doc())
        collect_at_end(self.state, self._log_configs())
        t = self.totals
        log.info("%s: %d records ingested, %d passes, %d records emitted in %.0fs",
                 "stopped" if self._stop.is_set() else "done", t.ingested, t.passes, t.emitted,
                 time.monotonic() - self.started)
        return 130 if self._stop_signal == signal.SIGINT else code

    def _run_query(self) -> None:
        """Run the query until it ends (--once), or until Ctrl-C / SIGTERM; restart it from its checkpoint
        after a transient Kafka failure, or when a Python process of the engine ended under it, for up to
        --retry-timeout since the last batch that succeeded."""
        restarts = Restarts(self.options.retry_timeout)
        while True:
            self._closing = False
            self._phase = PLANNING_FIRST if not self.totals.batches else PLANNING_AGAIN
            query = self._query()
            try:
                self._watch(query)
            finally:
                with self.lock:  # the batch or stage in flight ends first
                    self._closing = True
                if self._stop.is_set() or not query.is_active and query.exception() is None:
                    self.engine.stop_begun()  # the run ends here (not a failed query, to start again)
                query.stop()
            if (exc := query.exception()) is None or self._stop.is_set():
                return
            process_lost = isinstance(exc, EngineProcessLost)
            if not process_lost and not is_transient(exc):
                raise exc
            pause = restarts.next_pause(self.totals.batches)
            if pause is None:
                what = "the engine's Python processes kept ending" if process_lost else "the cluster stayed unreachable"
                raise JobError(f"{what} for more than --retry-timeout={self.options.retry_timeout:.0f}s; "
                               f"last failure: {telling_line(exc)}") from exc
            if process_lost:
                log.warning("%s; restarting the query from its checkpoint in %.0fs", exc, pause)
            else:
                log.warning("waiting for the source cluster: the query failed on a transient Kafka error (%s); "
                            "restarting it from its checkpoint in %.0fs", telling_line(exc), pause)
            if self._stop.wait(pause):
                return

    def _watch(self, query: RunningQuery) -> None:
        """Wait while the query runs; idle triggers (no micro-batch) get their compaction stage from a thread of
        their own (job.idle_stages), so that this one only waits, and hears Ctrl-C."""
        if self.options.once:
            while query.is_active and not self._stop.wait(0.05):
                pass
            return
        with IdleStages(self._idle_stage, lambda: self.totals.batches, self.trigger_interval_s, self.lock) as idle:
            while query.is_active and idle.failure is None and not self._stop.wait(self.trigger_interval_s):
                pass
        if idle.failure is not None:
            raise idle.failure

    def _idle_stage(self) -> None:
        if self._switched_away():
            return
        self.sync_topics()
        self.compaction_stage()

    def _final_stage(self) -> int:
        """--once: clean at the current time, also when no batch ran; a sink that is away is waited for. The
        stage that followed the last micro-batch counts when it left nothing to retry."""
        restarts = Restarts(self.options.retry_timeout)
        drain = self.options.drain
        while True:
            if not self._stage_after_batch or drain:
                self.compaction_stage(drain=drain)
            if self._switched_line is not None:
                return 1
            self._stage_after_batch = drain = False
            failed = failed_reports(self.last_reports)
            waiting = failed and all(r.error and r.error.transient for r in failed)
            pause = restarts.next_pause(self.totals.emitted) if waiting else None
            if pause is None or self._stop.wait(pause):
                break
            log.warning("%d partitions could not reach the sink; trying again in %.0fs", len(failed), pause)
        return outcome(self.last_reports, self.totals.emitted, int(self.clock() * 1000), self.options.drain)


def _stop_at_once(what: str) -> None:
    print(f"kcompact: {what}; the next start reads the interrupted batch again", file=sys.stderr, flush=True)
    os._exit(130)
