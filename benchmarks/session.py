"""Session-level costs: better-answer search and linked-output checks.

Prints, for fixed seeds:
* the suggestion search on tables of ~1,000 and ~10,000 cells (budget 0.2 s, and how
  much was explored within it), against the cost of the plain pandas groupby;
* checking a new ~1,000-cell table against 200 earlier outputs of the same session
  (differencing through filters + joint audit), against displaying it alone;
* the same on 1M rows after 50 related outputs (issue 10's target: <= 0.3 s), the same
  table displayed again, and the memory the linking holds.

Run: ``.venv/bin/python benchmarks/session.py``. Not a test: machines are shared.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from sdc_magic.jupyter.session import Session


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
        found["out"], _ = session.suggestions(checked, name_of=lambda f, k: "df", )

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


def _time_linking(session: Session) -> list[float]:
    """Accumulate the time spent in the session's linking steps (differencing, published lookup, link)."""
    spent: list[float] = []
    for name in ("_differencing", "_published", "_link"):
        original = getattr(session, name)

        def wrapped(*args, _original=original, **kwargs):
            t0 = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                spent.append(time.perf_counter() - t0)

        setattr(session, name, wrapped)
    return spent


def linked_large(rows: int = 1_000_000, earlier: int = 50) -> None:
    """The latency target of issue 10: a 1,000-cell table on 1M rows after 50 related outputs
    (filters, recodings, a reset index, describe, a constant key) in one session."""
    import tracemalloc

    df = frame(rows)
    session = Session()
    session.capture.install()
    keys_options = [["region", "size_band"], ["activity", "size_band"], ["region", "flag"], ["activity", "flag"],
                    ["region"], ["size_band", "consent"]]
    times = []
    tracemalloc.start()
    for i in range(earlier):
        if i % 10 == 9:
            part = df[df["age"] != 18 + i].reset_index(drop=True)
        elif i % 10 == 4:
            part = df[df["consent"]]
        else:
            part = df[df["age"] != 18 + (i % 70)]
        if i % 17 == 16:
            table = part["age"].describe()
        elif i % 13 == 12:
            table = part.assign(all="all").groupby("all").size()
        else:
            keys = keys_options[i % len(keys_options)]
            table = part.groupby(keys).size()
            table = table.unstack() if len(keys) > 1 else table
        t0 = time.perf_counter()
        session.publish(table)
        times.append(time.perf_counter() - t0)
    new = df.groupby(["region", "activity"]).size().unstack()  # 1,000 cells (grouped before timing)
    lone = Session()
    lone.capture.install()
    alone_table = df.groupby(["region", "activity"]).size().unstack()
    alone = timed(lambda: lone.publish(alone_table), repeats=1)
    lone.capture.uninstall()
    spent = _time_linking(session)
    t0 = time.perf_counter()
    published = session.publish(new)
    with_history = time.perf_counter() - t0
    linking = sum(spent)
    spent.clear()
    again = timed(lambda: session.publish(new), repeats=3)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    meta = published.metadata["sdc_magic"]
    linker = session.populations
    print(f"linked   {rows:,} rows: new table {new.size} cells after {earlier} related outputs: {with_history:.3f} s, "
          f"of which linking {linking:.3f} s (alone {alone:.3f} s; same table again {again:.3f} s; "
          f"status {meta['status']}, {meta['hidden']} hidden)")
    print(f"         earlier outputs: first {times[0]:.3f} s, median {np.median(times):.3f} s, last {times[-1]:.3f} s; "
          f"linking memory {linker.nbytes() / 2**20:.1f} MB for {len(linker)} populations, "
          f"{sum(u.n_atoms for u in linker.universes):,} atoms; traced peak {peak / 2**20:.0f} MB")
    session.capture.uninstall()


def main() -> None:
    print(f"pandas {pd.__version__}, numpy {np.__version__}")
    suggestions(100_000, ["region", "activity"])  # ~1,000 cells
    suggestions(1_000_000, ["region", "activity", "size_band"])  # ~4,000 cells
    suggestions(1_000_000, ["region", "activity", "size_band", "flag"])  # ~8,000 cells
    linked()
    linked_large()


if __name__ == "__main__":
    main()
