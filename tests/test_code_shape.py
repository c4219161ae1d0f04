"""The shape a newcomer sees: no module over 800 lines, no class over 500 (issue 24).

A module is every source file: ``.py``, and on the native side ``.pyx``, the ``.pxi`` files a
``.pyx`` includes (each measured as a module of its own, so an include cannot hide a long one) and
``.pxd`` declarations.

``TOO_BIG`` lists what was over the limit when the check was written, each with its size then: an
entry may only shrink (the test fails when one grows, and when one is within the limit and still
listed, so the list shrinks as the code is split), and nothing new may join it.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rmqcore"
# the shape of the sources: an installed wheel (CI's wheel round trip) carries no .pyx to measure
SOURCES = pytest.mark.skipif(not any(PACKAGE.glob("_native/*.pyx")), reason="needs the source checkout")
MAX_MODULE_LINES = 800
MAX_CLASS_LINES = 500

TOO_BIG: dict[str, int] = {}  # empty since the splits of issue 24; nothing may join it

_PYX_CLASS = re.compile(r"(?:cdef |cpdef )?class (\w+)")


def _classes(path: Path, text: str) -> dict[str, int]:
    """Lines of each top-level and nested class (Python by its AST; Cython from a ``class`` line at
    column 0 to the next line at column 0 that is not blank or a comment)."""
    if path.suffix == ".py":
        return {node.name: (node.end_lineno or node.lineno) - node.lineno + 1
                for node in ast.walk(ast.parse(text)) if isinstance(node, ast.ClassDef)}
    out: dict[str, int] = {}
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = _PYX_CLASS.match(line)
        if m:
            j = i + 1
            while j < len(lines) and (not lines[j] or lines[j][0] in " \t#"):
                j += 1
            while j > i + 1 and not lines[j - 1].strip():
                j -= 1
            out[m.group(1)] = j - i
    return out


SUFFIXES = ("py", "pyx", "pxi", "pxd")


def sizes(root: Path = PACKAGE) -> dict[str, int]:
    """Lines of every module of the package (every file of SUFFIXES) and of every class in them."""
    out: dict[str, int] = {}
    for path in sorted(p for suffix in SUFFIXES for p in root.rglob(f"*.{suffix}")):
        name = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        out[name] = text.count("\n")
        for cls, n in _classes(path, text).items():
            out[f"{name}:{cls}"] = n
    return out


@SOURCES
def test_no_module_or_class_outgrows_its_limit() -> None:
    found = sizes()
    over = {k: n for k, n in found.items() if n > (MAX_CLASS_LINES if ":" in k else MAX_MODULE_LINES)}
    new = {k: n for k, n in over.items() if k not in TOO_BIG}
    grown = {k: (TOO_BIG[k], n) for k, n in over.items() if k in TOO_BIG and n > TOO_BIG[k]}
    assert not new, f"over the limit ({MAX_MODULE_LINES} lines a module, {MAX_CLASS_LINES} a class): {new}"
    assert not grown, f"grew while over the limit (listed size, now): {grown}"


@SOURCES
def test_the_list_of_exceptions_only_shrinks() -> None:
    found = sizes()
    gone = sorted(k for k in TOO_BIG if k not in found)
    fixed = sorted(k for k in TOO_BIG
                   if k in found and found[k] <= (MAX_CLASS_LINES if ":" in k else MAX_MODULE_LINES))
    assert not gone and not fixed, f"take these out of TOO_BIG: {gone + fixed}"


def test_the_measure_counts_what_it_claims(tmp_path: Path) -> None:
    py = tmp_path / "m.py"
    py.write_text("x = 1\n\n\nclass A:\n    a = 1\n\n    def f(self):\n        return 2\n\n\ny = 2\n")
    assert _classes(py, py.read_text()) == {"A": 5}
    pyx = tmp_path / "m.pyx"
    pyx.write_text("cdef int x = 1\n\n\ncdef class B:\n    cdef int a\n\n    # note\n    def f(self):\n"
                   "        return 2\n\n\ndef g():\n    pass\n")
    assert _classes(pyx, pyx.read_text()) == {"B": 6}


def test_include_and_declaration_files_are_measured(tmp_path: Path) -> None:
    native = tmp_path / "_native"
    native.mkdir()
    (native / "k.pyx").write_text('include "k_part.pxi"\n')
    (native / "k_part.pxi").write_text("cdef class C:\n" + "    cdef int a\n" * 600 + "\n\ncdef int x = 1\n")
    (native / "k.pxd").write_text("cdef int f(int a)\n" * 3)
    found = sizes(tmp_path)
    assert found["_native/k.pyx"] == 1
    assert found["_native/k_part.pxi"] == 604
    assert found["_native/k_part.pxi:C"] == 601
    assert found["_native/k.pxd"] == 3
