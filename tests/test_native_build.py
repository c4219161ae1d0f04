"""The C core (csrc/) is built once: into rmqcore._native._core, with hidden visibility, reached by every
kernel module through one table of functions (csrc/rmq_capi.h).

So no extension module exports an rmq_* symbol, no kernel module carries a copy of the C core, and the
core's per-process state (the CRC kernels chosen for the CPU and their testing override) is one state
that every module sees.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rmqcore import _impl

CORE = "rmqcore._native._core"
CSRC = Path(__file__).resolve().parents[1] / "csrc"


def _native_modules() -> list[ModuleType]:
    if not _impl.native_available():
        pytest.skip("the native kernels are not built")
    return [importlib.import_module(CORE), *(_impl.kernel(k, "native") for k in _impl.KERNELS)]


def _extension_files() -> list[Path]:
    """Every extension module file of this interpreter under rmqcore/_native/."""
    if not _impl.native_available():
        pytest.skip("the native kernels are not built")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return sorted(Path(str(importlib.import_module("rmqcore._native").__file__)).parent.glob(f"*{suffix}"))


def _nm(*args: str) -> list[tuple[str, str]]:
    """(type letter, name) of each symbol ``nm`` lists."""
    p = subprocess.run(["nm", *args], capture_output=True, text=True, check=True)
    out = []
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out.append((parts[-2], parts[-1]))
    return out


needs_elf_nm = pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("nm") is None, reason="reads ELF symbols with nm"
)


@pytest.mark.native
@needs_elf_nm
def test_no_module_exports_an_rmq_symbol() -> None:
    files = _extension_files()
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for f in files:
        exported = [name for _, name in _nm("-D", "--defined-only", str(f))]
        assert [s for s in exported if s.startswith("rmq_")] == [], f
        assert f"PyInit_{f.name[: -len(suffix)]}" in exported, f
    assert sorted(f.name[: -len(suffix)] for f in files) == sorted(["_core", *_impl.KERNELS])


@pytest.mark.native
@needs_elf_nm
def test_the_c_core_is_linked_into_one_module() -> None:
    core, *kernels = _native_modules()
    in_core = {name for kind, name in _nm("--defined-only", str(core.__file__)) if name.startswith("rmq_")}
    if not in_core:
        pytest.skip("the core module's symbol table is stripped")
    assert {"rmq_crc32", "rmq_crc_force_level", "rmq_decode_batch", "rmq_index_put", "rmq_gc_new"} <= in_core
    for mod in kernels:
        defined = {name for _, name in _nm("--defined-only", str(mod.__file__))}
        assert defined & in_core == set(), mod.__file__


@pytest.mark.native
def test_the_crc_override_is_one_state_for_every_module() -> None:
    """Set through the crc kernel's hook, seen through the core module, whose C functions every kernel
    module calls (with one copy of the C core, there is no other state to see)."""
    core = _native_modules()[0]
    crc = _impl.kernel("crc", "native")
    best = core.crc_kernels()
    try:
        crc._force_level(2)
        assert core.crc_kernels() == ("slice-by-8", "slice-by-8")
        crc._force_level(1)
        assert core.crc_kernels() == crc._impl_names()
        assert "vpclmul" not in core.crc_kernels()
    finally:
        crc._force_level(0)
    assert core.crc_kernels() == best == crc._impl_names()


@pytest.mark.skipif(not CSRC.is_dir(), reason="needs the source tree (csrc/)")
def test_the_table_lists_every_function_the_headers_declare() -> None:
    decl = re.compile(r"(?m)^(?!static|#|\s|typedef)[^;{}()]*?\b(rmq_\w+)\s*\([^;{}]*\)\s*;")
    declared = set()
    for h in sorted(CSRC.glob("*.h")):
        if h.name == "rmq_capi.h":
            continue
        text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", h.read_text(encoding="utf-8"), flags=re.S)
        declared |= set(decl.findall(text))
    capi = (CSRC / "rmq_capi.h").read_text(encoding="utf-8")
    funcs = capi[capi.index("#define RMQ_CAPI_FUNCS(X)") : capi.index("#define RMQ_CAPI_FIELD")]
    listed = re.findall(r"X\((rmq_\w+)\)", funcs)
    macros = re.findall(r"(?m)^#define (rmq_\w+) \(rmq_capi->(rmq_\w+)\)$", capi)
    assert len(declared) > 50
    assert sorted(listed) == sorted(declared)
    assert len(listed) == len(set(listed))
    assert [a for a, b in macros if a != b] == []
    assert sorted(a for a, _ in macros) == sorted(declared)


def test_the_dispatch_loop_calls_no_python_while_it_has_let_the_gil_go() -> None:
    """``Dispatcher._loop`` lets the GIL go by hand (a short run keeps it), so Cython no longer checks
    that its loop is nogil code: the generated C between ``PyEval_SaveThread`` and
    ``PyEval_RestoreThread`` must call nothing of Python's C API (plain C helpers such as Cython's
    integer division are fine)."""
    c_file = Path(str(importlib.import_module("rmqcore._native").__file__)).parent / "dispatch.c"
    if not c_file.exists():
        pytest.skip("no generated C beside the package (an installed wheel)")
    code = re.sub(r"/\*.*?\*/", "", c_file.read_text(), flags=re.S)  # Cython's comments quote the .pyx
    saved = r"__pyx_v_tstate\s*=\s*PyEval_SaveThread\(\);(.*?)PyEval_RestoreThread\(__pyx_v_tstate\)"
    regions = re.findall(saved, code, flags=re.S)
    assert len(regions) == 1, f"{len(regions)} regions between PyEval_SaveThread and PyEval_RestoreThread"
    names = set(re.findall(r"\b(_?_?Py[A-Za-z_]\w*|__Pyx\w*)\s*\(", regions[0]))
    allowed = {n for n in names if re.fullmatch(r"__Pyx_(div|mod)_\w+", n)}
    assert names - allowed == set(), f"Python C API called without the GIL: {sorted(names - allowed)}"
    assert "__pyx_f_7rmqcore_7_native_8dispatch" in regions[0] or "rmq_dispatch_batch" in regions[0]
