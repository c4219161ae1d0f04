"""CommitLog records as Arrow batches (``rmqcore.columnar.arrow``), with pyarrow alone: projections build
only the columns asked for and give the very values of the whole schema; bad projections are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")

from rmqcore.columnar import arrow as A  # noqa: E402
from rmqcore.columnar.stores import open_commitlog  # noqa: E402
from rmqcore.errors import ConfigError  # noqa: E402
from tests.conftest import RMQ_FIXTURES  # noqa: E402

STORE = str(RMQ_FIXTURES / "5.3.3" / "storeA")
FILE_SIZE = 131072


class _Counting:
    """An arrowcols twin that counts its calls."""

    def __init__(self, k: Any) -> None:
        self.k, self.calls = k, []

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.k, name)

        def call(*a: Any, **kw: Any) -> Any:
            self.calls.append(name)
            return fn(*a, **kw)

        return call


def _table(schema: Any, flt: Any = None) -> Any:
    cl = open_commitlog(STORE, FILE_SIZE)
    try:
        batches = list(A.decode_range(cl, STORE, cl.min_offset, cl.max_offset, flt, 500, schema))
    finally:
        cl.close()
    for b in batches:
        b.validate(full=True)
        assert b.schema == schema
    return pa.Table.from_batches(batches, schema=schema)


@pytest.mark.parametrize(
    "columns",
    [
        [("topic", "string"), ("queue_id", "int"), ("body", "binary")],
        [("BODY", "binary"), ("msg_id", None), ("store", "string")],
        [("tags", "string"), ("keys", "array<string>"), ("physical_offset", "bigint")],
        [("properties", "map<string,string>")],
    ],
)
def test_projection_builds_only_its_columns_with_the_same_values(
    impl: Any, monkeypatch: pytest.MonkeyPatch, columns: list[tuple[str, str | None]]
) -> None:
    full = _table(A.ARROW_SCHEMA)
    k = _Counting(impl.arrowcols)
    monkeypatch.setattr(A, "_kernel", lambda: k)
    schema = A.project(columns)
    got = _table(schema, A.RowFilter(queue_ids=frozenset({1, 2})))
    assert got.column_names == [n for n, _ in columns]
    want = full.filter(pa.compute.is_in(full["queue_id"], pa.array([1, 2], pa.int32())))
    assert got.num_rows == want.num_rows > 0
    for name, _ in columns:
        assert got[name].to_pylist() == want[name.lower()].to_pylist(), name
    made = set(k.calls)
    lower = {n.lower() for n, _ in columns}
    assert ("split_properties" in made) == bool(lower & {"tags", "keys", "properties"})
    assert ("message_ids" in made) == ("msg_id" in lower)
    assert ("format_hosts" in made) == bool(lower & {"born_host", "store_host"})
    assert ("gather" in made) == ("body" in lower)


@pytest.mark.parametrize(
    "columns, message",
    [
        ([("topik", "string")], "no column 'topik'"),
        ([("queue_id", "bigint")], "queue_id' is int"),
        ([("body", "binary"), ("Body", "binary")], "appears twice"),
        ([], "at least one column"),
    ],
)
def test_bad_projection_is_a_config_error(columns: list[tuple[str, str | None]], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        A.project(columns)


def test_fixture_untouched() -> None:
    assert not (Path(STORE) / "rmqcore-columnar").exists()
