"""One session-scoped local SparkSession (rmqcore.spark.local_session) for every Spark test."""

from __future__ import annotations

from pathlib import Path

import pytest


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

    s = local_session(tmp_path_factory.mktemp("spark"), app="rmqcore-tests")
    yield s
    s.stop()
