"""polars ``pivot`` counted inside polars for linking, as ``group_by`` is (stop 57).

The census of honest sessions of stop 57: above ``IN_ENGINE_ROWS`` a pivot was read by rows and,
beside the session's group_by tables counted in polars, was ``review`` ("identified in different
ways"), as was every table after it. Its keys are the index and the ``on`` column (as text):
written over the frame it pivots, it is counted there. The differencing cases must come out as
they do by rows.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_engines_redteam import PEOPLE

pl = pytest.importorskip("polars")



def _status(out: Any) -> str:
    return out.metadata["sdc_magic"]["status"]


def _pivot(frame: Any) -> Any:
    return frame.pivot(on="sex", index="district", values="person", aggregate_function="len").sort("district")


def test_a_pivot_beside_group_by_tables_is_compared_in_polars(sess: Any, monkeypatch: Any) -> None:
    from sdc_magic.evidence import rows as row_limits
    from sdc_magic.evidence.in_engine import InEngineRows

    monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)
    df = pl.from_pandas(PEOPLE)
    first = sess.publish(_pivot(df.filter(pl.col("district") != "C")))
    assert isinstance(sess.registry.entries()[-1].source.rows, InEngineRows)
    second = sess.publish(df.filter(pl.col("district") != "C").group_by("district").agg(pl.len()).sort("district"))
    assert (_status(first), _status(second)) == ("pass", "pass"), second.metadata["sdc_magic"].get("notes")


@pytest.mark.parametrize("order", ["pivot first", "group_by first"])
def test_everyone_and_the_people_under_100(sess: Any, linked: str, order: str) -> None:
    """Counts by district and sex of everyone and of the people under 100 (a woman and a man
    of A over 100): never both cleared with A's cells shown."""
    df = pl.from_pandas(PEOPLE)
    tables = [lambda: _pivot(df),
              lambda: df.filter(pl.col("age") < 100).group_by("district", "sex").len().sort("district", "sex")]
    if order == "group_by first":
        tables.reverse()
    first, second = (sess.publish(t()) for t in tables)
    cleared = all(_status(o) in ("pass", "suppressed") for o in (first, second))
    shown = "✕" not in first.data["text/plain"] and "✕" not in second.data["text/plain"]
    assert not (cleared and shown), (first.data["text/plain"], second.data["text/plain"])
