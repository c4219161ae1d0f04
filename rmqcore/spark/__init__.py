"""PySpark (4.x Python Data Source API) access to rmqcore stores and Kafka segments.

* ``spark.read.format("rmq")`` / ``spark.readStream.format("rmq")`` / ``df.write.format("rmq")``:
  RocketMQ stores (see :mod:`rmqcore.spark.rmq`); :func:`materialize` makes Parquet copies of a
  store's sealed CommitLog files, which :func:`read_store` then reads with Spark's Parquet reader.
* ``spark.read.format("kafka-segments")``: Kafka partition directories
  (see :mod:`rmqcore.spark.kafka_source`).

Call :func:`register` once per session. Spark 4.3 caches a Python data source's read plan per
DataFrame (a DataFrame is a snapshot taken when it is first planned, and a filtered query can leave
its pruned reader behind for a later unfiltered one): use :func:`read_store` /
:func:`read_kafka_segments`, which build a fresh DataFrame per call, once per logical read.
"""

from __future__ import annotations

from typing import Any

try:
    import pyarrow  # type: ignore[import-untyped,unused-ignore]  # noqa: F401
    import pyspark  # noqa: F401
    from pyspark.sql.datasource import DataSource  # noqa: F401
except ImportError as e:  # pragma: no cover
    raise ImportError(
        f"rmqcore.spark needs PySpark 4 and pyarrow ({e}); install them with: pip install rmqcore[spark]"
    ) from e

from .kafka_source import KafkaSegmentsDataSource, read_kafka_segments
from .rmq import RmqDataSource, materialize, read_store
from .session import local_session

__all__ = [
    "register",
    "read_store",
    "materialize",
    "read_kafka_segments",
    "local_session",
    "RmqDataSource",
    "KafkaSegmentsDataSource",
]


def register(spark: Any) -> None:  # a pyspark.sql.SparkSession
    """Register the ``rmq`` and ``kafka-segments`` data sources with ``spark``."""
    spark.dataSource.register(RmqDataSource)
    spark.dataSource.register(KafkaSegmentsDataSource)
