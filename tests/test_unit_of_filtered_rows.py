"""A declared unit column is found for the key columns of a filtered frame that is no variable.

Found by the random sessions of stop 65/66 (class "unit column not found", 12 tables in
``review``): ``pd.crosstab(df[df.age > 20].sex, df[df.age > 20].edu)`` and
``df[df.age > 30].edu.value_counts()`` under ``unit=hh`` were reviewed because only a frame with
the very same labels was looked for. The key columns now lead to the frame they were filtered
from (``capture.column_rows.unit_of_rows``), and the counts are of distinct households: a cell
of many rows but few households is hidden, not cleared.
"""

from __future__ import annotations

import pytest

SETUP = """
import numpy as np, pandas as pd
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
