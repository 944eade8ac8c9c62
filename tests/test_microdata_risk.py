"""Matching risk (fast vs brute force), utility summaries, certificate, and the whole pipeline."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sdc_magic.microdata import (
    broadcast_person_columns,
    certificate,
    check_k_anonymity,
    date_noise,
    first_last_states,
    local_suppression,
    make_hdss,
    match_risk,
    person_table,
    utility_summary,
)
from sdc_magic.microdata.risk import match_risk_bruteforce

KEYS = ["sex", "birth_year", "death_year", "n_events", "education_first", "education_last",
        "occupation_first", "occupation_last"]
CONSTANT_STATES = ["education", "occupation"]


@pytest.fixture(scope="module")
def small() -> dict[str, pd.DataFrame]:
    ev = make_hdss(350, seed=21)
    noisy = date_noise(ev, level="low", seed=3).events
    return {"events": ev, "noisy": noisy, "orig": person_table(ev), "anon": person_table(noisy)}


def fast_sets(report) -> dict[str, set]:
    return {name: set(flags.index[flags.to_numpy()]) for name, flags in report.at_risk.items()}


@pytest.mark.parametrize("n_neighbours", [1, 3])
def test_fast_risk_agrees_with_brute_force(small, n_neighbours: int) -> None:
    orig, anon = small["orig"], small["anon"].copy()
    rng = np.random.default_rng(0)
    # suppressed values in the anonymised data, and a missing value in the original: wildcards
    for col in ["sex", "education_last", "occupation_last"]:
        anon.loc[rng.random(len(anon)) < 0.08, col] = None
    orig = orig.copy()
    orig.loc[orig.index[::41], "occupation_last"] = None
    fast = match_risk(orig, anon, n_neighbours=n_neighbours)
    brute = match_risk_bruteforce(orig, anon, n_neighbours=n_neighbours)
    assert fast_sets(fast) == brute
    for name, stats in fast.per_event.items():
        assert stats["at_risk"] == len(brute[name])
        assert stats["people"] == int(orig[f"date_{name}"].notna().sum())
    assert any(len(v) for v in brute.values())


def test_risk_with_ties_and_year_window() -> None:
    """Hand-made: equal distances favour the attacker, the ±1 year window filters candidates."""
    day = pd.Timestamp
    orig = pd.DataFrame({"person_id": [1, 2, 3, 4], "sex": ["F"] * 4, "education_last": ["a"] * 4,
                         "occupation_last": ["x"] * 4,
                         "date_birth": [day("2000-06-01")] * 4})
    anon = orig.copy()
    anon["date_birth"] = [day("2000-06-11"), day("2000-05-22"), day("2000-06-11"), day("2003-06-01")]
    ev = {"birth": "date_birth"}
    fast = match_risk(orig, anon, events=ev, n_neighbours=1)
    brute = match_risk_bruteforce(orig, anon, events=ev, n_neighbours=1)
    # persons 1-3 are all 10 days away from the originals: nobody is strictly closer -> at risk;
    # person 4 moved outside the ±1 year window -> never found
    assert fast_sets(fast)["birth"] == brute["birth"] == {1, 2, 3}


def test_noise_lowers_risk(small) -> None:
    exact = match_risk(small["orig"], small["orig"])
    noisy = match_risk(small["orig"], small["anon"])
    for name in exact.per_event:
        assert noisy.per_event[name]["at_risk"] <= exact.per_event[name]["at_risk"]


def test_utility_summary_before_and_after(small) -> None:
    same = utility_summary(small["events"], small["events"])
    spans = same["in_out_migration_days"]
    assert spans["original"] == spans["anonymised"] and spans["original"]["n"] > 0
    assert same["chi_square"]["statistic"] == 0 and not same["chi_square"]["significant"]
    u = utility_summary(small["events"], small["noisy"])
    before, after = u["in_out_migration_days"]["original"], u["in_out_migration_days"]["anonymised"]
    assert before["n"] == after["n"]  # order is kept, so every span still exists
    assert abs(before["mean"] - after["mean"]) < 60
    for key in ("mean", "sd", "share_under_100_days"):
        assert key in before and key in after
    chi = u["chi_square"]
    assert chi["dims"] == ["event", "sex", "period", "age_band"] and chi["df"] == chi["cells"] - 1
    assert chi["statistic"] > 0 and chi["critical_value"] > 0
    json.dumps(u)


def test_pipeline_and_certificate(small) -> None:
    ev = small["events"]
    before = ev.copy(deep=True)
    reduced = first_last_states(ev, state_cols=CONSTANT_STATES)
    noise = date_noise(reduced, level="medium", seed=12345)
    people = person_table(noise.events)
    protected, supp = local_suppression(people, KEYS, k=3)
    check = check_k_anonymity(protected, KEYS, k=3)
    assert check.ok and supp.violations_after == 0
    cols = ["sex", "education_first", "education_last", "occupation_first", "occupation_last"]
    anon_events = broadcast_person_columns(noise.events, protected, columns=cols)
    anon_people = person_table(anon_events)
    for col in cols:  # suppressions carried back to the long file
        assert anon_people[col].isna().sum() == protected[col].isna().sum()
    risk = match_risk(small["orig"], anon_people)
    cert = certificate(check, supp, risk, noise)
    text = json.dumps(cert)
    assert cert["k"] == 3 and cert["keys"] == KEYS and cert["violations_after"] == 0
    assert cert["suppressions"] == supp.suppressed
    assert set(cert["risk"]["per_event"]) == {"birth", "death", "in_migration", "out_migration"}
    assert cert["noise"]["lo_days"] == 76 and cert["noise"]["hi_days"] == 93
    assert cert["seed"] is None and "12345" not in text  # the seed would undo the noise
    assert certificate(check, supp, risk, noise, include_seed=True)["seed"] == 12345
    pd.testing.assert_frame_equal(ev, before)
    with pytest.raises(ValueError):
        certificate(check_k_anonymity(protected, KEYS[:3], 3), supp)
