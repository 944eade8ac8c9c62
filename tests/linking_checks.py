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
