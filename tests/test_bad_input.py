"""Bad input, fault injection and transparency of the wrappers, in an in-process IPython.

Bad input must give a clear message or a safe rendering: no crash, no leak of a small
cell, and the user's objects untouched (compared with deep copies, ``attrs`` included).
The tests hold before and after secondary protection is merged: primary cells must be
hidden, extra (secondary) hidden cells are allowed, and a table with hidden cells is
never ``pass``.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _nbutil import HIDDEN, STATUSES, check_html_cells, mask_frame, small
from conftest import Ran, Shell
from pandas.api.typing import DataFrameGroupBy, SeriesGroupBy

from sdc_magic.datasets import make_referrals

GROUPBY_NAMES = (
    "size", "count", "sum", "mean", "median", "min", "max", "std", "var", "sem", "first", "last",
    "quantile", "agg", "aggregate", "describe", "value_counts", "nunique", "__getitem__",
)


@pytest.fixture(scope="module")
def referrals() -> pd.DataFrame:
    return make_referrals()


# --------------------------------------------------------------------------- helpers
def snapshot(ns: dict[str, Any], names: list[str]) -> dict[str, Any]:
    return {n: (copy.deepcopy(ns[n]), copy.deepcopy(getattr(ns[n], "attrs", None))) for n in names}


def assert_untouched(ns: dict[str, Any], before: dict[str, Any]) -> None:
    for name, (obj, attrs) in before.items():
        now = ns[name]
        if isinstance(obj, pd.DataFrame):
            pd.testing.assert_frame_equal(now, obj, check_dtype=True, check_exact=True)
            assert list(now.columns) == list(obj.columns)
        elif isinstance(obj, pd.Series):
            pd.testing.assert_series_equal(now, obj, check_dtype=True, check_exact=True)
        if attrs is not None:
            assert now.attrs == attrs, f"{name}.attrs changed: {now.attrs!r} (was {attrs!r})"


PAYLOAD = "application/vnd.sdc-magic.v1+json"


def assert_safe_table(ran: Ran, true_obj: Any, primary: Any, where: str) -> dict[str, Any]:
    """One checked output; primary cells are the marker; shown cells are true; status coherent."""
    assert ran.error is None, f"{where}: {ran.error!r}"
    meta = ran.meta
    data = ran.data
    assert meta["status"] in STATUSES
    assert set(data) <= {"text/plain", "text/html", PAYLOAD}, sorted(data)
    mask = mask_frame(primary)
    result = check_html_cells(data["text/html"], true_obj, mask, where)
    if PAYLOAD in data:  # our renderer's data: every primary cell shown is the marker there too
        for row in data[PAYLOAD]["table"]["rows"]:
            for j, cell in enumerate(row["cells"]):
                if j < mask.shape[1] and mask[row["i"], j]:
                    assert cell == HIDDEN, f"{where}: primary cell [{row['i']}, {j}] is {cell!r} in the payload"
    if mask.any() or meta["hidden"]:
        assert meta["status"] != "pass", f"{where}: pass with hidden or primary cells"
    assert data["text/plain"].count(HIDDEN) >= result.displayed_primary
    json.dumps(meta, allow_nan=False)  # metadata travels as strict JSON in the Jupyter protocol
    return meta


def show(sdc: Shell, expr: str) -> Ran:
    return sdc.run(expr, raise_error=False)


# --------------------------------------------------------------------------- NaN keys
@pytest.mark.parametrize("dropna", [True, False])
def test_nan_group_keys(sdc: Shell, referrals: pd.DataFrame, dropna: bool) -> None:
    d = referrals.assign(served=referrals.days_to_first_service.map(
        lambda x: np.nan if pd.isna(x) else ("fast" if x <= 14 else "slow")))
    d.attrs["source"] = "synthetic"
    sdc.ns.update(d=d, pd=pd)
    before = snapshot(sdc.ns, ["d"])
    code = f"d.groupby(['case_category', 'served', 'sex'], dropna={dropna}).size().unstack()"
    truth = d.groupby(["case_category", "served", "sex"], dropna=dropna).size().unstack()
    ran = show(sdc, code)
    meta = assert_safe_table(ran, truth, small(truth), code)
    if not dropna:
        assert truth.index.get_level_values("served").isna().any()
        assert meta["kind"] == "table", meta.get("notes")
    assert_untouched(sdc.ns, before)


def test_nan_in_one_value_column_pivot_margins(sdc: Shell, referrals: pd.DataFrame) -> None:
    """pandas computes pivot_table margins only from rows with no missing value in *any*
    value column (dropna=True): a margin can then be a small count although its cells are not."""
    sdc.ns.update(df=referrals, pd=pd)
    code = ("df.pivot_table(index=['admin2', 'case_category'], columns='sex', "
            "values=['age', 'days_to_first_service'], aggfunc='count', margins=True)")
    truth = referrals.pivot_table(index=["admin2", "case_category"], columns="sex",
                                  values=["age", "days_to_first_service"], aggfunc="count", margins=True)
    assert truth.loc[("Mirebalais", "Child protection"), ("age", "All")] == 4  # a small margin
    assert_safe_table(show(sdc, code), truth, small(truth), code)


# --------------------------------------------------------------------------- negative values
def test_negative_values_sum_needs_review(sdc: Shell) -> None:
    d = pd.DataFrame({"g": ["a"] * 6 + ["b"] * 6, "v": [10.0, -3, 5, 7, 2, 1, 4, 4, 4, 4, 4, 4]})
    d.attrs["unit"] = "EUR"
    sdc.ns.update(d=d)
    before = snapshot(sdc.ns, ["d"])
    ran = show(sdc, "d.groupby('g')['v'].sum()")
    truth = d.groupby("g")["v"].sum()
    meta = assert_safe_table(ran, truth, pd.Series(False, index=truth.index), "negative sum")
    assert meta["status"] == "review", meta
    rules = {r["rule"] for item in meta["reasons"] for r in item["reasons"]}
    assert "negative" in rules, meta["reasons"]
    negative_cells = [item["cell"][0] for item in meta["reasons"]
                      if any(r["rule"] == "negative" for r in item["reasons"])]
    assert negative_cells == ["a"], negative_cells
    assert_untouched(sdc.ns, before)


# --------------------------------------------------------------------------- mixed dtypes
def test_mixed_dtype_key_column(sdc: Shell) -> None:
    d = pd.DataFrame({"k": [1, "a", 2, "a", 1, "a", 2, 1, 1, "a", "a", 1] * 2, "v": range(24)}, dtype=object)
    d["v"] = d["v"].astype(int)
    sdc.ns.update(d=d)
    before = snapshot(sdc.ns, ["d"])
    truth = d.groupby("k").size()
    ran = show(sdc, "d.groupby('k').size()")
    assert_safe_table(ran, truth, small(truth), "mixed key")
    ran = show(sdc, "d.k.value_counts()")
    # (drawn in label order, as text: two published counts cannot show that counts order the rows,
    # checking/row_order.py)
    vc = d.k.value_counts().sort_index(key=lambda labels: labels.map(str))
    assert_safe_table(ran, vc, small(vc), "mixed value_counts")
    assert_untouched(sdc.ns, before)


def test_mixed_dtype_value_column(sdc: Shell) -> None:
    """An object column of ints and strings: pandas' own error for sum, a safe count."""
    m = pd.DataFrame({"g": list("aaaaaabbbbbbcc"), "x": [1, "two", 3, 4.5, None, "6", 1, 2, 3, 4, 5, 6, 1, 2]})
    sdc.ns.update(m=m)
    before = snapshot(sdc.ns, ["m"])
    ran = sdc.run("m.groupby('g')['x'].sum()", raise_error=False)
    assert isinstance(ran.error, TypeError), ran.error  # exactly pandas' behaviour
    assert not ran.tables
    truth = m.groupby("g")["x"].count()
    ran = show(sdc, "m.groupby('g')['x'].count()")
    assert_safe_table(ran, truth, small(truth), "mixed count")
    ran = show(sdc, "m")  # row-level with a mixed column: shown with its banner, never exportable
    assert ran.error is None
    assert ran.meta["status"] == "blocked" and ran.meta["kind"] == "row-level", ran.meta
    assert_untouched(sdc.ns, before)


# --------------------------------------------------------------------------- empty
@pytest.mark.parametrize("expr", [
    "d.iloc[:0].groupby('a').size()",
    "d.iloc[:0].groupby(['a', 'b']).size().unstack()",
    "pd.DataFrame()",
    "pd.Series(dtype=float)",
    "pd.crosstab(d.a.iloc[:0], d.b.iloc[:0])",
    "d.iloc[:0]",
])
def test_empty(sdc: Shell, expr: str) -> None:
    d = pd.DataFrame({"a": list("xxyy"), "b": list("pqpq"), "v": [1.0, 2, 3, 4]})
    sdc.ns.update(d=d, pd=pd)
    before = snapshot(sdc.ns, ["d"])
    ran = show(sdc, expr)
    assert ran.error is None, ran.error
    meta = ran.meta
    assert meta["status"] in STATUSES
    assert meta["hidden"] == 0
    assert "text/html" in ran.data and "text/plain" in ran.data
    json.dumps(meta, allow_nan=False)
    assert_untouched(sdc.ns, before)


# --------------------------------------------------------------------------- MultiIndex
def test_multiindex_rows_and_columns(sdc: Shell, referrals: pd.DataFrame) -> None:
    sdc.ns.update(df=referrals, pd=pd)
    before = snapshot(sdc.ns, ["df"])
    code = "pd.crosstab([df.admin2, df.case_category], [df.age_band, df.sex])"
    truth = pd.crosstab([referrals.admin2, referrals.case_category], [referrals.age_band, referrals.sex])
    assert isinstance(truth.index, pd.MultiIndex) and isinstance(truth.columns, pd.MultiIndex)
    assert_safe_table(show(sdc, code), truth, small(truth), code)
    code = "df.groupby(['admin2', 'case_category', 'age_band', 'sex']).size().unstack(['age_band', 'sex'])"
    truth = referrals.groupby(["admin2", "case_category", "age_band", "sex"]).size().unstack(["age_band", "sex"])
    assert_safe_table(show(sdc, code), truth, small(truth), code)
    assert_untouched(sdc.ns, before)


# --------------------------------------------------------------------------- categoricals
def _categorical_frame() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame({
        "site": pd.Categorical(rng.choice(["A", "B"], 200), categories=["A", "B", "C"]),
        "band": pd.Categorical(rng.choice(["young", "old"], 200), categories=["young", "old", "unknown"]),
    })


def test_categorical_unused_categories_zeros(sdc: Shell) -> None:
    d = _categorical_frame()
    sdc.ns.update(d=d)
    before = snapshot(sdc.ns, ["d"])
    code = "d.groupby(['site', 'band'], observed=False).size().unstack()"
    truth = d.groupby(["site", "band"], observed=False).size().unstack()
    assert (truth == 0).sum().sum() == 5 and not small(truth).any().any()
    meta = assert_safe_table(show(sdc, code), truth, small(truth), "zeros allowed")
    assert meta["status"] == "pass", meta  # zeros are allowed by the default preset
    assert meta["hidden"] == 0

    out = sdc.magic("sdc rules zeros=suppress")
    assert "zeros hidden" in out.stdout
    ran = show(sdc, code)
    zero = truth == 0
    meta = assert_safe_table(ran, truth, zero, "zeros suppressed")
    assert meta["status"] != "pass"
    hidden = {tuple(r["position"]) for r in meta["reasons"] if r["hidden"]}
    for i, j in zip(*np.nonzero(zero.to_numpy()), strict=True):
        assert (int(i), int(j)) in hidden
    rules = {r["rule"] for item in meta["reasons"] for r in item["reasons"]}
    assert "zero" in rules
    assert_untouched(sdc.ns, before)


# --------------------------------------------------------------------------- duplicated labels
def test_duplicated_row_labels(sdc: Shell, referrals: pd.DataFrame) -> None:
    t = referrals.groupby(["case_category", "age_band", "sex"]).size().unstack()
    sdc.ns.update(t=t, pd=pd)
    before = snapshot(sdc.ns, ["t"])
    # (drawn in label order, repeated labels in their order: checking/row_order.py)
    truth = pd.concat([t, t]).sort_index(kind="stable")
    assert not truth.index.is_unique and small(truth).any().any()
    assert_safe_table(show(sdc, "pd.concat([t, t])"), truth, small(truth), "concat rows")
    assert_untouched(sdc.ns, before)


def test_duplicated_column_names(sdc: Shell, referrals: pd.DataFrame) -> None:
    t = referrals.groupby(["case_category", "age_band", "sex"]).size().unstack()
    sdc.ns.update(t=t, pd=pd)
    before = snapshot(sdc.ns, ["t"])
    truth = pd.concat([t, t], axis=1)
    assert not truth.columns.is_unique
    assert_safe_table(show(sdc, "pd.concat([t, t], axis=1)"), truth, small(truth), "concat columns")
    renamed = t.set_axis(["x", "x"], axis=1)
    sdc.ns["r"] = renamed
    assert_safe_table(show(sdc, "r"), renamed, small(renamed), "duplicated names")
    assert_untouched(sdc.ns, before)


# --------------------------------------------------------------------------- a million cells
BIG_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np, pandas as pd
    from IPython.testing import globalipapp
    from IPython.utils.capture import capture_output
    globalipapp.start_ipython()
    ip = globalipapp.get_ipython()
    with capture_output():
        ip.run_line_magic('load_ext', 'sdc_magic')
    ip.user_ns.update(np=np, pd=pd)
    ip.run_cell(sys.argv[1])
    t0 = time.perf_counter()
    with capture_output() as cap:
        res = ip.run_cell(sys.argv[2])
    elapsed = time.perf_counter() - t0
    out = [{"mimes": sorted(o.data), "meta": o.metadata.get("sdc_magic"), "html_len": len(o.data.get("text/html", "")),
            "plain": o.data.get("text/plain", "")[:4000]} for o in cap.outputs]
    print(json.dumps({"elapsed": elapsed, "error": repr(res.error_in_exec), "outputs": out}, default=str))
""")

BIG_CASES = {
    # 1,000 x 1,000 after unstack, every cell 5 cases: nothing to hide
    "unstack_1000x1000_no_small": (
        "big = pd.DataFrame({'a': np.repeat(np.arange(1000), 5000), 'b': np.tile(np.arange(1000), 5000)})\n"
        "t = big.groupby(['a', 'b']).size().unstack()",
        "t", 0),
    # a 1e6-row Series result, every cell one case: everything must be hidden
    "series_1e6_all_small": (
        "ids = pd.Series(np.arange(1_000_000))\nvc = ids.value_counts()",
        "vc", 1_000_000),
}


@pytest.mark.parametrize("case", list(BIG_CASES))
def test_million_cell_table(case: str) -> None:
    """Runs in a subprocess with a watchdog, so that a hang fails the test instead of the suite."""
    setup, expr, primary = BIG_CASES[case]
    env = dict(os.environ, SDC_MAGIC_CONFIG="")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", BIG_SCRIPT, setup, expr], capture_output=True, text=True,
                              timeout=240, env=env, cwd=str(os.path.dirname(__file__)))
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}: displaying a 1,000,000-cell table did not finish within 240 s")
    print(f"{case}: subprocess {time.perf_counter() - t0:.1f} s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"{case}: display took {result['elapsed']:.1f} s")
    assert result["error"] == "None", result["error"]
    assert len(result["outputs"]) == 1, result
    out = result["outputs"][0]
    assert out["mimes"] == sorted(["text/html", "text/plain", PAYLOAD])
    meta = out["meta"]
    assert meta["status"] in STATUSES and meta["cells"] == 1_000_000
    assert out["html_len"] < 2_000_000, "a huge table must be rendered truncated"
    if primary:
        assert meta["status"] != "pass"
        assert meta["hidden"] >= primary
        body = out["plain"].split("sdc_magic:")[0]
        values = [line.split()[-1] for line in body.splitlines()[1:] if line.strip() and ".." not in line
                  and not line.startswith(("Name:", "["))]  # ".." / "..." are pandas' truncation rows
        assert values and all(v == HIDDEN for v in values), values[:10]


# --------------------------------------------------------------------------- fault injection
FAULTS = [
    "sdc_magic.jupyter.session.check",
    "sdc_magic.jupyter.session.render_html",
    "sdc_magic.jupyter.session.render_plain",
    "sdc_magic.rules.assess",
    "sdc_magic.outputs.render.protected_frame",
]


@pytest.mark.parametrize("target", FAULTS)
def test_fault_injection_fails_closed(sdc: Shell, monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    secret = pd.DataFrame({"x": [7919, 3], "y": [104729, 2]}, index=pd.Index(["p", "q"], name="g"))
    secret.columns.name = "h"
    sdc.ns["secret"] = secret
    before = snapshot(sdc.ns, ["secret"])

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom: injected fault 7919")

    monkeypatch.setattr(target, boom)
    for code in ("secret", "display(secret)", "secret.style", "[secret]"):
        ran = sdc.run(code, raise_error=False)
        assert ran.error is None, f"{code}: {ran.error!r}"
        text = ran.everything
        assert "7919" not in text and "104729" not in text, f"{code}: raw value or error text leaked: {text[:800]}"
        assert "boom" not in text
        assert "withheld" in text, f"{code}: no placeholder: {text[:500]}"
        if code != "[secret]":
            meta = ran.meta
            assert meta["status"] == "blocked", meta
            assert "<table" not in ran.data["text/html"]
    debug = sdc.magic("sdc debug")
    assert "Traceback" in debug.stdout and "boom: injected fault" in debug.stdout, debug.stdout[:500]
    monkeypatch.undo()
    ran = show(sdc, "secret")  # back to normal once the fault is gone
    assert ran.meta["status"] in STATUSES and "withheld" not in ran.data["text/plain"]
    assert_untouched(sdc.ns, before)


# --------------------------------------------------------------------------- magics
def test_load_twice_is_harmless(shell: Shell, referrals: pd.DataFrame) -> None:
    import sdc_magic

    shell.magic("load_ext sdc_magic")
    shell.magic("load_ext sdc_magic")
    out = shell.magic("reload_ext sdc_magic")
    assert "Traceback" not in out.stdout + out.stderr
    sdc_magic.load_ipython_extension(shell.ip)  # a second direct load: a message, no second install
    shell.ns.update(df=referrals)
    ran = shell.run("df.groupby(['admin2', 'sex']).size()")
    assert len(ran.tables) == 1, "one display must give exactly one output"
    shell.magic("unload_ext sdc_magic")
    assert not getattr(pd.DataFrame.describe, "__sdc_magic_wrapper__", False)
    assert not getattr(DataFrameGroupBy.size, "__sdc_magic_wrapper__", False)


@pytest.mark.parametrize(("line", "key"), [
    ("threshold=abc", "threshold"),
    ("nonsense=1", "nonsense"),
    ("threshold=0", "threshold"),
    ("zeros=maybe", "zeros"),
    ("dominance=1", "dominance"),
    ("threshold", "threshold"),
])
def test_bad_rules_name_the_key(sdc: Shell, line: str, key: str | None) -> None:
    from sdc_magic.config import RulesError

    before = sdc.magic("sdc rules").stdout.splitlines()[0]
    if key is None:  # structural-zero list syntax: accepted
        sdc.magic(f"sdc rules {line}")
        return
    with pytest.raises(RulesError) as err:
        sdc.magic(f"sdc rules {line}")
    assert key in str(err.value), str(err.value)
    after = sdc.magic("sdc rules").stdout.splitlines()[0]
    assert after == before, "a rejected change must leave the rules as they were"
    ran = sdc.run(f"%sdc rules {line}", raise_error=False)  # in a cell: an error, the kernel lives on
    assert isinstance(ran.error, RulesError)


# --------------------------------------------------------------------------- transparency
ENTRY_POINTS: dict[str, Callable[[pd.DataFrame], Any]] = {
    "gb.size": lambda d: d.groupby(["admin2", "sex"]).size(),
    "gb.size.as_index_false": lambda d: d.groupby(["admin2", "sex"], as_index=False).size(),
    "gb.size.dropna_false": lambda d: d.groupby(["served", "sex"], dropna=False).size(),
    "gb.count": lambda d: d.groupby("admin2").count(),
    "gb.sum": lambda d: d.groupby("admin2")[["age", "days_to_first_service"]].sum(),
    "gb.mean": lambda d: d.groupby(["admin2", "sex"])[["age", "days_to_first_service"]].mean(),
    "gb.median": lambda d: d.groupby("admin2")["age"].median(),
    "gb.min": lambda d: d.groupby("admin2")["age"].min(),
    "gb.max": lambda d: d.groupby("admin2").max(numeric_only=True),
    "gb.std": lambda d: d.groupby("admin2")["days_to_first_service"].std(),
    "gb.var": lambda d: d.groupby("admin2")[["age"]].var(ddof=0),
    "gb.sem": lambda d: d.groupby("admin2")["age"].sem(),
    "gb.first": lambda d: d.groupby("admin2")["age"].first(),
    "gb.last": lambda d: d.groupby("admin2").last(),
    "gb.quantile": lambda d: d.groupby("admin2")["age"].quantile([0.25, 0.75]),
    "gb.agg.str": lambda d: d.groupby("admin2")["age"].agg("mean"),
    "gb.agg.list": lambda d: d.groupby("admin2")["age"].agg(["mean", "min", np.max]),
    "gb.agg.dict": lambda d: d.groupby("admin2").agg({"age": "mean", "days_to_first_service": ["count", "max"]}),
    "gb.agg.named": lambda d: d.groupby("admin2").agg(n=("case_id", "count"), m=("age", "mean")),
    "gb.agg.series_named": lambda d: d.groupby("admin2")["age"].agg(lo="min", hi="max"),
    "gb.agg.lambda": lambda d: d.groupby("admin2")["age"].agg(lambda s: s.max() - s.min()),
    "gb.aggregate": lambda d: d.groupby("sex").aggregate({"age": "sum"}),
    "gb.describe": lambda d: d.groupby("admin2")["age"].describe(),
    "gb.describe.frame": lambda d: d.groupby("sex")[["age", "days_to_first_service"]].describe(),
    "gb.value_counts": lambda d: d.groupby("admin2")["sex"].value_counts(),
    "gb.value_counts.normalize": lambda d: d.groupby("admin2")["sex"].value_counts(normalize=True),
    "gb.value_counts.frame": lambda d: d.groupby("admin2")[["sex", "age_band"]].value_counts(),
    "gb.nunique": lambda d: d.groupby("admin2")["household_id"].nunique(),
    "gb.nunique.frame": lambda d: d.groupby("admin2").nunique(),
    "gb.getitem.list": lambda d: d.groupby("sex")[["age"]].mean(),
    "series.value_counts": lambda d: d.admin2.value_counts(),
    "series.value_counts.normalize": lambda d: d.admin2.value_counts(normalize=True),
    "series.value_counts.dropna_false": lambda d: d.served.value_counts(dropna=False),
    "series.value_counts.bins": lambda d: d.age.value_counts(bins=4),
    "series.value_counts.positional": lambda d: d.sex.value_counts(False, True, False),
    "frame.value_counts": lambda d: d[["admin2", "sex"]].value_counts(),
    "frame.value_counts.subset": lambda d: d.value_counts(subset=["admin2", "sex"], normalize=True),
    "frame.value_counts.dropna_false": lambda d: d[["served", "sex"]].value_counts(dropna=False),
    "crosstab": lambda d: pd.crosstab(d.admin2, d.sex),
    "crosstab.margins": lambda d: pd.crosstab([d.admin2, d.case_category], d.sex, margins=True),
    "crosstab.normalize": lambda d: pd.crosstab(d.admin2, d.sex, normalize=True),
    "crosstab.normalize.index": lambda d: pd.crosstab(d.admin2, d.sex, normalize="index", margins=True),
    "crosstab.normalize.columns": lambda d: pd.crosstab(d.admin2, d.sex, normalize="columns"),
    "crosstab.values": lambda d: pd.crosstab(d.admin2, d.sex, values=d.age, aggfunc="mean"),
    "crosstab.dropna_false": lambda d: pd.crosstab(d.served, d.sex, dropna=False),
    "crosstab.arrays": lambda d: pd.crosstab(d.sex.to_numpy(), d.age_band.to_numpy()),
    "pivot_table": lambda d: d.pivot_table(index="admin2", columns="sex", values="age"),
    "pivot_table.margins": lambda d: d.pivot_table(index="admin2", columns="sex", values="age", aggfunc="sum",
                                                   margins=True),
    "pivot_table.multi": lambda d: d.pivot_table(index="admin2", columns="sex", values=["age", "days_to_first_service"],
                                                 aggfunc=["mean", "count"]),
    "pivot_table.fill_value": lambda d: d.pivot_table(index="case_category", columns="age_band", values="age",
                                                      aggfunc="count", fill_value=0),
    "pivot_table.function": lambda d: pd.pivot_table(d, index="admin2", values="age", aggfunc="median"),
    "pivot_table.function_kw": lambda d: pd.pivot_table(data=d, index=["sex"], columns=["age_band"], values="age",
                                                        aggfunc=len),
    "frame.describe": lambda d: d.describe(),
    "frame.describe.all": lambda d: d.describe(include="all"),
    "series.describe": lambda d: d.age.describe(),
    "series.describe.object": lambda d: d.admin2.describe(),
}


def _transparency_frame(referrals: pd.DataFrame) -> pd.DataFrame:
    d = referrals.assign(served=referrals.days_to_first_service.map(
        lambda x: np.nan if pd.isna(x) else ("fast" if x <= 14 else "slow")))
    d.attrs["source"] = "synthetic referrals"
    return d


def _assert_same(got: Any, want: Any) -> None:
    assert type(got) is type(want)
    if isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want, check_dtype=True, check_exact=True)
    elif isinstance(want, pd.Series):
        pd.testing.assert_series_equal(got, want, check_dtype=True, check_exact=True)
    else:
        assert got == want
    assert getattr(got, "attrs", None) == getattr(want, "attrs", None)


def test_results_identical_with_extension(shell: Shell, referrals: pd.DataFrame) -> None:
    from sdc_magic.jupyter import extension

    d = _transparency_frame(referrals)
    before = {name: f(d.copy(deep=True)) for name, f in ENTRY_POINTS.items()}
    untouched = copy.deepcopy(d)
    shell.magic("load_ext sdc_magic")
    sess = extension.session()
    failures_before = len(sess.registry.failures)
    entries_before = len(sess.registry)
    mismatches = []
    for name, f in ENTRY_POINTS.items():
        try:
            _assert_same(f(d), before[name])
        except AssertionError as exc:
            mismatches.append(f"{name}: {exc}")
    assert not mismatches, "\n".join(mismatches)
    pd.testing.assert_frame_equal(d, untouched)
    assert d.attrs == untouched.attrs
    assert len(sess.registry) > entries_before, "the wrappers recorded nothing"
    new_failures = sess.registry.failures[failures_before:]
    assert not new_failures, f"evidence recording failed for some entry points: {new_failures[:5]}"


def _patched_attributes() -> dict[tuple[Any, str], tuple[bool, Any, Any]]:
    """(owner, name) -> (defined on owner, owner.__dict__ value, getattr value)."""
    out: dict[tuple[Any, str], tuple[bool, Any, Any]] = {}
    owners: list[tuple[Any, tuple[str, ...]]] = [
        (DataFrameGroupBy, GROUPBY_NAMES), (SeriesGroupBy, GROUPBY_NAMES),
        (pd.DataFrame, ("describe", "value_counts", "pivot_table", "__str__", "__repr__", "_repr_html_")),
        (pd.Series, ("describe", "value_counts", "__str__", "__repr__")),
    ]
    for owner, names in owners:
        for name in names:
            out[(owner, name)] = (name in owner.__dict__, owner.__dict__.get(name), getattr(owner, name, None))
    for name in ("crosstab", "pivot_table"):
        out[(pd, name)] = (True, getattr(pd, name), getattr(pd, name))
    return out


def _formatter_state(ip: Any) -> dict[str, Any]:
    from pandas.io.formats.style import Styler

    fmt = ip.display_formatter
    formatters = dict(fmt.formatters)
    formatters["ipython_display"] = fmt.ipython_display_formatter
    formatters["mimebundle"] = fmt.mimebundle_formatter
    state = {}
    for mime, f in formatters.items():
        for t in (pd.DataFrame, pd.Series, Styler):
            state[(mime, t)] = (f.type_printers.get(t), dict(f.deferred_printers).get((t.__module__, t.__name__)))
    return state


def test_unload_restores_everything(shell: Shell) -> None:
    attrs_before = _patched_attributes()
    formatters_before = _formatter_state(shell.ip)
    had_magic = "sdc" in shell.ip.magics_manager.magics["line"]
    for _ in range(2):  # load / unload twice: the second cycle must not wrap a wrapper
        shell.magic("load_ext sdc_magic")
        assert pd.DataFrame.describe is not attrs_before[(pd.DataFrame, "describe")][2]
        assert DataFrameGroupBy.mean is not attrs_before[(DataFrameGroupBy, "mean")][2]
        assert "sdc" in shell.ip.magics_manager.magics["line"]
        shell.magic("unload_ext sdc_magic")
        after = _patched_attributes()
        changed = []
        for (owner, name), (own, raw, resolved) in attrs_before.items():
            own2, raw2, resolved2 = after[(owner, name)]
            if own != own2 or raw is not raw2 or resolved is not resolved2:
                changed.append(f"{getattr(owner, '__name__', owner)}.{name}")
        assert not changed, f"not restored after unload: {changed}"
        assert pd.DataFrame.describe is attrs_before[(pd.DataFrame, "describe")][2]
        assert DataFrameGroupBy.mean is attrs_before[(DataFrameGroupBy, "mean")][2]
        assert pd.crosstab is attrs_before[(pd, "crosstab")][2]
        assert ("__str__" in pd.DataFrame.__dict__) == attrs_before[(pd.DataFrame, "__str__")][0]
        assert ("__str__" in pd.Series.__dict__) == attrs_before[(pd.Series, "__str__")][0]
        assert _formatter_state(shell.ip) == formatters_before
        assert ("sdc" in shell.ip.magics_manager.magics["line"]) == had_magic


def test_print_warns_but_returns_pandas_text(sdc: Shell, referrals: pd.DataFrame) -> None:
    t = referrals.groupby(["admin2", "sex"]).size()
    sdc.ns["t"] = t
    ran = sdc.run("s = str(t)")
    assert sdc.ns["s"] == repr(t)
    assert "NOT checked" in ran.stderr or "NOT checked" in ran.stdout or not ran.outputs


def test_metadata_is_strict_json(sdc: Shell, referrals: pd.DataFrame) -> None:
    """Output metadata goes through the Jupyter protocol: NaN/inf are not JSON (a kernel then
    warns "Message serialization failed" and a future jupyter_client drops the message)."""
    sdc.ns.update(df=referrals, pd=pd)
    for code in ["pd.crosstab(df.case_category, [df.age_band, df.sex])",
                 "df[df.admin2 == 'Mirebalais'].groupby(['case_category', 'age_band', 'sex']).size().unstack()",
                 "df.groupby(['admin2', 'case_category'])['days_to_first_service'].mean().unstack()"]:
        ran = show(sdc, code)
        assert ran.tables, code
        for _, meta in ran.tables:
            json.dumps(meta, allow_nan=False)
