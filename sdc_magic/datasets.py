"""Synthetic protection-referrals microdata for tests, demos and teaching.

Every row is invented. No real person, case or household stands behind any
value: the frame is generated from a seeded ``numpy`` random generator.

Why it exists: the lesson "Nineteen cells of one" (``/work/shared/domain``)
argues with specific numbers -- a four-way table of 200 cells, 85 of them
holding four cases or fewer and 19 holding exactly one, while the two-way
district-by-category table has no cell under five, and a disability equity gap
(54/202 = 26.7 % against 663/1,436 = 46.2 %) that survives suppression.  The
extension has to be demonstrated and tested against exactly those numbers, so
:func:`make_referrals` builds them *by construction* (never by searching seeds
until something fits): every seed yields different but equally plausible
microdata with identical headline figures.

The frame also carries the traps that the disclosure checks must handle:

* ``household_id`` groups 1-4 cases, so "frequency on distinct units" differs
  from a plain row count in some cells;
* ``Mirebalais`` is a small district: subtracting the all-but-Mirebalais
  sex x age table from the all-districts one reveals 2 girls aged 0-11, and
  "3 of 11" disabled consenting cases there were reached;
* an integer ``age`` consistent with ``age_band`` so recoding can propose new
  cut points.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "AGE_BANDS",
    "CASE_CATEGORIES",
    "CELL_KEYS",
    "DISTRICTS",
    "REFERRALS_FIGURES",
    "make_referrals",
    "referrals_figures",
]

#: Haitian arrondissements (admin2), ASCII spelling, with their share of the
#: caseload.  Seven districts are needed: 6 x 4 categories x 4 age bands x 2
#: sexes is only 192 possible cells, fewer than the 200 the lesson counts.
DISTRICTS: dict[str, float] = {
    "Port-au-Prince": 0.26,
    "Croix-des-Bouquets": 0.18,
    "Cap-Haitien": 0.15,
    "Gonaives": 0.13,
    "Saint-Marc": 0.11,
    "Leogane": 0.10,
    "Mirebalais": 0.05,
}

#: Case categories and their share of the caseload.
CASE_CATEGORIES: dict[str, float] = {
    "GBV": 0.36,
    "Child protection": 0.25,
    "Family separation": 0.14,
    "Psychosocial": 0.25,
}

#: Ordered age bands; plain strings (not categoricals) so that ``groupby``
#: returns only observed cells on both pandas 2.2 and 3.x.
AGE_BANDS: tuple[str, ...] = ("0-11", "12-17", "18-59", "60+")

#: Inclusive integer age range of each band (60+ capped at a plausible 92).
_AGE_RANGES: dict[str, tuple[int, int]] = {
    "0-11": (0, 11),
    "12-17": (12, 17),
    "18-59": (18, 59),
    "60+": (60, 92),
}

#: P(age band | category).  Child protection has no 60+ cases at all (those
#: 14 cells are structurally empty); its few 18-59 cases are care leavers.
_AGE_GIVEN_CATEGORY: dict[str, tuple[float, float, float, float]] = {
    "GBV": (0.07, 0.20, 0.66, 0.07),
    "Child protection": (0.52, 0.44, 0.04, 0.0),
    "Family separation": (0.36, 0.25, 0.31, 0.08),
    "Psychosocial": (0.10, 0.15, 0.55, 0.20),
}

#: P(sex = "F" | category, age band): GBV survivors are overwhelmingly women
#: and girls; the other categories are closer to balanced.
_FEMALE_SHARE: dict[str, tuple[float, float, float, float]] = {
    "GBV": (0.78, 0.88, 0.92, 0.90),
    "Child protection": (0.50, 0.52, 0.50, 0.50),
    "Family separation": (0.50, 0.50, 0.62, 0.58),
    "Psychosocial": (0.55, 0.60, 0.64, 0.60),
}

#: The four-way disaggregation the lesson tabulates.
CELL_KEYS: list[str] = ["admin2", "case_category", "age_band", "sex"]

#: The figures of the lesson; :func:`make_referrals` reproduces all of them
#: for every seed, and :func:`referrals_figures` recomputes them from a frame.
REFERRALS_FIGURES: dict[str, Any] = {
    "rows": 1850,
    "cells": 200,
    "cells_le4": 85,
    "cells_eq1": 19,
    "min_admin2_category": 5,  # lower bound: no 2-way cell under 5
    "consenting": 1638,
    "not_consenting": 212,
    "disability_reached": 54,
    "disability_consenting": 202,
    "no_disability_reached": 663,
    "no_disability_consenting": 1436,
    "mirebalais_girls_0_11": 2,
    "mirebalais_disability_reached": 3,
    "mirebalais_disability_consenting": 11,
}

_SMALL_DISTRICT = "Mirebalais"
_EMPTY_CELLS = 224 - 200  # 7 x 4 x 4 x 2 possible cells, 200 observed
_SIZE_ONE_CELLS = 19
_SIZE_2_TO_4_CELLS = 85 - 19
_LARGE_CELLS = 200 - 85
# Disabled cases among the 212 who did not consent: not a lesson figure, fixed
# so the overall disability prevalence (~12 %) is stable across seeds.
_DISABILITY_NOT_CONSENTING = 26


def _pick(rng: np.random.Generator, candidates: np.ndarray, k: int, weights: np.ndarray) -> np.ndarray:
    """Draw exactly ``k`` of ``candidates`` without replacement, favouring high weights.

    Exact counts are what make the lesson's figures hold for every seed;
    the weights only decide *who* gets the attribute, which keeps the data
    plausible (e.g. older people report disability more often).
    """
    if k > len(candidates):
        raise RuntimeError(f"cannot pick {k} of {len(candidates)} rows")  # unreachable by construction
    if k == 0:
        return candidates[:0]
    return rng.choice(candidates, size=k, replace=False, p=weights / weights.sum())


def _cell_sizes(rng: np.random.Generator) -> pd.DataFrame:
    """Choose the size of each of the 224 possible four-way cells.

    Expected sizes come from the marginal shares above (times a per-seed
    log-normal jitter).  Cells are then ranked by that weight and the size
    classes are dealt out in rank order with the lesson's exact counts:
    24 empty, 19 of one, 66 of two to four and 115 of five or more.  A few
    cells are fixed beforehand: structurally empty ones (child protection
    60+), Mirebalais girls 0-11 (exactly two, in two cells of one), and in
    each district x category the largest cell is forced to be >= 5 so the
    two-way table never has a cell under five.
    """
    n_rows = REFERRALS_FIGURES["rows"]
    index = pd.MultiIndex.from_product(
        [list(DISTRICTS), list(CASE_CATEGORIES), list(AGE_BANDS), ["F", "M"]], names=CELL_KEYS
    )
    cells = index.to_frame(index=False)
    band_pos = cells["age_band"].map({band: i for i, band in enumerate(AGE_BANDS)}).to_numpy()
    p_age = np.array(
        [_AGE_GIVEN_CATEGORY[c][i] for c, i in zip(cells["case_category"], band_pos, strict=True)]
    )
    p_f = np.array([_FEMALE_SHARE[c][i] for c, i in zip(cells["case_category"], band_pos, strict=True)])
    p_sex = np.where(cells["sex"].to_numpy() == "F", p_f, 1.0 - p_f)
    expected = (
        n_rows
        * cells["admin2"].map(DISTRICTS).to_numpy()
        * cells["case_category"].map(CASE_CATEGORIES).to_numpy()
        * p_age
        * p_sex
    )
    weight = expected * np.exp(rng.normal(0.0, 0.35, size=len(cells)))
    size = np.full(len(cells), -1, dtype=np.int64)  # -1 = not decided yet

    # Structural zeros, then the Mirebalais girls aged 0-11 (2 in total).
    size[weight == 0] = 0
    mire_girls = (
        (cells["admin2"] == _SMALL_DISTRICT) & (cells["sex"] == "F") & (cells["age_band"] == "0-11")
    ).to_numpy()
    girls_size = {"GBV": 0, "Child protection": 1, "Family separation": 1, "Psychosocial": 0}
    size[mire_girls] = cells.loc[mire_girls, "case_category"].map(girls_size).to_numpy()

    # The largest open cell of every district x category is a "large" cell.
    large = np.zeros(len(cells), dtype=bool)
    open_weight = pd.Series(np.where(size < 0, weight, -np.inf))
    large[open_weight.groupby([cells["admin2"], cells["case_category"]]).idxmax().to_numpy()] = True

    # Deal the remaining size classes out by ascending weight.
    n_empty = _EMPTY_CELLS - int((size == 0).sum())
    n_one = _SIZE_ONE_CELLS - int((size == 1).sum())
    n_small = _SIZE_2_TO_4_CELLS
    free = np.flatnonzero((size < 0) & ~large)
    free = free[np.argsort(weight[free], kind="stable")]
    size[free[:n_empty]] = 0
    size[free[n_empty : n_empty + n_one]] = 1
    small = free[n_empty + n_one : n_empty + n_one + n_small]
    size[small] = np.clip(np.rint(weight[small]), 2, 4).astype(np.int64)
    large[free[n_empty + n_one + n_small :]] = True
    if int(large.sum()) != _LARGE_CELLS:
        raise RuntimeError("cell-size classes do not add up")  # unreachable by construction

    # Large cells: 5 each, plus the rest of the 1,850 in proportion to their
    # weight above 5 (largest-remainder rounding keeps the total exact).
    big = np.flatnonzero(large)
    extra = n_rows - int(size[size > 0].sum()) - 5 * len(big)
    share = np.maximum(weight[big] - 5.0, 0.5)
    raw = extra * share / share.sum()
    add = np.floor(raw).astype(np.int64)
    add[np.argsort(raw - add, kind="stable")[::-1][: extra - int(add.sum())]] += 1
    size[big] = 5 + add
    cells["n"] = size
    return cells


def _assign_households(rng: np.random.Generator, admin2: np.ndarray, category: np.ndarray) -> np.ndarray:
    """Group cases into households of 1-4 cases within one district.

    Cases are shuffled within district and loosely ordered by category before
    chunking, so siblings often share a category (and sometimes a whole
    four-way cell): that is what makes distinct households per cell differ
    from rows.  Returns an integer household number per row.
    """
    household = np.empty(len(admin2), dtype=np.int64)
    next_id = 0
    for district in DISTRICTS:
        rows = np.flatnonzero(admin2 == district)
        rows = rows[rng.permutation(len(rows))]
        rows = rows[np.argsort(category[rows], kind="stable")]
        start = 0
        while start < len(rows):
            n = int(rng.choice([1, 2, 3, 4], p=[0.50, 0.27, 0.14, 0.09]))
            household[rows[start : start + n]] = next_id
            next_id += 1
            start += n
    return household


def make_referrals(seed: int = 2024) -> pd.DataFrame:
    """Return a synthetic protection-referrals frame: one row per case, 1,850 cases.

    Deterministic for a given ``seed``; every seed reproduces the figures in
    :data:`REFERRALS_FIGURES` exactly (see :func:`referrals_figures`), because
    cell sizes and outcome counts are fixed first and randomness only decides
    which cases receive them.

    Columns: ``case_id`` (``"C0001"``...), ``household_id`` (``"H0001"``...),
    ``admin2``, ``case_category``, ``age_band``, ``age`` (int), ``sex``
    (``"F"``/``"M"``), ``disability_reported``, ``consent_to_refer``,
    ``referral_accepted`` (bool) and ``days_to_first_service`` (float, NaN
    when no service was received).
    """
    rng = np.random.default_rng(seed)
    cells = _cell_sizes(rng)
    rows = cells.loc[cells.index.repeat(cells["n"]), CELL_KEYS].reset_index(drop=True)
    n = len(rows)
    admin2 = rows["admin2"].to_numpy(dtype=object)
    category = rows["case_category"].to_numpy(dtype=object)
    band = rows["age_band"].to_numpy(dtype=object)
    all_rows = np.arange(n)

    # Age in years, uniform within band except adults, who skew young.
    age = np.empty(n, dtype=np.int64)
    for name, (lo, hi) in _AGE_RANGES.items():
        in_band = np.flatnonzero(band == name)
        if name == "18-59":
            draws = lo + np.floor(rng.beta(1.4, 2.6, size=len(in_band)) * (hi - lo + 1))
            age[in_band] = np.minimum(draws.astype(np.int64), hi)
        else:
            age[in_band] = rng.integers(lo, hi + 1, size=len(in_band))

    # Consent: exactly 212 refuse; adult GBV survivors refuse more often.
    refuse_w = np.where((category == "GBV") & (band == "18-59"), 2.0, 1.0)
    not_consenting = _pick(rng, all_rows, REFERRALS_FIGURES["not_consenting"], refuse_w)
    consent = np.ones(n, dtype=bool)
    consent[not_consenting] = False

    # Disability: exact counts among consenting cases (11 of them in
    # Mirebalais), a fixed number among the others; older people more often.
    disability_w = np.select([band == "60+", band == "0-11"], [4.0, 0.8], 1.0)
    in_mire = admin2 == _SMALL_DISTRICT
    disability = np.zeros(n, dtype=bool)
    mire_k = REFERRALS_FIGURES["mirebalais_disability_consenting"]
    for mask, k in [
        (consent & in_mire, mire_k),
        (consent & ~in_mire, REFERRALS_FIGURES["disability_consenting"] - mire_k),
        (~consent, _DISABILITY_NOT_CONSENTING),
    ]:
        idx = np.flatnonzero(mask)
        disability[_pick(rng, idx, k, disability_w[idx])] = True

    # Reached (accepted and served): exact counts per group; services are
    # denser in the capital and for psychosocial support.
    reach_w = np.where(admin2 == "Port-au-Prince", 1.5, 1.0) * np.where(category == "Psychosocial", 1.3, 1.0)
    reached = np.zeros(n, dtype=bool)
    mire_r = REFERRALS_FIGURES["mirebalais_disability_reached"]
    for mask, k in [
        (consent & disability & in_mire, mire_r),
        (consent & disability & ~in_mire, REFERRALS_FIGURES["disability_reached"] - mire_r),
        (consent & ~disability, REFERRALS_FIGURES["no_disability_reached"]),
    ]:
        idx = np.flatnonzero(mask)
        reached[_pick(rng, idx, k, reach_w[idx])] = True

    # Consenting but not reached: refused by the provider (no date), accepted
    # but still waiting (no date), or served outside the referral (a date but
    # not accepted) -- which is why completion needs both conditions.
    outcome = rng.choice(3, size=n, p=[0.55, 0.35, 0.10])
    unreached = consent & ~reached
    accepted = reached | (unreached & (outcome == 1))
    has_date = reached | (unreached & (outcome == 2))
    days = np.round(1.0 + rng.gamma(2.0, 9.0, size=n)).clip(1.0, 90.0)
    days_to_first_service = np.where(has_date, days, np.nan)

    household = _assign_households(rng, admin2, category)

    frame = pd.DataFrame(
        {
            "admin2": rows["admin2"],
            "case_category": rows["case_category"],
            "age_band": rows["age_band"],
            "age": age,
            "sex": rows["sex"],
            "disability_reported": disability,
            "consent_to_refer": consent,
            "referral_accepted": accepted,
            "days_to_first_service": days_to_first_service.astype(np.float64),
            "_household": household,
        }
    )
    # Shuffle so the file does not arrive sorted by cell, then number cases
    # and households in that order.
    frame = frame.iloc[rng.permutation(n)].reset_index(drop=True)
    frame.insert(0, "case_id", [f"C{i:04d}" for i in range(1, n + 1)])
    first_seen = pd.unique(frame["_household"].to_numpy())
    hh_number = pd.Series(np.arange(1, len(first_seen) + 1), index=first_seen)
    hh_ids = [f"H{i:04d}" for i in hh_number.loc[frame["_household"].to_numpy()]]
    frame.insert(1, "household_id", hh_ids)
    frame = frame.drop(columns="_household")

    figures = referrals_figures(frame)
    wrong = {
        key: (figures[key], want)
        for key, want in REFERRALS_FIGURES.items()
        if key != "min_admin2_category" and figures[key] != want
    }
    if wrong or figures["min_admin2_category"] < 5:
        raise RuntimeError(f"synthetic referrals miss the lesson figures: {wrong}")  # unreachable
    return frame


def _completion(frame: pd.DataFrame) -> tuple[int, int]:
    """(reached, consenting) exactly as the lesson computes completion."""
    consenting = frame[frame["consent_to_refer"]]
    reached = consenting["referral_accepted"] & consenting["days_to_first_service"].notna()
    return int(reached.sum()), len(consenting)


def referrals_figures(df: pd.DataFrame) -> dict[str, Any]:
    """Recompute the lesson's figures from a referrals frame.

    Returns a dict with the same keys as :data:`REFERRALS_FIGURES` (where
    ``min_admin2_category`` is the *actual* smallest district x category
    count) plus ``admin2_category_cells`` and the two completion rates in
    percent.  Each figure is computed the way the lesson computes it, so a
    test or demo that quotes the lesson can check itself against the data.
    """
    cells = df.groupby(CELL_KEYS, dropna=False).size()
    two_way = df.groupby(["admin2", "case_category"]).size()
    disability = df["disability_reported"].isin([True, "true", "Yes"])
    d_reached, d_consenting = _completion(df[disability])
    nd_reached, nd_consenting = _completion(df[~disability])
    consenting = int(df["consent_to_refer"].sum())

    # Differencing attack: all districts minus all-but-Mirebalais.
    everyone = df.groupby(["sex", "age_band"]).size()
    others = df[df["admin2"] != _SMALL_DISTRICT].groupby(["sex", "age_band"]).size()
    revealed = everyone.sub(others, fill_value=0)
    mire = df[(df["admin2"] == _SMALL_DISTRICT) & disability]
    m_reached, m_consenting = _completion(mire)

    return {
        "rows": len(df),
        "cells": len(cells),
        "cells_le4": int((cells <= 4).sum()),
        "cells_eq1": int((cells == 1).sum()),
        "min_admin2_category": int(two_way.min()),
        "admin2_category_cells": len(two_way),
        "consenting": consenting,
        "not_consenting": len(df) - consenting,
        "disability_reached": d_reached,
        "disability_consenting": d_consenting,
        "disability_completion_pct": round(100 * d_reached / d_consenting, 1) if d_consenting else None,
        "no_disability_reached": nd_reached,
        "no_disability_consenting": nd_consenting,
        "no_disability_completion_pct": round(100 * nd_reached / nd_consenting, 1) if nd_consenting else None,
        "mirebalais_girls_0_11": int(revealed.get(("F", "0-11"), 0)),
        "mirebalais_disability_reached": m_reached,
        "mirebalais_disability_consenting": m_consenting,
    }
