"""A column's value counts are linked through the frame it is a column of.

Red team of stop 50 (helper-49, 12): one person's sex missing, ``df.sex.value_counts()`` showed
F 36, M 36 and ``df.flag.value_counts()`` 42 + 31 = 73, both ``pass``: 73 − 72 is the person
whose sex is missing (``value_counts`` drops missing values). Each Series was read as a frame
of its one column, whose rows matched nothing, so the two tables were never compared. A column
of the user's frame (same labels, name and values) is now read with that frame's rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

X = "✕"


@pytest.fixture(autouse=True)
def _fresh_linking(sdc: Any) -> None:
    # (the test shell's session outlives a test: each starts without earlier outputs)
    from sdc_magic.jupyter import kernel

    kernel.current().populations.clear()


def _meta(ran: Any) -> dict[str, Any]:
    return ran.outputs[-1][1]["sdc_magic"]


def _numbers(ran: Any) -> list[int]:
    text = ran.outputs[-1][0]["text/plain"].split("\nsdc_magic:")[0]
    return [int(t) for line in text.splitlines() for t in line.split()[1:] if t.isdigit()]


def test_a_missing_key_is_not_told_by_two_value_counts(sdc: Any) -> None:
    from test_engines_redteam import PEOPLE

    df = PEOPLE.copy()
    df.loc[[71], "sex"] = np.nan
    sdc.ns["df"] = df
    by_sex = sdc.run("df.sex.value_counts()")
    by_flag = sdc.run("df.flag.value_counts()")
    cleared = all(_meta(r)["status"] in ("pass", "suppressed") for r in (by_sex, by_flag))
    shown = sum(_numbers(by_flag)) - sum(_numbers(by_sex))
    assert not (cleared and shown == 1), (by_sex.outputs[-1][0]["text/plain"], by_flag.outputs[-1][0]["text/plain"])


def test_value_counts_of_columns_without_missing_values_stay_cleared(sdc: Any) -> None:
    from test_engines_redteam import PEOPLE

    sdc.ns["df"] = PEOPLE.copy()
    statuses = [_meta(sdc.run(code))["status"] for code in ("df.sex.value_counts()", "df.flag.value_counts()")]
    assert statuses == ["pass", "pass"]
