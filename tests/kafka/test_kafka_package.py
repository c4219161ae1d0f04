"""``rmqcore.kafka``'s names are its submodules' public names, each declared once (issue 24, D13/D14)."""

from __future__ import annotations

import importlib

import rmqcore.kafka as kafka

SUBMODULES = ("index", "log", "records", "segment", "txnindex")


def test_package_exports_every_public_name_of_its_submodules() -> None:
    modules = [importlib.import_module(f"rmqcore.kafka.{m}") for m in SUBMODULES]
    declared = [n for m in modules for n in m.__all__]
    assert kafka.__all__ == declared
    assert len(set(declared)) == len(declared)
    assert {"DEFAULT_MAX_INDEX_SIZE", "encode_varint", "BatchHeader"} <= set(kafka.__all__)
    for m in modules:
        for name in m.__all__:
            assert not name.startswith("_")
            assert getattr(kafka, name) is getattr(m, name)
