"""What the wheel must carry. Under CI's wheel round trip (.ci/wheel-roundtrip sets RMQCORE_EXPECT_SITE to
the fresh venv's site-packages) rmqcore and every native kernel must come from there, not the source tree.
"Every" is every Cython source: rmqcore/_native/*.pyx of the sdist the wheel was built from
(RMQCORE_NATIVE_SOURCES, set by the round trip and by cibuildwheel's test command), else of the checkout."""
from __future__ import annotations

import importlib
import importlib.machinery
import os
from pathlib import Path

import pytest

import rmqcore
from rmqcore import _impl


def test_py_typed_beside_the_package() -> None:
    assert (Path(rmqcore.__file__).parent / "py.typed").is_file()


def _native_sources() -> list[str]:
    """The names of the Cython sources: the sdist's (RMQCORE_NATIVE_SOURCES), else the checkout's."""
    env = os.environ.get("RMQCORE_NATIVE_SOURCES")
    src = Path(env) if env else Path(rmqcore.__file__).parent / "_native"
    names = sorted(p.stem for p in src.glob("*.pyx"))
    if env and not names:
        pytest.fail(f"RMQCORE_NATIVE_SOURCES={env} holds no .pyx")
    return names


def test_every_cython_source_is_a_built_extension_with_a_pure_twin() -> None:
    names = _native_sources()
    if not names:
        if os.environ.get("RMQCORE_REQUIRE_NATIVE") == "1":
            pytest.fail("a native build under test, but no Cython sources to check it against: "
                        "set RMQCORE_NATIVE_SOURCES to the sdist's rmqcore/_native")
        pytest.skip("an installed package without its sources (RMQCORE_NATIVE_SOURCES not set)")
    if os.environ.get("RMQCORE_IMPL") == "pure":
        pytest.skip("a pure-only run (RMQCORE_IMPL=pure) need not have built the extensions")
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    site = os.environ.get("RMQCORE_EXPECT_SITE")
    for name in names:
        mod = importlib.import_module(f"rmqcore._native.{name}")
        f = os.path.realpath(mod.__file__ or "")
        assert f.endswith(suffixes), (name, f)
        if site:
            assert f.startswith(os.path.realpath(site) + os.sep), (name, f)
        if not name.startswith("_"):  # a kernel, with its twin (_core is the C core the kernels share)
            importlib.import_module(f"rmqcore._pure.{name}")


@pytest.mark.skipif(not os.environ.get("RMQCORE_EXPECT_SITE"), reason="only in CI's wheel round trip")
def test_installed_wheel_with_native_kernels_is_under_test() -> None:
    site = os.path.realpath(os.environ["RMQCORE_EXPECT_SITE"]) + os.sep
    assert os.path.realpath(rmqcore.__file__).startswith(site), rmqcore.__file__
    assert _impl.IMPLEMENTATION == "native"
    assert os.environ.get("RMQCORE_NATIVE_SOURCES"), "the round trip names the sdist's Cython sources"
    for name in _impl.KERNELS:
        f = os.path.realpath(_impl.kernel(name).__file__ or "")
        assert f.startswith(site) and f.endswith(".so"), f


WORKFLOWS = Path(__file__).resolve().parents[1] / ".github" / "workflows"


@pytest.mark.skipif(not WORKFLOWS.is_dir(), reason="a copy of tests/ without the repository (wheel tests)")
@pytest.mark.parametrize("name", ["ci.yml", "wheels.yml"])
def test_every_workflow_that_runs_the_suite_fetches_the_fixtures(name: str) -> None:
    """The suite reads ../shared/fixtures (or RMQCORE_SHARED): a workflow running it checks the
    fixtures repository out, places it at ./shared, fails without it, and points RMQCORE_SHARED there
    (ci.yml pointed at a ../shared nothing ever filled, so its fixture tests failed)."""
    text = (WORKFLOWS / name).read_text()
    assert "repository: ${{ vars.RMQCORE_SHARED_REPOSITORY }}" in text
    assert "test -d shared/fixtures ||" in text
    if name == "ci.yml":
        assert "RMQCORE_SHARED: ${{ github.workspace }}/shared" in text
    else:  # cibuildwheel's test command, from pyproject.toml
        assert "RMQCORE_SHARED={project}/shared" in (WORKFLOWS.parents[1] / "pyproject.toml").read_text()
