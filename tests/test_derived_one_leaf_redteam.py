"""A red team's snippets against the one-table exemption of derived tables (issue 23).

The first version exempted every cell that follows one checked table from the count rule; 25 of
45 snippets then drew a count of people that the previous code hid: numbers from the rows brought
in as arrays, lists, dicts, Python numbers or uncaptured Series (``m - women.to_numpy()`` is 2
men in January), a hidden cell passed as ``other`` (``m.where(m > 1e6, m["03"])`` draws March's
2 everywhere), and a second table whose move ``clip`` absorbed. None of them may draw the figure.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session
from sdc_magic.outputs.render import protected_frame

X = "✕"
MONTHS = ["01", "02", "03", "04", "05", "06"]
PER_MONTH = [135, 120, 2, 140, 150, 25]  # March 2 hidden, June 25 its secondary
MEN = {"01": 2, "02": 60, "03": 1, "04": 3, "05": 75, "06": 12}


def _people() -> pd.DataFrame:
    sex: list[str] = []
    for month, n in zip(MONTHS, PER_MONTH, strict=True):
        sex += ["M"] * MEN[month] + ["F"] * (n - MEN[month])
    df = pd.DataFrame({"month": np.repeat(MONTHS, PER_MONTH), "sex": sex})
    df["resolved"] = True
    df.loc[df.index[:2], "resolved"] = False  # 2 unresolved in January
    return df


@pytest.fixture
def env() -> Any:
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    df = _people()
    districts = {"A": (20, 20), "B": (14, 16), "C": (1, 2), "D": (6, 6), "E": (17, 18)}
    dd = pd.DataFrame([(d, sx) for d, (f, m_) in districts.items() for sx, k in (("F", f), ("M", m_))
                       for _ in range(k)], columns=["district", "sex"])
    with s.capturing():
        ns = {"m": df.groupby("month").size(), "x": pd.crosstab(dd.district, dd.sex),
              "everyone": df.groupby("month").size(), "resolved": df[df.resolved].groupby("month").size()}
    women = df[df.sex == "F"].groupby("month").size().reindex(MONTHS).to_numpy()
    ns.update(df=df, pd=pd, np=np, Counter=Counter, women_np=women,
              men_np=np.array([MEN[k] for k in MONTHS]))
    yield s, ns
    s.capture.uninstall()


def _drawn(s: Session, obj: Any) -> Any:
    out = s.publish(obj)
    if out.checked is None or out.metadata["sdc_magic"]["status"] == "blocked":
        return None
    return protected_frame(out.checked)


def _number(v: Any) -> float | None:
    try:
        return float(str(v).removesuffix("?").strip())
    except ValueError:
        return None


MONTH_LEAKS = {  # code -> {label: the figure it must not draw there}
    "m - women_np": {"01": 2, "04": 3},
    "m.sub(women_np, fill_value=0)": {"01": 2, "04": 3},
    "m - len(df[(df.month == '04') & (df.sex == 'F')])": {"04": 3},
    "m - df[(df.month == '01') & (df.sex == 'F')].shape[0]": {"01": 2},
    "m.where(m > 1e6, men_np)": {"01": 2, "04": 3},
    "m.where(m > 140).combine_first(pd.Series(men_np, index=m.index))": {"01": 2, "04": 3},
    "m.where(m > 140).fillna(pd.Series(men_np, index=m.index))": {"01": 2, "04": 3},
    "m.floordiv(1).sub(m.values - men_np)": {"01": 2, "04": 3},
    "everyone - resolved.to_numpy()": {"01": 2},
    "everyone.sub(list(resolved))": {"01": 2},
    "everyone - pd.Series(resolved.to_dict())": {"01": 2},
    "everyone - pd.Series(Counter(df[df.resolved].month))": {"01": 2},
    "everyone.where(everyone > 1e6, everyone.values - resolved.values)": {"01": 2},
    "everyone - resolved.clip(upper=resolved['01'])": {"01": 2},
    "m - int(m['01'] - m['03'])": {"01": 2},
    "m.sub(pd.Series({'01': 133, '07': 3}), fill_value=0)": {"01": 2},
}


@pytest.mark.parametrize("code", list(MONTH_LEAKS))
def test_numbers_from_elsewhere_are_checked_as_counts(env: Any, code: str) -> None:
    s, ns = env
    drawn = _drawn(s, eval(code, ns))
    if drawn is None:
        return
    for label, figure in MONTH_LEAKS[code].items():
        assert _number(drawn[label]) != figure, (code, label, drawn[label])


@pytest.mark.parametrize(("code", "secret"), [
    ("m.where(m > 1e6, m['03'])", 2), ("m.where(m > 1e6, m['06'])", 25), ("m.where(m > 1e6, m.iloc[2].item())", 2),
    ("m.where(m > 1e6, m.sum() - m.drop(['03', '06']).sum() - m['06'])", 2),
    ("x.where(x > 1e6, x.loc['C', 'F'])", 1),
])
def test_a_hidden_cell_passed_as_a_value_is_not_drawn(env: Any, code: str, secret: int) -> None:
    s, ns = env
    drawn = _drawn(s, eval(code, ns))
    if drawn is None:
        return
    values = drawn.to_numpy().ravel() if hasattr(drawn, "to_numpy") else np.asarray(drawn).ravel()
    assert secret not in [_number(v) for v in values], (code, drawn)


def test_differences_within_one_table_are_still_shown(env: Any) -> None:
    s, ns = env
    drawn = _drawn(s, eval("x.sub(x['F'], axis=0)", ns))  # (.to_numpy() would be data from elsewhere)
    assert drawn is not None and _number(drawn.loc["E", "M"]) == 1  # 18 - 17 of published cells
