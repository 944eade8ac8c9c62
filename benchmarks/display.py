"""What a user waits for when a notebook displays a table (issue 21's targets).

Each scenario runs in a fresh Python process, the way a notebook does: an in-process IPython
shell, ``%load_ext sdc_magic`` (recording on, linking on: the defaults), the data made first
and not timed, then the cell that displays the table is timed (CPU and wall) by
``shell.run_cell``. The same cell without the extension, in the same process before it is
loaded, is the plain reference. Medians over ``--repeats`` fresh processes.

Scenarios (targets from issue 21):

* ``seed``: the seed lesson's four-way table of the referrals (200 cells) ≤ 0.3 CPU s;
* ``3key-1M``: a 1,000-cell three-key count table of 1M rows ≤ 0.5 CPU s;
* ``25x20x10``: counts of a 25 × 20 × 10 table ≤ 3 CPU s;
* ``skewed-sacro``: ACRO's skewed layout, ``pd.crosstab([a, b], c, values=v, aggfunc="mean")``
  with geometric category frequencies (0.45^k), 1M rows, ``%sdc preset sacro``: ≤ 3× plain;
* ``crosstab-again``: the skewed crosstab of ``v * 2`` displayed after the one of ``v`` (same rows,
  another measure; the first display is not timed): no target, it shows what a related table costs;
* ``4way-sums``: sums of a 15 × 12 × 8 × 7 table (13,186 cells with margins) of 500,000 rows
  whose rare label makes 75 primaries, ``%sdc preset insee``: no target; until stop 53 its
  protection spent the whole work budget (186 s) and hid every cell;
* ``nested-sums``: income sums of 1,500 people by five keys, one of which (region) the district
  decides (the red team's table of stop 66): no target; withheld until stop 66, then 8 CPU s;
* ``raw-rows``: the frame of 1M rows itself (text and numbers) after 8 tables grouped by its
  columns: no target; 14 s before stop 70 (flattened whole once per such table);
* ``villages-20k``: counts of 20,000 villages, one key: no target; 46 s and 12.7 GB before stop 70;
* ``session-40``: 40 related tables on 1M rows (filters and margins): per-display CPU of the
  1st and 40th (flat curve: 40th ≤ 2× 1st), statuses; none blocked.

Run: ``.venv/bin/python benchmarks/display.py [--repeats 5] [--only seed,3key-1M] [--rows N] [--busy] [--rerun]``
(``--busy``: session-40 once more with busy loops on every core; the outputs must be identical;
``--rerun``: the display of a second kernel in the same folder, as after Restart & Run All, which
audits the patterns the first stored instead of searching again, see ``protect/patterns.py``).
Not a test: it never fails on a missed target (machines are shared); it prints OK / MISS.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

SETUP = {
    "seed": """
        from sdc_magic.datasets import make_referrals
        referrals = make_referrals()
    """,
    "3key-1M": """
        import numpy as np, pandas as pd
        rng = np.random.default_rng(3)
        n = {rows}
        df = pd.DataFrame({{"a": rng.integers(0, 10, n), "b": rng.integers(0, 10, n),
                           "c": rng.zipf(1.6, n).clip(max=10)}})
    """,
    "25x20x10": """
        import numpy as np, pandas as pd
        rng = np.random.default_rng(1)
        n = 60_000
        df = pd.DataFrame({"a": rng.integers(0, 25, n), "b": rng.integers(0, 20, n),
                           "c": rng.zipf(1.3, n).clip(max=10)})
    """,
    "skewed-sacro": """
        import numpy as np, pandas as pd
        rng = np.random.default_rng(5)
        n = {rows}
        def skewed(k):
            p = 0.45 ** np.arange(k); p /= p.sum()
            return rng.choice(k, n, p=p)
        df = pd.DataFrame({{"a": skewed(8), "b": skewed(6), "c": skewed(10), "v": rng.lognormal(3, 1, n)}})
    """,
}
SETUP["crosstab-again"] = SETUP["skewed-sacro"]
SETUP["nested-sums"] = """
    import numpy as np, pandas as pd
    rng = np.random.default_rng(21)
    n = 1500
    df = pd.DataFrame({"district": rng.choice([f"D{i}" for i in range(8)], n, p=[0.25, 0.2, 0.2, 0.15, 0.1, 0.07, 0.02, 0.01]),
                       "sex": rng.choice(["F", "M"], n), "age": rng.integers(0, 100, n),
                       "edu": rng.choice(["none", "primary", "secondary", "tertiary"], n, p=[0.03, 0.4, 0.4, 0.17]),
                       "flag": (rng.random(n) < 0.2).astype(int), "income": rng.lognormal(5, 1, n).round(),
                       "hh": rng.integers(0, n // 3, n)})
    df.loc[rng.choice(n, 3, replace=False), "district"] = "D8"
    df["region"] = df.district.map({"D0": "R1", "D1": "R1", "D2": "R1", "D3": "R2", "D4": "R2", "D5": "R2",
                                    "D6": "R3", "D7": "R3"}).fillna("R3")
    df["band"] = pd.cut(df.age, [-1, 17, 59, 120], labels=["child", "adult", "older"]).astype(str)
"""
SETUP["4way-sums"] = """
    import numpy as np, pandas as pd
    rng = np.random.default_rng(9)
    n = 500_000
    df = pd.DataFrame({"a": rng.integers(0, 15, n), "b": rng.integers(0, 12, n), "c": rng.integers(0, 8, n),
                       "d": rng.integers(0, 6, n), "v": rng.lognormal(2, 1.2, n)})
    df.loc[rng.random(n) < 3e-5, "d"] = 6  # a rare label: a few primaries in a 13,000-cell table
"""
SETUP["raw-rows"] = """
    import numpy as np, pandas as pd
    rng = np.random.default_rng(4)
    n = {rows}
    df = pd.DataFrame({{"region": rng.choice([f"R{{i}}" for i in range(20)], n), "sex": rng.choice(["F", "M"], n),
                       "age": rng.integers(0, 90, n), "income": rng.gamma(2.0, 1000.0, n)}})
"""
SETUP["villages-20k"] = """
    import numpy as np, pandas as pd
    rng = np.random.default_rng(0)
    sizes = rng.integers(3, 30, 20_000)
    df = pd.DataFrame({"village": np.repeat([f"V{i:06d}" for i in range(len(sizes))], sizes)})
"""
CELL = {
    "seed": 'referrals.groupby(["admin2", "case_category", "age_band", "sex"]).size()',
    "3key-1M": 'df.groupby(["a", "b", "c"]).size()',
    "25x20x10": 'df.groupby(["a", "b", "c"]).size()',
    "skewed-sacro": 'pd.crosstab([df.a, df.b], df.c, values=df.v, aggfunc="mean")',
    "crosstab-again": 'pd.crosstab([df.a, df.b], df.c, values=df.v * 2, aggfunc="mean")',
    "4way-sums": 'df.groupby(["a", "b", "c", "d"])["v"].sum()',
    "nested-sums": "df[df.age != 43].groupby(['district', 'edu', 'sex', 'band', 'region'])['income'].sum()",
    "raw-rows": "df",
    "villages-20k": 'df.groupby("village").size()',
}
#: cells displayed (not timed) after the extension is loaded and before the timed cell
BEFORE = {"crosstab-again": 'pd.crosstab([df.a, df.b], df.c, values=df.v, aggfunc="mean")',
          "raw-rows": "\n".join(f"display(df.groupby({keys}){stat})" for keys, stat in [
              ('"region"', ".size()"), ('["region", "sex"]', ".size()"), ('"sex"', ".size()"),
              ('"region"', '["income"].sum()'), ('["region", "sex"]', '["income"].mean()'), ('"age"', ".size()"),
              ('["sex", "age"]', ".size()"), ('"region"', '["age"].mean()')])}
PRESET = {"skewed-sacro": "sacro", "crosstab-again": "sacro", "4way-sums": "insee"}
TARGET_CPU = {"seed": 0.3, "3key-1M": 0.5, "25x20x10": 3.0}
TARGET_RATIO = {"skewed-sacro": 3.0}

RUNNER = """
import json, os, resource, sys, time
os.environ["SDC_MAGIC_CONFIG"] = ""
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.display_pub.publish = lambda *a, **k: None  # what a front-end would receive: built, not sent
shell.display_formatter.active_types = ["text/plain", "text/html"]  # as a notebook kernel formats
shell.displayhook.write_format_data = lambda *a, **k: None
exec(compile({setup!r}, "setup", "exec"), shell.user_ns)

def timed(code):
    c0, w0 = time.process_time(), time.perf_counter()
    result = shell.run_cell(code, store_history=False)
    if result.error_in_exec is not None:
        raise result.error_in_exec
    return time.process_time() - c0, time.perf_counter() - w0

plain = timed({cell!r})
shell.run_line_magic("load_ext", "sdc_magic")
if {preset!r}:
    shell.run_line_magic("sdc", "preset " + {preset!r})
if {before!r}:
    timed({before!r})
checked = timed({cell!r})
from sdc_magic.jupyter.kernel import session
record = session().ledger.records[-1]
print("RESULT " + json.dumps({{"plain_cpu": plain[0], "plain_wall": plain[1], "cpu": checked[0], "wall": checked[1],
                   "status": record.status, "hidden": record.hidden,
                   "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""

SESSION_RUNNER = """
import hashlib, json, os, time
os.environ["SDC_MAGIC_CONFIG"] = ""
import numpy as np, pandas as pd
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.display_pub.publish = lambda *a, **k: None
shell.display_formatter.active_types = ["text/plain", "text/html"]
shell.displayhook.write_format_data = lambda *a, **k: None
rng = np.random.default_rng(11)
n = {rows}
shell.user_ns.update(pd=pd, df=pd.DataFrame({{
    "district": rng.choice([f"D{{i:02d}}" for i in range(30)], n, p=np.r_[np.full(27, 0.036), 0.0268, 0.001, 0.0002]),
    "sex": rng.choice(["F", "M"], n), "age": rng.integers(0, 100, n), "resolved": rng.random(n) < 0.4}}))
shell.run_line_magic("load_ext", "sdc_magic")
cells = []
for i in range(40):
    lo = (i * 7) % 90
    cells.append([
        'df.groupby(["district", "sex"]).size()',
        f'df[df.age >= {{lo}}].groupby(["district", "sex"]).size()',
        f'pd.crosstab(df[df.age < {{lo + 10}}].district, df[df.age < {{lo + 10}}].sex, margins=True)',
        f'df[(df.age >= {{lo}}) & (df.age < {{lo + 5}})].groupby(["district", "resolved"]).size()',
    ][i % 4])
from sdc_magic.jupyter.kernel import session
out = []
for code in cells:
    c0 = time.process_time()
    shell.run_cell(code, store_history=False)
    rec = session().ledger.records[-1]
    # what is shown and exported, without the page's element ids: status, CSV, hidden cells and intervals
    shown = json.dumps([rec.status, rec.csv, rec.hidden_cells], sort_keys=True, default=str)
    out.append({{"cpu": time.process_time() - c0, "status": rec.status, "hidden": rec.hidden,
                "digest": hashlib.sha256(shown.encode()).hexdigest()}})
print("RESULT " + json.dumps(out))
"""


def _result(stdout: str) -> Any:
    line = next(line for line in reversed(stdout.splitlines()) if "RESULT " in line)
    return json.loads(line.split("RESULT ", 1)[1])


def run_scenario(name: str, rows: int, rerun: bool = False) -> dict:
    """One fresh process in a fresh working directory; ``rerun``: a second process in the same
    directory afterwards (Restart & Run All: the ledger and the stored patterns of the first run
    are there), whose display is the one reported."""
    setup = textwrap.dedent(SETUP[name]).format(rows=rows) if "{rows" in SETUP[name] else textwrap.dedent(SETUP[name])
    code = RUNNER.format(setup=setup, cell=CELL[name], preset=PRESET.get(name, ""), before=BEFORE.get(name, ""))
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(2 if rerun else 1):
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600,
                                  cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})
            if done.returncode != 0:
                raise RuntimeError(f"{name}: {done.stderr[-2000:]}")
    return _result(done.stdout)


def report(name: str, runs: list[dict], rerun: bool = False) -> None:
    med = {k: statistics.median(r[k] for r in runs) for k in ("plain_cpu", "plain_wall", "cpu", "wall", "rss_mb")}
    statuses = sorted({f"{r['status']}/{r['hidden']} hidden" for r in runs})
    ratio = med["wall"] / max(med["plain_wall"], 1e-9)
    verdict = ""
    if name in TARGET_CPU:
        verdict = f"target ≤ {TARGET_CPU[name]:g} CPU s: {'OK' if med['cpu'] <= TARGET_CPU[name] else 'MISS'}"
    elif name in TARGET_RATIO:
        verdict = f"target ≤ {TARGET_RATIO[name]:g}× plain: {'OK' if ratio <= TARGET_RATIO[name] else 'MISS'}"
    if rerun:
        name, verdict = f"{name} re-run", f"(new kernel, same folder) {verdict}"
    print(f"{name:<14} checked {med['cpu']:7.3f} CPU s {med['wall']:7.3f} s wall | plain {med['plain_cpu']:6.3f} CPU s "
          f"{med['plain_wall']:6.3f} s | {ratio:7.1f}× | {med['rss_mb']:6.0f} MB peak | {', '.join(statuses)} | {verdict}")


@contextlib.contextmanager
def busy_cores() -> Iterator[None]:
    """Busy loops on every core for the duration (a shared, loaded TRE server)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()


def session_run(rows: int) -> list[dict]:
    code = SESSION_RUNNER.format(rows=rows)
    # a fresh working directory: no ledger of an earlier run (output ids start at out-1)
    with tempfile.TemporaryDirectory() as cwd:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=7200, cwd=cwd,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return _result(done.stdout)


def session_scenario(rows: int, busy: bool = False) -> None:
    out = session_run(rows)
    first, last = out[0]["cpu"], out[-1]["cpu"]
    counts: dict[str, int] = {}
    for o in out:
        counts[o["status"]] = counts.get(o["status"], 0) + 1
    flat = last <= 2 * max(first, 1e-9)
    print(f"session-40     1st {first:6.3f} CPU s, 40th {last:6.3f} CPU s, max {max(o['cpu'] for o in out):6.3f} | "
          f"{counts} | target: 40th ≤ 2× 1st {'OK' if flat else 'MISS'}, none blocked "
          f"{'OK' if not counts.get('blocked') else 'MISS'}")
    print("               statuses: " + " ".join(f"{o['status'][0]}{o['hidden']}" for o in out))
    print("               CPU s per display: " + " ".join(f"{o['cpu']:.2f}" for o in out))
    if busy:
        with busy_cores():
            loaded = session_run(rows)
        same = [a["digest"] == b["digest"] and a["status"] == b["status"] for a, b in zip(out, loaded, strict=True)]
        print(f"               with busy loops on all {os.cpu_count()} cores: {sum(same)} of {len(out)} outputs "
              f"identical (status, CSV, hidden cells and their intervals) {'OK' if all(same) else 'MISS'}; "
              f"max {max(o['cpu'] for o in loaded):.3f} CPU s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--only", default="seed,3key-1M,25x20x10,skewed-sacro,session-40")
    parser.add_argument("--busy", action="store_true", help="session-40: run again under busy loops and compare")
    parser.add_argument("--rerun", action="store_true",
                        help="time a second kernel in the same folder (Restart & Run All) instead of the first")
    args = parser.parse_args()
    for name in args.only.split(","):
        if name == "session-40":
            session_scenario(args.rows, busy=args.busy)
            continue
        report(name, [run_scenario(name, args.rows, args.rerun) for _ in range(args.repeats)], args.rerun)


if __name__ == "__main__":
    main()
