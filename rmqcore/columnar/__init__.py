"""Columnar views of a store: CommitLog records as Arrow batches in the ``rmq`` schema.

* :mod:`.arrow`: the one conversion (needs pyarrow);
* :mod:`.stores`: finding stores and opening their CommitLog read-only.
"""
