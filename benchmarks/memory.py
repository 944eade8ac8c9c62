"""Kernel memory after many captures: RSS with and without sdc_magic (issue 12, item 3).

Each (entry point, mode) runs in a fresh process so that one run's heap does not
colour the next: a 1M-row frame (integer key ``k``, 20 levels; string key ``j``, 10
levels; lognormal ``v``), one warm-up call, then ``--calls`` calls whose results are
dropped as a loop drops them. Reported: RSS before and after the calls, the peak, and
with the extension the registry's accounted bytes, entries and evictions. Before the
fix (pandas 3.1, 1M rows) the growth per call was +7.6 MB (groupby sum), +23 MB
(2-key mean), +78 MB (crosstab) and +23.5 MB (pivot_table), without bound.

    python benchmarks/memory.py                      # 1M rows, 1,000 calls of each
    python benchmarks/memory.py --calls 50 --rows 200000
    python benchmarks/memory.py --budget 64          # registry budget in MB

This is a script, not a test: it prints MISS when the growth exceeds budget + 25 %.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

CALLS = {
    "groupby(k)['v'].sum()": "df.groupby('k')['v'].sum()",
    "groupby([k, j])['v'].mean()": "df.groupby(['k', 'j'])['v'].mean()",
    "pd.crosstab(df.k, df.j)": "pd.crosstab(df['k'], df['j'])",
    "pivot_table(k × j, v, sum)": "df.pivot_table(index='k', columns='j', values='v', aggfunc='sum')",
}


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def child(op: str, mode: str, rows: int, calls: int, budget: float) -> dict[str, float]:
    """One measurement (runs in its own process)."""
    import gc

    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(20240611)
    labels = np.array([f"j{i}" for i in range(10)], dtype=object)
    df = pd.DataFrame({"k": rng.integers(0, 20, rows), "j": labels[rng.integers(0, 10, rows)],
                       "v": rng.lognormal(size=rows)})
    session = None
    if mode == "sdc_magic":
        from sdc_magic.config import preset
        from sdc_magic.jupyter.session import Session

        session = Session(rules=preset("humanitarian"))
        session.registry.budget_mb = budget
        session.capture.install()
    code = compile(CALLS[op], "<call>", "eval")
    scope = {"df": df, "pd": pd}
    eval(code, scope)
    gc.collect()
    before = _rss_mb()
    started = time.perf_counter()
    for _ in range(calls):
        eval(code, scope)
    seconds = time.perf_counter() - started
    gc.collect()
    after = _rss_mb()
    out = {"before": before, "after": after, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6,
           "seconds": seconds}
    if session is not None:
        out.update(registry=session.registry.nbytes / 1e6, entries=len(session.registry),
                   evicted=session.registry.evicted)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=1_000)
    parser.add_argument("--budget", type=float, default=256.0, help="registry budget in MB")
    parser.add_argument("--only", default="", help="run only entry points containing this text")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.rows, args.calls, args.budget)))
        return
    env = dict(os.environ, SDC_MAGIC_CONFIG="")
    root = Path(__file__).resolve().parents[1]
    print(f"{args.rows:,} rows, {args.calls:,} calls per entry point, registry budget {args.budget:g} MB "
          f"(RSS in MB; each line a fresh process)\n")
    header = (f"| {'entry point':<30} | plain: RSS after | sdc_magic: RSS after | growth over the calls "
              f"| registry (entries, evicted) | s/call plain / sdc |")
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for op in CALLS:
        if args.only and args.only not in op:
            continue
        runs = {}
        for mode in ("plain", "sdc_magic"):
            cmd = [sys.executable, __file__, "--rows", str(args.rows), "--calls", str(args.calls),
                   "--budget", str(args.budget), "--child", op, mode]
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root, check=True)
            runs[mode] = json.loads(done.stdout.strip().splitlines()[-1])
        p, s = runs["plain"], runs["sdc_magic"]
        growth = s["after"] - s["before"]
        flag = "" if growth <= 1.25 * args.budget else "  MISS"
        print(f"| {op:<30} | {p['after']:>8,.0f} | {s['after']:>8,.0f} (peak {s['peak']:,.0f}) "
              f"| {p['after'] - p['before']:+,.0f} plain, {growth:+,.0f} with sdc_magic "
              f"| {s['registry']:,.0f} MB ({s['entries']}, {s['evicted']}) "
              f"| {p['seconds'] / args.calls:.3f} / {s['seconds'] / args.calls:.3f} |{flag}", flush=True)


if __name__ == "__main__":
    main()
