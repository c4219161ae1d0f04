"""Fixtures for the Kafka half (the kernel twins come from tests/conftest.py: ``impl`` and ``twins()``)."""

from __future__ import annotations

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
