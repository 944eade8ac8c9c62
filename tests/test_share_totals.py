"""A table of shares tells its groups' totals: a share beside any count of its group gives it.

Red team of stop 67 (helper-90, L4 and L6): two filters' totals by sex (A or C: F 320; B or C: F
296), then a crosstab with margins whose joint audit hid the sex totals (F 614 would give C's 2
women: 320 + 296 − 614), then the row shares: F/child 226 shown in the counts and 0.368078 in the
shares give 226 / 0.368078 = 614. Linking took a share for its count and left the total unknown;
a table of shares now publishes the total of every group it shows a share of some rows in
(``sdc_magic.linking.share_totals``), and the joint audit hides shares until the totals it must
keep are told by none.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

BANDS = ["adult", "child", "older"]
FILTER_TOTALS = {"F": 320 + 296, "M": 283 + 307}  # C's women: 616 − 614 = 2, C's man: 590 − 589 = 1
TRUE_TOTALS = {"F": 614, "M": 589}


def _people(small_district: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    n = 1200
    df = pd.DataFrame({"district": rng.choice(["A", "B"], n), "sex": rng.choice(["F", "M"], n),
                       "band": rng.choice(BANDS, n)})
    if small_district:
        df = pd.concat([df, pd.DataFrame({"district": "C", "sex": ["F", "F", "M"], "band": ["child", "adult", "adult"]})],
                       ignore_index=True)
    return df


def _filters(session, df: pd.DataFrame) -> None:
    for districts in (["A", "C"], ["B", "C"]):
        out = session.publish(df[df.district.isin(districts)].groupby("sex").size())
        assert out.metadata["sdc_magic"]["status"] == "pass"


def _shown(out, row, col) -> float | None:
    """The value a display shows at (row label, column label), None when hidden."""
    frame = out.checked.frame
    i, j = frame.index.get_loc(row), frame.columns.get_loc(col)
    return None if out.checked.hidden[i, j] else float(frame.iloc[i, j])


def _totals_told(counts, shares) -> dict[str, set[int]]:
    """Per sex, the totals an attacker computes from a shown share and its shown count."""
    told: dict[str, set[int]] = {"F": set(), "M": set()}
    for sex in told:
        for band in BANDS:
            n, s = _shown(counts, sex, band), _shown(shares, sex, band)
            if n is not None and s:
                told[sex].add(round(n / s))
        if "All" in counts.checked.frame.columns and _shown(counts, sex, "All") is not None:
            told[sex].add(round(_shown(counts, sex, "All")))
    return told


@pytest.mark.parametrize("order", ["counts first", "shares first"])
def test_shares_beside_counts_do_not_give_the_hidden_totals_back(session, order) -> None:
    df = _people()
    _filters(session, df)
    counts_call = lambda: pd.crosstab(df.sex, df.band, margins=True)  # noqa: E731
    shares_call = lambda: pd.crosstab(df.sex, df.band, normalize="index")  # noqa: E731
    if order == "counts first":
        counts, shares = session.publish(counts_call()), session.publish(shares_call())
    else:
        shares, counts = session.publish(shares_call()), session.publish(counts_call())
    for out in (counts, shares):
        assert out.metadata["sdc_magic"]["status"] in ("pass", "suppressed"), out.data["text/plain"]
    told = _totals_told(counts, shares)
    for sex, total in TRUE_TOTALS.items():
        assert total not in told[sex], (sex, told, counts.data["text/plain"], shares.data["text/plain"])


def test_shares_by_group_of_value_counts_are_totals_too(session) -> None:
    df = _people()
    _filters(session, df)
    counts = session.publish(pd.crosstab(df.sex, df.band, margins=True))
    shares = session.publish(df.groupby("sex").band.value_counts(normalize=True))
    told: dict[str, set[int]] = {"F": set(), "M": set()}
    frame = shares.checked.frame
    column = frame.iloc[:, 0] if isinstance(frame, pd.DataFrame) else frame
    for (sex, band), hidden, share in zip(frame.index, shares.checked.hidden[:, 0], column, strict=True):
        n = _shown(counts, sex, band)
        if not hidden and n is not None and share:
            told[sex].add(round(n / share))
    assert TRUE_TOTALS["F"] not in told["F"] and TRUE_TOTALS["M"] not in told["M"], shares.data["text/plain"]


def test_a_duckdb_share_window_beside_its_count(session) -> None:
    duckdb = pytest.importorskip("duckdb")
    df = _people()
    _filters(session, df)
    out = session.publish(duckdb.sql("select sex, band, count(*) n, count(*) / sum(count(*)) over (partition by sex) p "
                                     "from df group by sex, band order by 1, 2").df())
    assert out.metadata["sdc_magic"]["status"] in ("pass", "suppressed"), out.data["text/plain"]
    frame, hidden = out.checked.frame, out.checked.hidden
    n_col, p_col = frame.columns.get_loc("n"), frame.columns.get_loc("p")
    for sex, total in TRUE_TOTALS.items():
        rows = np.flatnonzero(frame["sex"].to_numpy() == sex)
        told = {round(frame.iloc[r, n_col] / frame.iloc[r, p_col]) for r in rows
                if not hidden[r, n_col] and not hidden[r, p_col] and frame.iloc[r, p_col]}
        if not hidden[rows, n_col].any():
            told.add(int(frame.iloc[rows, n_col].sum()))
        assert total not in told, (sex, out.data["text/plain"])


def test_shares_and_counts_of_large_groups_stay_shown(session) -> None:
    """Over-protection: with no small group anywhere, the shares and the counts show every cell."""
    df = _people(small_district=False)
    _filters(session, df)
    for call in (lambda: pd.crosstab(df.sex, df.band, margins=True),
                 lambda: pd.crosstab(df.sex, df.band, normalize="index"),
                 lambda: df.groupby("sex").band.value_counts(normalize=True)):
        out = session.publish(call())
        assert out.metadata["sdc_magic"]["status"] == "pass", out.data["text/plain"]
        assert not out.checked.hidden.any()


def test_the_totals_a_share_table_tells_are_remembered_after_a_restart(humanitarian_sessions, tmp_path) -> None:
    """The linking memory keeps what a table of shares tells. A first kernel shows the row shares
    (a rare band of 2 women and 3 men hidden with another cell per row, so no row's cells add up to
    its total) and the counts by sex of a band shown in both rows: count / share gives each total. After a
    restart, the two filters' totals shown next must not both show F (their sum minus that total
    is C's 2 women), nor both show M."""
    df = pd.concat([_people(), pd.DataFrame({"district": "A", "sex": ["F", "F", "M", "M", "M"], "band": "rare"})],
                   ignore_index=True)
    first = humanitarian_sessions(tmp_path)
    shares = first.publish(pd.crosstab(df.sex, df.band, normalize="index"))
    assert shares.checked.hidden.sum(axis=1).tolist() == [2, 2]
    band = shares.checked.frame.columns[~shares.checked.hidden.any(axis=0)][0]  # (shown in both rows)
    counts = first.publish(df[df.band == band].groupby("sex").size())
    assert not counts.checked.hidden.any()
    second = humanitarian_sessions(tmp_path)
    shown = [second.publish(df[df.district.isin(districts)].groupby("sex").size()) for districts in (["A", "C"], ["B", "C"])]
    for sex in ("F", "M"):
        visible = [out.metadata["sdc_magic"]["status"] != "blocked"
                   and not out.checked.hidden[out.checked.frame.index.get_loc(sex)].any() for out in shown]
        assert not all(visible), (sex, [out.data["text/plain"] for out in shown])


def test_linking_levels_told_by_shares() -> None:
    """The levels a table's shares tell, by the names of the population's keys; shares whose
    groups are no level of the keys make every margin told (never less than the shares tell)."""
    from types import SimpleNamespace

    from sdc_magic.linking.share_totals import levels_told

    assert levels_told(SimpleNamespace(normalized=("sex",)), ("sex", "band")) == ((("sex",),), False)
    assert levels_told(SimpleNamespace(normalized=()), ("sex", "band")) == (((),), False)
    assert levels_told(SimpleNamespace(normalized=None, totals_shown=(("band", "sex"),)), ("sex", "band")) \
        == ((("sex", "band"),), False)
    assert levels_told(SimpleNamespace(normalized=("region",)), ("sex", "band")) == ((), True)
    assert levels_told(SimpleNamespace(normalized=None), ("sex",)) == ((), False)


# ---- the red team of the change (helper-92, stop 68)
def _pairs_told(counts, shares, cells) -> set[int]:
    """Totals ``count / share`` of the given (row, column) cells shown in both displays."""
    out = set()
    for row, col in cells:
        n, s = _shown(counts, row, col), _shown(shares, row, col)
        if n is not None and s:
            out.add(round(n / s))
    return out


@pytest.mark.parametrize("call", [
    'pd.crosstab(df.sex, df.band, normalize=True)',  # (True == 1 was read as "columns")
    'pd.crosstab(df.band, df.sex, normalize=np.True_).T',  # (pandas: a numpy bool is an axis, np.True_ the columns)
    'pd.crosstab(df.sex, df.band, normalize="all", margins=True)',  # (its All row: 416 / 0.345802)
    'pd.crosstab(df.sex, df.band, normalize=True, margins=True)',
])
def test_shares_of_the_whole_do_not_give_the_grand_total_back(session, call) -> None:
    df = _people()
    _filters(session, df)  # (A or C: 603 people, B or C: 603; everyone is 1,203: C = 3)
    counts = session.publish(pd.crosstab(df.sex, df.band, margins=True))
    shares = session.publish(eval(call, {"pd": pd, "np": np, "df": df}))
    cells = [(r, c) for r in ("F", "M", "All") for c in (*BANDS, "All")
             if r in shares.checked.frame.index and c in shares.checked.frame.columns and (r, c) != ("All", "All")]
    assert 1203 not in _pairs_told(counts, shares, cells), shares.data["text/plain"]


@pytest.mark.parametrize("call", [
    'pd.crosstab(df.sex, df.band, values=df.one, aggfunc="sum", normalize="index")',
    'pd.crosstab(df.sex, df.band, normalize=np.False_)',  # (pandas: np.False_ is the rows' axis)
])
def test_row_shares_in_other_words(session, call) -> None:
    df = _people().assign(one=1)
    _filters(session, df)
    counts = session.publish(pd.crosstab(df.sex, df.band, margins=True))
    shares = session.publish(eval(call, {"pd": pd, "np": np, "df": df}))
    for sex, total in TRUE_TOTALS.items():
        assert total not in _pairs_told(counts, shares, [(sex, b) for b in BANDS]), shares.data["text/plain"]


@pytest.mark.parametrize("engine", ["duckdb", "polars", "polars count"])
@pytest.mark.parametrize("missing", [False, True])
def test_a_sum_over_the_count_is_a_share(session, engine, missing) -> None:
    """``sum(child) / count(*)`` by sex was checked as the sum of ``child`` and passed whole:
    226 / 0.368078 = 614 (red team of stop 68). It is planned as the mean over every row of the
    group, a missing value counting 0 (``missing``: the flag unknown for 6 people of district A,
    which the mean of ``child`` leaves out while ``count(*)`` does not: helper-93); polars
    ``sum() / count()`` of the flag is its mean (it passed as a sum)."""
    df = _people().assign(child=lambda d: (d.band == "child").astype(float))
    if missing:
        df.loc[df.index[(df.district == "A") & (df.band == "adult")][:6], "child"] = np.nan
    _filters(session, df)
    counts = session.publish(pd.crosstab(df.sex, df.band, margins=True))  # (children shown, sex totals hidden)
    if engine == "duckdb":
        duckdb = pytest.importorskip("duckdb")
        con = duckdb.connect()
        con.register("people", df)
        out = session.publish(con.sql("select sex, sum(child) / count(*) p from people group by sex order by 1").df())
        values = dict(zip(out.checked.frame["sex"], out.checked.frame["p"], strict=True))
        hidden = dict(zip(out.checked.frame["sex"], out.checked.hidden[:, 1], strict=True))
    else:
        pl = pytest.importorskip("polars")
        frame = pl.from_pandas(df, nan_to_null=True)
        over = pl.len() if engine == "polars" else pl.col("child").count()
        out = session.publish(frame.group_by("sex").agg((pl.col("child").sum() / over).alias("p")).sort("sex"))
        values = dict(zip(out.checked.frame["sex"], out.checked.frame["p"], strict=True))
        hidden = dict(zip(out.checked.frame["sex"], out.checked.hidden[:, 1], strict=True))
    for sex, total in TRUE_TOTALS.items():
        children = _shown(counts, sex, "child")
        assert children is not None, counts.data["text/plain"]
        # (polars ``sum / count`` with flags missing is their mean over the known ones: n / share is
        # then the count of known flags, 584 men of 589, which gives no small group here)
        assert hidden[sex] or round(children / values[sex]) != total, out.data["text/plain"]


def test_counts_then_their_row_shares_hide_the_same_cells(session) -> None:
    """Over-protection the change first made (helper-92, O1): a crosstab's counts, then its row
    shares, were two tables; the shares' differencing made the counts' secondaries primary and
    the shares were blocked whole. They are the same table again (the joint audit still compares
    what the shares tell besides)."""
    df = _people()
    counts = session.publish(pd.crosstab(df.district, df.sex))
    shares = session.publish(pd.crosstab(df.district, df.sex, normalize="index"))
    assert counts.metadata["sdc_magic"]["status"] == shares.metadata["sdc_magic"]["status"] == "suppressed"
    assert np.array_equal(counts.checked.hidden, shares.checked.hidden)
