"""Session-level costs: better-answer search and linked-output checks.

Prints, for fixed seeds:
* the suggestion search on tables of ~1,000 and ~10,000 cells (budget 0.2 s, and how
  much was explored within it), against the cost of the plain pandas groupby;
* checking a new ~1,000-cell table against 200 earlier outputs of the same session
  (differencing through filters + joint audit), against displaying it alone.

Run: ``.venv/bin/python benchmarks/session.py``. Not a test: machines are shared.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from sdc_magic.session import Session


def frame(rows: int, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "region": rng.integers(0, 25, rows).astype(str),
        "activity": rng.integers(0, 40, rows).astype(str),
        "size_band": rng.choice(["0-9", "10-49", "50-249", "250+"], rows, p=[0.6, 0.25, 0.1, 0.05]),
        "age": rng.integers(18, 90, rows),
        "flag": rng.random(rows) < 0.3,
        "consent": rng.random(rows) < 0.9,
    })


def timed(fn, repeats: int = 3) -> float:
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def suggestions(rows: int, keys: list[str]) -> None:
    df = frame(rows)
    session = Session()
    session.capture.install()
    table = df.groupby(keys).size()
    checked = session.check(table, protect=False)
    plain = timed(lambda: df.groupby(keys).size())
    found = {}

    def run() -> None:
        found["out"], _ = session.suggestions(checked, name_of=lambda f, k: "df", budget=0.2)

    seconds = timed(run, repeats=1)
    out = found["out"]
    print(f"suggest  {len(table):>6} cells  {rows:>9,} rows   search {seconds:6.3f} s (budget 0.2 s)   "
          f"explored {len(out.explored):>2}, offered {len(out.items):>2}, exhausted={out.exhausted}   "
          f"plain groupby {plain:.4f} s")
    session.capture.uninstall()


def linked(earlier: int = 200) -> None:
    df = frame(20_000)
    session = Session()
    session.capture.install()
    keys_options = [["region", "size_band"], ["activity", "size_band"], ["region", "flag"], ["activity", "flag"]]
    for i in range(earlier):
        part = df[df["age"] != 18 + (i % 70)]
        session.publish(part.groupby(keys_options[i % 4]).size().unstack())
    new = df.groupby(["region", "activity"]).size().unstack()  # 1,000 cells
    lone = Session()
    lone.capture.install()
    alone = timed(lambda: lone.publish(df.groupby(["region", "activity"]).size().unstack()), repeats=1)
    t0 = time.perf_counter()
    published = session.publish(new)
    with_history = time.perf_counter() - t0
    meta = published.metadata["sdc_magic"]
    print(f"linked   new table {new.size} cells vs {earlier} earlier outputs: {with_history:.3f} s "
          f"(alone {alone:.3f} s; status {meta['status']}, {meta['hidden']} hidden)")


def main() -> None:
    print(f"pandas {pd.__version__}, numpy {np.__version__}")
    suggestions(100_000, ["region", "activity"])  # ~1,000 cells
    suggestions(1_000_000, ["region", "activity", "size_band"])  # ~4,000 cells
    suggestions(1_000_000, ["region", "activity", "size_band", "flag"])  # ~8,000 cells
    linked()


if __name__ == "__main__":
    main()
