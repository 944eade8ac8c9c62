"""A session of related tables that show a 0/1 indicator's mean beside counts: what it costs and
how many end blocked or review.

Why: a mean of a flag beside a count publishes the flagged rows and the others too; each such
population is audited jointly with earlier outputs (``jupyter/session._link_indicator_rows``).
This measures what that costs a user, display by display, and counts the verdicts (over-
protection is a defect too: before 2026-12-04, 4 of these 12 tables were blocked whole).

Each engine runs in a fresh Python process, the session shown as a notebook would (``Session.
publish``, recording and linking on): 12 tables (``--tables``) of counts and the means of two flags (30 % and
10 % of the rows) by district × sex, every third over all rows, the others over ``age >= lo``;
districts of 3.6 % each and three small ones (2.7 %, 0.1 %, 0.02 %). ``--root`` runs another
checkout of the package too (its own process), interleaved with this one, for before/after.

Run: ``.venv/bin/python benchmarks/indicators.py [--rows 2e5] [--engines pandas,duckdb,polars] [--root PATH]
[--tables 12]``
Not a test: it prints CPU per display and the statuses; it never fails.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUNNER = """
import json, os, sys, time
sys.path.insert(0, {root!r}); os.chdir({cwd!r})
import numpy as np, pandas as pd
from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session
n = {rows}
rng = np.random.default_rng(11)
df = pd.DataFrame({{"district": rng.choice([f"D{{i:02d}}" for i in range(30)], n,
                                          p=np.r_[np.full(27, 0.036), 0.0268, 0.001, 0.0002]),
                   "sex": rng.choice(["F", "M"], n), "age": rng.integers(0, 100, n),
                   "flag": (rng.random(n) < 0.3).astype(int), "other": (rng.random(n) < 0.1).astype(int)}})
s = Session(rules=preset("humanitarian")); s.capture.install()
if {engine!r} == "duckdb":
    import duckdb
    con = duckdb.connect(); con.register("src", df); con.execute("create table d as select * from src")
if {engine!r} == "polars":
    import polars as pl
    p = pl.from_pandas(df)
out = []
for i in range({tables}):
    lo = (i * 7) % 90
    if {engine!r} == "pandas":
        sub = df[df.age >= lo] if i % 3 else df
        table = lambda: sub.groupby(["district", "sex"]).agg(n=("age", "size"), f=("flag", "mean"), o=("other", "mean"))
    elif {engine!r} == "polars":
        sub = p.filter(pl.col("age") >= lo) if i % 3 else p
        table = lambda: sub.group_by("district", "sex").agg(pl.len().alias("n"), pl.col("flag").mean(),
                                                            pl.col("other").mean()).sort("district", "sex")
    else:
        cond = f"where age >= {{lo}}" if i % 3 else ""
        table = lambda: con.sql(f"select district, sex, count(*) n, avg(flag) f, avg(other) o from d {{cond}} "
                                "group by all order by all")
    c0 = time.process_time()
    shown = s.publish(table())
    out.append([time.process_time() - c0, shown.metadata["sdc_magic"]["status"]])
s.capture.uninstall()
print("RESULT " + json.dumps(out))
"""


def run(root: Path, engine: str, rows: int, tables: int = 12) -> list[list]:
    code = RUNNER.format(root=str(root), cwd=tempfile.mkdtemp(), rows=rows, engine=engine, tables=tables)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    line = next(x for x in reversed(done.stdout.splitlines()) if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def report(label: str, displays: list[list]) -> None:
    cpu = [d[0] for d in displays]
    statuses = [d[1] for d in displays]
    counts = {s: statuses.count(s) for s in dict.fromkeys(statuses)}
    print(f"{label:<28} median {statistics.median(cpu):.3f} CPU s, total {sum(cpu):.2f} | {counts}")
    print(" " * 28 + " " + " ".join(f"{c:.2f}" for c in cpu))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=float, default=2e5)
    parser.add_argument("--engines", default="pandas,duckdb,polars")
    parser.add_argument("--root", type=Path, default=None, help="another checkout, measured beside this one")
    parser.add_argument("--tables", type=int, default=12, help="tables in the session (the curve of a long one)")
    args = parser.parse_args()
    for engine in args.engines.split(","):
        roots = [("this checkout", ROOT)] + ([(f"--root {args.root}", args.root)] if args.root else [])
        for label, root in roots:
            report(f"{engine}, {label}", run(root, engine, int(args.rows), args.tables))


if __name__ == "__main__":
    main()
