"""Shared fixtures.

``impl`` is the one fixture that picks a kernel twin: a test taking it runs once per implementation
("pure", "native") and gets a namespace whose attributes are that implementation's kernel modules, every
one in ``rmqcore._impl.KERNELS`` (``impl.crc``, ``impl.codec``, ``impl.kafka_batch`` ...), and ``name``
to pass as ``impl=`` to the high-level classes. Native params are marked ``native`` and fail (not skip)
when the extension is missing, unless RMQCORE_IMPL=pure is set, so that a packaging slip cannot pass
silently. Crossing tests (encode with one twin, decode with the other) call ``twins()`` for every
implementation's namespace instead.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, settings

from rmqcore import _impl

settings.register_profile(
    "ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile("thorough", max_examples=3000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
if not SHARED.is_dir():  # CI clones next to shared/ as well; allow an override
    SHARED = Path(os.environ.get("RMQCORE_SHARED", SHARED))
FIXTURES = SHARED / "fixtures"
RMQ_FIXTURES = FIXTURES / "rocketmq"
VERSIONS = ("4.9.8", "5.3.3")

IMPLS = ["pure", "native"]
if os.environ.get("RMQCORE_IMPL") == "pure":
    IMPLS = ["pure"]


_NAMESPACES: dict[str, SimpleNamespace] = {}


def _namespace(name: str) -> SimpleNamespace:
    got = _NAMESPACES.get(name)
    if got is not None:
        return got
    mods = {}
    for k in _impl.KERNELS:
        try:
            mods[k] = _impl.kernel(k, name)
        except ImportError as e:
            if name == "native":
                pytest.fail(f"native kernel {k!r} is not built ({e}); RMQCORE_IMPL=pure tests pure only")
            raise
    got = _NAMESPACES[name] = SimpleNamespace(name=name, **mods)
    return got


@pytest.fixture(params=IMPLS)
def impl(request: pytest.FixtureRequest) -> SimpleNamespace:
    return _namespace(request.param)


def twins() -> tuple[SimpleNamespace, ...]:
    """Every implementation's namespace (as ``impl`` gives them, in ``IMPLS`` order), for crossing tests.

    The kernel modules are stateless, so hypothesis tests may share them across examples."""
    return tuple(_namespace(n) for n in IMPLS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        cs = getattr(item, "callspec", None)
        if cs is not None and cs.params.get("impl") == "native":
            item.add_marker(pytest.mark.native)


def read_jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="session")
def rmq_fixtures() -> Path:
    if not RMQ_FIXTURES.is_dir():
        pytest.fail(f"shared fixtures not found at {RMQ_FIXTURES}")
    return RMQ_FIXTURES


def copy_store(src: Path, dst: Path) -> Path:
    """Copy a fixture store to a writable place (fixtures are read-only and never modified)."""
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    os.chmod(dst, 0o755)
    return dst
