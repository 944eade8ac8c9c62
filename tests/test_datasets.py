"""The synthetic referrals frame must reproduce every figure of "Nineteen cells of one".

Demos and other tests quote those numbers, so they are checked here exactly,
by recomputing them the way the lesson does (not only via ``referrals_figures``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.datasets import AGE_BANDS, CELL_KEYS, REFERRALS_FIGURES, make_referrals, referrals_figures

SEEDS = [2024, 0, 7, 12345]


@pytest.fixture(scope="module")
def referrals() -> pd.DataFrame:
    return make_referrals()


@pytest.fixture(scope="module", params=SEEDS)
def any_referrals(request: pytest.FixtureRequest) -> pd.DataFrame:
    return make_referrals(request.param)


def lesson_completion(frame: pd.DataFrame) -> tuple[int, int]:
    """Copied from the lesson, so the test does not trust the module's own helper."""
    consenting = frame[frame["consent_to_refer"]]
    reached = consenting[consenting["referral_accepted"] & consenting["days_to_first_service"].notna()]
    return len(reached), len(consenting)


def test_shape_and_ids(any_referrals: pd.DataFrame) -> None:
    df = any_referrals
    assert len(df) == 1850
    assert df["case_id"].is_unique
    assert df["case_id"].str.fullmatch(r"C\d{4}").all()
    assert df["household_id"].str.fullmatch(r"H\d{4}").all()
    assert list(df.columns) == [
        "case_id",
        "household_id",
        "admin2",
        "case_category",
        "age_band",
        "age",
        "sex",
        "disability_reported",
        "consent_to_refer",
        "referral_accepted",
        "days_to_first_service",
    ]
    assert "Mirebalais" in set(df["admin2"])
    assert df["admin2"].nunique() == 7
    assert set(df["case_category"]) == {"GBV", "Child protection", "Family separation", "Psychosocial"}
    assert set(df["age_band"]) == set(AGE_BANDS)
    assert set(df["sex"]) == {"F", "M"}
    assert not df[["admin2", "case_category", "age_band", "sex"]].isna().any().any()


def test_four_way_cells(any_referrals: pd.DataFrame) -> None:
    cells = any_referrals.groupby(CELL_KEYS, dropna=False).size()
    assert len(cells) == 200
    assert (cells > 0).all()
    assert (cells <= 4).sum() == 85
    assert (cells == 1).sum() == 19


def test_two_way_table_has_no_small_or_empty_cell(any_referrals: pd.DataFrame) -> None:
    by_area = any_referrals.groupby(["admin2", "case_category"]).size().unstack()
    assert by_area.shape == (7, 4)
    assert not by_area.isna().any().any()
    assert (by_area >= 5).all().all()
    coarse = any_referrals.groupby(["admin2", "case_category"]).size()
    assert (coarse < 5).sum() == 0


def test_completion_equity_gap(any_referrals: pd.DataFrame) -> None:
    df = any_referrals
    disability = df["disability_reported"].isin([True, "true", "Yes"])
    assert lesson_completion(df[disability]) == (54, 202)
    assert lesson_completion(df[~disability]) == (663, 1436)
    assert round(100 * 54 / 202, 1) == 26.7
    assert round(100 * 663 / 1436, 1) == 46.2
    assert df["consent_to_refer"].sum() == 1638
    assert (~df["consent_to_refer"]).sum() == 212


def test_mirebalais_differencing_reveals_two_girls(any_referrals: pd.DataFrame) -> None:
    df = any_referrals
    everyone = df.groupby(["sex", "age_band"]).size()
    others = df[df["admin2"] != "Mirebalais"].groupby(["sex", "age_band"]).size()
    revealed = everyone.sub(others, fill_value=0)
    assert revealed[("F", "0-11")] == 2
    mire = df[df["admin2"] == "Mirebalais"]
    assert ((mire["sex"] == "F") & (mire["age_band"] == "0-11")).sum() == 2


def test_mirebalais_three_of_eleven(any_referrals: pd.DataFrame) -> None:
    df = any_referrals
    mire = df[(df["admin2"] == "Mirebalais") & df["disability_reported"]]
    assert lesson_completion(mire) == (3, 11)


def test_referrals_figures_matches_lesson(any_referrals: pd.DataFrame) -> None:
    figures = referrals_figures(any_referrals)
    for key, want in REFERRALS_FIGURES.items():
        if key == "min_admin2_category":
            assert figures[key] >= want
        else:
            assert figures[key] == want, key
    assert figures["admin2_category_cells"] == 28
    assert figures["disability_completion_pct"] == 26.7
    assert figures["no_disability_completion_pct"] == 46.2


def test_referrals_figures_on_other_frame() -> None:
    """The helper computes, it does not echo constants."""
    df = make_referrals().iloc[:100]
    figures = referrals_figures(df)
    assert figures["rows"] == 100
    assert figures["cells"] == len(df.groupby(CELL_KEYS).size())
    assert figures["disability_consenting"] + figures["no_disability_consenting"] == figures["consenting"]


def test_deterministic_for_a_seed() -> None:
    pd.testing.assert_frame_equal(make_referrals(2024), make_referrals(2024))
    pd.testing.assert_frame_equal(make_referrals(), make_referrals(2024))


def test_different_seeds_differ() -> None:
    a, b = make_referrals(1), make_referrals(2)
    assert not a.equals(b)
    # Different microdata, not merely a different row order.
    assert not a.groupby(CELL_KEYS).size().equals(b.groupby(CELL_KEYS).size())


def test_dtypes(referrals: pd.DataFrame) -> None:
    for col in ["disability_reported", "consent_to_refer", "referral_accepted"]:
        assert referrals[col].dtype == np.dtype(bool), col
    assert pd.api.types.is_integer_dtype(referrals["age"])
    assert referrals["days_to_first_service"].dtype == np.dtype("float64")
    for col in ["case_id", "household_id", "admin2", "case_category", "age_band", "sex"]:
        assert pd.api.types.is_string_dtype(referrals[col]), col


def test_age_consistent_with_band(any_referrals: pd.DataFrame) -> None:
    df = any_referrals
    bounds = {"0-11": (0, 11), "12-17": (12, 17), "18-59": (18, 59), "60+": (60, 120)}
    lo = df["age_band"].map(lambda b: bounds[b][0])
    hi = df["age_band"].map(lambda b: bounds[b][1])
    assert ((df["age"] >= lo) & (df["age"] <= hi)).all()
    recut = pd.cut(df["age"], bins=[-1, 11, 17, 59, 200], labels=list(AGE_BANDS)).astype(str)
    assert (recut == df["age_band"].astype(str)).all()


def test_days_to_first_service(any_referrals: pd.DataFrame) -> None:
    days = any_referrals["days_to_first_service"]
    served = days.dropna()
    assert ((served >= 1) & (served <= 90)).all()
    # Mostly after an accepted referral; never without consent.
    assert any_referrals.loc[days.notna(), "referral_accepted"].mean() > 0.8
    assert days[~any_referrals["consent_to_refer"]].isna().all()
    assert not any_referrals.loc[~any_referrals["consent_to_refer"], "referral_accepted"].any()


def test_households(any_referrals: pd.DataFrame) -> None:
    df = any_referrals
    sizes = df.groupby("household_id").size()
    assert sizes.between(1, 4).all()
    assert (sizes > 1).any()
    assert df["household_id"].nunique() < len(df)
    assert (df.groupby("household_id")["admin2"].nunique() == 1).all()
    # Distinct households per four-way cell differ from rows somewhere, so a
    # "frequency on distinct units" rule sees something a row count does not.
    per_cell = df.groupby(CELL_KEYS).agg(rows=("case_id", "size"), units=("household_id", "nunique"))
    assert (per_cell["units"] < per_cell["rows"]).any()
    assert (per_cell["units"] <= per_cell["rows"]).all()


def test_plausibility(any_referrals: pd.DataFrame) -> None:
    df = any_referrals
    district_sizes = df["admin2"].value_counts()
    assert district_sizes.idxmax() == "Port-au-Prince"
    assert district_sizes.idxmin() == "Mirebalais"
    gbv = df[df["case_category"] == "GBV"]
    assert (gbv["sex"] == "F").mean() > 0.8
    child = df[df["case_category"] == "Child protection"]
    assert child["age_band"].isin(["0-11", "12-17"]).mean() > 0.9
