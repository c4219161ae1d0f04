"""One session-scoped local SparkSession (rmqcore.spark.local_session) for every Spark test, with the
settings that start a JVM fast and keep small queries small (local_session's defaults are a real
job's: the optimising JIT, adaptive execution, Spark's shuffle partitions)."""

from __future__ import annotations

from pathlib import Path

import pytest

FAST_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djdk.lang.Process.launchMechanism=VFORK"
FAST_START = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.rdd.compress": "false",
    "spark.shuffle.compress": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.driver.extraJavaOptions": FAST_JVM,
    "spark.executor.extraJavaOptions": FAST_JVM,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from rmqcore.spark import local_session

    s = local_session(tmp_path_factory.mktemp("spark"), app="rmqcore-tests", **FAST_START)
    yield s
    s.stop()
