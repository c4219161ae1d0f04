"""A local SparkSession with the settings this machine needs (see the Spark notes, sections 1 and 5).

``local_session()`` sets PYSPARK_PYTHON/PYSPARK_DRIVER_PYTHON to this interpreter and
SPARK_LOCAL_IP=127.0.0.1, binds the driver to loopback, turns the UI off, enables Python data
source filter pushdown (required by the rmq readers' ``pushFilters``), uses small shuffle/parallelism
settings and a fast-starting JVM, and puts ``spark.local.dir`` and the warehouse under a temp dir.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

__all__ = ["local_session"]


def local_session(
    tmp_dir: str | os.PathLike[str] | None = None,
    app: str = "rmqcore",
    master: str = "local[2]",
    register: bool = True,
    **conf: Any,
) -> Any:
    """Return (get or create) a local SparkSession; ``conf`` entries override the defaults."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    base = str(tmp_dir) if tmp_dir is not None else tempfile.mkdtemp(prefix="rmqcore-spark-")
    os.makedirs(os.path.join(base, "local"), exist_ok=True)
    jopts = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djdk.lang.Process.launchMechanism=VFORK"
    settings = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.rdd.compress": "false",
        "spark.shuffle.compress": "false",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.python.filterPushdown.enabled": "true",
        "spark.python.worker.faulthandler.enabled": "true",
        "spark.driver.extraJavaOptions": jopts,
        "spark.executor.extraJavaOptions": jopts,
        "spark.local.dir": os.path.join(base, "local"),
        "spark.sql.warehouse.dir": os.path.join(base, "warehouse"),
    }
    settings.update({k: str(v) for k, v in conf.items()})
    b = SparkSession.builder.master(master).appName(app)
    for k, v in settings.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if register:
        from . import register as _register

        _register(spark)
    return spark
