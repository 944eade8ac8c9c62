"""A declared unit column is found for the key columns of a filtered frame that is no variable.

Found by the random sessions of stop 65/66 (class "unit column not found", 12 tables in
``review``): ``pd.crosstab(df[df.age > 20].sex, df[df.age > 20].edu)`` and
``df[df.age > 30].edu.value_counts()`` under ``unit=hh`` were reviewed because only a frame with
the very same labels was looked for. The key columns now lead to the frame they were filtered
from (``capture.column_rows.unit_of_rows``), and the counts are of distinct households: a cell
of many rows but few households is hidden, not cleared.
"""

from __future__ import annotations

import re

import pytest

SETUP = """
import numpy as np, pandas as pd
for _name in [k for k, v in globals().items() if isinstance(v, pd.DataFrame) or k == "data"]:
    del globals()[_name]  # (the test shell outlives a test: no frame of another test is a source)
rng = np.random.default_rng(0)
n = 2400
df = pd.DataFrame({"sex": rng.choice(["F", "M"], n), "edu": rng.choice(["primary", "secondary"], n),
                   "age": rng.integers(0, 100, n), "hh": rng.integers(0, n // 3, n)})
# 12 people of 2 households with tertiary education, all over 20: 12 rows, 2 households
few = pd.DataFrame({"sex": ["F"] * 12, "edu": ["tertiary"] * 12, "age": [30] * 12, "hh": [5000] * 6 + [5001] * 6})
df = pd.concat([df, few], ignore_index=True)
"""

FILTERED = [
    "pd.crosstab(df[df.age > 20].sex, df[df.age > 20].edu)",
    "df[df.age > 20].edu.value_counts()",
    "df.loc[df.age > 20, ['sex', 'edu']].value_counts()",
    "df.loc[df.age > 20, ['sex', 'edu']].groupby(['sex', 'edu']).size()",
]


@pytest.fixture(autouse=True)
def _fresh_linking(sdc) -> None:
    # (the test shell's session outlives a test: each starts without earlier outputs)
    from sdc_magic.jupyter import kernel

    kernel.current().populations.clear()


def _meta(ran) -> dict:
    return ran.outputs[-1][1]["sdc_magic"]


@pytest.mark.parametrize("code", FILTERED)
def test_the_unit_column_is_read_from_the_frame_the_keys_were_filtered_from(sdc, code: str) -> None:
    sdc.run(SETUP)
    sdc.magic("sdc rules unit=hh")
    ran = sdc.run(code)
    meta = _meta(ran)
    assert not any("not found" in n for n in meta["notes"]), meta["notes"]
    # tertiary: 12 rows of 2 households, below the threshold of 5 distinct households
    assert meta["status"] in ("suppressed", "review"), meta
    html = ran.outputs[-1][0]["text/html"]
    assert ">12<" not in html and ">6<" not in html
    assert meta["status"] == "suppressed", meta


def test_two_frames_giving_different_units_leave_the_table_in_review(sdc) -> None:
    """A copy of the frame with other households fits the key columns too: which frame the
    table came from is unknown, so the rows are counted as units and the table is reviewed
    (the copy's one household per row would clear the 12 rows of 2 households)."""
    sdc.run(SETUP + "\nother = df.assign(hh=np.arange(len(df)))")
    sdc.magic("sdc rules unit=hh")
    meta = _meta(sdc.run("df[df.age > 25].edu.value_counts()"))
    assert any("unit column 'hh' not found" in n for n in meta["notes"]), meta["notes"]
    assert meta["status"] != "pass"


def test_a_short_series_is_not_tied_to_a_frame_by_chance(sdc) -> None:
    """Fewer rows than ``MIN_REPEATS`` could match an unrelated frame: no unit is read."""
    sdc.run(SETUP)
    sdc.magic("sdc rules unit=hh")
    meta = _meta(sdc.run("df[df.age > 20].head(10).edu.value_counts()"))
    assert any("not found" in n for n in meta["notes"]), meta["notes"]
    assert meta["status"] != "pass"


def test_the_frames_values_are_not_changed(sdc) -> None:
    sdc.run(SETUP + "\nbefore = df.copy()")
    sdc.magic("sdc rules unit=hh")
    for code in FILTERED:
        sdc.run(code)
    assert sdc.run("df.equals(before)").result is True


# ---------------------------------------------------------------- red team of the change (helper-90)
ATTACKS = {
    # a renumbered copy of the adults without hh: its keys fall on other people's labels in df
    # (a constant key fitted any frame); df's hh there gave 11 households for 2
    "renumbered copy": ("w = df.loc[df.age > 20, ['sex', 'edu']].reset_index(drop=True)",
                        "w[w.sex == 'F'].groupby(['sex', 'edu']).size()"),
    "constant key": ("w = df.loc[df.age > 20, ['sex', 'edu']].reset_index(drop=True)",
                     "w.assign(k='all').groupby(['k', 'edu']).size()"),
    # the source held in a dict, beside a copy with one household per person
    "source in a dict": ("persons = df.assign(hh=np.arange(len(df)))\ndata = {'p': df}\ndel df",
                         "data['p'][data['p'].age > 20].edu.value_counts()"),
    # the source with duplicate labels, beside the same copy
    "source with duplicate labels": ("persons = df.assign(hh=np.arange(len(df)))\n"
                                     "df.index = list(range(len(df) - 2)) + [0, 1]",
                                     "df[~df.index.duplicated(keep=False)].edu.value_counts()"),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_frame_the_keys_do_not_provably_come_from_gives_no_units(sdc, name: str) -> None:
    """The 12 tertiary women of 2 households are never cleared on another frame's households:
    hidden (the right households found) or reviewed (rows counted as units, said)."""
    prepare, code = ATTACKS[name]
    sdc.run(SETUP + "\n" + prepare)
    sdc.magic("sdc rules unit=hh")
    ran = sdc.run(code)
    meta = _meta(ran)
    # (10 or 12 of them: the duplicate labels drop two)
    shown = re.search(r"tertiary\s+(\d+)", ran.outputs[-1][0]["text/plain"].replace("tertiary  ", "tertiary "))
    assert meta["status"] == "review" or shown is None, (meta, shown)
    if shown is not None:
        assert any("unit column 'hh' not found" in n for n in meta["notes"]), meta["notes"]


def test_a_frame_of_households_by_the_same_labels_is_not_taken_without_the_keys(sdc) -> None:
    """A frame holding only hh at the adults' labels (one per person) is not the table's source:
    its rows are not checked to be the keys' (helper-90, older than the change); df is."""
    sdc.run(SETUP + "\nids = pd.DataFrame({'hh': np.arange((df.age > 20).sum())}, index=df.index[df.age > 20])")
    sdc.magic("sdc rules unit=hh")
    ran = sdc.run("df[df.age > 20].edu.value_counts()")
    assert _meta(ran)["status"] == "suppressed" and ">12<" not in ran.outputs[-1][0]["text/html"]


def test_a_copy_with_the_same_households_in_another_type_agrees(sdc) -> None:
    """hh as float in a copy is the same households: no ambiguity, no review."""
    sdc.run(SETUP + "\ncopy = df.assign(hh=df.hh.astype(float))")
    sdc.magic("sdc rules unit=hh")
    meta = _meta(sdc.run("df[df.age > 28].edu.value_counts()"))
    assert meta["status"] == "suppressed", meta
