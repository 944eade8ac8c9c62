"""Overhead of sdc_magic's evidence capture and display path, side by side with plain pandas.

One process, synthetic microdata (fixed seed), every operation timed with and without the
capture wrappers installed, interleaved so that drift (thermal, allocator, page cache)
hits both sides alike. Reported per operation: the median of the repeats for plain
pandas and with the extension, their ratio, and the target.

    python benchmarks/capture.py            # 1M and 10M rows
    python benchmarks/capture.py --quick    # 1M rows, fewer repeats
    python benchmarks/capture.py --rows 2000000 --repeats 7
    python benchmarks/capture.py --quick --profile   # + cProfile of each captured call

This is a script, not a test: it never fails on a missed target, it prints MISS.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

import sdc_magic
from sdc_magic.config import preset
from sdc_magic.jupyter import (
    extension,  # imported up front: all sdc_magic modules come from one version of the tree
)
from sdc_magic.jupyter.session import Session

SEED = 20240611
LEVELS = (20, 10, 10)  # k1 × k2 × k3 = 2,000 groups
KEYS = ["k1", "k2", "k3"]

COUNT_TARGET = 1.5
MAGNITUDE_TARGET = 3.0
DISPLAY_1K_TARGET_S = 0.100
NONPANDAS_TARGET = 1.10  # "~1.0×": anything within 10 % is noise at these timescales


# --------------------------------------------------------------------------- data
def make_frame(n: int, int_keys: bool, seed: int = SEED) -> pd.DataFrame:
    """``n`` rows: keys k1/k2/k3 (20×10×10 levels), k4 (5 levels), v lognormal, uid ~3 rows/unit."""
    rng = np.random.default_rng(seed)
    codes = [rng.integers(0, m, n, dtype=np.int32) for m in (*LEVELS, 5)]
    cols: dict[str, Any] = {}
    for name, prefix, c, m in zip(["k1", "k2", "k3", "k4"], "abcd", codes, (*LEVELS, 5), strict=True):
        if int_keys:
            cols[name] = c.astype(np.int64)
        else:
            labels = np.array([f"{prefix}{i:02d}" for i in range(m)], dtype=object)
            cols[name] = pd.array(labels[c], dtype="str")
    cols["v"] = rng.lognormal(mean=3.0, sigma=1.5, size=n)
    cols["uid"] = rng.integers(0, max(n // 3, 1), n, dtype=np.int64)
    return pd.DataFrame(cols)


# --------------------------------------------------------------------------- timing
@dataclass
class Row:
    section: str
    operation: str
    rows: str
    plain: float
    ext: float
    target: str
    ok: bool | None
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.ext / self.plain if self.plain > 0 else float("nan")


def _once(fn: Callable[[], Any], number: int = 1) -> float:
    gc.collect()
    t0 = time.perf_counter()
    for _ in range(number):
        out = fn()
    elapsed = (time.perf_counter() - t0) / number
    del out
    return elapsed


def side_by_side(plain: Callable[[], Any], ext: Callable[[], Any], repeats: int, warmup: int = 1,
                 number: int = 1, after: Callable[[], None] | None = None) -> tuple[float, float]:
    """Median seconds of ``plain`` and ``ext``; interleaved, alternating which runs first."""
    for _ in range(warmup):
        plain()
        ext()
        if after:
            after()
    a: list[float] = []
    b: list[float] = []
    for r in range(repeats):
        order = ((a, plain), (b, ext)) if r % 2 == 0 else ((b, ext), (a, plain))
        for sink, fn in order:
            sink.append(_once(fn, number))
            if after:
                after()
    return statistics.median(a), statistics.median(b)


class Bench:
    def __init__(self, rules_preset: str | None) -> None:
        self.session = Session(rules=preset(rules_preset) if rules_preset else None)
        self.base_rules = self.session.rules
        self.rows: list[Row] = []

    def captured(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        cap = self.session.capture

        def run() -> Any:
            cap.install()
            try:
                return fn()
            finally:
                cap.uninstall()

        return run

    def forget(self) -> None:
        # the registry keeps evidence (and crosstab's temporary source frame) alive
        self.session.registry.clear()

    def check_captured(self, fn: Callable[[], Any]) -> str:
        """Run once with capture and say whether evidence was recorded (not an 'unverified' table)."""
        failures = len(self.session.registry.failures)
        obj = self.captured(fn)()
        ok = self.session.registry.by_object(obj) is not None
        new = self.session.registry.failures[failures:]
        self.forget()
        if new:
            return f"capture failed: {new[-1][:60]}"
        return "" if ok else "no evidence recorded"


# --------------------------------------------------------------------------- sections
def aggregation_ops(df: pd.DataFrame) -> list[tuple[str, str, Callable[[], Any], str | None]]:
    """(name, kind, call, unit rule) for every timed aggregation."""
    k1, k2, _ = KEYS
    return [
        ("groupby(k1,k2,k3).size()", "count", lambda: df.groupby(KEYS).size(), None),
        ("groupby(k1,k2,k3)['v'].mean()", "magnitude", lambda: df.groupby(KEYS)["v"].mean(), None),
        ("groupby(k1,k2,k3)['v'].sum()", "magnitude", lambda: df.groupby(KEYS)["v"].sum(), None),
        ("crosstab(k1,k2,values=v,mean)", "magnitude",
         lambda: pd.crosstab(df[k1], df[k2], values=df["v"], aggfunc="mean"), None),
        ("pivot_table(k1×k2, v, sum)", "magnitude",
         lambda: df.pivot_table(index=k1, columns=k2, values="v", aggfunc="sum"), None),
        ("groupby(k1,k2,k3).size() unit=uid", "count", lambda: df.groupby(KEYS).size(), "uid"),
        ("groupby(k1,k2,k3)['v'].sum() unit=uid", "magnitude", lambda: df.groupby(KEYS)["v"].sum(), "uid"),
    ]


def run_aggregations(bench: Bench, df: pd.DataFrame, label: str, rows: str, repeats: int,
                     profile: bool) -> None:
    for name, kind, fn, unit in aggregation_ops(df):
        bench.session.rules = bench.base_rules
        if unit is not None:
            bench.session.set_rules(unit=unit)
        note = bench.check_captured(fn)
        plain_s, ext_s = side_by_side(fn, bench.captured(fn), repeats, after=bench.forget)
        target = COUNT_TARGET if kind == "count" else MAGNITUDE_TARGET
        ratio = ext_s / plain_s
        bench.rows.append(Row(label, name, rows, plain_s, ext_s, f"≤ {target:g}×", ratio <= target, note))
        print(f"  {label:<12} {name:<40} {plain_s:8.3f}s {ext_s:8.3f}s {ratio:5.2f}×", file=sys.stderr)
        if profile:
            profile_call(bench, fn, f"{label} {name} ({rows} rows)")
    bench.session.rules = bench.base_rules


def display_tables(df: pd.DataFrame) -> list[tuple[str, Callable[[], Any], float | None]]:
    """Tables of ~1,000, 2,000 and 10,000 cells, built with capture on (so they carry evidence)."""
    k1, k2, k3 = KEYS
    small = df.iloc[:3000]  # ~1.5 rows per cell: many cells below the threshold
    return [
        ("1,000 cells: groupby(k1,k2,k4)['v'].mean()",
         lambda: df.groupby([k1, k2, "k4"])["v"].mean(), DISPLAY_1K_TARGET_S),
        ("1,000 cells: pivot k1×(k2,k4) size, small cells",
         lambda: small.pivot_table(index=k1, columns=[k2, "k4"], values="v", aggfunc="size"), None),
        ("2,000 cells: groupby(k1,k2,k3).size()", lambda: df.groupby(KEYS).size(), None),
        ("2,000 cells: size().unstack(k3)", lambda: df.groupby(KEYS).size().unstack(k3), None),
        ("10,000 cells: groupby(k1,k2,k3,k4)['v'].sum()",
         lambda: df.groupby([k1, k2, k3, "k4"])["v"].sum(), None),
    ]


def run_display(bench: Bench, df: pd.DataFrame, rows: str, repeats: int, profile: bool) -> None:
    from IPython.core.formatters import DisplayFormatter

    plain_fmt = DisplayFormatter()  # what IPython does for a pandas table without the extension
    sess = bench.session
    for name, make, target_s in display_tables(df):
        table = bench.captured(make)()
        cells = int(np.prod(table.shape)) if table.ndim == 2 else len(table)
        status = sess.bundle(table, record=False)[1]["sdc_magic"]["status"]
        plain_s, ext_s = side_by_side(lambda t=table: plain_fmt.format(t),
                                      lambda t=table: sess.bundle(t, record=False), repeats * 2, number=3)
        if target_s is not None:
            target, ok = f"< {target_s * 1000:g} ms", ext_s < target_s
        else:
            target, ok = "(info)", None
        bench.rows.append(Row("display", name, rows, plain_s, ext_s, target, ok, f"{cells} cells, {status}"))
        print(f"  display      {name:<40} {plain_s:8.4f}s {ext_s:8.4f}s", file=sys.stderr)
        if profile:
            profile_call(bench, lambda t=table: sess.bundle(t, record=False), f"display {name}", capture=False)
        del table
        bench.forget()


def run_nonpandas(bench: Bench, repeats: int) -> None:
    """Non-pandas outputs through IPython's DisplayFormatter, extension loaded vs not."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    fmt = ip.display_formatter
    objects = {
        "list of 1,000 ints": list(range(1000)),
        "dict of 200 str→float": {f"key{i}": i / 7 for i in range(200)},
        "numpy array 100×100": np.random.default_rng(SEED).normal(size=(100, 100)),
    }
    loaded = {"on": False}

    def toggle(on: bool) -> None:
        if on == loaded["on"]:
            return
        with contextlib.redirect_stdout(io.StringIO()):
            if on:
                sdc_magic.load_ipython_extension(ip)
            else:
                sdc_magic.unload_ipython_extension(ip)
        loaded["on"] = on

    for name, obj in objects.items():
        def plain(o: Any = obj) -> Any:
            toggle(False)
            return fmt.format(o)

        def ext(o: Any = obj) -> Any:
            toggle(True)
            return fmt.format(o)

        # toggling happens outside the timed loop body only once per sample: time `number` formats
        plain_s, ext_s = side_by_side_toggled(plain, ext, toggle, repeats * 3, number=50)
        ratio = ext_s / plain_s
        bench.rows.append(Row("non-pandas", f"DisplayFormatter.format({name})", "-", plain_s, ext_s,
                              f"~1.0× (≤ {NONPANDAS_TARGET:g})", ratio <= NONPANDAS_TARGET))
        print(f"  non-pandas   {name:<40} {plain_s:8.5f}s {ext_s:8.5f}s {ratio:5.2f}×", file=sys.stderr)
    toggle(False)
    extension._session = None


def side_by_side_toggled(plain: Callable[[], Any], ext: Callable[[], Any], toggle: Callable[[bool], None],
                         repeats: int, number: int) -> tuple[float, float]:
    """Like :func:`side_by_side`, with the extension switched on/off before each sample, untimed."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(3):
        plain()
        ext()
    for r in range(repeats):
        order = ((a, plain, False), (b, ext, True)) if r % 2 == 0 else ((b, ext, True), (a, plain, False))
        for sink, fn, on in order:
            toggle(on)
            sink.append(_once(fn, number))
    return statistics.median(a), statistics.median(b)


# --------------------------------------------------------------------------- profile
def profile_call(bench: Bench, fn: Callable[[], Any], title: str, capture: bool = True, top: int = 14) -> None:
    call = bench.captured(fn) if capture else fn
    prof = cProfile.Profile()
    prof.enable()
    call()
    prof.disable()
    bench.forget()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out).strip_dirs().sort_stats("tottime")
    stats.print_stats(top)
    body = out.getvalue()
    start = body.find("   ncalls")
    print(f"\n--- cProfile (by own time): {title}\n{body[start:].rstrip()}\n", file=sys.stderr)


# --------------------------------------------------------------------------- report
def fmt_seconds(s: float) -> str:
    return f"{s * 1000:9.2f} ms" if s < 1 else f"{s:9.3f} s "


def print_table(rows: list[Row]) -> None:
    head = f"{'section':<12} {'operation':<50} {'rows':>5} {'plain':>12} {'with ext':>12} {'ratio':>7}  " \
           f"{'target':<17} {'':4}  note"
    print(head)
    print("-" * len(head))
    for r in rows:
        verdict = "" if r.ok is None else ("OK" if r.ok else "MISS")
        print(f"{r.section:<12} {r.operation:<50} {r.rows:>5} {fmt_seconds(r.plain):>12} {fmt_seconds(r.ext):>12} "
              f"{r.ratio:6.2f}×  {r.target:<17} {verdict:4}  {r.note}")


def human_rows(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else (f"{n // 1000}k" if n % 1000 == 0 else str(n))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1M rows only, fewer repeats")
    parser.add_argument("--rows", type=int, nargs="+", help="row counts to run (default 1000000 10000000)")
    parser.add_argument("--repeats", type=int, help="timed repeats per side (default 7; 3 with --quick)")
    parser.add_argument("--preset", help="rules preset to check under (default: the project's rules)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each captured call")
    parser.add_argument("--skip-int-keys", action="store_true", help="string keys only")
    args = parser.parse_args(argv)

    sizes = args.rows or ([1_000_000] if args.quick else [1_000_000, 10_000_000])
    repeats = args.repeats or (3 if args.quick else 7)
    bench = Bench(args.preset)
    print(f"sdc_magic capture benchmark — python {platform.python_version()}, pandas {pd.__version__}, "
          f"numpy {np.__version__}, {platform.machine()}, repeats {repeats} (median), seed {SEED}")
    print(f"rules: {bench.base_rules.describe()} (top-k {bench.base_rules.top_k})\n")
    t_start = time.perf_counter()
    try:
        _run_all(bench, args, sizes, repeats)
    except Exception as exc:  # a failing section must not lose the rows already measured
        bench.rows.append(Row("error", f"{type(exc).__name__}: {exc}"[:50], "-", float("nan"), float("nan"),
                              "", False, "run stopped here; see stderr"))
        import traceback

        traceback.print_exc()
    print_table(bench.rows)
    missed = [r for r in bench.rows if r.ok is False]
    sys.stderr.flush()
    print(f"\n{len(missed)} target(s) missed; total {time.perf_counter() - t_start:.0f} s. "
          "Display rows: 'plain' = IPython's DisplayFormatter on the bare table (pandas text+HTML), "
          "'with ext' = Session.bundle (check + render).")
    return 0


def _run_all(bench: Bench, args: argparse.Namespace, sizes: list[int], repeats: int) -> None:
    for n in sizes:
        rows = human_rows(n)
        reps = repeats if n <= 2_000_000 else max(3, repeats - 2)
        for int_keys in ([False] if args.skip_int_keys else [False, True]):
            label = "int keys" if int_keys else "str keys"
            print(f"[{rows} rows, {label}] building frame…", file=sys.stderr)
            df = make_frame(n, int_keys)
            run_aggregations(bench, df, label, rows, reps, args.profile and n == sizes[0])
            if not int_keys:
                run_display(bench, df, rows, reps, args.profile and n == sizes[0])
            del df
            bench.forget()
            gc.collect()
    run_nonpandas(bench, repeats)


if __name__ == "__main__":
    raise SystemExit(main())
