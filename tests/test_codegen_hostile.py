"""Suggestion code is valid, inert Python for any column name or label (issue 12, item 7).

Every snippet is compiled, its syntax tree is checked so that no name from the data is
evaluated as code (only the analyst's frame, ``pd``, ``float`` and ``recoded`` are
names; every data name is a constant), and it is run to give the table it promises.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sdc_magic.outputs.suggest import CODE_NAMES, NoLiteral, Suggester, frame_name, literal

EVIL = "__import__('os').system('touch PWNED')"
HOSTILE_COLUMNS = [EVIL, "age band", "class", "1st", "it's \"quoted\"", "new\nline", "x=1, y", "lambda"]
# methods and keywords the generator may use; anything else in the tree came from the data
METHODS = {"groupby", "size", "unstack", "assign", "astype", "replace", "cut", "agg", "sum", "mean",
           "median", "min", "max", "std", "var", "count", "CategoricalDtype"}
KEYWORDS = {"observed", "bins", "right", "labels", "ordered", None}


def hostile_frame(n: int = 600, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    nominal = np.array(["big one", "also big", EVIL, "tiny'\"", "wee\nlabel", "class"], dtype=object)
    weights = np.array([0.45, 0.45, 0.004, 0.004, 0.004, 0.088])
    ages = np.where(rng.random(n) < 0.01, rng.integers(60, 75, n), rng.integers(0, 60, n))
    ages = np.where(rng.random(n) < 0.2, rng.integers(75, 90, n), ages)
    bands = pd.cut(ages, bins=[0, 12, 18, 60, 75, 200], right=False,
                   labels=["a'0-11", 'b"12-17', "c\n18-59", "d\\60-74", "e) or (75+"])
    consent = rng.random(n) < 0.8
    return pd.DataFrame({
        EVIL: rng.choice(nominal, n, p=weights / weights.sum()),
        "age band": bands,
        "1st": ages,
        "class": consent,
        "it's \"quoted\"": consent & (rng.random(n) < 0.5),
        "lambda": rng.lognormal(size=n),
        "new\nline": rng.random(n) < 0.5,
    })


def names_in(code: str) -> tuple[set[str], set[str], set[Any]]:
    """Names loaded, attributes used and keyword names of a snippet."""
    tree = ast.parse(code)
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    attrs = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    kws = {kw.arg for node in ast.walk(tree) if isinstance(node, ast.Call) for kw in node.keywords}
    return names, attrs, kws


def assert_inert(code: str, frame: str) -> None:
    compile(code, "<suggestion>", "exec")
    names, attrs, kws = names_in(code)
    assert names <= CODE_NAMES | {frame}, (names, code)
    assert attrs <= METHODS, (attrs, code)
    assert kws <= KEYWORDS, (kws, code)
    # every string in the code is a constant: no data name appears anywhere else
    strings = {node.value for node in ast.walk(ast.parse(code))
               if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    for column in HOSTILE_COLUMNS:
        if column in code.replace("\\n", "\n"):
            assert column in strings or any(column in s for s in strings), (column, code)


def _suggest(session: Any, data: pd.DataFrame, keys: list[str]) -> list[Any]:
    table = data.groupby(keys, observed=True).size()
    checked = session.check(table)
    assert checked.hidden_count > 0
    result, suggester = session.suggestions(checked, name_of=lambda frame, keys: "data", candidates=1000)
    assert suggester is not None
    while not result.exhausted:
        suggester.more(result, candidates=1000)
    return list(result.explored) + [s for s in result.items if s.kind == "rate"]


@pytest.fixture
def found(session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], pd.DataFrame]:
    """Suggestions for a nominal hostile dimension (drop, Other, rates) and hostile bands (merge, cut)."""
    monkeypatch.chdir(tmp_path)
    data = hostile_frame()
    items = _suggest(session, data, [EVIL, "class"]) + _suggest(session, data, ["age band", "it's \"quoted\""])
    return items, data


def test_every_suggestion_compiles_is_inert_and_runs(found: Any, tmp_path: Path) -> None:
    items, data = found
    kinds = {s.kind for s in items}
    assert {"drop", "merge", "other", "cut", "rate"} <= kinds, kinds
    for s in items:
        assert_inert(s.code, "data")
        scope: dict[str, Any] = {"data": data, "pd": pd}
        exec(compile(s.code, "<suggestion>", "exec"), scope)
        last = s.code.strip().splitlines()[-1]
        produced = eval(last, scope)
        assert isinstance(produced, pd.Series | pd.DataFrame)
        if s.kind != "rate":
            expected = s.checked.frame
            assert np.nansum(produced.to_numpy(dtype=float)) == pytest.approx(
                np.nansum(pd.DataFrame(expected).to_numpy(dtype=float))), s.code
    assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()


def test_merge_code_names_hostile_columns_through_a_dict(found: Any) -> None:
    items, _ = found
    merges = [s for s in items if s.kind in ("merge", "other", "cut")]
    assert merges
    for s in merges:
        assert ".assign(**{" in s.code
        assert "assign(" + "age band" not in s.code and "assign(" + EVIL not in s.code


def test_literals_round_trip_hostile_values() -> None:
    values = [EVIL, "a'b\"c", "new\nline", "back\\slash", "", 0, -3, 2.5, float("inf"), -float("inf"), True, None,
              np.int64(7), np.float32(0.5), ["x", 1], ("y",)]
    for value in values:
        code = literal(value)
        tree = ast.parse(code, mode="eval")
        assert {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} <= {"float"}, code
        back = eval(code, {"float": float})
        expected = value.item() if isinstance(value, np.generic) else value
        assert back == expected and type(back) is type(expected), code
    nan = eval(literal(float("nan")), {"float": float})
    assert nan != nan
    with pytest.raises(NoLiteral):
        literal(pd.Timestamp("2024-01-01"))


def test_hostile_frame_names_fall_back_to_df() -> None:
    assert frame_name("referrals") == "referrals"
    for bad in ("age band", "class", "1st", EVIL, "pd", "", None, "a;b"):
        assert frame_name(bad) == "df"


def test_date_labels_recode_through_text(session: Any) -> None:
    """Labels without a literal (dates) give code that recodes their text, still inert."""
    days = pd.to_datetime(["2024-01-01"] * 60 + ["2024-01-02"] * 2 + ["2024-01-03"] * 3 + ["2024-01-04"] * 50)
    data = pd.DataFrame({"day": days, "sex": (["F", "M"] * 58)[: len(days)]})
    suggester = Suggester(data, ["day", "sex"], None, "size", session.rules, session.check, name="data")
    item = suggester._merge("day")
    assert item is not None and item.hidden == 0
    assert_inert(item.code, "data")
    scope: dict[str, Any] = {"data": data, "pd": pd}
    exec(item.code, scope)
    merged = eval(item.code.splitlines()[-1], scope)
    assert len(merged) == 2 and int(merged.to_numpy().sum()) == len(days)  # the three small days merged
    assert not os.path.exists("PWNED")
