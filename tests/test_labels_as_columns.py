"""Numbers written into labels, wherever the labels are drawn (issue 23.5, red team of this stop).

pandas drew "C (n=✕)" and sent the table to review; the same label in a polars or DuckDB result,
where the keys are columns of a default index, was drawn "C (n=3)" at ``suppressed`` (cleared);
a label column computed after the aggregation (no evidence: ``review``) kept "B (n=30)" beside
B's hidden cell; and linking's explanations named an earlier table's cell "C (n=3)" in full.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session


def _everything(out: Any) -> str:
    return json.dumps(out.data) + json.dumps(out.metadata, default=str)


def _states_small_count(out: Any) -> bool:
    return bool(re.search(r"n=3\b|\[3\]|\(3\)", _everything(out)))


def test_polars_key_column_label(sess: Session, p: Any) -> None:
    pl = pytest.importorskip("polars")
    t = p.with_columns(pl.col("district").replace({"C": "C (n=3)"})).group_by("district").len().sort("district")
    out = sess.publish(t)
    assert out.metadata["sdc_magic"]["status"] == "review"
    assert "C (n=✕)" in out.data["text/plain"]
    assert not _states_small_count(out)


def test_polars_two_keys_label(sess: Session, p: Any) -> None:
    pl = pytest.importorskip("polars")
    t = p.with_columns(pl.col("district").replace({"C": "C [3]"})).group_by("district", "sex").len() \
        .sort("district", "sex")
    out = sess.publish(t)
    assert out.metadata["sdc_magic"]["status"] == "review"
    assert not _states_small_count(out)


def test_duckdb_key_column_label(sess: Session, df: pd.DataFrame) -> None:
    duckdb = pytest.importorskip("duckdb")
    d = df  # noqa: F841 (read by DuckDB)
    out = sess.publish(duckdb.sql("SELECT CASE WHEN district = 'C' THEN 'C (n=3)' ELSE district END AS dd, "
                                  "count(*) AS n FROM d GROUP BY 1 ORDER BY 1").df())
    assert out.metadata["sdc_magic"]["status"] == "review"
    assert not _states_small_count(out)


def test_label_column_built_from_the_counts(sess: Session, p: Any) -> None:
    pl = pytest.importorskip("polars")
    t = p.group_by("district").len().with_columns(
        pl.concat_str([pl.col("district"), pl.lit(" (n="), pl.col("len").cast(pl.Utf8), pl.lit(")")]).alias("label")
    ).sort("district")
    out = sess.publish(t)
    assert out.metadata["sdc_magic"]["status"] != "pass"
    text = _everything(out)
    assert "n=3)" not in text and "n=30)" not in text  # B is C's secondary: 73 - 40 - 30 = 3
    assert "n=40)" in out.data["text/plain"]  # A is published


def test_pandas_label_then_an_engine_table_names_it_hidden(sess: Session, df: pd.DataFrame, p: Any) -> None:
    pl = pytest.importorskip("polars")
    first = sess.publish(df.assign(district=df.district.replace({"C": "C (n=3)"})).groupby("district").size())
    assert not _states_small_count(first)
    out = sess.publish(p.with_columns(pl.col("district").replace({"C": "C [3]"})).group_by("district").len()
                       .sort("district"))
    assert not _states_small_count(out)  # (linking's reasons named out-1's cell "C (n=3)")


def test_explanations_mask_counts_in_labels_only() -> None:
    from sdc_magic.linking.names import cell_name

    assert cell_name(("C (n=3)", "F")) == "C (n=✕) / F"
    assert cell_name(("B (30)",)) == "B (✕)"
    assert cell_name(("2024-03",)) == "2024-03"
    assert cell_name((101.0,)) == "101"


# -- second red-team round of this stop ------------------------------------------------------

def test_axis_names_are_labels(sess: Session, df: pd.DataFrame) -> None:
    m = df.groupby("district").income.mean()
    m.index.name = "district (C: n=3)"
    out = sess.publish(m)
    assert out.metadata["sdc_magic"]["status"] == "review"
    assert not _states_small_count(out) and "n=3" not in _everything(out)


def test_a_label_formatted_from_the_counts_beside_hidden_cells(sess: Session, p: Any) -> None:
    pl = pytest.importorskip("polars")
    t = p.group_by("district").len().with_columns(pl.format("{}: {}", "district", "len").alias("label")) \
        .sort("district")
    text = _everything(sess.publish(t))
    assert "B: 30" not in text and "C: 3" not in text  # 73 - 40 - 30 = 3
    assert "A: 40" in text


def test_a_category_stating_its_own_size_beside_its_hidden_cell(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(df.assign(district=df.district.replace({"B": "B: 30"})).groupby("district").size())
    assert "B: 30" not in _everything(out)


def test_explanations_mask_counts_written_any_way(sess: Session, df: pd.DataFrame, p: Any) -> None:
    pytest.importorskip("polars")
    sess.publish(df.assign(district=df.district.replace({"C": "C: 3"})).groupby("district").size())
    out = sess.publish(p.group_by("district").len().sort("district"))
    assert "C: 3" not in _everything(out)


def test_every_small_number_of_a_label_is_masked(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(df.groupby("district").income.mean().rename({"C": "C: 2 F, 1 M"}))
    text = _everything(out)
    assert "2 F" not in text and "1 M" not in text


def test_rare_numeric_keys_in_key_columns(sess: Session, p: Any) -> None:
    pytest.importorskip("polars")
    out = sess.publish(p.group_by("age").len().sort("age"))
    ages = sorted(p["age"].to_list())
    rare = [a for a in set(ages) if ages.count(a) < 5 and a > 95]
    assert rare
    shown = out.data["text/plain"]
    assert not any(f" {a} " in shown for a in rare)


@pytest.mark.parametrize("label", ["2024-03", "0-4", "10:30", "2021/3"])
def test_dates_ranges_and_times_are_no_counts(sess: Session, label: str) -> None:
    df = pd.DataFrame({"k": [label] * 3 + ["other"] * 40})
    out = sess.publish(df.groupby("k").size())
    assert label in out.data["text/plain"]


def test_a_total_in_an_axis_name_beside_hidden_cells(sess: Session, df: pd.DataFrame) -> None:
    t = df.groupby("district").size()
    t.index.name = "district (N=73)"  # 73 - 40 - 30 = 3
    assert "N=73" not in _everything(sess.publish(t))
    s = df.groupby("district").size().rename("cases (73 in all)")
    assert "73 in all" not in _everything(sess.publish(s))


@pytest.mark.parametrize("relabel", [
    lambda t: t.rename(index={"B": "B (n=30)"}),
    lambda t: t.rename("cases (73 in all)"),
])
def test_a_label_drawn_hidden_is_never_exported(sess: Session, df: pd.DataFrame, relabel: Any,
                                                tmp_path: Any) -> None:
    """Masked on screen, the label would be written as it is by an export: such a table is review."""
    out = sess.publish(relabel(df.groupby("district").size()))
    assert out.metadata["sdc_magic"]["status"] == "review"
    sess.export(str(tmp_path / "export"))
    for f in (tmp_path / "export").rglob("*"):
        if f.is_file():
            text = f.read_text(errors="ignore")
            assert "n=30" not in text and "73 in all" not in text, f.name
