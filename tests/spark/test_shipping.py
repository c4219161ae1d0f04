"""rmqcore.spark.shipping: rmqcore's wheel (with its .so kernels) shipped to real executor JVMs.

The cluster test runs ``local-cluster[1,1,1024]`` in a subprocess (one SparkContext per process;
the suite's own session lives in this one). Its executor imports rmqcore from the unpacked archive
``<executor work dir>/rmqcore_pkg/`` -- the test proves it from ``rmqcore.__file__`` and the .so
path, checks that the native kernels are in use and work, and that neither the repository nor
site-packages supplied the module. SPARK_HOME points at a temp dir of symlinks so that the
``work/`` directory local-cluster writes does not land inside site-packages.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from rmqcore.spark.shipping import DEFAULT_ALIAS, build_wheel, ship_wheel, shipping_conf  # noqa: E402

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def rmqcore_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from this checkout (``pip wheel <repo> --no-deps``), once per session.
    ``RMQCORE_TEST_WHEEL=<path>`` uses a prebuilt one instead."""
    given = os.environ.get("RMQCORE_TEST_WHEEL")
    if given:
        return Path(given)
    import importlib.util

    # without Cython here (a CI venv installed with build isolation), let pip fetch the build deps
    isolated = importlib.util.find_spec("Cython") is None
    return build_wheel(REPO, tmp_path_factory.mktemp("wheel"), build_isolation=isolated, timeout=900)


# -- the configuration helper (no JVM) -------------------------------------------------------------------
def test_ship_wheel_sets_archive_and_pythonpath(rmqcore_wheel: Path, tmp_path: Path) -> None:
    conf: dict[str, str] = {"spark.archives": "/x/other.zip#other", "spark.executorEnv.PYTHONPATH": "keep"}
    out = ship_wheel(conf, rmqcore_wheel, zip_dir=tmp_path)
    assert out is conf
    zipped = tmp_path / (rmqcore_wheel.name + ".zip")
    assert zipped.is_file() and zipped.read_bytes() == rmqcore_wheel.read_bytes()
    assert conf["spark.archives"] == f"/x/other.zip#other,{zipped}#{DEFAULT_ALIAS}"
    assert conf["spark.executorEnv.PYTHONPATH"] == os.pathsep.join([DEFAULT_ALIAS, "keep"])
    ship_wheel(conf, rmqcore_wheel, zip_dir=tmp_path)  # idempotent: no duplicate entries
    assert conf["spark.archives"].count(f"#{DEFAULT_ALIAS}") == 1
    assert conf["spark.executorEnv.PYTHONPATH"].split(os.pathsep).count(DEFAULT_ALIAS) == 1
    names = zipfile.ZipFile(zipped).namelist()  # the archive holds the compiled kernels
    assert any(n.startswith("rmqcore/_native/crc.") and n.endswith(".so") for n in names)


def test_ship_wheel_on_sparkconf_and_builder(rmqcore_wheel: Path, tmp_path: Path) -> None:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    conf = ship_wheel(SparkConf(loadDefaults=False), rmqcore_wheel, "pkg", zip_dir=tmp_path)
    assert conf.get("spark.archives").endswith(".whl.zip#pkg")
    assert conf.get("spark.executorEnv.PYTHONPATH") == "pkg"
    builder = SparkSession.Builder()
    assert ship_wheel(builder, rmqcore_wheel, zip_dir=tmp_path) is builder
    assert builder._options["spark.archives"].endswith(f".whl.zip#{DEFAULT_ALIAS}")
    assert shipping_conf("/a/b.whl.zip", "al")["spark.executorEnv.PYTHONPATH"] == "al"
    with pytest.raises(ValueError):
        ship_wheel({}, tmp_path / "not-a-wheel.zip")


# -- local-cluster: separate executor JVMs and Python workers ----------------------------------------------
_DRIVER = textwrap.dedent(
    """
    import json, os, sys
    from pyspark.sql import SparkSession
    from rmqcore.spark.shipping import ship_wheel

    wheel, tmp = sys.argv[1], sys.argv[2]
    builder = (
        SparkSession.builder.master("local-cluster[1,1,1024]").appName("rmqcore-shipping-test")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false").config("spark.local.dir", os.path.join(tmp, "local"))
        .config("spark.sql.warehouse.dir", os.path.join(tmp, "warehouse"))
        .config("spark.executor.memory", "512m")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .config("spark.executor.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .config("spark.executorEnv.PYTHONNOUSERSITE", "1")
        .config("spark.executorEnv.RMQCORE_IMPL", "native")
    )
    ship_wheel(builder, wheel, zip_dir=tmp)

    def probe(_):
        import os, sys
        import rmqcore
        from rmqcore._native import crc
        return json.dumps({
            "file": rmqcore.__file__, "crc_file": crc.__file__, "impl": rmqcore.IMPLEMENTATION,
            "crc": crc.crc32(b"hello"), "cwd": os.getcwd(), "pid": os.getpid(),
        })

    spark = builder.getOrCreate()
    try:
        out = spark.sparkContext.parallelize([0], 1).map(probe).collect()
        print("RESULT " + json.dumps({"executor": json.loads(out[0]), "driver_pid": os.getpid()}), flush=True)
    finally:
        spark.stop()
    """
)


def _spark_home(tmp: Path) -> Path:
    """A SPARK_HOME of symlinks to the pip-installed pyspark (local-cluster writes SPARK_HOME/work)."""
    import pyspark

    src = Path(pyspark.__file__).resolve().parent
    home = tmp / "spark_home"
    home.mkdir()
    for name in ("bin", "jars", "python", "sbin"):
        if (src / name).exists():
            (home / name).symlink_to(src / name)
    return home


@pytest.mark.skipif(shutil.which("java") is None, reason="java is not on PATH")
def test_local_cluster_executor_imports_shipped_wheel(rmqcore_wheel: Path, tmp_path: Path) -> None:
    import zlib

    import pyspark

    pyspark_work = Path(pyspark.__file__).resolve().parent / "work"
    had_work = pyspark_work.exists()
    home = _spark_home(tmp_path)
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.pop("PYTHONPATH", None)  # the driver finds rmqcore through its normal installation only
    env.update(
        SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONNOUSERSITE="1",
    )  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, str(script), str(rmqcore_wheel), str(tmp_path)], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the JVMs it started
        out, err = proc.communicate()
        pytest.fail(f"local-cluster run timed out\n{err[-4000:]}")
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"rc={proc.returncode}\n{out[-2000:]}\n{err[-6000:]}"
    res: dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
    ex = res["executor"]
    print("executor imported", ex)
    shipped = Path(ex["cwd"]) / DEFAULT_ALIAS / "rmqcore"
    # the executor's Python worker imported the unpacked archive, in its own work dir below SPARK_HOME
    assert Path(ex["file"]) == shipped / "__init__.py", ex
    assert Path(ex["crc_file"]).parent == shipped / "_native" and ex["crc_file"].endswith(".so"), ex
    assert Path(ex["cwd"]).resolve().is_relative_to((home / "work").resolve()), ex
    assert not Path(ex["file"]).resolve().is_relative_to(REPO.resolve()), ex
    assert "site-packages" not in ex["file"], ex
    assert ex["pid"] != res["driver_pid"]
    # the compiled kernels are what runs there
    assert ex["impl"] == "native"
    assert ex["crc"] == zlib.crc32(b"hello")
    # local-cluster wrote its work dir below our SPARK_HOME, not into the pyspark installation
    assert (home / "work").is_dir()
    assert had_work or not pyspark_work.exists()
