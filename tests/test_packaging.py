"""What the wheel must carry. Under CI's wheel round trip (.ci/wheel-roundtrip sets RMQCORE_EXPECT_SITE to
the fresh venv's site-packages) rmqcore and every native kernel must come from there, not the source tree."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import rmqcore
from rmqcore import _impl


def test_py_typed_beside_the_package() -> None:
    assert (Path(rmqcore.__file__).parent / "py.typed").is_file()


@pytest.mark.skipif(not os.environ.get("RMQCORE_EXPECT_SITE"), reason="only in CI's wheel round trip")
def test_installed_wheel_with_native_kernels_is_under_test() -> None:
    site = os.path.realpath(os.environ["RMQCORE_EXPECT_SITE"]) + os.sep
    assert os.path.realpath(rmqcore.__file__).startswith(site), rmqcore.__file__
    assert _impl.IMPLEMENTATION == "native"
    for name in _impl.KERNELS:
        f = os.path.realpath(_impl.kernel(name).__file__ or "")
        assert f.startswith(site) and f.endswith(".so"), f
