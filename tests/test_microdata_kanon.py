"""k-anonymity check, global recoding proposals and local suppression (sdc_magic.microdata).

Expected values come from brute force over record pairs, never from the code under test.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdc_magic.microdata import (
    apply_recodes,
    check_k_anonymity,
    local_suppression,
    proposals_frame,
    recode_proposals,
)


def plain(df: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Key values as Python objects (missing -> None) and the missing mask."""
    na = df[keys].isna().to_numpy()
    vals = df[keys].to_numpy(dtype=object)
    vals[na] = None
    return vals, na


def brute_fk(df: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """f_k with missing values as wildcards, pair by pair."""
    vals, na = plain(df, keys)
    out = np.zeros(len(df), dtype=int)
    for i in range(len(df)):
        match = np.all((vals == vals[i]) | na | na[i], axis=1)
        out[i] = int(match.sum())
    return out


def brute_l(df: pd.DataFrame, keys: list[str], sensitive: str) -> np.ndarray:
    vals, na = plain(df, keys)
    s = df[sensitive].to_numpy(dtype=object)
    out = np.zeros(len(df), dtype=int)
    for i in range(len(df)):
        match = np.all((vals == vals[i]) | na | na[i], axis=1)
        out[i] = len({v for v in s[match] if not pd.isna(v)})
    return out


def random_frame(n: int, seed: int, na_share: float = 0.05) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "sex": rng.choice(["F", "M"], n),
        "year": rng.integers(1950, 2010, n),
        "edu": rng.choice(["none", "primary", "secondary", "tertiary"], n, p=[0.3, 0.4, 0.25, 0.05]),
        "when": pd.to_datetime("2000-01-01") + pd.to_timedelta(rng.integers(0, 3000, n), unit="D"),
        "diagnosis": rng.choice(["SECRET-A", "SECRET-B", "SECRET-C"], n),
    })
    df["edu"] = df["edu"].astype(object)
    df.loc[rng.random(n) < na_share, "edu"] = None
    return df


KEYS = ["sex", "year", "edu"]


def test_class_sizes_match_brute_force_with_wildcards() -> None:
    df = random_frame(600, 1, na_share=0.1)
    rep = check_k_anonymity(df, KEYS, k=3, sensitive="diagnosis", l=2)
    assert (rep.class_size == brute_fk(df, KEYS)).all()
    assert (rep.distinct_sensitive == brute_l(df, KEYS, "diagnosis")).all()
    assert rep.n_violations == int((brute_fk(df, KEYS) < 3).sum())
    s = rep.summary()
    assert s["violations"] == rep.n_violations and s["l_violations"] == int(rep.l_violating.sum())
    assert "wildcard" in s["convention"]


def test_all_missing_record_matches_everything() -> None:
    df = pd.DataFrame({"a": ["x", "y", None], "b": [1, 2, None]})
    rep = check_k_anonymity(df, ["a", "b"], k=2)
    assert rep.class_size.tolist() == [2, 2, 3]
    assert rep.ok


def test_reports_never_show_sensitive_values() -> None:
    df = random_frame(300, 2)
    rep = check_k_anonymity(df, KEYS, k=5, sensitive="diagnosis", l=3)
    assert rep.n_violations > 0
    shown = [repr(rep), json.dumps(rep.summary()), rep.to_frame().to_string(), rep.smallest_classes().to_string(),
             rep.to_frame().to_html()]
    assert not any("SECRET" in text for text in shown)
    frame = rep.to_frame()
    assert len(frame) == int((rep.violating | rep.l_violating).sum())
    assert "diagnosis" not in frame.columns and "class_size" in frame.columns
    smallest = rep.smallest_classes(3)
    assert smallest["class_size"].is_monotonic_increasing


def test_check_does_not_modify_input() -> None:
    df = random_frame(200, 3)
    before = df.copy(deep=True)
    check_k_anonymity(df, KEYS, k=3, sensitive="diagnosis")
    recode_proposals(df, KEYS + ["when"], k=3)
    local_suppression(df, KEYS, k=3)
    pd.testing.assert_frame_equal(df, before)


@pytest.mark.parametrize("order", ["fixes", "importance"])
@pytest.mark.parametrize("seed", [4, 5])
def test_local_suppression_reaches_k_anonymity(seed: int, order: str) -> None:
    df = random_frame(800, seed)
    out, rep = local_suppression(df, KEYS, k=3, order=order)
    fk = brute_fk(out, KEYS)  # wildcard convention, independent of the code under test
    assert (fk >= 3).all()
    assert rep.violations_after == 0 and rep.violations_before == int((brute_fk(df, KEYS) < 3).sum())
    assert check_k_anonymity(out, KEYS, 3).ok
    # counts per variable are exactly the new missing values
    for key in KEYS:
        newly = out[key].isna() & df[key].notna()
        assert rep.suppressed[key] == int(newly.sum())
        assert rep.percent[key] == round(100 * newly.sum() / len(df), 2)
        # suppression only removes values, never changes one
        kept = out[key].notna()
        assert (out.loc[kept, key].astype(object) == df.loc[kept, key].astype(object)).all()
    table = rep.to_frame()
    assert list(table.index) == ["suppressions", "percent"] and table.loc["suppressions", "total"] == rep.total
    assert out.index.equals(df.index) and list(out.columns) == list(df.columns)


def test_importance_steers_suppression() -> None:
    df = random_frame(800, 6)
    _, keep_year = local_suppression(df, KEYS, k=3, importance=["year", "edu", "sex"], order="importance")
    _, drop_year = local_suppression(df, KEYS, k=3, importance=["sex", "edu", "year"], order="importance")
    assert keep_year.suppressed["year"] < drop_year.suppressed["year"]
    assert keep_year.importance == {"year": 1, "edu": 2, "sex": 3}


def test_suppression_is_not_wasteful_on_a_tiny_case() -> None:
    # two records differing only in "b": one suppression of b in one of them makes both match
    df = pd.DataFrame({"a": ["x", "x", "y", "y", "y"], "b": ["p", "q", "r", "r", "r"]})
    out, rep = local_suppression(df, ["a", "b"], k=2)
    assert rep.total == 1 and rep.suppressed == {"a": 0, "b": 1}
    assert (brute_fk(out, ["a", "b"]) >= 2).all()


def test_too_few_records_is_an_error() -> None:
    with pytest.raises(ValueError):
        local_suppression(pd.DataFrame({"a": [1, 2]}), ["a"], k=3)


def test_recode_proposals_report_true_violations() -> None:
    df = random_frame(500, 7)
    df["edu"] = df["edu"].where(df.index % 97 != 0, "rare-category")
    keys = KEYS + ["when"]
    props = recode_proposals(df, keys, k=3)
    methods = {(p.key, p.method) for p in props}
    assert ("when", "year") in methods and ("year", "band") in methods and ("edu", "merge_rare") in methods
    for p in props:
        applied = p.apply(df)
        assert p.violations_after == int((brute_fk(applied, keys) < 3).sum())
        assert p.violations_before == int((brute_fk(df, keys) < 3).sum())
    band10 = next(p for p in props if p.key == "year" and p.params == {"width": 10})
    assert set(band10.apply(df)["year"].dropna()) <= {f"{y}-{y + 9}" for y in range(1950, 2010, 10)}
    merge = next(p for p in props if p.method == "merge_rare")
    assert "Other" in set(merge.apply(df)["edu"].dropna())
    frame = proposals_frame(props)
    assert frame["violations_after"].is_monotonic_increasing
    both = apply_recodes(df, [band10, next(p for p in props if p.key == "when")])
    assert both["when"].dtype.name == "Int64"


small_frames = st.lists(
    st.tuples(st.sampled_from(["a", "b", None]), st.integers(0, 6), st.sampled_from(["x", "y", "z"])),
    min_size=3, max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=small_frames, k=st.integers(2, 3))
def test_property_suppression_always_reaches_k(rows: list[tuple], k: int) -> None:
    df = pd.DataFrame(rows, columns=["c1", "c2", "c3"]).astype({"c1": object})
    if len(df) < k:
        return
    out, rep = local_suppression(df, ["c1", "c2", "c3"], k=k)
    assert (brute_fk(out, ["c1", "c2", "c3"]) >= k).all()
    assert rep.violations_after == 0
