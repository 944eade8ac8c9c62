"""Key fingerprints taken from a table's grouping (linking/identity.key_hashes_from_groups) are
the fingerprints hashing every row gives, for every dtype it accepts; the others are left alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.linking import identity

N = 5_000


def _keys(kind: str, rng: np.random.Generator) -> pd.Series:
    words = rng.choice(["north", "south", "east", "west", "Ñandú", ""], N)
    if kind == "str":
        return pd.Series(words, dtype="string")
    if kind == "str_missing":
        s = pd.Series(words, dtype="string")
        s[rng.random(N) < 0.1] = pd.NA
        return s
    if kind == "int":
        return pd.Series(rng.integers(-3, 40, N))
    if kind == "bool":
        return pd.Series(rng.random(N) < 0.3)
    if kind == "datetime":
        return pd.Series(pd.to_datetime("2026-01-01") + pd.to_timedelta(rng.integers(0, 9, N), unit="D"))
    if kind == "categorical":
        return pd.Series(pd.Categorical(words, categories=["west", "east", "north", "south", "Ñandú", "", "x"]))
    if kind == "float":
        return pd.Series(rng.choice([0.0, -0.0, 1.5, np.nan], N))
    if kind == "object":
        return pd.Series(rng.choice([7, "7", "a"], N).tolist(), dtype=object)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["str", "str_missing", "int", "bool", "datetime", "categorical"])
@pytest.mark.parametrize("sort", [True, False])
def test_the_fingerprints_from_groups_are_those_of_the_rows(kind: str, sort: bool) -> None:
    rng = np.random.default_rng(len(kind))
    frame = pd.DataFrame({"k": _keys(kind, rng), "b": rng.integers(0, 4, N), "v": rng.random(N)})
    gb = frame.groupby(["k", "b"], sort=sort, observed=True)
    ids, index = gb.ngroup().fillna(-1).to_numpy(dtype=np.int64), gb.size().index
    identity.key_hashes_from_groups(frame, ["k", "b"], ids, index)
    for column in ("k", "b"):
        expected = identity.hash_column(frame[column].copy())
        assert np.array_equal(identity.frame_hash(frame, column), expected)


@pytest.mark.parametrize("kind", ["float", "object"])
def test_columns_whose_groups_merge_values_are_hashed_from_their_rows(kind: str) -> None:
    """Floats (0.0 and -0.0 are one group) and objects (typed by their column) are not taken from
    the groups: the cache stays empty for them and frame_hash hashes the rows."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"k": _keys(kind, rng).astype(str) if kind == "object" else _keys(kind, rng)})
    if kind == "object":
        frame["k"] = frame["k"].astype(object)
    gb = frame.groupby("k", sort=False, dropna=False)
    identity.key_hashes_from_groups(frame, ["k"], gb.ngroup().to_numpy(), gb.size().index)
    cached = identity._frame_hashes.get(frame) or {}
    assert "k" not in cached
    assert np.array_equal(identity.frame_hash(frame, "k"), identity.hash_column(frame["k"].copy()))


def test_a_grouping_of_other_rows_is_refused() -> None:
    """Group ids that are not this frame's (a shuffled copy's) do not give its fingerprints."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"k": _keys("str", rng)})
    gb = frame.groupby("k", sort=False)
    ids = gb.ngroup().to_numpy()
    identity.key_hashes_from_groups(frame, ["k"], rng.permutation(ids), gb.size().index)
    assert np.array_equal(identity.frame_hash(frame, "k"), identity.hash_column(frame["k"].copy()))


def test_fresh_hashes_are_read_again_in_every_new_display() -> None:
    """fresh_hash reuses hashes read from the values during the same display only: a value edited in
    place after it (a row the cache's 16-value stamp does not sample) is read again at the next one."""
    frame = pd.DataFrame({"income": np.arange(1_000, dtype=float)})
    identity.new_display()
    first = identity.frame_hash(frame, "income").copy()
    assert np.array_equal(identity.fresh_hash(frame, "income"), first)
    frame.loc[500, "income"] = -1.0  # (not one of the stamp's sampled rows)
    identity.new_display()
    again = identity.fresh_hash(frame, "income")
    assert not np.array_equal(again, first)
    assert np.array_equal(again, identity.hash_column(frame["income"].copy()))


def test_fingerprints_from_groups_are_never_taken_for_fresh_values() -> None:
    """Hashes from a call's grouping describe the rows when the call grouped them: fresh_hash reads
    the values again even within the display."""
    frame = pd.DataFrame({"k": pd.Series(["a", "b"] * 500, dtype="string")})
    gb = frame.groupby("k", sort=False)
    identity.new_display()
    identity.key_hashes_from_groups(frame, ["k"], gb.ngroup().to_numpy(), gb.size().index)
    frame.loc[3, "k"] = "z"
    assert np.array_equal(identity.fresh_hash(frame, "k"), identity.hash_column(frame["k"].copy()))


# ---- red team of stop 52 (helper-55): the grouping is not always the column's values
def _unsampled(n: int) -> list[int]:
    """Rows outside the 32 a sample-based check compared (the first version's; an attacker's choice)."""
    take = set(np.unique(np.linspace(0, n - 1, num=32).astype(int)).tolist())
    return [i for i in range(n) if i not in take]


def test_a_series_named_like_the_key_does_not_give_the_columns_fingerprints(sess, df) -> None:
    """Grouping by a Series named ``district`` that is not ``df.district`` (it agrees on the 32
    sampled rows) gave df.district's fingerprints from its labels: the later tables of the real
    column were other rows, and 37 + 36 - 40 - 30 = 3 (C) at pass (helper-55 06, 22, 30)."""
    from shown_cells import cleared

    fake = df.district.copy()
    fake[_unsampled(len(df))] = "A"
    sess.publish(df.groupby(fake).size())
    by_sex = sess.publish(df.groupby("sex").size())
    not_c = sess.publish(df.loc[df.district != "C", ["district"]].value_counts())
    assert not cleared(by_sex, not_c)


@pytest.mark.parametrize("make", [
    lambda df: df.groupby("district").size(),
    # through pivot_table: its nested groupby's grouping
    lambda df: df.pivot_table(index="district", columns="sex", values="income", aggfunc="count"),
], ids=["groupby", "pivot_table"])
def test_a_key_edited_between_the_call_and_the_display_is_hashed_as_it_is(sess, df, make) -> None:
    """The table's groups are the rows as they were at the call; a key column edited in place before
    the display must be fingerprinted from its current values (helper-55 08: A and B swapped on
    unsampled rows, then 73 - 35 - 35 = 3 at pass): the later tables of the edited column are
    still the same rows."""
    from shown_cells import cleared

    table = make(df)
    swap = [i for i in _unsampled(len(df)) if i < 70]
    df.loc[swap, "district"] = np.where(df.loc[swap, "district"] == "A", "B", "A")
    sess.publish(table)
    by_sex = sess.publish(df.groupby("sex").size())
    not_c = sess.publish(df.loc[df.district != "C", "district"].value_counts())
    assert not cleared(by_sex, not_c)


def test_fingerprints_from_groups_need_every_rows_label() -> None:
    """A grouping whose labels differ from the column on rows the sample does not see is refused."""
    rng = np.random.default_rng(9)
    frame = pd.DataFrame({"k": _keys("str", rng)})
    fake = frame["k"].copy()
    fake[_unsampled(len(frame))] = "north"
    gb = frame.groupby(fake, sort=False)
    identity.key_hashes_from_groups(frame, ["k"], gb.ngroup().to_numpy(), gb.size().index.rename("k"))
    assert np.array_equal(identity.frame_hash(frame, "k"), identity.hash_column(frame["k"].copy()))
