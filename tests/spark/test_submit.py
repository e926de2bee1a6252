"""The spark-submit command of `kcompact submit`: the driver's address, kcompact's settings under the
user's, and the run command passed through as given."""

from __future__ import annotations

import sys

import pytest

from streaming.spark.submit import SubmitPlan, address_towards, master_host


@pytest.mark.parametrize("master,host", [("spark://m1:7077", "m1"), ("spark://m1:7077,m2:7077", "m1"),
                                         ("k8s://https://api.example:6443", "api.example"), ("local[2]", None),
                                         ("yarn", None)])
def test_the_master_host_is_read_from_each_kind_of_master_url(master: str, host: str | None) -> None:
    assert master_host(master) == host


def test_the_driver_address_is_loopback_for_a_master_on_this_host_and_a_local_run() -> None:
    assert address_towards("spark://127.0.0.1:7077") == "127.0.0.1"
    assert address_towards("spark://localhost:7077") == "127.0.0.1"
    assert address_towards("local[2]") == "127.0.0.1"
    assert address_towards("spark://no-such-host.invalid:7077") is None


def test_the_command_puts_the_users_settings_over_kcompacts_and_passes_run_as_given(monkeypatch) -> None:
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    plan = SubmitPlan("/app/submit.py", "spark://127.0.0.1:7077", ("--bootstrap-servers", "b:9092", "--once"),
                      {"spark.pyspark.python": "/opt/venv/bin/python", "spark.driver.extraJavaOptions": "-Dx=1"},
                      packages="org.apache.hadoop:hadoop-aws:3.5.0", log_format="json")
    argv = plan.command()
    confs = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--conf")
    assert argv[0].endswith("/bin/spark-submit") and argv[argv.index("--master") + 1] == "spark://127.0.0.1:7077"
    assert confs["spark.pyspark.python"] == "/opt/venv/bin/python"
    assert confs["spark.pyspark.driver.python"] == sys.executable and confs["spark.driver.host"] == "127.0.0.1"
    assert "-Dlog4j2.configurationFile=" in confs["spark.driver.extraJavaOptions"]
    assert confs["spark.driver.extraJavaOptions"].endswith(" -Dx=1")
    assert argv[argv.index("--packages") + 1] == "org.apache.hadoop:hadoop-aws:3.5.0"
    assert argv[argv.index("/app/submit.py"):] == ["/app/submit.py", "--log-level", "INFO", "--log-format", "json",
                                                   "run", "--bootstrap-servers", "b:9092", "--once"]
    env = plan.environment()
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1" and argv[0] == f"{env['SPARK_HOME']}/bin/spark-submit"
    chosen = SubmitPlan("/app/submit.py", "spark://127.0.0.1:7077", (), driver_host="10.1.2.3")
    assert chosen.environment()["SPARK_LOCAL_IP"] == "10.1.2.3"
