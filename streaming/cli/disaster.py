"""`kcompact promote` (the planned switch to the DR site) and `kcompact failover` (the unplanned one): each
writes its report (text, --json, and switch.json in the state dir) and marks the job, so it does not mirror
in its old direction again. Both are safe to run twice, and --dry-run changes nothing: a drill on a live
mirror."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from typing import TYPE_CHECKING

from streaming.cli.pairs import add_cluster_access_options, parse_pairs, regex_option
from streaming.configuration.cluster_settings import sink_settings
from streaming.errors import JobError, UsageError
from streaming.security import redaction

if TYPE_CHECKING:  # the commands load the state's modules when they run, not at --help
    from streaming.state.stores import StateDir

log = logging.getLogger("kcompact")

CATCH_UP_MS = "0"  # min.compaction.lag.ms of a promote's last run: nothing is held back
# Kafka aborts a transaction open past its producer's transaction.timeout.ms (60 s by default) and checks every
# 10 s (transaction.abort.timed.out.transaction.cleanup.interval.ms): by then one left open has ended.
OPEN_TRANSACTIONS_S = 75.0


def add_parsers(sub) -> None:
    p = sub.add_parser("promote", help="the planned switch to the DR site: mirror up to the source's end now, "
                                       "sync the groups one last time, report, and stop mirroring")
    _common(p)
    p.add_argument("--fence-source-writes", action="store_true",
                   help="first add DENY WRITE ACLs for every principal on the mirrored source topics (the "
                        "runbook's 'stop the producers'); needs --admin-config")
    p.add_argument("--admin-config", metavar="FILE",
                   help="an admin's client properties for the source cluster (for --fence-source-writes)")
    p.add_argument("--open-transactions-timeout", type=float, default=OPEN_TRANSACTIONS_S, metavar="SECONDS",
                   help="how long the cut waits for transactions open on the source to end (their records come "
                        "before it); one still open then is counted in the report, not mirrored")
    p.set_defaults(func=_cmd_promote)

    p = sub.add_parser("failover", help="the unplanned switch to the DR site: report what the sink holds and what "
                                        "was not mirrored, without waiting for the source, and stop mirroring")
    _common(p)
    p.set_defaults(func=_cmd_failover)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", required=True)
    p.add_argument("--group", default=".*", metavar="REGEX",
                   help="the consumer groups reported, and synced one last time where the source answers")
    p.add_argument("--source-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long the source is waited for (a failover goes on without it)")
    p.add_argument("--dry-run", action="store_true", help="compute and print the report; change nothing")
    add_cluster_access_options(p)


def _cmd_promote(args: argparse.Namespace) -> int:
    from streaming.disaster.report import Switch  # noqa: PLC0415
    from streaming.disaster.switch import (await_open_transactions, last_mirrored, live_ends,  # noqa: PLC0415
                                           live_stable_ends, report, unmirrored)

    if args.fence_source_writes and not args.admin_config:
        raise UsageError("--fence-source-writes adds ACLs as an admin: give --admin-config FILE")
    if args.open_transactions_timeout < 0:
        raise UsageError(f"--open-transactions-timeout must be >= 0, got {args.open_transactions_timeout}")
    with _switching(args) as (sides, done):
        if done is not None:
            return _print(args, done, f"already {done.switch.value}; its report:")
        if live_ends(sides, args.source_timeout) is None:
            raise JobError(f"the source cluster {sides.source.bootstrap_servers} did not answer within "
                           f"{args.source_timeout:.0f}s: a promote needs it; kcompact failover goes on without it")
        fenced = () if args.dry_run or not args.fence_source_writes else _fence(sides, args.admin_config)
        if not args.dry_run:
            await_open_transactions(sides, args.open_transactions_timeout)
        cut = live_ends(sides, args.source_timeout)  # after the fence and the open transactions: nothing is written past it
        if cut is None:
            raise JobError(f"the source cluster {sides.source.bootstrap_servers} stopped answering; run kcompact "
                           f"promote again, or kcompact failover")
        notes = []
        past = unmirrored(sides, last_mirrored(sides), cut, args.source_timeout)
        if not args.dry_run and past.maybe_records:
            if past.tails is None:
                log.warning("the records past what was mirrored stopped coming for %.0fs: the job runs once more "
                            "to the cut, to be sure none is missing", args.source_timeout)
            notes.append(_catch_up(args, sides))
            past = None  # the run moved the sink on: read again
        if not args.dry_run:
            _sync_groups(sides)
        # A transaction still open at the cut may have committed since: its records are read and counted; one
        # still open is counted by offset. Both from one read, so none is counted twice or missed between.
        now = live_stable_ends(sides, args.source_timeout) if not args.dry_run else None
        ends = cut if now is None else {p: stable for p, (stable, _) in now.items()}
        open_at = {} if now is None else {p: e for p, e in now.items() if e[0] < e[1]}
        done = report(sides, Switch.PROMOTE, args.dry_run, ends, args.source_timeout, fenced, not args.dry_run,
                      tuple(notes), past if ends == cut else None, open_at)
        _keep(args, sides, done)
        return _print(args, done)


def _cmd_failover(args: argparse.Namespace) -> int:
    from streaming.disaster.report import Switch  # noqa: PLC0415
    from streaming.disaster.switch import live_ends, report  # noqa: PLC0415

    with _switching(args) as (sides, done):
        if done is not None:
            return _print(args, done, f"already {done.switch.value}; its report:")
        ends = live_ends(sides, args.source_timeout)
        synced = ends is not None and not args.dry_run
        if synced:
            _sync_groups(sides)
        notes = () if ends is not None else (f"the source {sides.source.bootstrap_servers} did not answer within "
                                             f"{args.source_timeout:.0f}s: its ends are the job's last knowledge, "
                                             f"and the groups stand where the last sync put them",)
        done = report(sides, Switch.FAILOVER, args.dry_run, ends, args.source_timeout, (), synced, notes)
        _keep(args, sides, done)
        return _print(args, done)


@contextlib.contextmanager
def one_line(what: str):
    """A cluster that stops answering, a read that runs out of time or records refused: one line naming what
    was being done, not a stack (what the command changed before it is said in its own lines)."""
    from streaming.kafka.failures import kafka_error, reason  # noqa: PLC0415

    try:
        yield
    except JobError:
        raise
    except (TimeoutError, RuntimeError) as exc:
        raise JobError(f"{what}: {exc}") from None
    except Exception as exc:
        if kafka_error(exc) is None:
            raise
        raise JobError(f"{what}: {reason(exc)}") from None


@contextlib.contextmanager
def _switching(args: argparse.Namespace):
    """The job's sides, and its earlier switch if it was switched already. A switch that changes something
    holds the state dir's lock: a job still running there is named, and a second switch waits its turn."""
    from streaming.disaster.mark import switched  # noqa: PLC0415
    from streaming.disaster.switch import SwitchSides  # noqa: PLC0415
    from streaming.job.spec import load_saved  # noqa: PLC0415
    from streaming.kafka.admin import Cluster  # noqa: PLC0415
    from streaming.state.locks import StateDirLock  # noqa: PLC0415
    from streaming.state.stores import check_access, open_state_dir  # noqa: PLC0415

    pattern = regex_option(args.group, "--group")
    if args.source_timeout <= 0:
        raise UsageError(f"--source-timeout must be > 0, got {args.source_timeout}")
    state = open_state_dir(args.state_dir)
    check_access(state, write=not args.dry_run)
    saved = load_saved(state)
    source_kafka, sink_kafka = switch_settings(saved, parse_pairs(args.kafka, "--kafka"),
                                               parse_pairs(args.sink_kafka, "--sink-kafka"))
    redaction.register([source_kafka, sink_kafka])
    lock = None if args.dry_run else StateDirLock(state)
    try:
        sides = SwitchSides(state, saved, Cluster("source", saved.mapping.source_bootstrap, source_kafka,
                                                  connect_timeout_s=args.source_timeout),
                            Cluster("sink", saved.mapping.sink_bootstrap, sink_kafka), pattern)
        with one_line(f"kcompact {args.command} of {args.state_dir}"):
            yield sides, switched(state)
    finally:
        if lock is not None:
            lock.release()


def switch_settings(saved, kafka: dict, sink_kafka: dict) -> tuple[dict, dict]:
    """The clusters' client settings of a command run by hand: the job's saved ones it can use again
    (references to secrets, never a redacted value), under what the command line gives."""
    def kept(settings) -> dict:
        return {k: v for k, v in settings.items() if v != redaction.REDACTED}
    source = {**kept(saved.source_kafka), **kafka}
    return source, sink_settings(source, {**kept(saved.sink_kafka), **sink_kafka}, saved.mapping.one_cluster)


def _catch_up(args: argparse.Namespace, sides) -> str:
    """The job's last run, here: what is in the source now is ingested, every segment rolled and cleaned, and
    each key's winner emitted; min.compaction.lag.ms and the dirty ratio hold nothing back. It runs in the
    state dir it read the saved mapping from, which says so if others can read it, as a run does."""
    from streaming.startup.state_dir import warn_if_others_can_read  # noqa: PLC0415

    saved, mapping = sides.saved, sides.saved.mapping
    warn_if_others_can_read(sides.state)
    values: dict = {"bootstrap.servers": mapping.source_bootstrap, "dead.letter.topic": saved.dead_letter_topic}
    if hasattr(mapping.subscription, "pattern"):
        values["source.topic.pattern"] = mapping.subscription.pattern
    else:
        values["source.topic"] = tuple(mapping.subscription.names)
    if "{topic}" in mapping.sink_template:
        values["sink.topic.template"] = mapping.sink_template
    else:
        values["sink.topic"] = sink_topic_of(mapping.sink_template)
    if not mapping.one_cluster:
        values["sink.bootstrap.servers"] = mapping.sink_bootstrap
    log.info("promote: the job's last run, up to the source's end (min.compaction.lag.ms=0, every segment rolled)")
    run_to_end(args, sides.state, values, saved, sides.source.settings, sides.sink.settings)
    return "the job ran once more up to the source's end, holding nothing back"


def sink_topic_of(template: str) -> str:
    """The one sink topic a --sink-topic job's saved template names."""
    return template.replace("{{", "{").replace("}}", "}")


def run_to_end(args: argparse.Namespace, state: StateDir, values: dict, saved, kafka: dict, sink_kafka: dict) -> None:
    """`run --once --drain` of a mapping (``values``: its clusters and topics) with the job's own --config, in
    this process, in ``state``, a state dir the caller holds the lock of: what the source holds now is emitted,
    nothing held back. With --json, what the run prints goes to stderr, so stdout holds the one document."""
    from streaming.cleaner import Overrides  # noqa: PLC0415
    from streaming.job.options import RunOptions  # noqa: PLC0415
    from streaming.startup.assembly import Launch, start  # noqa: PLC0415

    options = RunOptions.of({**values, "once": True, "drain": True,
                             "config": {**saved.config, "min.compaction.lag.ms": CATCH_UP_MS},
                             "kafka": kafka, "sink.kafka": sink_kafka,
                             "trigger.interval": saved.trigger_interval_ms / 1000})
    launch = Launch(dict(kafka), dict(sink_kafka), Overrides.parse(options.config), args.log_level, args.log_format)
    with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
        code = start(options, launch, held=state)
    if code != 0:
        raise JobError(f"the run to the end of {state.uri} ended with code {code}; nothing was marked: run the "
                       f"command again")


def _sync_groups(sides) -> None:
    """One last group offset sync: the DR site's groups where the source's are."""
    from streaming.job.group_sync import mirrored  # noqa: PLC0415
    from streaming.kafka.groups.group_sync import GroupOffsetSync  # noqa: PLC0415

    done = GroupOffsetSync(sides.source, sides.sink, sides.groups).sync(mirrored(sides.saved.topics))
    log.info("consumer groups synced one last time: %d offsets of %d groups moved", done.offsets_moved,
             len(done.groups_synced))


def _fence(sides, admin_config: str) -> tuple[str, ...]:
    """DENY WRITE for every principal on each mirrored source topic: a producer still writing to the old
    primary would write records the DR site never sees."""
    from streaming.cli.acls import admin_cluster  # noqa: PLC0415
    from streaming.kafka.access.acl_apply import apply_grants  # noqa: PLC0415
    from streaming.kafka.access.acls import Grant, Resource  # noqa: PLC0415

    admin = admin_cluster("source", sides.source.bootstrap_servers, admin_config, "--admin-config")
    topics = tuple(sorted(sides.saved.topics))
    apply_grants(admin, [Grant("User:*", "WRITE", Resource.TOPIC, t, deny=True) for t in topics])
    log.warning("source writes fenced: DENY WRITE for every principal on %d topic(s) of %s (kcompact failback "
                "removes them)", len(topics), sides.source.bootstrap_servers)
    return topics


def _keep(args: argparse.Namespace, sides, done) -> None:
    from streaming.disaster.mark import mark  # noqa: PLC0415

    if not args.dry_run:
        mark(sides.state, done)


def _print(args: argparse.Namespace, done, heading: str | None = None) -> int:
    if args.json:
        print(json.dumps(done.to_doc()))
        return 0
    if heading:
        print(heading)
    print(done.render())
    return 0
