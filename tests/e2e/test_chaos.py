"""bench/chaos.py for 3 minutes with a fixed seed (the hour-long campaign is bench/'s): faults drawn at random
while a producer writes and the job runs with group sync, its state on the session's S3 server. Every
recovery within its bound, nothing lost and nothing twice, kcompact verify clean, the group's offsets on the
sink exact, and no traceback."""

from __future__ import annotations

import pytest

from streaming.kafka.admin import unique_topic_name
from tests.e2e.helpers import load_bench

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEED = 8  # the sink cut off, source connections reset, the state store cut off


def test_a_seeded_fault_campaign_loses_and_duplicates_nothing(cluster, cluster_broker, cluster_proxies, sink_site,
                                                               s3_server, toxiproxy, tmp_path) -> None:
    chaos = load_bench("chaos")
    site = chaos.Site(cluster_broker, cluster_proxies[1], sink_site.broker, sink_site.proxy, s3_server,
                      toxiproxy.proxy(unique_topic_name("store"), s3_server.endpoint))
    result = chaos.campaign(site, minutes=3, seed=SEED, work=tmp_path, fault_s=20, rate=100, partitions=2, keys=300)
    lines = result.lines()
    print("\n".join(lines))
    assert result.ok, lines
    assert [r.draw.fault for r in result.recoveries][:2] == [chaos.Fault.SINK_BLACKHOLE, chaos.Fault.SOURCE_RESETS]
    assert result.tally.records_in > 10_000 and result.tally.sink_records > 0
