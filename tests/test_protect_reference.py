"""The shared 100 × 50 turnover table, like for like with tau-Argus (issue 21, item 5).

Same NK(1,85) primaries (margins included), 10 % protection up and down, no insider attack,
cost = value, the display path's budget: tau-Argus MOD hides secondary cells worth 19,788.
Our pattern must cost no more and pass our audit.  (Pattern quality, not time: no timing here.)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from refbench import DEFAULT_FILE, TAU_MOD_VALUE, cells_of, run  # noqa: E402


def test_the_turnover_table_costs_no_more_than_tau_argus_mod() -> None:
    cells, dims = cells_of(DEFAULT_FILE)
    assert int(cells["primary"].sum()) == 515  # the reference's primaries
    result = run(cells, dims, time_limit=10.0)
    assert result["audit_ok"]
    assert result["value"] <= TAU_MOD_VALUE, result
