"""Files written during this session and read back: their rows are no data set of their own.

Why (red team, stop 56, left open then; stop 57): sums of income by sex of everyone, then the
people under 100 written to a file with a computed column (``income * 2``) and read back, their
sums by sex shown: the rows read back, fingerprinted by ``sex`` and the computed column, matched no
earlier output's rows and were taken for other people. Both tables ``pass``, and half the
second's cells subtracted from the first's gave the two people over 100 their incomes, in pandas
(CSV, Parquet), polars and DuckDB alike. A file keeps nothing of where its rows came from; what
can be told is *when* it was written.

What is recognised: a local file modified since the extension was first installed in this
process (:func:`note_start`; written by anything: ``to_csv``, polars' ``write_parquet``, DuckDB's
``COPY``, the ``csv`` module), read by pandas (``pd.read_*``), polars (``pl.read_*``,
``pl.scan_*``) or DuckDB (``FROM 'f.parquet'``, ``read_csv(...)``: :func:`written_paths`). The
frames pandas and polars read from such a file are remembered (:func:`remember`, the latest
:data:`MAX_REMEMBERED`); linking compares the rows of a table that start a data set of their
own with them (:mod:`sdc_magic.linking.read_back`) and reads such rows as a query's rows
(``evidence.rows.COMPUTED_SOURCE``): tied to no earlier output's rows with the same key
columns, the table is ``review``, as a table over a CTE that computes a column is. DuckDB's rows
are marked where they are read (:mod:`.duckdb.evidence`).

The modification time is compared with the file system's own clock, read when the extension
was installed (a file created then, :func:`_file_system_now`): the same notebook run on any
machine, under any load, marks the same files (those its cells write). Left open: a file written
by an earlier kernel and read after a restart (the start is this process's).
"""

from __future__ import annotations

import functools
import glob
import itertools
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

#: Frames read from files this session wrote, remembered for linking (the latest ones; each is kept
#: until linking first reads it, at the next table shown, then only its rows' fingerprints, 8 bytes
#: a value: a frame the notebook let go of stays in memory until then)
MAX_REMEMBERED = 64
#: Frames of more rows are not remembered (linking reads at most this many rows anyway)
MAX_REMEMBERED_ROWS = 5_000_000

#: pandas readers whose first argument (or one of :data:`PATH_KEYWORDS`) names the file
PANDAS_READERS = ("read_csv", "read_table", "read_parquet", "read_feather", "read_pickle", "read_json",
                  "read_excel", "read_stata", "read_orc", "read_fwf", "read_sas", "read_spss", "read_xml",
                  "read_hdf")
#: polars readers (eager) whose result is a DataFrame read from files
POLARS_READERS = ("read_csv", "read_parquet", "read_ipc", "read_ipc_stream", "read_json", "read_ndjson",
                  "read_avro", "read_excel", "read_ods", "read_delta")
PATH_KEYWORDS = ("filepath_or_buffer", "path", "path_or_buf", "source", "io", "fname", "file")

_start_ns: int | None = None


@dataclass
class ReadBack:
    """A frame read from a file this session wrote (pandas or polars, eager or a lazy scan)."""

    frame: Any
    path: str
    #: per column, the rows' fingerprints as linking takes them (filled by linking on first use)
    fingerprints: dict[str, Any] = field(default_factory=dict)


_remembered: deque[ReadBack] = deque(maxlen=MAX_REMEMBERED)


def note_start() -> None:
    """The session starts (the first install of the capture in this process): files modified
    from now on were written during it. Later installs (a re-load) keep the first start."""
    global _start_ns
    if _start_ns is None:
        _start_ns = _file_system_now()


def _file_system_now() -> int:
    """The file system's clock now (ns): the modification time of a file created for the purpose.

    Why not ``time.time_ns()``: Linux stamps files with a coarser clock, up to a tick (4–10 ms)
    behind; a file written just after the start could look older than it."""
    handle, path = tempfile.mkstemp(prefix="sdc-magic-start-")
    try:
        os.close(handle)
        return os.stat(path).st_mtime_ns
    finally:
        os.unlink(path)


def written_this_session(path: Any) -> bool:
    """Whether ``path`` (a file, a glob, a list of them) names a local file modified since the start."""
    if _start_ns is None:
        return False
    return any(_modified_since_start(p) for p in _local_paths(path))


def _local_paths(path: Any) -> Iterable[str]:
    if isinstance(path, list | tuple):
        for p in path[:1000]:
            yield from _local_paths(p)
        return
    if not isinstance(path, str | os.PathLike) and isinstance(getattr(path, "name", None), str):
        path = path.name  # (an open file: ``pd.read_csv(open(p))``)
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if isinstance(path, str) and path.startswith("file://"):
        path = path[len("file://"):]
    if not isinstance(path, str) or not path or "://" in path:
        return
    path = os.path.expanduser(path)
    if glob.has_magic(path):
        yield from glob.glob(path, recursive=True)[:1000]
    else:
        yield path


#: Files of a folder (a partitioned data set) looked at, at most
MAX_FILES_LOOKED_AT = 10_000


def _modified_since_start(path: str) -> bool:
    try:
        if os.path.isdir(path):
            files = (os.path.join(root, f) for root, _, names in os.walk(path) for f in names)
            return any(os.stat(f).st_mtime_ns >= (_start_ns or 0)
                       for f in itertools.islice(files, MAX_FILES_LOOKED_AT))
        return os.stat(path).st_mtime_ns >= (_start_ns or 0)
    except OSError:
        return False


def path_argument(args: tuple, kwargs: dict) -> Any:
    """The file a reader was called with (its first argument, or a keyword naming it)."""
    if args:
        return args[0]
    return next((kwargs[k] for k in PATH_KEYWORDS if k in kwargs), None)


def remember(frame: Any, path: Any) -> None:
    """``frame`` was read from ``path``; remembered when the file was written this session."""
    try:
        kind = type(frame).__name__
        if kind not in ("DataFrame", "LazyFrame") or not written_this_session(path):
            return  # (a chunk reader, a dict of sheets: not remembered)
        if kind == "DataFrame" and len(frame) > MAX_REMEMBERED_ROWS:
            return  # (a lazy scan's rows are counted when linking reads them)
        _remembered.append(ReadBack(frame, str(path)))
    except Exception:
        pass  # (never breaks the user's read)


def remembered() -> list[ReadBack]:
    """The frames read back, latest last."""
    return list(_remembered)


def forget() -> None:
    """Forget the frames read back (tests; a new analysis)."""
    _remembered.clear()


def reader_wrapper(original: Callable) -> Callable:
    """``original`` (a reader: ``pd.read_csv``, ``pl.read_parquet``...) whose result is remembered
    when the file it read was written this session."""
    @functools.wraps(original)
    def read(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if _start_ns is not None:
            remember(result, path_argument(args, kwargs))
        return result
    return read
