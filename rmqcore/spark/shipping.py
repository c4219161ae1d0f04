"""Ship rmqcore (with its compiled Cython kernels) to Spark executors that do not have it installed.

    builder = SparkSession.builder.master("spark://...")
    ship_wheel(builder)                       # builds a wheel of this checkout, or pass wheel_path=
    spark = builder.getOrCreate()

What it sets (a wheel is a zip file, so it can travel as an archive):

* ``spark.archives=<dir>/<wheel name>.whl.zip#rmqcore_pkg`` -- Spark copies the archive to every
  executor and unpacks it into the executor's working directory as ``rmqcore_pkg/``, which then
  holds ``rmqcore/`` with its ``.so`` files exactly as ``pip install`` would lay them out. The
  archive name must end in ``.zip`` (Spark unpacks only ``.zip/.tar.gz/.tgz/.tar/.jar``; a ``.whl``
  would be copied as-is), hence the copy to ``<name>.whl.zip``.
* ``spark.executorEnv.PYTHONPATH=rmqcore_pkg`` -- a path relative to the executor's working
  directory, where the Python workers start, so ``import rmqcore`` finds the unpacked copy first.

Why not ``--py-files`` / ``sc.addPyFile``: those put the zip itself on ``sys.path`` and Python
imports from it with ``zipimport``, which can load ``.py``/``.pyc`` files only -- never extension
modules (``.so``/``.pyd``), which the OS loader must open from a real file. The pure-Python parts
would import and ``rmqcore._native.*`` would fail (``No module named 'rmqcore._native.crc'``), so
rmqcore would silently fall back to its slow pure kernels (or fail with ``RMQCORE_IMPL=native``).
A bare ``.whl`` given to ``--py-files`` is not even put on ``sys.path`` (not a zip/egg/jar name).

Limits:

* ``spark.executorEnv.PYTHONPATH=<alias>`` relies on the executor's working directory being where
  archives unpack: true for standalone (and ``local-cluster``), YARN and Kubernetes executors, but
  **not** in plain ``local[N]`` mode, where Python workers start in the driver's directory (there
  the driver's own installation is used anyway). In YARN cluster deploy mode also set
  ``spark.yarn.appMasterEnv.PYTHONPATH``.
* The driver must have rmqcore installed normally: pickled rmqcore objects (data sources,
  partitions) are created and planned on the driver.
* The wheel is built for this interpreter (``cp311``, this platform): executors must run the same
  CPython minor version on a compatible platform (``auditwheel repair`` can retag a Linux wheel as
  manylinux for older-glibc nodes).

This module never imports pyspark.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["build_wheel", "ship_wheel", "shipping_conf", "DEFAULT_ALIAS"]

DEFAULT_ALIAS = "rmqcore_pkg"


def _source_root() -> Path:
    """The checkout this rmqcore was imported from (has a pyproject.toml), for building a wheel."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise FileNotFoundError(
            f"rmqcore was not imported from a source checkout ({root} has no pyproject.toml); "
            "pass wheel_path= with a built rmqcore wheel")
    return root


def build_wheel(
    source: str | os.PathLike[str] | None = None, out_dir: str | os.PathLike[str] | None = None, *,
    build_isolation: bool = False, timeout: float = 900,
) -> Path:
    """``pip wheel <source> --no-deps -w <out_dir>``; returns the rmqcore wheel's path.

    ``build_isolation=False`` (default) builds with the Cython and setuptools already installed
    here (no downloads); True lets pip fetch the build requirements."""
    src = Path(source) if source is not None else _source_root()
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="rmqcore-wheel-"))
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-w", str(out), "-q"]
    if not build_isolation:
        cmd.append("--no-build-isolation")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"pip wheel failed ({p.returncode}):\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}")
    wheels = sorted(out.glob("rmqcore-*.whl"), key=lambda w: w.stat().st_mtime)
    if not wheels:
        raise RuntimeError(f"pip wheel produced no rmqcore wheel in {out}")
    return wheels[-1]


def _as_zip(wheel: Path, dest_dir: Path | None) -> Path:
    """A copy of the wheel named ``<wheel>.zip`` (Spark unpacks archives by extension)."""
    if wheel.suffix != ".whl":
        raise ValueError(f"{wheel} is not a wheel (.whl)")
    if not wheel.is_file():
        raise FileNotFoundError(wheel)
    dest = (dest_dir or wheel.parent) / (wheel.name + ".zip")
    src_st = wheel.stat()
    if not dest.exists() or dest.stat().st_mtime < src_st.st_mtime or dest.stat().st_size != src_st.st_size:
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.copyfile(wheel, tmp)
        os.replace(tmp, dest)
    return dest


def shipping_conf(zip_path: str | os.PathLike[str], alias: str = DEFAULT_ALIAS,
                  archives: str | None = None, pythonpath: str | None = None) -> dict[str, str]:
    """The two settings that ship ``zip_path`` as ``alias`` (merged with existing values)."""
    if not alias or "/" in alias or "#" in alias or "," in alias:
        raise ValueError(f"bad alias {alias!r}")
    entry = f"{Path(zip_path).resolve()}#{alias}"
    arch = [a for a in (archives or "").split(",") if a and not a.endswith("#" + alias)]
    paths = [p for p in (pythonpath or "").split(os.pathsep) if p and p != alias]
    return {
        "spark.archives": ",".join([*arch, entry]),
        "spark.executorEnv.PYTHONPATH": os.pathsep.join([alias, *paths]),
    }


def _get(conf: Any, key: str) -> str | None:
    if isinstance(conf, dict):
        return conf.get(key)
    opts = getattr(conf, "_options", None)  # SparkSession.Builder keeps its settings here
    if isinstance(opts, dict):
        return opts.get(key)
    get = getattr(conf, "get", None)  # SparkConf
    return get(key, None) if get is not None else None


def ship_wheel(spark_conf_or_builder: Any = None, wheel_path: str | os.PathLike[str] | None = None,
               alias: str = DEFAULT_ALIAS, *, zip_dir: str | os.PathLike[str] | None = None) -> Any:
    """Configure Spark to ship rmqcore's wheel to executors (see the module docstring).

    Args:
        spark_conf_or_builder: a ``SparkConf``, a ``SparkSession.Builder`` or a ``dict``; updated in
            place and returned. ``None``: return the settings as a new dict.
        wheel_path: a built rmqcore wheel; default: build one from this checkout (``pip wheel .
            --no-deps``, 30-60 s).
        alias: the directory name the archive unpacks to in each executor's working directory.
        zip_dir: where to put the ``.whl.zip`` copy (default: next to the wheel).

    Must be applied before the SparkContext starts (``spark.archives`` is read at startup).
    """
    wheel = Path(wheel_path) if wheel_path is not None else build_wheel()
    zipped = _as_zip(wheel, Path(zip_dir) if zip_dir is not None else None)
    target = {} if spark_conf_or_builder is None else spark_conf_or_builder
    settings = shipping_conf(zipped, alias, _get(target, "spark.archives"),
                             _get(target, "spark.executorEnv.PYTHONPATH"))
    for key, value in settings.items():
        if isinstance(target, dict):
            target[key] = value
        elif hasattr(target, "set"):  # SparkConf
            target.set(key, value)
        else:  # SparkSession.Builder
            target.config(key, value)
    return target
