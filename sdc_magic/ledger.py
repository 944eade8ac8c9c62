"""The session ledger: every checked output, what it published, and the analyst's notes.

Each displayed table gets a record: id (``out-7``, stable within the notebook and
continued across kernel restarts), execution count, kind, status, hidden cells with
reasons and audited intervals, the rules in force, a digest of what was published, and
— for exportable outputs — the published table (hidden cells empty) and its
certificate. Records persist as JSON lines in ``.sdc_magic/ledger.jsonl`` next to the
notebook, so a kernel restart keeps the record; a restart is itself recorded.

Nothing in the ledger holds a hidden value: it stores only what was published.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

LEDGER_DIR = ".sdc_magic"
LEDGER_FILE = "ledger.jsonl"
EXPORTABLE = frozenset({"pass", "suppressed"})


def _as_dict(record: OutputRecord) -> dict[str, Any]:
    """A shallow field dict (``dataclasses.asdict`` deep-copies every nested value: slow)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def default_folder() -> Path:
    """``$SDC_MAGIC_LEDGER_DIR``, else ``.sdc_magic/`` in the kernel's working directory
    (Jupyter starts a notebook's kernel in the notebook's folder)."""
    env = os.environ.get("SDC_MAGIC_LEDGER_DIR")
    return Path(env) if env else Path.cwd() / LEDGER_DIR


def ledger_file_name() -> str:
    """One ledger per notebook when the server tells the kernel which notebook it runs."""
    session_name = os.environ.get("JPY_SESSION_NAME")
    if session_name:
        stem = Path(session_name).stem
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in stem)
        return f"{safe}.jsonl"
    return LEDGER_FILE


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


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

    @property
    def exportable(self) -> bool:
        """Cleared, or under review with an exception request for the checker to decide."""
        if self.dropped:
            return False
        return self.status in EXPORTABLE or (self.status == "review" and bool(self.exception)
                                              and self.csv is not None)

    def as_row(self) -> dict[str, Any]:
        return {"id": self.id, "cell": self.execution_count, "kind": self.kind, "status": self.status,
                "hidden": self.hidden, "cells": self.cells, "call": self.call, "exception": self.exception,
                "comments": "; ".join(self.comments), "dropped": self.dropped, "exportable": self.exportable,
                "timestamp": self.timestamp}


class Ledger:
    """All outputs of a session, persisted as JSON lines."""

    def __init__(self, folder: Path | None = None, persist: bool = True) -> None:
        self.records: list[OutputRecord] = []
        self.events: list[dict[str, Any]] = []
        self.folder = Path(folder) if folder is not None else default_folder()
        self.persist = persist
        self._lock = threading.Lock()
        self._next = 1
        if persist:
            self._load()

    # ------------------------------------------------------------ persistence
    @property
    def path(self) -> Path:
        return self.folder / ledger_file_name()

    def _load(self) -> None:
        if not self.path.is_file():
            return
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue
            if item.get("event") == "output":
                record = OutputRecord(**item["record"])
                self._replace(record)
            elif item.get("event") in ("restart", "update"):
                if item.get("event") == "update":
                    self._replace(OutputRecord(**item["record"]))
                else:
                    self.events.append(item)
        numbers = [int(r.id.split("-")[1]) for r in self.records if r.id.startswith("out-") and r.id[4:].isdigit()]
        self._next = max(numbers, default=0) + 1
        if self.records:
            self._append({"event": "restart", "timestamp": now(), "outputs_before": len(self.records)})
            self.events.append({"event": "restart", "timestamp": now()})

    def _replace(self, record: OutputRecord) -> None:
        for i, old in enumerate(self.records):
            if old.id == record.id:
                self.records[i] = record
                return
        self.records.append(record)

    def _append(self, item: dict[str, Any]) -> None:
        if not self.persist:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(item, default=str) + "\n")
        except OSError:
            self.persist = False  # read-only folder: keep the record in memory only

    # ------------------------------------------------------------ records
    def new_id(self) -> str:
        with self._lock:
            out = f"out-{self._next}"
            self._next += 1
            return out

    def add(self, record: OutputRecord) -> None:
        with self._lock:
            self._replace(record)
        if self.persist:
            self._append({"event": "output", "record": _as_dict(record)})

    def get(self, out_id: str) -> OutputRecord:
        for record in self.records:
            if record.id == out_id:
                return record
        raise KeyError(f"no output {out_id!r} in this session (see %sdc status)")

    def _update(self, record: OutputRecord) -> None:
        self._append({"event": "update", "record": _as_dict(record)})

    def request_exception(self, out_id: str, reason: str) -> OutputRecord:
        """The analyst asks the checker to release an output as it is: status becomes review."""
        record = self.get(out_id)
        record.exception = reason
        if record.status in EXPORTABLE or record.kind == "table":
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

    def frame(self) -> pd.DataFrame:
        """The session's outputs as a table (``sdc_magic.ledger()``)."""
        columns = ["id", "cell", "kind", "status", "hidden", "cells", "call", "exception", "comments", "dropped",
                   "exportable", "timestamp"]
        return pd.DataFrame([r.as_row() for r in self.records], columns=columns)

    def digests(self) -> set[str]:
        return {r.digest for r in self.records}
