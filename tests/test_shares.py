"""Tables of shares publish their sums (as 1): no hidden share is 1 minus the others (issue 23.1).

Red team round 3: ``crosstab(df.district, df.sex, normalize="index")`` hid the small district's
share but published the 0.0 beside it; its row sums to 1, so the hidden share was 1: all the
cases of that district are female.  Checked here for every way pandas normalises, on screen and
in the export.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.outputs.render import HIDDEN

TABLES = {
    "crosstab index": ('pd.crosstab(df.district, df.sex, normalize="index")', "rows"),
    "crosstab index, three outcomes": ('pd.crosstab(df.district, df.outcome, normalize="index")', "rows"),
    "crosstab columns": ('pd.crosstab(df.district, df.sex, normalize="columns")', "columns"),
    "crosstab all": ('pd.crosstab(df.district, df.sex, normalize="all")', "all"),
    "crosstab True": ("pd.crosstab(df.district, df.sex, normalize=True)", "all"),
    "crosstab two row keys": ('pd.crosstab([df.district, df.sex], df.outcome, normalize="index")', "rows"),
    "groupby value_counts unstacked": (
        'df.groupby("district")["sex"].value_counts(normalize=True).unstack(fill_value=0)', "rows"),
    "groupby value_counts unstacked, outcome": (
        'df.groupby("district")["outcome"].value_counts(normalize=True).unstack(fill_value=0)', "rows"),
    "Series value_counts": ("df.district.value_counts(normalize=True)", "all"),
    "DataFrame value_counts": ('df[["district", "sex"]].value_counts(normalize=True)', "all"),
}


def _people() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({"district": rng.choice(list("ABCDE"), n), "sex": rng.choice(["F", "M"], n),
                       "outcome": rng.choice(["open", "closed", "referred"], n)})
    few = pd.DataFrame({"district": ["Z", "Z", "Y", "Y", "Y"], "sex": ["F", "F", "M", "M", "F"],
                        "outcome": ["closed", "closed", "open", "open", "open"]})
    return pd.concat([df, few], ignore_index=True)


def _groups(frame: pd.DataFrame | pd.Series, how: str) -> list[np.ndarray]:
    """Per group whose shares sum to 1: the (row, col) positions of its displayed cells."""
    shape = frame.shape if isinstance(frame, pd.DataFrame) else (len(frame), 1)
    cells = [(r, c) for r in range(shape[0]) for c in range(shape[1])]
    if how == "rows":
        return [np.array([(r, c) for c in range(shape[1])]) for r in range(shape[0])]
    if how == "columns":
        return [np.array([(r, c) for r in range(shape[0])]) for c in range(shape[1])]
    return [np.array(cells)]


@pytest.mark.parametrize("name", sorted(TABLES))
def test_no_hidden_share_is_one_minus_the_others(session, name: str, tmp_path) -> None:
    code, how = TABLES[name]
    table = eval(code, {"df": _people(), "pd": pd})
    out = session.publish(table)
    meta = out.metadata["sdc_magic"]
    checked = out.checked
    assert checked.hidden.any(), "the small districts' shares must be hidden"
    if meta["status"] in ("review", "blocked"):
        return  # not exportable; the note says why
    for members in _groups(table, how):
        h = checked.hidden[members[:, 0], members[:, 1]]
        assert h.sum() != 1, f"{name}: a group with a single hidden share gives it back as 1 − the others"
    for cell, (low, high) in checked.intervals.items():
        assert checked.hidden[cell] and low < high, f"{name}: hidden cell {cell} drawn with an exact interval"
    # the hidden values appear nowhere: not in the text, not in the export
    session.export(tmp_path)
    csv = (tmp_path / f"{out.id}.csv").read_text()
    assert HIDDEN in out.data["text/plain"]
    if how == "rows" and isinstance(table, pd.DataFrame) and "Z" in table.index:
        for line in (line for line in csv.splitlines() if line.startswith(("Z,", "Z / "))):
            fields = line.split(",")[1:]  # (two row keys: "Z / F,...")
            assert sum(f == "" for f in fields) != 1, "the exported row of Z keeps a single hidden share"


def test_a_share_alone_in_its_group_needs_review(session) -> None:
    df = _people()
    out = session.publish(df.groupby("district")["sex"].value_counts(normalize=True))  # Z shows F only
    assert out.metadata["sdc_magic"]["status"] == "review"
    assert any("1 by construction" in n for n in out.checked.notes)


def test_shares_without_small_groups_stay_published(session) -> None:
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"district": rng.choice(list("ABCD"), 2000), "sex": rng.choice(["F", "M"], 2000)})
    out = session.publish(pd.crosstab(df.district, df.sex, normalize="index"))
    assert out.metadata["sdc_magic"]["status"] == "pass"
    assert not out.checked.hidden.any()


def test_count_tables_are_unchanged(session) -> None:
    df = _people()
    out = session.publish(pd.crosstab(df.district, df.sex))
    assert not any("shares of its group" in r.message for rs in out.checked.reasons.values() for r in rs)
