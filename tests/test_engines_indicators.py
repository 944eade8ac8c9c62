"""DuckDB sums and means of a 0/1 (or two-valued) column are counts on both sides, as in pandas.

Data: district A 40 people of whom 38 flagged (2 are not), B 30 of whom 15 flagged.
Before this change ``select district, count(*), sum(flag)`` was cleared showing 40 and 38:
2 people without the flag.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

from sdc_magic.config import preset  # noqa: E402
from sdc_magic.jupyter.session import Session  # noqa: E402
from sdc_magic.outputs.render import protected_frame  # noqa: E402

X = "✕"
DF = pd.DataFrame({"person": np.arange(70), "district": ["A"] * 40 + ["B"] * 30,
                   "flag": [1] * 38 + [0] * 2 + [1] * 15 + [0] * 15,
                   "coded": [2] * 38 + [1] * 2 + [2] * 15 + [1] * 15,
                   "income": np.linspace(10, 20, 70)})


def _publish(sql: str, unit: str | None = None):
    s = Session(rules=dataclasses.replace(preset("humanitarian"), unit=unit))
    s.capture.install()
    try:
        df = DF  # noqa: F841 - read by DuckDB's replacement scan
        out = s.publish(duckdb.sql(sql))
        return out, protected_frame(out.checked)
    finally:
        s.capture.uninstall()


@pytest.mark.parametrize("unit", [None, "person"])
@pytest.mark.parametrize("expr", ["sum(flag)", "avg(flag)", "sum(coded)", "avg(coded)"])
def test_a_flag_with_two_people_lacking_it_is_hidden(unit, expr) -> None:
    out, shown = _publish(f"select district, count(*) n, {expr} f from df group by district order by 1", unit)
    assert shown.loc["A", "f"] == X, shown
    assert out.metadata["sdc_magic"]["status"] in ("suppressed", "blocked")


@pytest.mark.parametrize("unit", [None, "person"])
def test_a_real_magnitude_is_not_taken_for_a_flag(unit) -> None:
    out, shown = _publish("select district, count(*) n, sum(income) s from df group by district order by 1", unit)
    assert X not in shown.to_numpy().tolist()
    assert out.metadata["sdc_magic"]["status"] == "pass"


def test_a_flag_both_sides_large_passes() -> None:
    df2 = DF.assign(flag=[1] * 20 + [0] * 20 + [1] * 15 + [0] * 15)  # noqa: F841
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        out = s.publish(duckdb.sql("select district, sum(flag) f from df2 group by district order by 1"))
        assert out.metadata["sdc_magic"]["status"] == "pass"
    finally:
        s.capture.uninstall()


def test_two_sessions_installed_at_once_do_not_deadlock() -> None:
    """A session whose capture stayed installed (an extension loaded in an in-process shell)
    and a second one on top: fetching DuckDB's own result from inside a check must reach
    DuckDB's method, not the first session's wrapper (that ran the check again and waited
    forever on the evidence lock: the CI suite hung on a PIVOT)."""
    import threading

    outer, inner = Session(rules=preset("humanitarian")), Session(rules=preset("humanitarian"))
    outer.capture.install()
    inner.capture.install()
    result: dict = {}
    try:
        df = DF  # noqa: F841 - read by DuckDB's replacement scan
        rel = duckdb.sql("PIVOT df ON district USING sum(income) AS s, count(*) AS n GROUP BY flag ORDER BY flag")
        worker = threading.Thread(target=lambda: result.setdefault("out", inner.publish(rel)), daemon=True)
        worker.start()
        worker.join(60)
        assert not worker.is_alive(), "the check deadlocked"
        assert result["out"].metadata["sdc_magic"]["status"] in ("pass", "suppressed", "review", "blocked")
    finally:
        inner.capture.uninstall()
        outer.capture.uninstall()


def test_a_session_left_installed_does_not_disable_later_sessions() -> None:
    """A session whose capture stays installed (an extension loaded in an in-process shell),
    then sessions installed and removed over it: each later session's DuckDB tables are
    checked with their evidence, not as unverified tables (the CI suite saw 'review')."""
    left = Session(rules=preset("humanitarian"))
    left.capture.install()
    try:
        df = DF  # noqa: F841 - read by DuckDB's replacement scan
        for _ in range(2):
            s = Session(rules=preset("humanitarian"))
            s.capture.install()
            try:
                out = s.publish(duckdb.sql("select district, count(*) n, sum(flag) f from df group by 1 order by 1"))
                assert out.checked is not None and out.checked.kind == "table"
                assert out.metadata["sdc_magic"]["status"] in ("pass", "suppressed")
            finally:
                s.capture.uninstall()
        out = left.publish(duckdb.sql("select district, count(*) n from df group by 1 order by 1"))
        assert out.checked is not None and out.checked.kind == "table"  # the first session works again
    finally:
        left.capture.uninstall()
