"""The least ACL set a job needs, the principal a client's settings give it, and what a refusal says to check."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from streaming.brokers.choice import start_local_broker
from streaming.kafka.admin import Cluster
from streaming.security.certificates import make_certificates
from streaming.kafka.access.acls import Grant, Resource
from streaming.kafka.failures import refusal_hint, refuses
from streaming.kafka.access.permissions import AccessCheck, JobAccess, principal_of, required_grants

def test_on_one_cluster_what_the_sink_side_holds_is_not_asked_again_of_the_source_side() -> None:
    two = required_grants(JobAccess(("t",), ("s",), groups=("g",), sync_acls=True), "User:a", "User:a")
    one = required_grants(JobAccess(("t",), ("s",), groups=("g",), sync_acls=True, one_cluster=True), "User:a", "User:a")
    dropped = {("source", Grant("User:a", "DESCRIBE", Resource.GROUP, "g")),
               ("source", Grant("User:a", "DESCRIBE", Resource.CLUSTER))}
    assert set(two) - set(one) == dropped and set(one) < set(two)


def test_the_principal_is_the_sasl_user_the_certificates_cn_or_anonymous(tmp_path) -> None:
    certs = make_certificates(tmp_path)
    assert principal_of({"security.protocol": "SASL_SSL", "sasl.username": "job"}) == "User:job"
    assert principal_of({"security.protocol": "SSL", "ssl.certificate.location": str(certs.client_cert)}) == \
        f"User:{certs.client_name}"
    assert principal_of({}) == "User:ANONYMOUS"


def test_a_refusal_says_what_to_check_and_a_broker_away_is_no_refusal() -> None:
    untrusted = KafkaError(KafkaError._SSL, "SSL handshake failed: certificate verify failed: broker certificate")
    no_cert = KafkaError(KafkaError._TRANSPORT, "Receive failed: ssl/tls alert bad certificate: SSL alert number 42")
    away = KafkaError(KafkaError._TRANSPORT, "Connection refused")
    assert refuses(untrusted) and "ssl.ca.location" in refusal_hint(untrusted)
    assert refuses(no_cert) and "ssl.certificate.location" in refusal_hint(no_cert)
    assert not refuses(away)


@pytest.mark.integration
def test_the_group_check_at_start_waits_out_a_fresh_clusters_coordinator() -> None:
    """On a cluster with no group yet, the first group request makes __consumer_offsets, and the requests
    that follow are answered NOT_COORDINATOR (or COORDINATOR_LOAD_IN_PROGRESS) until its partitions load: the
    check at start of a job with --sync-group-offsets waits that out, as the group sync does."""
    with start_local_broker() as fresh:
        sink = Cluster("sink", fresh.secure.sasl_ssl_bootstrap_servers, fresh.secure.admin())
        check = AccessCheck(Cluster("source", fresh.bootstrap_servers), sink)
        check.before_creating(JobAccess((), (), groups=("orders-readers",)))
