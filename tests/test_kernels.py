"""The kernel registry (rmqcore._impl): every kernel is in it, and its two twins expose the same surface.

A kernel's surface is its ``__all__``: the same names in both twins, each of the same kind (class,
function or constant); functions and the public methods of classes with the same parameters (names,
kinds, defaults) wherever both sides are introspectable; constants with the same value, except those
that name the implementation itself (``IMPL_NAME``).
"""
from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

import rmqcore
from rmqcore import _impl
from tests.conftest import IMPLS

# constants whose value describes the twin itself
PER_TWIN = {"IMPL_NAME"}

PACKAGE = Path(rmqcore.__file__).resolve().parent


def _params(fn: Any) -> list[tuple[str, Any, Any]] | None:
    """(name, kind, default) of each parameter, or None where the signature is not introspectable (a
    cdef class's ``__init__`` is a slot wrapper taking ``*args, **kwargs``)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    ps = list(sig.parameters.values())
    if [p.kind for p in ps[-2:]] == [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD] and (
        type(fn).__name__ == "wrapper_descriptor"
    ):
        return None
    return [(p.name, p.kind, p.default) for p in ps]


def _methods(cls: type) -> dict[str, Any]:
    """The public methods of ``cls`` (data attributes are left out: a pure class sets its attributes on
    the instance, a cdef class declares them on the type)."""
    out = {}
    for name in dir(cls):
        if name.startswith("_") and name != "__init__":
            continue
        static = inspect.getattr_static(cls, name)
        if isinstance(static, (staticmethod, classmethod)) or inspect.isroutine(static):
            out[name] = getattr(cls, name)
    return out


def surface_mismatches(native: ModuleType, pure: ModuleType) -> list[str]:
    """How the surfaces of two twins differ (empty: they agree)."""
    bad: list[str] = []
    names = {}
    for mod in (native, pure):
        got = getattr(mod, "__all__", None)
        if got is None:
            bad.append(f"{mod.__name__} has no __all__")
            return bad
        names[mod] = list(got)
        for name in got:
            if not hasattr(mod, name):
                bad.append(f"{mod.__name__}.__all__ names {name!r}, which it lacks")
    for name in sorted(set(names[native]) ^ set(names[pure])):
        side = native if name in names[native] else pure
        bad.append(f"{name!r} is only in {side.__name__}.__all__")
    for name in sorted(set(names[native]) & set(names[pure])):
        a, b = getattr(native, name, None), getattr(pure, name, None)
        if a is None or b is None:
            continue
        if isinstance(a, type) != isinstance(b, type) or callable(a) != callable(b):
            bad.append(f"{name!r} is a {type(a).__name__} in one twin and a {type(b).__name__} in the other")
        elif isinstance(a, type):
            ma, mb = _methods(a), _methods(b)
            for m in sorted(set(ma) ^ set(mb)):
                bad.append(f"method {name}.{m} is only in {'native' if m in ma else 'pure'}")
            for m in sorted(set(ma) & set(mb)):
                pa, pb = _params(ma[m]), _params(mb[m])
                if pa is not None and pb is not None and pa != pb:
                    bad.append(f"{name}.{m} takes {pa} natively but {pb} in pure")
        elif callable(a):
            pa, pb = _params(a), _params(b)
            if pa is not None and pb is not None and pa != pb:
                bad.append(f"{name} takes {pa} natively but {pb} in pure")
        elif name not in PER_TWIN and a != b:
            bad.append(f"{name} = {a!r} natively but {b!r} in pure")
    return bad


def test_the_registry_lists_every_kernel_module() -> None:
    # _native/_core.pyx is the C core every native kernel calls, not a kernel; a pure module named
    # with "_" is part of one (_pure/_dispatch_hints.py: dispatch's reader of the hint ring)
    native = sorted(p.stem for p in (PACKAGE / "_native").glob("*.pyx") if not p.stem.startswith("_"))
    pure = sorted(p.stem for p in (PACKAGE / "_pure").glob("*.py") if not p.stem.startswith("_"))
    # the installed wheel carries .so files, not .pyx: there the pure twins name the kernels
    assert sorted(_impl.KERNELS) == pure
    if native:
        assert sorted(_impl.KERNELS) == native
    assert len(pure) >= 11  # the glob found the twins (an empty directory would pass the equalities)


def test_every_kernel_loads_through_the_registry(impl: SimpleNamespace) -> None:
    for name in _impl.KERNELS:
        mod = _impl.kernel(name, impl.name)
        assert mod.__name__ == f"rmqcore._{impl.name}.{name}"
        assert getattr(impl, name) is mod


def test_unknown_kernel_or_implementation() -> None:
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        _impl.kernel("nope", "pure")
    with pytest.raises(ValueError, match="unknown implementation 'fast'"):
        _impl.kernel("crc", "fast")


@pytest.mark.skipif(IMPLS != ["pure", "native"], reason="needs both implementations")
def test_native_available_counts_every_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _impl.native_available()
    real = importlib.import_module
    for missing in _impl.KERNELS:

        def fake(name: str, package: str | None = None, missing: str = missing) -> ModuleType:
            if name == f"rmqcore._native.{missing}":
                raise ImportError(f"No module named {name!r}")
            return real(name, package)

        monkeypatch.setattr(importlib, "import_module", fake)
        assert not _impl.native_available(), missing
        monkeypatch.setattr(importlib, "import_module", real)


@pytest.mark.skipif(IMPLS != ["pure", "native"], reason="needs both implementations")
@pytest.mark.parametrize("name", _impl.KERNELS)
def test_twins_expose_the_same_surface(name: str) -> None:
    assert surface_mismatches(_impl.kernel(name, "native"), _impl.kernel(name, "pure")) == []


def _module(name: str, **attrs: Any) -> ModuleType:
    mod = ModuleType(name)
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


def test_surface_check_reports_each_kind_of_difference() -> None:
    def f(a: int, b: int = 0) -> None: ...
    def g(a: int, b: int = 1) -> None: ...
    def h(a: int, *, b: int = 0) -> None: ...

    class C:
        def put(self, x: int) -> None: ...

    class D:
        def put(self, y: int) -> None: ...
        def close(self) -> None: ...

    full = dict(__all__=["f", "C", "K", "IMPL_NAME"], f=f, C=C, K=1, IMPL_NAME="fast")
    same = _module("n", **full)
    assert surface_mismatches(same, _module("p", **{**full, "IMPL_NAME": "slow"})) == []
    lacking = _module("p", **{**full, "__all__": ["f", "C", "IMPL_NAME"]})
    assert surface_mismatches(same, lacking) == ["'K' is only in n.__all__"]
    assert surface_mismatches(same, _module("p", **{k: v for k, v in full.items() if k != "K"})) == [
        "p.__all__ names 'K', which it lacks"
    ]
    assert surface_mismatches(same, _module("p", **{k: v for k, v in full.items() if k != "__all__"})) == [
        "p has no __all__"
    ]
    assert surface_mismatches(same, _module("p", **{**full, "f": g}))[0].startswith("f takes")
    assert surface_mismatches(same, _module("p", **{**full, "f": h}))[0].startswith("f takes")
    assert surface_mismatches(same, _module("p", **{**full, "K": 2})) == ["K = 1 natively but 2 in pure"]
    assert surface_mismatches(same, _module("p", **{**full, "K": f})) == [
        "'K' is a int in one twin and a function in the other"
    ]
    got = surface_mismatches(same, _module("p", **{**full, "C": D}))
    assert got[0] == "method C.close is only in pure"
    assert got[1].startswith("C.put takes [('self',") and "('x'," in got[1] and "('y'," in got[1]
    assert len(got) == 2
