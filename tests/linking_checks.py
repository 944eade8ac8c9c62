"""What the linking-in-engine tests compare: a display's verdict and where its rows were counted.

Shared by the DuckDB, polars and Spark tests (``test_linking_in_*.py``): each runs red-team
sessions once linked by rows and once counted in the engine and asserts the same verdicts.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pandas as pd

from sdc_magic.jupyter.session import Session
from sdc_magic.linking.in_engine import EngineUniverse


def duckdb_table(data: pd.DataFrame) -> duckdb.DuckDBPyConnection:
    """A new DuckDB connection holding ``data`` as the table ``ep`` (a table of the connection,
    not a view of the frame: counted there as a user's own table is)."""
    con = duckdb.connect()
    con.register("src", data)
    con.execute("CREATE TABLE ep AS SELECT * FROM src")
    con.unregister("src")
    return con


def verdict(out: Any) -> tuple[str, tuple, tuple]:
    """Status, the hidden cells (as the user sees them) and why each was hidden."""
    checked = out.checked
    hidden = tuple(np.flatnonzero(checked.hidden_flat)) if checked is not None else ()
    why = tuple(sorted((cell, tuple(sorted({r.rule for r in reasons})))
                       for cell, reasons in checked.reasons.items())) if checked is not None else ()
    return out.metadata["sdc_magic"]["status"], hidden, why


def engine_universes(sess: Session) -> list[EngineUniverse]:
    """The session's universes counted in an engine."""
    return [u for u in sess.populations.universes if isinstance(u, EngineUniverse)]


def last_rows(sess: Session) -> Any:
    """The rows linking was given for the newest table (a frame of rows, or ``InEngineRows``)."""
    entry = max(sess.registry.entries(), key=lambda e: e.id)
    return entry.source.rows if entry.source is not None else None


def decisions(sess: Session, tables: list[Any]) -> list[tuple[str, int]]:
    """Each table's status and how many of its cells are hidden; the session's capture is removed
    after, so that the next session's is the only one installed (Spark's wrappers are global)."""
    out = []
    try:
        for t in tables:
            status = sess.publish(t).metadata["sdc_magic"]["status"]
            out.append((status, sess.ledger.records[-1].hidden))
    finally:
        sess.capture.uninstall()
    return out


def grouped_first_changes_nothing(grouping: Any, session: Any, monkeypatch: Any) -> list[tuple[str, str]]:
    """Run ``session(first_from)`` (a list of (status, text) per display) with an engine's counts
    grouped first from one expression on (``grouping``: ``capture/duckdb/grouping`` or
    ``capture/polars/grouping``), and never; assert some count was grouped first and every display
    is the same both ways. Returns the displays."""
    calls: list[bool] = []
    real = grouping.first_by
    monkeypatch.setattr(grouping, "first_by", lambda *a: calls.append(bool(r := real(*a))) or r)
    grouped = session(1)
    assert any(calls)  # (the counts were grouped first)
    assert grouped == session(10**9)
    return grouped


def rates_people(n: int = 30_000, seed: int = 11) -> pd.DataFrame:
    """People by district (two small ones), sex, age and a 0/1 flag: tables of a rate by district ×
    sex over ``age >= k`` get small cells to hide."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"district": rng.choice([f"D{i}" for i in range(8)], n, p=[0.16] * 6 + [0.035, 0.005]),
                         "sex": rng.choice(["F", "M"], n), "age": rng.integers(0, 100, n),
                         "flag": (rng.random(n) < 0.3).astype(int)})


def published(tables: list[Any]) -> list[tuple[str, str]]:
    """Each table (a function making it) shown in one new session: its status and text."""
    from sdc_magic.config import preset

    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    out = []
    try:
        for table in tables:
            shown = s.publish(table())
            out.append((shown.metadata["sdc_magic"]["status"], shown.data.get("text/plain", "")))
    finally:
        s.capture.uninstall()
    return out
