"""polars, DuckDB and pandas: what a user waits for until a grouped table is on screen, checked vs plain.

    python benchmarks/engines.py --rows 1e6                 # 1M rows, 1,000-cell tables
    python benchmarks/engines.py --rows 1e7 --cells 10000   # 10M rows, 10,000-cell tables
    python benchmarks/engines.py --large    # 100M rows (DuckDB only; needs ~8 GB)
    python benchmarks/engines.py --spark --rows 1e6   # PySpark local[2] (Java 17), rows generated in Spark
    python benchmarks/engines.py --spark --connect --rows 1e6   # the same through a local Spark Connect server
    python benchmarks/engines.py --only polars
    python benchmarks/engines.py --rows 1e6 --session 40   # 40 related DuckDB tables in one session
    python benchmarks/engines.py --rows 1e7 --only pandas --session 10 [--linked-rows 5e7]
    python benchmarks/engines.py --rows 1e6 --session 20 --distinct [--only polars]   # every 4th: distinct firms
    python benchmarks/engines.py --rows 1e6 --session 20 --unit [--only polars]   # firms declared the unit

*plain*: the call, its result as the notebook gets it (DuckDB ``.df()``, a polars frame,
a lazy query ``.collect()``) and the HTML IPython formats for it, without the extension.
*checked*: the same call with the extension's capture installed, then the display a
notebook makes (``Session.publish`` with recording and linking on: evidence, rules,
protection, linking with the session's earlier outputs, rendering). Each pair runs plain
then checked in one process, ``--pairs`` times (interleaved, medians reported); every
checked run is the first display of a fresh session and kernel: no protection found before,
no row fingerprints of the frame (``--later``: kept, as for a frame's next table).
Keys: 3 columns (``--cells`` groups, a few small), one float magnitude, one unit id
(rows / 3 units; ``--unit`` declares it). *Peak memory added*: one more, untimed pair, the
resident size above the start of the call sampled every 2 ms (:func:`peak_mb`).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd


def make_data(rows: int, seed: int = 7, cells: int = 6000) -> pd.DataFrame:
    """Keys region × activity × size with about ``cells`` groups (50 × 20 × 6 = 6,000 by default)."""
    rng = np.random.default_rng(seed)
    n_region = max(round(cells / (20 * 6)), 1)
    region = rng.integers(0, n_region, rows)
    activity = rng.integers(0, 20, rows)
    size = rng.integers(0, 6, rows)
    # a few rare combinations: small cells for the rules to find
    rare = rng.random(rows) < 2e-6
    size[rare] = 6
    return pd.DataFrame({
        "region": pd.Categorical.from_codes(region, [f"r{i:03d}" for i in range(n_region)]).astype(str),
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


def spark_main(args: Any) -> None:
    """PySpark local[2]: the user's path, as for the other engines (see :func:`measure`).

    *plain*: ``groupBy(...).count()`` / ``agg(sum)`` fetched with ``toPandas()`` and formatted as
    HTML; *checked*: the same aggregation displayed by a fresh session with recording and
    linking on (one job for the user's columns and the facts, one for linking's count of the
    session's atoms inside Spark: ``capture/spark_lineage.py``). The data are generated inside
    Spark and cached (no transfer from Python). ``--session N``: N related tables in one session
    (:func:`spark_session`).
    """
    import warnings

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    rows = int(args.rows)
    warnings.filterwarnings("ignore", category=FutureWarning)
    builder = SparkSession.builder.remote("local[2]") if args.connect else SparkSession.builder.master("local[2]")
    spark = (builder.config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").config("spark.driver.memory", "2g").getOrCreate())
    if not args.connect:
        spark.sparkContext.setLogLevel("ERROR")
    else:  # (Connect's columns: pyspark.sql.functions follows the session made first)
        from pyspark.sql.connect.functions import builtin as F
    n_region = max(round(args.cells / (20 * 6)), 1)
    sdf = spark.range(rows).select(
        F.format_string("r%03d", F.pmod(F.xxhash64("id", F.lit(1)), F.lit(n_region))).alias("region"),
        F.format_string("a%02d", F.pmod(F.xxhash64("id", F.lit(2)), F.lit(20))).alias("activity"),
        F.pmod(F.xxhash64("id", F.lit(3)), F.lit(6)).alias("size"),
        # (a deterministic skewed value: a random one would make the plan non-deterministic, and
        # such a source is linked by its rows, not inside Spark)
        F.exp((F.pmod(F.xxhash64("id", F.lit(4)), F.lit(10_000)) / 10_000.0 - 0.5) * 4.0 + 3.0).alias("turnover"),
        F.pmod(F.xxhash64("id", F.lit(5)), F.lit(max(rows // 3, 1))).alias("firm_id"),
    ).cache()
    t0 = time.perf_counter()
    sdf.count()
    print(f"Spark {spark.version} local[2]{' (Connect)' if args.connect else ''}: {rows:,} rows, {args.cells:,}-cell tables, generated and cached in "
          f"{time.perf_counter() - t0:.1f} s ({load()})")
    keys = ["region", "activity", "size"]

    def fetched(make: Callable[[], Any]) -> Callable[[], Any]:
        return lambda: make().toPandas()

    cases = [("count", lambda: sdf.groupBy(*keys).count()),
             ("sum", lambda: sdf.groupBy(*keys).agg(F.sum("turnover").alias("turnover")))]
    if args.session:
        spark_session(sdf, args.session)
        spark.stop()
        return
    results = [measure("Spark", op, make, args, plain_make=fetched(make)) for op, make in cases]
    spark.stop()
    print(f"({load()})")
    table(results)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=float, default=1e6)
    parser.add_argument("--cells", type=int, default=1000, help="groups of the tables (1,000 or 10,000)")
    parser.add_argument("--pairs", type=int, default=5, help="interleaved plain/checked pairs (medians)")
    parser.add_argument("--unit", action="store_true", help="declare the unit column (firm_id)")
    parser.add_argument("--large", action="store_true", help="100M rows (DuckDB only)")
    parser.add_argument("--spark", action="store_true", help="PySpark local[2] instead of polars and DuckDB")
    parser.add_argument("--connect", action="store_true", help="with --spark: through a local Spark Connect server")
    parser.add_argument("--only", choices=["polars", "duckdb", "pandas"], help="one engine")
    parser.add_argument("--later", action="store_true",
                        help="a later table of a frame already displayed (its row fingerprints kept); "
                             "default: the frame's first table in a fresh kernel")
    parser.add_argument("--session", type=int, default=0,
                        help="this many related tables displayed in one session (filters, margins): DuckDB, "
                             "or polars with --only polars (eager, lazy and derived columns mixed), or pandas "
                             "with --only pandas")
    parser.add_argument("--distinct", action="store_true",
                        help="with --session (DuckDB, polars): every 4th table counts distinct firms "
                             "(count(DISTINCT firm_id), n_unique), linked in units inside the engine")
    parser.add_argument("--linked-rows", type=float, default=0,
                        help="with --only pandas --session: link pandas frames of up to this many rows "
                             "(MAX_LINKED_ROWS; default: as shipped)")
    args = parser.parse_args()
    rows = int(1e8 if args.large else args.rows)
    if args.spark:
        spark_main(args)
        return

    import duckdb
    import polars as pl

    t0 = time.perf_counter()
    data = make_data(rows, cells=args.cells)
    p = pl.from_pandas(data)
    con = duckdb.connect()
    con.register("firms", p.to_arrow())
    con.execute("CREATE TABLE t AS SELECT * FROM firms")
    con.unregister("firms")
    print(f"{rows:,} rows, {args.cells:,}-cell tables, generated in {time.perf_counter() - t0:.1f} s "
          f"(polars {pl.__version__}, duckdb {duckdb.__version__}, pandas {pd.__version__}; {load()})")

    if args.session:
        if args.only == "polars":
            polars_session(p, args.session, args.distinct, "firm_id" if args.unit else None)
        elif args.only == "pandas":
            pandas_session(data, args.session, int(args.linked_rows))
        else:
            duckdb_session(con, args.session, args.distinct, "firm_id" if args.unit else None)
        return
    keys = ["region", "activity", "size"]
    q_count = "SELECT region, activity, size, count(*) AS n FROM t GROUP BY ALL"
    q_sum = "SELECT region, activity, size, sum(turnover) AS turnover FROM t GROUP BY ALL"
    # (the lazy query starts from ``p.lazy()`` in the call, as in a notebook that loaded the extension first:
    # a lazy frame made before the capture was installed has no known root and is linked by its rows)
    cases: list[tuple[str, str, Callable[[], Any]]] = [
        ("DuckDB", "count", lambda: con.sql(q_count).df()),
        ("DuckDB", "sum", lambda: con.sql(q_sum).df()),
        ("polars", "count", lambda: p.group_by(keys).len()),
        ("polars", "sum", lambda: p.group_by(keys).agg(pl.col("turnover").sum())),
        ("polars lazy", "count", lambda: p.lazy().group_by(keys).len().collect()),
        ("polars lazy", "sum", lambda: p.lazy().group_by(keys).agg(pl.col("turnover").sum()).collect()),
        ("pandas", "groupby.size", lambda: data_pd.groupby(keys).size()),
        ("pandas", "groupby.sum", lambda: data_pd.groupby(keys)["turnover"].sum()),
        ("pandas", "crosstab mean", lambda: pd.crosstab([data_pd.region, data_pd.activity], data_pd["size"],
                                                         values=data_pd.turnover, aggfunc="mean")),
        ("pandas", "pivot_table sum", lambda: data_pd.pivot_table(index=["region", "activity"], columns="size",
                                                                  values="turnover", aggfunc="sum")),
    ]
    data_pd = data
    if args.only:
        cases = [c for c in cases if c[0].split()[0].lower() == args.only]
    if args.large:
        cases = [c for c in cases if c[0] == "DuckDB"]
    results = [measure(engine, op, make, args) for engine, op, make in cases]
    print(f"({load()})")
    table(results)


def duckdb_session(con: Any, n: int, distinct: bool = False, unit: str | None = None) -> None:
    """``n`` related DuckDB tables in one session, as an analysis goes: filters of the same
    table, coarser groupings, a sum now and then. Per table, plain (the query and its HTML)
    and checked (the display with recording and linking on, in the one session) side by side;
    what a user waits for as the session grows, and the verdicts (then linked by rows instead,
    as :func:`_session_report` does for every engine). ``unit``: declared (``--unit``)."""
    groupings = ["region, activity, size", "region, size", "activity, size", "region", "region, activity"]
    filters = ["TRUE", "size <> 6", "activity <> 'a00'", "region <> 'r000'", "size < 5", "turnover > 1"]
    queries = []
    for i in range(n):
        keys, where = groupings[i % len(groupings)], filters[(i // len(groupings)) % len(filters)]
        stat = "sum(turnover) AS turnover" if i % 7 == 6 else "count(*) AS n"
        stat = "count(DISTINCT firm_id) AS firms" if distinct and i % 4 == 3 else stat
        queries.append(f"SELECT {keys}, {stat} FROM t WHERE {where} GROUP BY ALL")
    _session_report("DuckDB", [lambda q=q: con.sql(q) for q in queries], lambda r: r.df(), n, unit)


def pandas_session(data: pd.DataFrame, n: int, linked_rows: int = 0) -> None:
    """``n`` related pandas tables in one session, as :func:`duckdb_session` (the same groupings
    and filters), with the memory the session keeps (resident, after a garbage collection) and why
    tables are ``review``. ``linked_rows``: ``MAX_LINKED_ROWS`` for the run (above it a pandas
    frame is not linked, and every later table of the session is ``review``)."""
    from sdc_magic.config import preset
    from sdc_magic.evidence import rows as row_limits
    from sdc_magic.jupyter.session import Session

    if linked_rows:
        row_limits.MAX_LINKED_ROWS = linked_rows
    groupings = [["region", "activity", "size"], ["region", "size"], ["activity", "size"], ["region"],
                 ["region", "activity"]]
    filters: list[Callable[[pd.DataFrame], Any]] = [
        lambda d: None, lambda d: d["size"] != 6, lambda d: d.activity != "a00", lambda d: d.region != "r000",
        lambda d: d["size"] < 5, lambda d: d.turnover > 1]

    def table(i: int) -> Any:
        keys, keep = groupings[i % len(groupings)], filters[(i // len(groupings)) % len(filters)](data)
        frame = data if keep is None else data[keep]
        return frame.groupby(keys)["turnover"].sum() if i % 7 == 6 else frame.groupby(keys).size()

    gc.collect()
    before = _rss_bytes()
    sess = Session(rules=preset("insee"))
    sess.capture.install()
    ratios, statuses, checked_s, why = [], [], [], []
    try:
        for i in range(n):
            gc.collect()
            t0 = time.perf_counter()
            _formatted(table(i))
            plain = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = sess.publish(table(i))
            checked = time.perf_counter() - t0
            ratios.append(checked / plain)
            checked_s.append(checked)
            statuses.append(out.metadata["sdc_magic"]["status"])
            if statuses[-1] == "review":
                notes = out.checked.notes if out.checked else []
                why += ([n[:60] for n in notes if "review" in n] or [n[:60] for n in notes])[:1]
        gc.collect()
        kept = (_rss_bytes() - before) / 2**20
    finally:
        sess.capture.uninstall()
    counts = {s: statuses.count(s) for s in dict.fromkeys(statuses)}
    print(f"pandas session of {n} tables on {len(data):,} rows (MAX_LINKED_ROWS {row_limits.MAX_LINKED_ROWS:,}): "
          f"checked {statistics.median(checked_s):.3f} s median per display ({statistics.median(ratios):.2f}x plain); "
          f"first {checked_s[0]:.3f} s, last {checked_s[-1]:.3f} s; memory kept +{kept:.0f} MB; statuses {counts}; "
          f"review because: {sorted(set(why))}", flush=True)


def spark_session(sdf: Any, n: int) -> None:
    """``n`` related Spark tables in one session, as :func:`polars_session` (filters, a derived
    column now and then, sums now and then), then the same session linked by rows."""
    from sdc_magic.capture.spark_lineage import functions_of

    F = functions_of(sdf)
    groupings = [["region", "activity", "size"], ["region", "size"], ["activity", "size"], ["region"],
                 ["region", "activity"]]
    filters = [F.lit(True), F.col("size") != 6, F.col("activity") != "a00", F.col("region") != "r000",
               F.col("size") < 5, F.col("turnover") > 1]
    makers: list[Callable[[], Any]] = []
    for i in range(n):
        keys, where = groupings[i % len(groupings)], filters[(i // len(groupings)) % len(filters)]
        agg = F.sum("turnover").alias("turnover") if i % 7 == 6 else F.count("*").alias("n")
        if i % 5 == 4:
            makers.append(lambda k=keys, w=where, a=agg: sdf.withColumn("small", F.col("size") < 3).filter(w)
                          .groupBy(*k, "small").agg(a))
        else:
            makers.append(lambda k=keys, w=where, a=agg: sdf.filter(w).groupBy(*k).agg(a))
    _session_report("Spark", makers, lambda t: t.toPandas(), n)


def _session_report(engine: str, makers: list[Callable[[], Any]], fetch: Callable[[Any], Any], n: int,
                    unit: str | None = None) -> None:
    """Display the tables in one session, linked in the engine, then by rows: time per display
    (plain: the same aggregation fetched and formatted), the curve, and the statuses compared.
    ``unit``: the declared unit column (``--unit``), or None."""
    from sdc_magic.config import preset
    from sdc_magic.evidence import rows as row_limits
    from sdc_magic.jupyter.session import Session

    def run(limit: int) -> tuple[list[str], list[float], list[float]]:
        saved = row_limits.IN_ENGINE_ROWS
        row_limits.IN_ENGINE_ROWS = limit
        sess = Session(rules=preset("insee"))
        if unit is not None:
            sess.set_rules(unit=unit)
        sess.capture.install()
        statuses, ratios, checked_s = [], [], []
        try:
            for make in makers:
                gc.collect()
                t0 = time.perf_counter()
                _formatted(fetch(make()))
                plain = time.perf_counter() - t0
                t0 = time.perf_counter()
                out = sess.publish(make())
                checked = time.perf_counter() - t0
                ratios.append(checked / plain)
                checked_s.append(checked)
                statuses.append(out.metadata["sdc_magic"]["status"])
        finally:
            sess.capture.uninstall()
            row_limits.IN_ENGINE_ROWS = saved
        return statuses, ratios, checked_s

    statuses, ratios, checked_s = run(row_limits.IN_ENGINE_ROWS)
    half = max(n // 2, 1)
    counts = {s: statuses.count(s) for s in dict.fromkeys(statuses)}
    print(f"{engine} session of {n} tables: checked {statistics.median(checked_s):.3f} s median per display "
          f"({statistics.median(ratios):.2f}x plain); first {checked_s[0]:.3f} s, last {checked_s[-1]:.3f} s; "
          f"second half / first half {statistics.median(checked_s[half:]) / statistics.median(checked_s[:half]):.2f}; "
          f"statuses {counts}", flush=True)
    by_rows, _, rows_s = run(10**12)
    same = sum(a == b for a, b in zip(statuses, by_rows, strict=True))
    print(f"  linked by rows instead: {statistics.median(rows_s):.3f} s median per display; statuses "
          f"{ {s: by_rows.count(s) for s in dict.fromkeys(by_rows)} }; {same} of {n} the same", flush=True)


def polars_session(p: Any, n: int, distinct: bool = False, unit: str | None = None) -> None:
    """``n`` related polars tables in one session, as :func:`duckdb_session`, written the ways a polars
    user writes them: eager and lazy, filters, a derived column now and then; then the same
    session with linking by rows (``IN_ENGINE_ROWS`` raised above the data) for the verdicts."""
    import polars as pl


    groupings = [["region", "activity", "size"], ["region", "size"], ["activity", "size"], ["region"],
                 ["region", "activity"]]
    filters = [pl.lit(True), pl.col("size") != 6, pl.col("activity") != "a00", pl.col("region") != "r000",
               pl.col("size") < 5, pl.col("turnover") > 1]
    makers: list[Callable[[], Any]] = []
    for i in range(n):
        keys, where = groupings[i % len(groupings)], filters[(i // len(groupings)) % len(filters)]
        agg = pl.col("turnover").sum() if i % 7 == 6 else pl.len()
        agg = pl.col("firm_id").n_unique().alias("firms") if distinct and i % 4 == 3 else agg
        if i % 3 == 1:
            makers.append(lambda k=keys, w=where, a=agg: p.lazy().filter(w).group_by(k).agg(a).collect())
        elif i % 5 == 4:
            makers.append(lambda k=keys, w=where, a=agg: p.with_columns(small=pl.col("size") < 3).filter(w)
                          .group_by([*k, "small"]).agg(a))
        else:
            makers.append(lambda k=keys, w=where, a=agg: p.filter(w).group_by(k).agg(a))
    _session_report("polars", makers, lambda t: t.to_pandas(), n, unit)


def table(results: list[tuple]) -> None:
    """The results as the Markdown table the docs show."""
    print("\n| engine | statistic | units | plain (s) | checked (s) | ratio | peak memory added, plain / checked | status |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for engine, op, unit, plain, checked, status, plain_mb, checked_mb in results:
        print(f"| {engine} | {op} | {unit} | {plain:.3f} | {checked:.3f} | {checked / plain:.2f}× "
              f"| {plain_mb:.0f} / {checked_mb:.0f} MB | {status} |")


def measure(engine: str, op: str, make: Callable[[], Any], args: Any,
            plain_make: Callable[[], Any] | None = None) -> tuple:
    """Medians of ``args.pairs`` interleaved pairs: plain, then a fresh session's first checked display.

    ``plain_make``: what the plain side calls, when it differs from ``make`` (Spark: the
    aggregation fetched with ``toPandas()``, which a checked display does itself).
    """
    from sdc_magic.config import preset
    from sdc_magic.jupyter.session import Session

    plain_times, checked_times, statuses = [], [], []
    for _ in range(args.pairs):
        gc.collect()
        t0 = time.perf_counter()
        html = _formatted((plain_make or make)())
        plain_times.append(time.perf_counter() - t0)
        del html
        sess = Session(rules=preset("insee"))
        if args.unit:
            sess.set_rules(unit="firm_id")
        forget_process_caches(keep_fingerprints=args.later)
        sess.capture.install()
        try:
            gc.collect()
            t0 = time.perf_counter()
            published = sess.publish(make())  # record=True: linking on, as a notebook displays
            checked_times.append(time.perf_counter() - t0)
            statuses.append(published.metadata["sdc_magic"]["status"])
        finally:
            sess.capture.uninstall()
    plain, checked = statistics.median(plain_times), statistics.median(checked_times)
    unit = "firm_id" if args.unit else "rows"
    # memory: one more pair, untimed (the sampling thread would weigh on the timings)
    plain_mb = peak_mb(lambda: _formatted((plain_make or make)()))
    sess = Session(rules=preset("insee"))
    if args.unit:
        sess.set_rules(unit="firm_id")
    forget_process_caches(keep_fingerprints=args.later)
    sess.capture.install()
    try:
        checked_mb = peak_mb(lambda: sess.publish(make()))
    finally:
        sess.capture.uninstall()
    print(f"{engine:12s} {op:16s} unit={unit:8s} plain {plain:7.3f} s  checked {checked:7.3f} s "
          f"({checked / plain:6.2f}x)  peak +{plain_mb:5.0f} / +{checked_mb:5.0f} MB  status {statuses[-1]}",
          flush=True)
    return engine, op, unit, plain, checked, statuses[-1], plain_mb, checked_mb


def forget_process_caches(keep_fingerprints: bool = False) -> None:
    """What a fresh kernel does not have: protections found for earlier tables and, unless
    ``keep_fingerprints`` (``--later``: a frame whose earlier table was displayed), the frames'
    row fingerprints. Without this every pair after the first reused the first one's protection
    and the frame's fingerprints, and the medians measured no first display at all."""
    from sdc_magic.capture.polars.lineage import forget_identities
    from sdc_magic.linking.identity import forget_fingerprints
    from sdc_magic.protect.api import clear_cache

    clear_cache()
    if not keep_fingerprints:
        forget_fingerprints()
        forget_identities()


def _formatted(shown: Any) -> str:
    return shown.to_frame()._repr_html_() if isinstance(shown, pd.Series) else shown._repr_html_()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_mb(run: Callable[[], Any]) -> float:
    """Peak resident memory above the start while ``run`` runs (MB), sampled every 2 ms.

    Why sampled: the process's high-water mark (``ru_maxrss``) only grows, so in one process it
    cannot tell the second of two calls apart; the resident size read from ``/proc`` while the
    call runs can, native allocations (DuckDB, polars, Arrow) included. Memory the allocator
    kept from an earlier call is reused without growing the resident size, so this is what the
    call adds to the process, not all it touches (the same for both sides).
    """
    gc.collect()
    start = _rss_bytes()
    peak = [start]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_bytes())
            done.wait(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = run()
        peak[0] = max(peak[0], _rss_bytes())
        del result
    finally:
        done.set()
        sampler.join()
    return (peak[0] - start) / 2**20


if __name__ == "__main__":
    main()
