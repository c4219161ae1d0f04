"""Fixtures for the Kafka half.

``kimpl`` runs a test once per kernel implementation ("pure", "native"): a namespace with the twin
modules ``sparse`` and ``kafka_batch`` loaded by importlib, and ``name`` to pass as ``impl=`` to the
high-level classes. The native param FAILS (never skips) when the extension is not built, unless
``RMQCORE_IMPL=pure`` asks for the pure twins only.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures"
if not FIXTURES.is_dir():  # allow an override, as tests/conftest.py does
    FIXTURES = Path(os.environ.get("RMQCORE_SHARED", FIXTURES.parent)) / "fixtures"
KAFKA = FIXTURES / "kafka"
REAL_BROKER = FIXTURES / "kafka-real-broker"

KIMPLS = ["pure", "native"]
if os.environ.get("RMQCORE_IMPL") == "pure":
    KIMPLS = ["pure"]

KERNELS = ("sparse", "kafka_batch")


def load_kernels(name: str) -> SimpleNamespace:
    mods = {}
    for k in KERNELS:
        try:
            mods[k] = importlib.import_module(f"rmqcore._{name}.{k}")
        except ImportError as e:
            if name == "native":
                pytest.fail(
                    f"native kernel {k!r} is not built ({e}); set RMQCORE_IMPL=pure to test pure only"
                )
            raise
    return SimpleNamespace(name=name, **mods)


@pytest.fixture(params=KIMPLS)
def kimpl(request: pytest.FixtureRequest) -> SimpleNamespace:
    return load_kernels(request.param)


@pytest.fixture(scope="session")
def kimpls() -> tuple[SimpleNamespace, ...]:
    """Every implementation, for crossing tests (stateless modules: safe to share across examples)."""
    return tuple(load_kernels(n) for n in KIMPLS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        cs = getattr(item, "callspec", None)
        if cs is not None and cs.params.get("kimpl") == "native":
            item.add_marker(pytest.mark.native)


def scenario_dirs() -> list[Path]:
    """Every fixture partition directory (oracle scenarios and real-broker files)."""
    return sorted(p.parent for p in [*KAFKA.glob("*/manifest.json"), *REAL_BROKER.glob("*/manifest.json")])


_MANIFESTS: dict[Path, dict[str, Any]] = {}


def manifest(d: Path) -> dict[str, Any]:
    got = _MANIFESTS.get(d)
    if got is None:
        with open(d / "manifest.json", encoding="utf-8") as f:
            got = _MANIFESTS[d] = json.load(f)
    return got


def copy_dir(src: Path, dst: Path) -> Path:
    """Copy a read-only fixture directory to a writable place (fixtures are never modified)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("manifest.json"))
    for p in dst.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    os.chmod(dst, 0o755)
    return dst


def segment_files(d: Path, base: int) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        p = d / f"{base:020d}{suffix}"
        out[suffix] = p.read_bytes() if p.exists() else None
    return out


@pytest.fixture(scope="session")
def kx() -> SimpleNamespace:
    """Helpers shared by the Kafka test modules."""
    if not KAFKA.is_dir():
        pytest.fail(f"shared Kafka fixtures not found at {KAFKA}")
    return SimpleNamespace(
        KAFKA=KAFKA,
        REAL_BROKER=REAL_BROKER,
        manifest=manifest,
        copy_dir=copy_dir,
        segment_files=segment_files,
        scenario_dirs=scenario_dirs,
    )
