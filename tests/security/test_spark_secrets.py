"""Spark settings that are secrets reach the JVM only once it runs, never on its command line."""

from __future__ import annotations

from streaming.security.spark_secrets import spark_settings


def test_spark_secrets_are_told_to_the_jvm_only_once_it_runs(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KC_TEST_S3_KEY", "the-key")
    public, secret = spark_settings({"spark.executor.memory": "2g",
                                     "spark.hadoop.fs.s3a.secret.key": "typed",
                                     "spark.hadoop.fs.s3a.access.key": "${env:KC_TEST_S3_KEY}"})
    assert public == {"spark.executor.memory": "2g"}
    assert secret == {"spark.hadoop.fs.s3a.secret.key": "typed", "spark.hadoop.fs.s3a.access.key": "the-key"}
