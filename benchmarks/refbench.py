"""The shared 100 × 50 magnitude table, like for like with tau-Argus (issue 21, item 5).

``../shared/data/refbench/scale_mag_100x50.json`` (README beside it) holds microdata of a turnover
table with reference patterns: tau-Argus MOD hides secondary cells worth 19,788 with its MAN(10)
levels on the NK(1,85) primaries.  Like for like here: the same primaries (NK(1,85) per cell,
margins included, computed from the microdata), 10 % protection up and down, no insider attack,
cost = value, margins hideable.  Prints the secondaries, their value, the audit and CPU seconds,
for the display path's budget (``time_limit=10``, what a notebook gets) and an offline one.

Run: ``.venv/bin/python benchmarks/refbench.py [--file PATH] [--offline SECONDS]``.
Not a test (it never fails): it prints OK / MISS against the reference value.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sdc_magic.config import Rules  # noqa: E402
from sdc_magic.protect import protect  # noqa: E402
from sdc_magic.protect.api import clear_cache  # noqa: E402

#: the shared benchmark's file; a gzipped copy is kept with the tests (tests/data/)
DEFAULT_FILE = ROOT / "tests" / "data" / "scale_mag_100x50.json.gz"
TAU_MOD_VALUE = 19_788


def cells_of(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """Inner cells and margins (``Total``) with value, top contribution and the NK(1,85) flag."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    spec = json.loads(raw)
    micro = pd.DataFrame(spec["micro"])
    dims = list(spec["dims"])
    resp = spec["resp"]
    frames = []
    for by in ([*dims], [dims[0]], [dims[1]], []):
        g = micro.groupby(by)[resp] if by else micro.assign(_all=0).groupby("_all")[resp]
        t = pd.DataFrame({"value": g.sum(), "top1": g.max(), "units": g.size()}).reset_index()
        t = t.drop(columns=["_all"], errors="ignore")
        for d in dims:
            if d not in by:
                t[d] = "Total"
        frames.append(t[[*dims, "value", "top1", "units"]])
    cells = pd.concat(frames, ignore_index=True)
    cells["primary"] = cells["top1"] > 0.85 * cells["value"]
    return cells, dims


def run(cells: pd.DataFrame, dims: list[str], time_limit: float) -> dict:
    clear_cache()
    rules = Rules(threshold=1, protection=10.0, singletons=False, cost="value")
    t0 = time.process_time()
    res = protect(cells, dims=dims, value="value", units="units", rules=rules, primary="primary",
                  singletons=False, margins="hideable", time_limit=time_limit, levels="tau")
    cpu = time.process_time() - t0
    out = res.cells
    secondary = out["status"] == "secondary"
    return {"primaries": int((out["status"] == "primary").sum()), "secondaries": int(secondary.sum()),
            "value": float(out.loc[secondary, "value"].sum()), "audit_ok": bool(res.audit_ok),
            "method": res.method, "cpu": round(cpu, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", type=Path, default=DEFAULT_FILE)
    ap.add_argument("--offline", type=float, default=0.0, help="also run with this time_limit (nominal s)")
    args = ap.parse_args()
    cells, dims = cells_of(args.file)
    print(f"{args.file.name}: {int(cells['primary'].sum())} NK(1,85) primaries (margins included)")
    budgets = [("display (time_limit=10)", 10.0)] + ([(f"offline (time_limit={args.offline:g})", args.offline)]
                                                     if args.offline else [])
    for name, limit in budgets:
        r = run(cells, dims, limit)
        verdict = "OK" if r["value"] <= TAU_MOD_VALUE and r["audit_ok"] else "MISS"
        print(f"{name}: {r['secondaries']} secondaries worth {r['value']:,.0f} (tau-Argus MOD {TAU_MOD_VALUE:,}) "
              f"audit {'passed' if r['audit_ok'] else 'FAILED'}, {r['method']}, {r['cpu']} CPU s  {verdict}")


if __name__ == "__main__":
    main()
