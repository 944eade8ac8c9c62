"""The session ledger: every checked output, what it published, and the analyst's notes.

Each displayed table gets a record: id (``out-7``, unique within the notebook's ledger and
continued across kernel restarts), execution count, notebook cell id when the front-end
gives one, kind, status, hidden cells with reasons and audited intervals, the rules in
force, a digest of what was published, and — for exportable outputs — the published
table (hidden cells empty) and its certificate. Records persist as JSON lines in
``.sdc_magic/<notebook>.jsonl`` next to the notebook, so a kernel restart keeps the
record; a restart is itself recorded.

Why it is built this way:

* **Loading never raises.** A line that is not a well-formed event (truncated JSON,
  invalid UTF-8, a record with missing or mistyped fields) is moved, byte for byte, to
  ``<ledger>.corrupt`` and the rest loads; the message is in :attr:`Ledger.warnings`. A
  ledger that cannot be written (read-only folder, ``.sdc_magic`` is a file, disk full)
  turns persistence off with one warning; records stay in memory. The session shows
  the warnings; nothing here may stop the extension from loading, because an extension
  that fails to load leaves every later table unprotected.
* **Linear.** Records are indexed by id: loading 5,000 records is one pass.
* **Several kernels, one ledger.** Two kernels of one notebook share the file. Every
  append happens under an exclusive ``flock`` on ``<ledger>.lock`` and is one ``write``
  of a whole line; before giving out an id a kernel reads what the others appended and
  reserves the id with a line of its own, so ids stay short (``out-12``) and are never
  given twice.
* **Re-runs.** A record carries the cell id when known; a later output of the same cell
  from another execution supersedes it (``superseded_by``). Superseded outputs stay in the
  ledger as history and are not exported.

Nothing in the ledger holds a hidden value: it stores only what was published.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import secrets
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

try:  # POSIX: appends of concurrent kernels are serialised with flock
    import fcntl
except ImportError:  # pragma: no cover - Windows: no locking (one kernel per notebook)
    fcntl = None  # type: ignore[assignment]

LEDGER_DIR = ".sdc_magic"
LEDGER_FILE = "ledger.jsonl"
EXPORTABLE = frozenset({"pass", "suppressed"})
_ID = re.compile(r"^out-(\d+)$")


def _as_dict(record: OutputRecord) -> dict[str, Any]:
    """A shallow field dict (``dataclasses.asdict`` deep-copies every nested value: slow)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def _json_default(value: Any) -> Any:
    """numpy scalars as numbers (a count must reload as an int, not as the string "12")."""
    item = getattr(value, "item", None)
    if callable(item):
        with contextlib.suppress(Exception):
            return item()
    return str(value)


def default_folder() -> Path:
    """``$SDC_MAGIC_LEDGER_DIR``, else ``.sdc_magic/`` in the kernel's working directory
    (Jupyter starts a notebook's kernel in the notebook's folder)."""
    env = os.environ.get("SDC_MAGIC_LEDGER_DIR")
    return Path(env) if env else Path.cwd() / LEDGER_DIR


def notebook_stem() -> str | None:
    """The notebook's identity for file names, when the server tells the kernel (``JPY_SESSION_NAME``)."""
    session_name = os.environ.get("JPY_SESSION_NAME")
    if not session_name:
        return None
    return safe_stem(Path(session_name).stem)


def safe_stem(stem: str) -> str | None:
    """A file-name-safe identity of a notebook's stem, different for different stems.

    Why (issue 23.10): ``my analysis.ipynb`` and ``my_analysis.ipynb`` both became
    ``my_analysis`` and shared one ledger, one linking memory and one export folder (B's export
    held A's table). A stem that is already safe is kept as it is (its files keep their names);
    one that had to be changed gets a short hash of the original, so no two stems meet.
    """
    safe = legacy_stem(stem)
    if safe is None or safe == stem:
        return safe
    return f"{safe}-{hashlib.sha256(stem.encode('utf-8')).hexdigest()[:8]}"


def legacy_stem(stem: str) -> str | None:
    """The name earlier versions gave a notebook's files (unsafe characters as ``_``, colliding)."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in stem) or None


def legacy_ledger_file_name() -> str | None:
    """The ledger name earlier versions used for this notebook, when it differs from today's."""
    session_name = os.environ.get("JPY_SESSION_NAME")
    if not session_name:
        return None
    old = legacy_stem(Path(session_name).stem)
    return f"{old}.jsonl" if old and old != notebook_stem() else None


def ledger_file_name() -> str:
    """One ledger per notebook when the server tells the kernel which notebook it runs."""
    stem = notebook_stem()
    return f"{stem}.jsonl" if stem else LEDGER_FILE


def current_cell_id() -> str | None:
    """The notebook cell being run, as the front-end names it, or None.

    JupyterLab and Notebook 7 put ``cellId`` in the metadata of each execute request; the
    kernel keeps that request as the current parent (ipykernel >= 6). nbclient, a console
    or a script send none: their outputs are then never superseded.
    """
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        kernel = getattr(ipython.get_ipython(), "kernel", None)
        parent = kernel.get_parent("shell") if kernel is not None and hasattr(kernel, "get_parent") else None
        cell = ((parent or {}).get("metadata") or {}).get("cellId")
    except Exception:  # never let a front-end detail fail a display
        return None
    return cell if isinstance(cell, str) and cell else None


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class NotReleasable(ValueError):
    """An exception request for an output that can never be released (status blocked)."""


@dataclass
class OutputRecord:
    """What the session published for one displayed table."""

    id: str
    status: str
    kind: str
    hidden: int
    cells: int
    call: str | None
    digest: str
    execution_count: int | None
    reasons: dict[str, int] = field(default_factory=dict)
    exception: str | None = None
    comments: list[str] = field(default_factory=list)
    dropped: bool = False
    timestamp: str = field(default_factory=now)
    rules: dict[str, Any] | None = None
    method: str | None = None
    hidden_cells: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    csv: str | None = None  # the published table, hidden cells empty (exportable outputs only)
    certificate: dict[str, Any] | None = None
    command: str | None = None
    cell_id: str | None = None  # the notebook cell (front-end's cell id), when known
    kernel_session: str | None = None  # which kernel session wrote it (filled by the ledger)
    superseded_by: str | None = None  # a later run of the same cell replaced this output

    @property
    def exportable(self) -> bool:
        """Cleared, or under review with an exception request for the checker to decide."""
        if self.dropped:
            return False
        return self.status in EXPORTABLE or (self.status == "review" and bool(self.exception)
                                              and self.csv is not None)

    @property
    def current(self) -> bool:
        """Still in the notebook: no later run of its cell replaced it."""
        return self.superseded_by is None

    def as_row(self) -> dict[str, Any]:
        return {"id": self.id, "cell": self.execution_count, "kind": self.kind, "status": self.status,
                "hidden": self.hidden, "cells": self.cells, "call": self.call, "exception": self.exception,
                "comments": "; ".join(self.comments), "dropped": self.dropped, "exportable": self.exportable,
                "timestamp": self.timestamp, "superseded_by": self.superseded_by}


# ------------------------------------------------------------------ validation of stored lines
_STR = (str,)
_OPT_STR = (str, type(None))
_TYPES: dict[str, tuple[type, ...]] = {
    "id": _STR, "status": _STR, "kind": _STR, "digest": _STR, "hidden": (int,), "cells": (int,),
    "call": _OPT_STR, "execution_count": (int, type(None)), "reasons": (dict,), "exception": _OPT_STR,
    "comments": (list,), "dropped": (bool,), "timestamp": _STR, "rules": (dict, type(None)), "method": _OPT_STR,
    "hidden_cells": (list,), "notes": (list,), "csv": _OPT_STR, "certificate": (dict, type(None)),
    "command": _OPT_STR, "cell_id": _OPT_STR, "kernel_session": _OPT_STR, "superseded_by": _OPT_STR,
}
_REQUIRED = ("id", "status", "kind", "digest", "hidden", "cells")


def record_from_json(data: Any) -> OutputRecord:
    """An :class:`OutputRecord` from its stored form; ``ValueError`` naming what is wrong.

    Unknown keys are ignored (a newer version may add fields); missing or mistyped known
    fields are an error, so a damaged line is set aside instead of loading half a record.
    """
    if not isinstance(data, dict):
        raise ValueError("the record is not an object")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ValueError("the record lacks " + ", ".join(missing))
    values = {}
    for name, types in _TYPES.items():
        if name not in data:
            continue
        value = data[name]
        if isinstance(value, bool) and bool not in types:
            raise ValueError(f"{name} has the wrong type")
        if not isinstance(value, types):
            raise ValueError(f"{name} has the wrong type ({type(value).__name__})")
        values[name] = value
    values.setdefault("call", None)
    values.setdefault("execution_count", None)
    return OutputRecord(**values)


def _parse_line(raw: bytes) -> dict[str, Any]:
    """One stored event, validated; ``ValueError`` if it cannot be used."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError("not UTF-8") from exc
    try:
        item = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from exc
    if not isinstance(item, dict) or not isinstance(item.get("event"), str):
        raise ValueError("not an event")
    event = item["event"]
    if event in ("output", "update"):
        item["record"] = record_from_json(item.get("record"))
    elif event == "reserve" and not (isinstance(item.get("id"), str) and _ID.match(item["id"])):
        raise ValueError("a reservation without a valid id")
    return item


class Ledger:
    """All outputs of a session (and of other kernels of the same notebook), persisted as JSON lines."""

    def __init__(self, folder: Path | None = None, persist: bool = True) -> None:
        self.records: list[OutputRecord] = []
        self.events: list[dict[str, Any]] = []
        self.warnings: list[str] = []  # for the session to show, once each (see take_warnings)
        self._shown = 0
        self.folder = Path(folder) if folder is not None else default_folder()
        self.persist = persist
        self.token = secrets.token_hex(4)  # this kernel session (writer of its lines)
        self._lock = threading.RLock()
        self._depth = 0
        self._index: dict[str, int] = {}
        self._by_cell: dict[str, list[str]] = {}
        self._next = 1
        self._offset = 0  # bytes of the ledger file already read
        self._inode: tuple[int, int] | None = None
        if persist:
            try:
                self._load()
            except Exception as exc:  # never let the ledger stop the extension from loading
                self._disable(f"could not be read ({type(exc).__name__}: {exc})")

    # ------------------------------------------------------------ warnings
    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def take_warnings(self) -> list[str]:
        """Warnings not yet shown (the session prints them inline, once)."""
        new = self.warnings[self._shown:]
        self._shown = len(self.warnings)
        return new

    def _disable(self, why: str) -> None:
        if self.persist:
            self.persist = False
            self._warn(f"sdc_magic: the session ledger {self.path} {why}; outputs are recorded for this kernel "
                       "only and will not survive a restart")

    # ------------------------------------------------------------ persistence
    @property
    def path(self) -> Path:
        return self.folder / ledger_file_name()

    @property
    def corrupt_path(self) -> Path:
        return self.path.with_name(self.path.name + ".corrupt")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Exclusive lock shared by every process using this ledger (a separate, never replaced file).

        Re-entrant within the process: a second ``flock`` on a new descriptor of the same
        file would wait for the first one forever.
        """
        with self._lock:
            if not self._depth:
                self.folder.mkdir(parents=True, exist_ok=True)  # the first output of a notebook creates it
            if fcntl is None or self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
            finally:
                os.close(fd)  # closing releases the lock

    def _load(self) -> None:
        if self.folder.exists() and not self.folder.is_dir():
            self._disable("cannot be kept: " + str(self.folder) + " is a file, not a folder")
            return
        if not self.path.is_file():
            self._check_writable()
            return
        try:
            with self._locked():
                self._read_new(initial=True)
        except OSError as exc:  # a read-only folder (no lock file possible): read only
            try:
                self._read_new(initial=True, rewrite=False)
            except OSError:
                self._disable(f"could not be read ({exc.strerror or exc})")
                return
            self._disable(f"cannot be written ({exc.strerror or exc})")
        if self.records and self.persist:
            self._append({"event": "restart", "timestamp": now(), "outputs_before": len(self.records)})
            self.events.append({"event": "restart", "timestamp": now()})

    def _check_writable(self) -> None:
        """Find out at load, without creating anything, whether the ledger could be written.

        (Only a hint: the first append is the real test, and it warns too.)
        """
        existing = self.folder if self.folder.is_dir() else next(
            (p for p in self.folder.parents if p.exists()), None)
        if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            self._disable(f"cannot be written ({existing or self.folder} is not a writable folder)")

    def _read_new(self, initial: bool = False, rewrite: bool = True) -> None:
        """Apply the lines appended since the last read (by other kernels); set bad lines aside.

        Called with the lock held (except for a read-only ledger). If the file was replaced
        (another kernel set corrupt lines aside), it is read again from the start.
        """
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return
        inode = (st.st_dev, st.st_ino)
        if inode != self._inode or st.st_size < self._offset:
            self._offset = 0
        with open(self.path, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        self._inode = inode
        if not data:
            return
        lines = data.split(b"\n")
        tail = lines.pop()  # after the last newline: empty, or a line a crash cut short
        if tail.strip():
            lines.append(tail)
        bad: list[bytes] = []
        good: list[bytes] = []
        for raw in lines:
            if not raw.strip():
                continue
            try:
                item = _parse_line(raw)
            except ValueError as exc:
                bad.append(raw)
                why = str(exc)
                continue
            good.append(raw)
            if item.get("writer") == self.token and not initial:
                continue  # our own line: already applied
            self._apply(item)
        self._offset += len(data)
        if bad:
            self._set_aside(bad, why, rewrite)

    def _set_aside(self, bad: list[bytes], why: str, rewrite: bool) -> None:
        """Keep the unreadable lines in ``<ledger>.corrupt`` (original bytes) and drop them from the ledger."""
        n = len(bad)
        if rewrite:
            try:
                with open(self.corrupt_path, "ab") as fh:
                    fh.write(b"".join(raw + b"\n" for raw in bad))
                unwanted = set(bad)
                with open(self.path, "rb") as fh:
                    kept = [raw for raw in fh.read().split(b"\n") if raw.strip() and raw not in unwanted]
                tmp = self.path.with_name(self.path.name + f".{self.token}.tmp")
                with open(tmp, "wb") as fh:
                    fh.write(b"".join(raw + b"\n" for raw in kept))
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self.path)
                st = os.stat(self.path)
                self._inode, self._offset = (st.st_dev, st.st_ino), st.st_size
                self._warn(f"sdc_magic: {n} unreadable line(s) in {self.path} ({why}) were set aside in "
                           f"{self.corrupt_path.name}; the other records loaded")
                return
            except OSError:
                pass
        self._warn(f"sdc_magic: {n} unreadable line(s) in {self.path} ({why}) were skipped; the other "
                   "records loaded")

    def _apply(self, item: dict[str, Any]) -> None:
        event = item["event"]
        if event in ("output", "update"):
            self._replace(item["record"])
        elif event == "reserve":
            self._bump(item["id"])
        elif event == "restart":
            self.events.append(item)

    def _bump(self, out_id: str) -> None:
        m = _ID.match(out_id)
        if m:
            self._next = max(self._next, int(m.group(1)) + 1)

    def _replace(self, record: OutputRecord) -> None:
        """Insert or update a record (by id, O(1)); a new output of a cell supersedes its earlier runs."""
        self._bump(record.id)
        pos = self._index.get(record.id)
        if pos is not None:
            old = self.records[pos]
            record.superseded_by = record.superseded_by or old.superseded_by
            self.records[pos] = record
            return
        self._index[record.id] = len(self.records)
        self.records.append(record)
        if record.cell_id:
            run = (record.kernel_session, record.execution_count)
            earlier = self._by_cell.setdefault(record.cell_id, [])
            for other_id in earlier:
                other = self.records[self._index[other_id]]
                if other.superseded_by is None and (other.kernel_session, other.execution_count) != run:
                    other.superseded_by = record.id
            earlier.append(record.id)

    def _append(self, item: dict[str, Any]) -> None:
        """One whole line, under the lock, after catching up with other kernels' lines."""
        if not self.persist:
            return
        line = (json.dumps({**item, "writer": self.token}, default=_json_default) + "\n").encode("utf-8")
        try:
            with self._locked():
                self._read_new()
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    view = memoryview(line)
                    while view:
                        view = view[os.write(fd, view):]
                finally:
                    os.close(fd)
                self._offset += len(line)
                st = os.stat(self.path)
                self._inode = (st.st_dev, st.st_ino)
        except OSError as exc:
            self._disable(f"cannot be written any more ({exc.strerror or exc})")

    # ------------------------------------------------------------ records
    def new_id(self) -> str:
        """A fresh id, unique in this notebook's ledger even with several kernels writing to it."""
        with self._lock:
            if self.persist:
                try:
                    with self._locked():
                        self._read_new()
                        out = f"out-{self._next}"
                        self._next += 1
                        self._append({"event": "reserve", "id": out})
                        return out
                except OSError as exc:
                    self._disable(f"cannot be written any more ({exc.strerror or exc})")
            out = f"out-{self._next}"
            self._next += 1
            return out

    def add(self, record: OutputRecord) -> None:
        with self._lock:
            if record.kernel_session is None:
                record.kernel_session = self.token
            if record.cell_id is None:
                record.cell_id = current_cell_id()
            self._replace(record)
            if self.persist:
                self._append({"event": "output", "record": _as_dict(record)})

    def get(self, out_id: str) -> OutputRecord:
        pos = self._index.get(out_id)
        if pos is None:
            raise KeyError(f"no output {out_id!r} in this session (see %sdc status)")
        return self.records[pos]

    def _update(self, record: OutputRecord) -> None:
        self._append({"event": "update", "record": _as_dict(record)})

    def request_exception(self, out_id: str, reason: str) -> OutputRecord:
        """The analyst asks the checker to release an output as it is: status becomes review.

        Only a cleared output or one under review can be: a ``blocked`` output (row-level data,
        one-person cells with no safe pattern, a failed check) is never released, so the request
        is refused with :class:`NotReleasable` and the output stays ``blocked``. Why (red team 53b,
        finding 17): a blocked table used to be relabelled ``review`` and the reply said "the
        output checker decides", while the export still refused it.
        """
        record = self.get(out_id)
        if record.status == "blocked":
            raise NotReleasable(
                f"{out_id} is blocked: a blocked output cannot be released by an exception request "
                "(nothing was recorded; it stays blocked). Show a coarser or protected table instead, and ask "
                "for an exception on that one if it is needed")
        if record.status not in EXPORTABLE and record.status != "review":
            raise NotReleasable(f"{out_id} is not a checked table ({record.status}): there is nothing an exception "
                                "request could release")
        record.exception = reason
        record.status = "review"
        self._update(record)
        return record

    def comment(self, out_id: str, text: str) -> OutputRecord:
        record = self.get(out_id)
        record.comments.append(text)
        self._update(record)
        return record

    def drop(self, out_id: str) -> OutputRecord:
        """Exclude an output from export (it stays in the record)."""
        record = self.get(out_id)
        record.dropped = True
        self._update(record)
        return record

    def current(self) -> list[OutputRecord]:
        """Outputs not replaced by a later run of their cell (what the notebook shows now)."""
        return [r for r in self.records if r.superseded_by is None]

    def frame(self) -> pd.DataFrame:
        """The session's outputs as a table (``sdc_magic.ledger()``)."""
        columns = ["id", "cell", "kind", "status", "hidden", "cells", "call", "exception", "comments", "dropped",
                   "exportable", "timestamp", "superseded_by"]
        return pd.DataFrame([r.as_row() for r in self.records], columns=columns)

    def digests(self) -> set[str]:
        return {r.digest for r in self.records}


def clearances_from_file(path: str | Path) -> dict[str, frozenset[str]]:
    """Digest -> statuses the outputs with that content were published with, from a ledger file.

    For ``sdc-magic redact --ledger``: the status at publication (the ``output`` event), not
    a later exception request. Read-only: unreadable lines are skipped here, never
    rewritten (the file may belong to a running kernel). ``OSError`` if the file cannot
    be read.
    """
    out: dict[str, set[str]] = {}
    with open(path, "rb") as fh:
        for raw in fh:
            try:
                item = _parse_line(raw.rstrip(b"\n"))
            except ValueError:
                continue
            if item["event"] == "output":
                out.setdefault(item["record"].digest, set()).add(item["record"].status)
    return {d: frozenset(s) for d, s in out.items()}


def digests_from_file(path: str | Path) -> set[str]:
    """Digests of every output recorded in a ledger file."""
    return set(clearances_from_file(path))
