"""Labels equal across types (``True == 1 == 1.0``) in a table after related outputs.

Found by helper-89 (stop 66, older than that stop): a count by region, district and sex whose
regions are 1.0, 2.0, 3.0, then the same rows with regions True, False and "x", was blocked with
"checking failed (KeyError)": the earlier output's region margin 1.0 is the later table's region
True, and pandas refuses ``.loc[True]`` on an index of labels that are not all booleans
(``checking.margin_rows.with_public_cells`` now looks margins up by position).
"""

from __future__ import annotations

from typing import Any

import pytest

SETUP = """
import numpy as np, pandas as pd
rng = np.random.default_rng(1)
n = 1500
p = 0.8 ** np.arange(30)
p /= p.sum()
rng.shuffle(p)
df = pd.DataFrame({"village": rng.choice([f"V{i:02d}" for i in range(30)], n, p=p)})
df["district"] = "D" + (df.village.str[1:].astype(int) // 3).astype(str)
df["region"] = df.district.str[1:].astype(int).map(lambda j: "R1" if j < 4 else "R2" if j < 8 else "R3")
df["sex"] = rng.choice(["F", "M"], n, p=[.55, .45])
floats = df.assign(region=df.region.map({"R1": 1.0, "R2": 2.0, "R3": 3.0}), district=df.district.str[1:].astype(int))
mixed = df.assign(region=df.region.map({"R1": True, "R2": False, "R3": "x"}))
"""


@pytest.fixture(autouse=True)
def _fresh_linking(sdc: Any) -> None:
    from sdc_magic.jupyter import kernel

    kernel.current().populations.clear()


@pytest.mark.parametrize("first", ["floats", "df"])
def test_a_table_of_mixed_labels_after_one_of_numbers_is_checked(sdc, first: str) -> None:
    sdc.run(SETUP)
    before = sdc.run(f"{first}.groupby(['region', 'district', 'sex']).size()").outputs[-1][1]["sdc_magic"]
    assert before["status"] in ("pass", "suppressed"), before
    meta = sdc.run("mixed.groupby(['region', 'district', 'sex']).size()").outputs[-1][1]["sdc_magic"]
    assert not any("checking failed" in n for n in meta["notes"]), meta["notes"]
    assert meta["status"] in ("pass", "suppressed"), meta
