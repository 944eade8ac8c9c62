"""polars and DuckDB: a 3-key group-by (count; sum) checked vs plain, side by side in one process.

    python benchmarks/engines.py            # 10M rows
    python benchmarks/engines.py --rows 1e6
    python benchmarks/engines.py --large    # 100M rows (DuckDB only; needs ~8 GB)
    python benchmarks/engines.py --spark    # PySpark local[2] (Java 17), 10M rows generated in Spark
    python benchmarks/engines.py --only polars

*plain* is what a user runs without the extension (the query, and its result fetched as
pandas for DuckDB — what a display does); *with evidence* is the same call with the capture
installed and the result in its checked pandas form (the engine's evidence computed and
registered); *displayed and checked* adds what a display runs after that (rules,
secondary protection, rendering: the same cost as for a pandas table of that size). Each
timing is the best of ``--repeat`` runs. Keys: 3 columns (50 × 20 × 6 = 6,000 groups,
a few of them small), one float magnitude, one unit id (rows / 3 units).
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd


def make_data(rows: int, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    region = rng.integers(0, 50, rows)
    activity = rng.integers(0, 20, rows)
    size = rng.integers(0, 6, rows)
    # a few rare combinations: small cells for the rules to find
    rare = rng.random(rows) < 2e-6
    size[rare] = 6
    return pd.DataFrame({
        "region": pd.Categorical.from_codes(region, [f"r{i:02d}" for i in range(50)]).astype(str),
        "activity": pd.Categorical.from_codes(activity, [f"a{i:02d}" for i in range(20)]).astype(str),
        "size": size.astype(np.int64),
        "turnover": rng.lognormal(3.0, 1.5, rows),
        "firm_id": rng.integers(0, max(rows // 3, 1), rows),
    })


def load() -> str:
    """The machine's load average (timings on a shared machine are only comparable at like load)."""
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def spark_main(rows: int, repeat: int) -> None:
    """PySpark local[2]: plain ``groupBy(...).count()/sum().toPandas()`` vs the same with capture.

    The data are generated inside Spark (no 10M-row transfer from Python); *with evidence*
    is ``toPandas()`` of the captured result: one job computing the user's columns and the
    facts (per-unit sums add one job when a unit column is declared).
    """
    import warnings

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from sdc_magic.config import preset
    from sdc_magic.jupyter.session import Session

    warnings.filterwarnings("ignore", category=FutureWarning)
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    sdf = spark.range(rows).select(
        F.format_string("r%02d", F.pmod(F.xxhash64("id", F.lit(1)), F.lit(50))).alias("region"),
        F.format_string("a%02d", F.pmod(F.xxhash64("id", F.lit(2)), F.lit(20))).alias("activity"),
        F.pmod(F.xxhash64("id", F.lit(3)), F.lit(6)).alias("size"),
        F.exp(F.randn(4) * 1.5 + 3.0).alias("turnover"),
        F.pmod(F.xxhash64("id", F.lit(5)), F.lit(max(rows // 3, 1))).alias("firm_id"),
    ).cache()
    t0 = time.perf_counter()
    sdf.count()
    print(f"Spark {spark.version} local[2]: {rows:,} rows generated and cached in {time.perf_counter() - t0:.1f} s "
          f"({load()})")
    keys = ["region", "activity", "size"]
    cases = [("count", lambda: sdf.groupBy(*keys).count()),
             ("sum (top-k)", lambda: sdf.groupBy(*keys).agg(F.sum("turnover").alias("turnover")))]
    results = []
    for unit in (None, "firm_id"):
        sess = Session(rules=preset("insee"))
        if unit:
            sess.set_rules(unit=unit)
        for op, make in cases:
            plain = best(lambda make=make: make().toPandas(), repeat)
            sess.capture.install()
            try:
                ev = best(lambda make=make: make().toPandas(), repeat)
            finally:
                sess.capture.uninstall()
            results.append(("Spark", op, unit or "rows", plain, ev))
            print(f"Spark   {op:12s} unit={unit or 'rows':8s} plain {plain:7.3f} s  with evidence {ev:7.3f} s "
                  f"({ev / plain:5.2f}x)", flush=True)
    spark.stop()
    print(f"({load()})")
    print("\n| engine | statistic | units | plain (s) | with evidence (s) | ratio |")
    print("|---|---|---|---:|---:|---:|")
    for engine, op, unit, plain, ev in results:
        print(f"| {engine} | {op} | {unit} | {plain:.3f} | {ev:.3f} | {ev / plain:.2f}× |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=float, default=1e7)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--large", action="store_true", help="100M rows (DuckDB only)")
    parser.add_argument("--spark", action="store_true", help="PySpark local[2] instead of polars and DuckDB")
    parser.add_argument("--only", choices=["polars", "duckdb"], help="one of the two in-process engines")
    args = parser.parse_args()
    rows = int(1e8 if args.large else args.rows)
    if args.spark:
        spark_main(rows, args.repeat)
        return

    import duckdb
    import polars as pl

    from sdc_magic.capture.display import to_pandas
    from sdc_magic.config import preset
    from sdc_magic.jupyter.session import Session

    t0 = time.perf_counter()
    data = make_data(rows)
    p = pl.from_pandas(data)
    con = duckdb.connect()
    con.register("firms", p.to_arrow())
    con.execute("CREATE TABLE t AS SELECT * FROM firms")
    con.unregister("firms")
    del data
    print(f"{rows:,} rows generated in {time.perf_counter() - t0:.1f} s "
          f"(polars {pl.__version__}, duckdb {duckdb.__version__}; {load()})")

    keys = ["region", "activity", "size"]
    q_count = "SELECT region, activity, size, count(*) AS n FROM t GROUP BY ALL"
    q_sum = "SELECT region, activity, size, sum(turnover) AS turnover FROM t GROUP BY ALL"
    cases: list[tuple[str, str, Callable[[], Any]]] = [
        ("DuckDB", "count", lambda: con.sql(q_count)),
        ("DuckDB", "sum (top-k)", lambda: con.sql(q_sum)),
    ]
    if args.only == "polars":
        cases = []
    if not args.large and args.only != "duckdb":
        cases += [
            ("polars", "count", lambda: p.group_by(keys).len()),
            ("polars", "sum (top-k)", lambda: p.group_by(keys).agg(pl.col("turnover").sum())),
        ]

    def plain_run(make: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            out = make()
            return out.df() if hasattr(out, "df") else out
        return run

    results = []
    for unit in (None, "firm_id"):
        sess = Session(rules=preset("insee"))
        if unit:
            sess.set_rules(unit=unit)
        for engine, op, make in cases:
            plain = best(plain_run(make), args.repeat)
            sess.capture.install()
            try:
                statuses: list[str] = []

                def checked(make: Callable[[], Any] = make, statuses: list[str] = statuses, sess: Any = sess) -> None:
                    published = sess.publish(make(), record=False)
                    statuses.append(published.metadata["sdc_magic"]["status"])

                def evidence(make: Callable[[], Any] = make) -> None:
                    to_pandas(make())  # the call with its evidence, converted for checking

                ev = best(evidence, args.repeat)
                t = best(checked, args.repeat)
            finally:
                sess.capture.uninstall()
            results.append((engine, op, unit or "rows", plain, ev, t, statuses[-1]))
            print(f"{engine:7s} {op:12s} unit={unit or 'rows':8s} plain {plain:7.3f} s  with evidence {ev:7.3f} s "
                  f"({ev / plain:5.2f}x)  displayed and checked {t:7.3f} s ({t / plain:5.2f}x)  "
                  f"status {statuses[-1]}", flush=True)

    print(f"({load()})")
    print("\n| engine | statistic | units | plain (s) | with evidence (s) | ratio | displayed, checked (s) | ratio |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for engine, op, unit, plain, ev, t, _ in results:
        print(f"| {engine} | {op} | {unit} | {plain:.3f} | {ev:.3f} | {ev / plain:.2f}× | {t:.3f} | {t / plain:.2f}× |")


if __name__ == "__main__":
    main()
