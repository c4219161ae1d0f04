"""Columnar views of a store: CommitLog records as Arrow batches in the ``rmq`` schema, and a columnar
copy of its sealed CommitLog files.

The copy is plain Parquet: ``<store>/rmqcore-columnar/<commitlog file name>.parquet`` holds the
records of one sealed CommitLog file, in CommitLog order, with the columns of
:data:`rmqcore.columnar.arrow.SCHEMA`; Spark (:func:`rmqcore.spark.read_store`), pyarrow.dataset, DuckDB
and Polars read it as it is. What no copy holds -- the live tail -- is snapshotted by
``read_store`` (or ``materialize(tail=True)``) into ``_tail/``, which directory readers skip.

* :mod:`.arrow`: the one conversion of records to Arrow (needs pyarrow);
* :mod:`.materialize`: making the copies (``rmqcore materialize STORE_DIR``; needs pyarrow);
* :mod:`.snapshot`: immutable snapshots of the live tail, and planning a read from Parquet (needs
  pyarrow);
* :mod:`.manifest`: which copies are current, and retention's hook (needs neither);
* :mod:`.stores`: finding stores and opening their CommitLog read-only.
"""
