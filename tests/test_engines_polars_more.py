"""polars, researcher-style: describe, indicators, distinct units, differencing through filters.

Each test is a snippet an analyst would write with polars, with the cells we expect hidden
(or the status we expect) stated concretely, so that a capture that stops recording (or
records the wrong facts) fails here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pl = pytest.importorskip("polars")

from sdc_magic.config import preset  # noqa: E402
from sdc_magic.jupyter.session import Session  # noqa: E402


@pytest.fixture
def sess():
    s = Session(rules=preset("humanitarian"))  # threshold 5 (no dominance)
    s.capture.install()
    yield s
    s.capture.uninstall()


@pytest.fixture
def firms():
    s = Session(rules=preset("insee"))  # threshold 3, dominance (1, 85), p% 10
    s.capture.install()
    yield s
    s.capture.uninstall()


def _people() -> pl.DataFrame:
    """Three districts: A (30 people, two of them aged 100+), B (20), C (3)."""
    rng = np.random.default_rng(3)
    district = ["A"] * 30 + ["B"] * 20 + ["C"] * 3
    age = rng.integers(18, 90, len(district))
    age[[4, 17]] = [101, 103]
    household = np.concatenate([np.arange(30) // 2, 100 + np.arange(20) // 5, 200 + np.arange(3)])
    return pl.DataFrame({
        "district": district, "age": age.astype(np.int64),
        "income": rng.lognormal(7, 0.3, len(district)),
        "household": household.astype(np.int64),
        "disabled": ([True, False, False, False, False, False] * 9)[:len(district)],
    })


def _hidden(published) -> dict[tuple, list[str]]:
    meta = published.metadata["sdc_magic"]
    return {tuple(r["cell"]): [x["rule"] for x in r["reasons"]] for r in meta["reasons"] if r["hidden"]}


def _rules(c) -> dict:
    return dict(c.reason_summary())


# ---------------------------------------------------------------- describe
def test_describe_min_max_are_one_persons_values(sess: Session) -> None:
    people = _people()
    before = people.clone()
    d = people.select("age", "income").describe()
    assert d.columns == ["statistic", "age", "income"]  # polars' own result, untouched
    assert people.equals(before)
    c = sess.check(d, protect=False)
    assert c.kind == "table"
    assert _rules(c) == {"extreme": 4}  # min and max of both columns; count/mean/std/quartiles pass
    # the same answer as pandas' describe of the same columns
    pd_c = sess.check(people.select("age", "income").to_pandas().describe(), protect=False)
    assert _rules(pd_c) == _rules(c)


def test_describe_of_a_small_frame_hides_every_statistic(sess: Session) -> None:
    small = _people().filter(pl.col("district") == "C")  # three people
    c = sess.check(small.select("age", "income").describe(), protect=False)
    assert c.kind == "table" and c.status != "pass"
    assert _rules(c).get("threshold", 0) >= 14  # count, mean, std, quartiles... of 3 units: all too few
    assert c.primary_count == 16  # 9 statistics x 2 columns, all but the two null counts (0: nothing to hide)


def test_describe_null_count_is_a_count_of_the_few_missing(sess: Session) -> None:
    people = _people().with_columns(
        pl.when(pl.int_range(pl.len()) < 2).then(None).otherwise(pl.col("income")).alias("income"))
    c = sess.check(people.select("income").describe(), protect=False)
    hidden = {i for (i, _j) in np.argwhere(c.hidden)}
    labels = list(c.frame.index)
    assert labels[min(hidden)] in ("null_count", "min")
    assert "null_count" in [labels[i] for i in hidden]  # two people lack an income: fewer than 5
    assert "count" not in [labels[i] for i in hidden]


def test_series_and_lazy_describe_are_captured(sess: Session) -> None:
    people = _people()
    s = sess.check(people["age"].describe(), protect=False)
    assert _rules(s) == {"extreme": 2}
    lazy = sess.check(people.lazy().select("age").describe(), protect=False)
    assert _rules(lazy) == {"extreme": 2}


def test_describe_with_units_counts_households(sess: Session) -> None:
    sess.set_rules(unit="household")
    b = _people().filter(pl.col("district") == "B")  # 20 people, 4 households
    c = sess.check(b.select("age", "household").describe(), protect=False)
    assert _rules(c).get("threshold", 0) >= 12  # 4 households behind every statistic: fewer than 5
    sess.set_rules(unit=None)
    c = sess.check(b.select("age", "household").describe(), protect=False)
    assert "threshold" not in _rules(c)  # 20 people


# ---------------------------------------------------------------- indicators, magnitudes
def test_sum_of_a_flag_is_a_count(sess: Session) -> None:
    people = _people()
    t = people.group_by("district", maintain_order=True).agg(pl.col("disabled").sum())
    assert t["disabled"].to_list() == [5, 4, 0]
    c = sess.check(t, protect=False)
    # A: 5 of 30 disabled (ok); B: 4 of 20 (fewer than 5 have it); C: 3 people (too few)
    primary = dict(zip(t["district"].to_list(), c.hidden[:, -1].tolist(), strict=True))
    assert primary == {"A": False, "B": True, "C": True}


def test_mean_of_a_flag_is_a_proportion_of_few(sess: Session) -> None:
    people = _people()
    t = people.group_by("district", maintain_order=True).agg(pl.col("disabled").cast(pl.Int64).mean())
    c = sess.check(t, protect=False)
    primary = dict(zip(t["district"].to_list(), c.hidden[:, -1].tolist(), strict=True))
    assert primary == {"A": False, "B": True, "C": True}


def test_dominant_firm_is_hidden(firms: Session) -> None:
    data = pl.DataFrame({"sector": ["x"] * 6 + ["y"] * 6,
                         "turnover": [1000.0, 10, 10, 10, 10, 10, 50, 60, 55, 52, 58, 61]})
    t = data.group_by("sector", maintain_order=True).agg(pl.col("turnover").sum())
    c = firms.check(t, protect=False)
    assert c.hidden[:, -1].tolist() == [True, False]
    assert "dominance" in _rules(c)


def test_distinct_units_per_cell(sess: Session) -> None:
    sess.set_rules(unit="household")
    t = _people().group_by("district", maintain_order=True).agg(pl.col("income").mean())
    c = sess.check(t, protect=False)
    # A: 15 households, B: 4 households (hidden), C: 3 households (hidden)
    assert c.hidden[:, -1].tolist() == [False, True, True]


def test_unit_path_indicator_counts_households_with_the_attribute(sess: Session) -> None:
    sess.set_rules(unit="household")
    people = _people()
    t = people.group_by("district", maintain_order=True).agg(pl.col("disabled").sum())
    c = sess.check(t, protect=False)
    assert c.hidden[:, -1].tolist() == [False, True, True]


# ---------------------------------------------------------------- linking
def test_filter_differencing_hides_the_few_removed(sess: Session) -> None:
    people = _people()
    first = sess.publish(people.group_by("district").len().sort("district"))
    assert first.metadata["sdc_magic"]["status"] == "suppressed"  # C (3 people) hidden, A and B shown
    second = sess.publish(people.filter(pl.col("age") < 100).group_by("district").len().sort("district"))
    hidden = _hidden(second)
    rules = {r for v in hidden.values() for r in v}
    assert "differencing" in rules  # A: 30 then 28 — the two centenarians would be revealed
    table = second.checked.frame
    a_row = list(table["district"]).index("A")
    assert second.checked.hidden[a_row, -1]


def test_unrelated_polars_tables_are_not_differenced(sess: Session) -> None:
    people = _people()
    sess.publish(people.group_by("district").len())
    other = pl.DataFrame({"district": ["A"] * 28 + ["B"] * 20, "x": np.arange(48)})
    second = sess.publish(other.group_by("district").len())
    assert second.metadata["sdc_magic"]["status"] == "pass"


def test_plain_results_unchanged_with_capture(sess: Session) -> None:
    people = _people()
    sess.capture.uninstall()
    plain = [people.describe(), people.group_by("district", maintain_order=True).agg(pl.col("disabled").sum()),
             people["age"].describe()]
    sess.capture.install()
    captured = [people.describe(), people.group_by("district", maintain_order=True).agg(pl.col("disabled").sum()),
                people["age"].describe()]
    for a, b in zip(plain, captured, strict=True):
        assert a.schema == b.schema
        assert a.equals(b)


def test_describe_capture_failure_is_not_shown_raw(sess: Session, monkeypatch) -> None:
    from sdc_magic.capture import polars as cap

    def boom(*a, **k):
        raise RuntimeError("engine down")

    monkeypatch.setattr(cap.PolarsCapture, "_record_describe", boom)
    d = _people().select("age").describe()
    c = sess.check(d, protect=False)
    assert c.kind == "row-level" and c.status == "blocked"  # its statistic labels are text: never shown raw
    assert any("engine down" in f for f in sess.registry.failures)


def test_pandas_form_matches_pandas(sess: Session) -> None:
    d = _people().select("age").describe()
    from sdc_magic.capture.display import to_pandas

    form, _ = to_pandas(d)
    assert isinstance(form, pd.DataFrame)
    assert list(form.index)[:3] == ["count", "null_count", "mean"]


def test_lazy_filter_differencing(sess: Session) -> None:
    people = _people()
    sess.publish(people.lazy().group_by("district").agg(pl.len().alias("n")).collect())
    second = sess.publish(people.lazy().filter(pl.col("age") < 100).group_by("district")
                          .agg(pl.len().alias("n")).collect())
    assert "differencing" in {r for v in _hidden(second).values() for r in v}


def test_linking_skipped_above_the_row_limit(sess: Session, monkeypatch) -> None:
    from sdc_magic.evidence import rows as row_limits

    monkeypatch.setattr(row_limits, "MAX_LINKED_ROWS", 10)

    monkeypatch.setattr(row_limits, "MAX_FETCHED_ROWS", 10)
    people = _people()
    sess.publish(people.group_by("district").len())
    second = sess.publish(people.filter(pl.col("age") < 100).group_by("district").len())
    assert "differencing" not in {r for v in _hidden(second).values() for r in v}  # not linked: 53 rows > 10
