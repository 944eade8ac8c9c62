"""Sequential date noise, first/last states and the synthetic HDSS generator (sdc_magic.microdata)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdc_magic.microdata import (
    NOISE_LEVELS,
    NoiseLevel,
    add_date_noise,
    date_noise,
    first_last_states,
    make_hdss,
    person_table,
    sequential_noise,
)

LEVELS = ["low", "medium", "high", "normal"]


@pytest.fixture(scope="module")
def events() -> pd.DataFrame:
    return make_hdss(3_000, seed=11)


def sequences(frame: pd.DataFrame) -> pd.Series:
    """Per person, the row positions in event order (date, then original row order)."""
    f = frame.assign(_pos=np.arange(len(frame)))
    return f.sort_values(["person_id", "date", "_pos"], kind="stable").groupby("person_id")["_pos"].agg(tuple)


def test_generator_shape_and_determinism() -> None:
    a, b = make_hdss(500, seed=3), make_hdss(500, seed=3)
    pd.testing.assert_frame_equal(a, b)
    assert not make_hdss(500, seed=4).equals(a)
    assert a["person_id"].nunique() == 500
    assert set(a["event"]) <= {"baseline", "birth", "in_migration", "out_migration", "death"}
    per_person = len(a) / 500
    assert 3.0 < per_person < 4.8  # the article: 280,381 events / 72,935 people = 3.84
    first = a.groupby("person_id")["event"].first()
    assert set(first) <= {"baseline", "birth", "in_migration"}
    assert (a.loc[a["event"] == "birth", "date"] == a.loc[a["event"] == "birth", "birth_date"]).all()
    # states change over time for some people
    assert (a.groupby("person_id")["education"].nunique() > 1).any()


@pytest.mark.parametrize("level", LEVELS)
def test_order_and_counts_preserved_exactly(events: pd.DataFrame, level: str) -> None:
    out = add_date_noise(events, level=level, seed=1)
    assert len(out) == len(events) and out.index.equals(events.index)
    pd.testing.assert_series_equal(out.groupby("person_id").size(), events.groupby("person_id").size())
    assert (sequences(out) == sequences(events)).all()
    # distinct original dates stay strictly ordered, equal ones stay equal
    o = events.sort_values(["person_id", "date"], kind="stable")
    n = out.loc[o.index]
    same_person = o["person_id"].to_numpy()[1:] == o["person_id"].to_numpy()[:-1]
    d_orig = np.diff(o["date"].to_numpy().astype("datetime64[D]").astype(np.int64))[same_person]
    d_new = np.diff(n["date"].to_numpy().astype("datetime64[D]").astype(np.int64))[same_person]
    assert (d_new[d_orig > 0] > 0).all()
    assert (d_new[d_orig == 0] == 0).all()
    assert (d_orig == 0).any()  # the synthetic data has same-day events


@pytest.mark.parametrize("level", ["low", "medium", "high"])
def test_uniform_noise_within_bounds(events: pd.DataFrame, level: str) -> None:
    res = date_noise(events, level=level, seed=2)
    lv = NOISE_LEVELS[level]
    noise = res.noise_days.to_numpy()
    reduced = res.reduced.to_numpy()
    full = np.abs(noise[~reduced])
    assert full.min() >= lv.lo and full.max() <= lv.hi
    assert reduced.mean() < 0.05
    assert (np.abs(noise) <= lv.hi).all()
    # reduced events never cross their neighbours: checked by the order test, and here directly
    o = events.assign(noisy=res.events["date"]).sort_values(["person_id", "date"], kind="stable")
    red_rows = o.index.isin(res.reduced.index[res.reduced])
    assert red_rows.any()
    same = o["person_id"].to_numpy()[1:] == o["person_id"].to_numpy()[:-1]
    t = o["date"].to_numpy().astype("datetime64[D]").astype(np.int64)
    s = o["noisy"].to_numpy().astype("datetime64[D]").astype(np.int64)
    step = np.diff(t) > 0
    for i in np.flatnonzero(red_rows):
        if i + 1 < len(o) and same[i] and step[i]:
            assert s[i] < t[i + 1]  # before the next original date
        if i > 0 and same[i - 1] and step[i - 1]:
            assert s[i] > s[i - 1]  # after the previous noisy date


def test_normal_noise_scale(events: pd.DataFrame) -> None:
    res = date_noise(events, level="normal", seed=3)
    sd = float(np.nanstd(res.noise_days.to_numpy()[~res.reduced.to_numpy()]))
    assert 40 < sd < 60


@pytest.mark.parametrize("level", LEVELS)
def test_birth_date_and_birth_event_shift_identically(events: pd.DataFrame, level: str) -> None:
    res = date_noise(events, level=level, seed=4)
    out = res.events
    birth = events["event"] == "birth"
    shift_event = (out["date"] - events["date"])[birth]
    shift_bdate = (out["birth_date"] - events["birth_date"])[birth]
    assert (shift_event == shift_bdate).all()
    # one birth-date shift per person, on every row
    per_person = (out["birth_date"] - events["birth_date"]).groupby(events["person_id"]).nunique()
    assert (per_person == 1).all()
    # people born before surveillance: the birth date stays before their first event
    first = out.groupby("person_id")["date"].min()
    bdate = out.groupby("person_id")["birth_date"].first()
    assert (bdate <= first).all()
    moved = (out["birth_date"] != events["birth_date"]).groupby(events["person_id"]).first()
    assert moved.mean() > 0.9


def test_inputs_untouched_and_seeded(events: pd.DataFrame) -> None:
    before = events.copy(deep=True)
    a = add_date_noise(events, level="medium", seed=5)
    b = add_date_noise(events, level="medium", seed=5)
    c = add_date_noise(events, level="medium", rng=np.random.default_rng(6))
    pd.testing.assert_frame_equal(events, before)
    pd.testing.assert_frame_equal(a, b)
    assert not a["date"].equals(c["date"])
    assert a.dtypes.equals(events.dtypes)
    unseeded = date_noise(events.head(50), level="low")
    assert unseeded.seed is not None and unseeded.seed.bit_length() > 64


def test_missing_dates_and_custom_level() -> None:
    ev = make_hdss(200, seed=8)
    ev.loc[ev.index[::17], "date"] = pd.NaT
    lv = NoiseLevel("tiny", "uniform", 1, 3)
    res = date_noise(ev, level=lv, seed=1)
    assert res.events["date"].isna().equals(ev["date"].isna())
    assert res.noise_days[ev["date"].isna()].isna().all()
    with pytest.raises(ValueError):
        date_noise(ev, level="extreme")


def test_vectorised_over_people() -> None:
    """280k events in well under a few seconds: the loop runs over event rank, not people."""
    import time

    person = np.repeat(np.arange(70_000), 4)
    day = np.tile(np.array([0, 400, 800, 1200]), 70_000) + person % 50
    t0 = time.perf_counter()
    noise, reduced = sequential_noise(person, day, "medium", seed=1)
    assert time.perf_counter() - t0 < 5
    assert not reduced.any() and (np.abs(noise) >= 76).all()


event_lists = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 400)), min_size=1, max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(rows=event_lists, level=st.sampled_from([*LEVELS, 1, 2, 3, 4]), seed=st.integers(0, 2**32 - 1))
def test_property_order_preserved_on_random_sequences(rows: list[tuple[int, int]], level: str | int,
                                                      seed: int) -> None:
    person = np.array([p for p, _ in rows])
    day = np.array([d for _, d in rows])
    noise, reduced = sequential_noise(person, day, level, seed=seed)
    new = day + noise
    lv = NOISE_LEVELS[level]
    for p in np.unique(person):
        idx = np.flatnonzero(person == p)
        order = np.lexsort((idx, day[idx]))
        t, s = day[idx][order], new[idx][order]
        assert (np.diff(s)[np.diff(t) > 0] > 0).all()  # strict order kept
        assert (np.diff(s)[np.diff(t) == 0] == 0).all()  # ties stay tied
    if lv.kind == "uniform":
        assert (np.abs(noise[~reduced]) >= lv.lo).all() and (np.abs(noise) <= lv.hi).all()


def test_first_last_states() -> None:
    ev = pd.DataFrame({
        "person_id": [1, 1, 1, 1, 2, 2],
        "date": pd.to_datetime(["2010-01-01", "2011-01-01", "2012-01-01", "2013-01-01", "2010-01-01", "2015-01-01"]),
        "occupation": ["2", "2", "3", "4", "2", "3"],
        "education": ["2", None, "2", "3", "2", "3"],
    })
    shuffled = ev.sample(frac=1, random_state=1)
    before = shuffled.copy()
    wide = first_last_states(shuffled, state_cols=["occupation", "education"], wide=True)
    pd.testing.assert_frame_equal(shuffled, before)
    assert wide.loc[1].tolist() == ["2", "4", "2", "3"]
    assert wide.loc[2].tolist() == ["2", "3", "2", "3"]
    long = first_last_states(shuffled, state_cols=["occupation", "education"])
    assert "occupation" not in long.columns and long.index.equals(shuffled.index)
    assert (long.groupby("person_id")["occupation_last"].nunique() == 1).all()
    assert long.loc[long.person_id == 1, "occupation_last"].eq("4").all()


def test_person_table_keys() -> None:
    ev = make_hdss(300, seed=9)
    people = person_table(ev)
    assert len(people) == 300
    assert (people["n_events"] == ev.groupby("person_id").size().to_numpy()).all()
    dead = set(ev.loc[ev["event"] == "death", "person_id"])
    assert set(people.loc[people["death_year"].notna(), "person_id"]) == dead
    last = ev.groupby("person_id")["education"].last().to_numpy()
    assert (people["education_last"].to_numpy() == last).all()
    assert people["date_birth"].notna().all()
