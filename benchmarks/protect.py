"""Benchmark secondary suppression: sdc_magic.protect against tau-Argus (pytauargus).

A script, not a test:  ``python benchmarks/protect.py [--quick] [--no-tau] [--install-tau] [--only NAME]``.

Tables come from fixed seeds.  For each table it prints primaries, secondaries,
hidden value (sum of secondary values), CPU seconds and whether each pattern passes
*our* audit (outsider, 10 % protection): our default run (singletons off), our
singleton-safe run, our run with tau-Argus's levels, then tau-Argus OPT and MOD.

tau-Argus runs through pytauargus (PyPI wheels bundle the engine and HiGHS for
Linux) in its own virtual environment, build/bench-venv (created with ``--install-tau``).
When it is not available on this machine the script says so and prints, for the tables
measured in issue 13 with pytauargus 0.6 (OPT and MOD, 10 %), those reference values,
marked "(issue 13)": they were not re-run here.
tau-Argus's FREQ(n, 10) protects a frequency cell by 10 % of its value only; ours also
asks the interval to reach the threshold.  Like for like: the "ours tau levels" run
(``levels="tau"``, singletons off) has tau's levels, and the "audit" column of the tau
rows checks tau's pattern against tau's own levels (our levels in brackets).
Magnitude tables pass ``NK(1,85)|FREQ(n,10)`` (both rules, as rtauargus writes them);
the hierarchical table gets a ``.hrc`` file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sdc_magic.config import Rules  # noqa: E402
from sdc_magic.protect import protect  # noqa: E402
from sdc_magic.protect.api import _prepare  # noqa: E402
from sdc_magic.protect.audit import Problem, certify  # noqa: E402

#: extra keyword arguments for our protect() runs (e.g. {"method": "heuristic"} from a REPL)
EXTRA: dict = {}
VENV = ROOT / "build" / "bench-venv"


# ------------------------------------------------------------------ tables
def counts(shape: tuple[int, ...], seed: int, p: float) -> dict:
    rng = np.random.default_rng(seed)
    n = rng.negative_binomial(2, p, size=shape)
    dims = [f"v{j}" for j in range(len(shape))]
    idx = np.indices(shape).reshape(len(shape), -1)
    df = pd.DataFrame({d: [f"{d}{k:03d}" for k in idx[j]] for j, d in enumerate(dims)})
    df["n"] = n.ravel()
    df = df[df.n > 0].reset_index(drop=True)
    return {"cells": df, "dims": dims, "value": "n", "units": None, "top": None, "hier": None,
            "rules": Rules(threshold=5, protection=10.0), "kind": "count"}


def magnitudes(shape: tuple[int, int], seed: int) -> dict:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(shape[0]):
        for j in range(shape[1]):
            k = int(rng.integers(1, 12))
            contrib = np.sort(np.round(rng.lognormal(4, 1.3, size=k), 0) + 1)[::-1]
            rows.append((f"r{i:03d}", f"c{j:03d}", float(contrib.sum()), k, contrib[0],
                         contrib[1] if k > 1 else 0.0, contrib.tolist()))
    df = pd.DataFrame(rows, columns=["r", "c", "sales", "firms", "x1", "x2", "contrib"])
    return {"cells": df, "dims": ["r", "c"], "value": "sales", "units": "firms", "top": ["x1", "x2"],
            "hier": None, "rules": Rules(threshold=3, dominance=(1, 85.0), protection=10.0), "kind": "magnitude"}


def hierarchy(seed: int) -> dict:
    t = counts((15, 8), seed, 0.15)
    df = t["cells"]
    deps = sorted(df.v0.unique())
    regions = {f"R{k}": deps[k * 5:(k + 1) * 5] for k in range(3)}
    t["hier"] = {"v0": regions}
    t["rules"] = Rules(threshold=3, protection=10.0)
    return t


def hierarchy_magnitudes(seed: int) -> dict:
    """3 regions > 15 departments × 8 activities, magnitudes with (1,85) dominance."""
    t = magnitudes((15, 8), seed)
    deps = sorted(t["cells"].r.unique())
    t["hier"] = {"r": {f"R{k}": deps[k * 5:(k + 1) * 5] for k in range(3)}}
    return t


def three_level(seed: int) -> dict:
    """A 3-level hierarchy (3 areas > 9 regions > 36 departments) × 8 × 5, counts."""
    t = counts((36, 8, 5), seed, 0.2)
    deps = sorted(t["cells"].v0.unique())
    regions = {f"G{k}": deps[k * 4:(k + 1) * 4] for k in range(9)}
    areas = {f"A{k}": [f"G{j}" for j in range(k * 3, (k + 1) * 3)] for k in range(3)}
    t["hier"] = {"v0": {**areas, **regions}}
    t["rules"] = Rules(threshold=5, protection=10.0)
    return t


def acro_mean(seed: int = 2) -> dict:
    """ACRO's benchmark layout at the engine level: 1M rows, Zipf-skewed a (12) × b (6) × c (10),
    the sums behind ``crosstab([a, b], c, values=v, aggfunc="mean")``, sacro preset (as in
    tests/test_protect_scale.py)."""
    from sdc_magic.config import preset

    rng = np.random.default_rng(seed)
    n_rows = 1_000_000
    v = np.round(rng.lognormal(14, 3.5, n_rows))
    codes = []
    for k, z in ((12, 1.5), (6, 1.2), (10, 2.0)):
        p = 1.0 / np.arange(1, k + 1) ** z
        codes.append(rng.choice(k, size=n_rows, p=p / p.sum()))
    df = pd.DataFrame({"a": codes[0], "b": codes[1], "c": codes[2], "v": v})
    srt = df.sort_values(["a", "b", "c", "v"], ascending=[True, True, True, False], kind="stable")
    g = srt.groupby(["a", "b", "c"])
    rank = g.cumcount().to_numpy()
    out = g["v"].agg(value="sum", units="count")
    for j, name in enumerate(("top1", "top2")):
        out[name] = srt[rank == j].groupby(["a", "b", "c"])["v"].first().reindex(out.index).fillna(0.0)
    out = out.reset_index()
    for d in ("a", "b", "c"):
        out[d] = out[d].map(lambda x, d=d: f"{d}{x:02d}")
    return {"cells": out, "dims": ["a", "b", "c"], "value": "value", "units": "units", "top": ["top1", "top2"],
            "hier": None, "rules": preset("sacro"), "kind": "magnitude"}


#: tau-Argus (pytauargus 0.6, protection 10 %) on the same tables, measured for issue 13 on
#: another machine: (run, hidden value, CPU s); None = did not finish in 900 s.
TAU_REFERENCE: dict[str, list[tuple[str, float | None, float | None]]] = {
    "10x8 magnitudes (1,85)": [("tau OPT = MOD", 1801, 0.01)],
    "100x50 magnitudes": [("tau MOD", 19788, 1.2)],
    "300x100 counts": [("tau MOD", 494, 8.0), ("tau OPT", 525, 12.0)],
    "25x20x10 counts": [("tau OPT", 438, 22.9)],
    "50x40x10 counts": [("tau OPT", None, None), ("tau MOD", None, None)],
}


def tables(quick: bool) -> list[tuple[str, dict]]:
    out = [("10x10 counts", counts((10, 10), 1, 0.2)),
           ("10x8 magnitudes (1,85)", magnitudes((10, 8), 3)),
           ("3 regions>15 dep x 8", hierarchy(4)),
           ("3 regions>15 dep x 8 mag", hierarchy_magnitudes(4))]
    if not quick:
        out += [("20x10x5 counts", counts((20, 10, 5), 2, 0.3)),
                ("100x50 counts", counts((100, 50), 5, 0.1)),
                ("100x50 magnitudes", magnitudes((100, 50), 6)),
                ("300x100 counts", counts((300, 100), 7, 0.097)),
                ("ACRO mean 12x6x10 sacro", acro_mean()),
                ("3-level hier x 8 x 5", three_level(12)),
                ("25x20x10 counts", counts((25, 20, 10), 8, 0.3)),
                ("50x40x10 counts", counts((50, 40, 10), 9, 0.3))]
    return out


#: CPU-second limit per run: the display path's 10 s, 60 s for the large 3-D tables (issue 13 target)
def time_limit_of(name: str) -> float:
    return 60.0 if "x10 counts" in name or "3-level" in name else 10.0


# ------------------------------------------------------------------ ours
def our_run(t: dict, singletons: bool, levels: str = "ours", time_limit: float = 10.0) -> dict:
    kw = dict(dims=t["dims"], value=t["value"], units=t["units"], top=t["top"], hierarchies=t["hier"],
              rules=t["rules"], singletons=singletons, time_limit=time_limit, levels=levels, **EXTRA)
    cells = t["cells"].drop(columns=["contrib"], errors="ignore")
    c0 = time.process_time()
    res = protect(cells, **kw)
    cpu = time.process_time() - c0
    c = res.cells
    sec = c.status == "secondary"
    return {"primaries": int((c.status == "primary").sum()), "secondaries": int(sec.sum()),
            "hidden_value": float(c.value[sec].sum()), "cpu": cpu, "audit": res.audit_ok, "method": res.method,
            "res": res}


def audit_hidden(t: dict, ours, hidden_labels: list[list[str]]) -> tuple[int, int, float, bool]:
    """Audit a foreign pattern with our outsider audit against the primaries and levels of ``ours``.

    Pass our ``levels="tau"`` run to audit tau-Argus's patterns against tau-Argus's own
    levels (r % of the value), our default run for our stricter ones.
    """
    c = ours.cells
    keys = {tuple(str(x) for x in row): i for i, row in enumerate(c[t["dims"]].itertuples(index=False))}
    hidden = np.zeros(len(c), dtype=bool)
    for lab in hidden_labels:
        i = keys.get(tuple(lab))
        if i is not None:
            hidden[i] = True
    primary = (c.status == "primary").to_numpy()
    req = ours.requirements
    cells = t["cells"].drop(columns=["contrib"], errors="ignore")
    tab = _prepare(cells, t["dims"], t["value"], t["units"], t["top"], t["hier"], None,
                   t["units"] is None)
    a = tab.value
    lpl = np.zeros(len(a))
    upl = np.zeros(len(a))
    for _, row in req.iterrows():
        i = keys[tuple(str(row[d]) for d in t["dims"])]
        if row.direction == "up":
            upl[i] = row.must_reach - a[i]
        else:
            lpl[i] = a[i] - row.must_reach
    L = np.where(np.isnan(tab.lb), np.inf, a - tab.lb)
    U = np.where(np.isnan(tab.ub), np.inf, tab.ub - a)
    n = len(a)
    P = Problem(tab.model.M, a, L, U, primary, np.ones(n, bool), lpl, upl, np.abs(a), np.full(n, np.nan),
                np.full(n, np.nan))
    missing_primary = primary & ~hidden
    cert = certify(P, hidden | primary, [], singletons=False)
    ok = not cert.failures and not missing_primary.any()
    sec = hidden & ~primary
    return int(primary.sum()), int(sec.sum()), float(a[sec].sum()), ok


# ------------------------------------------------------------------ tau
def tau_ready(install: bool) -> tuple[bool, str]:
    py = VENV / "bin" / "python"
    if not py.exists() and not install:
        return False, f"not available on this machine (no {VENV.relative_to(ROOT)}; --install-tau creates it)"
    if not py.exists():
        try:
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, capture_output=True)
            subprocess.run([str(py), "-m", "pip", "install", "-q", "pytauargus[dataframe]"], check=True,
                           capture_output=True, timeout=600)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            return False, f"cannot install pytauargus in {VENV}: {exc}"
    probe = subprocess.run([str(py), "-c", "import pytauargus, pandas"], capture_output=True, text=True)
    if probe.returncode:
        return False, f"pytauargus does not import: {probe.stderr.strip()[-300:]}"
    return True, ""


def micro_of(t: dict) -> pd.DataFrame:
    dims = t["dims"]
    df = t["cells"]
    if t["kind"] == "count":
        rep = df.loc[df.index.repeat(df.n), dims].reset_index(drop=True)
        rep["one"] = 1.0
        return rep
    rows = []
    for _, r in df.iterrows():
        for x in r.contrib:
            rows.append((r.r, r.c, x))
    return pd.DataFrame(rows, columns=[*dims, "sales"])


def write_hrc(hierarchy: dict, path: Path) -> Path:
    """A tau-Argus ``.hrc`` file: one code per line, ``@`` once per level below the top.

    The grand total is implicit (``totcode``); leaves not placed under a parent sit
    at the top level.
    """
    children = {p: list(parts) for p, parts in hierarchy.items()}
    placed = {c for parts in children.values() for c in parts}
    lines: list[str] = []

    def walk(code: str, depth: int) -> None:
        lines.append("@" * depth + str(code))
        for child in children.get(code, []):
            walk(child, depth + 1)

    for top in [p for p in children if p not in placed]:
        walk(top, 0)
    path.write_text("\n".join(lines) + "\n")
    return path


def tau_run(t: dict, method: str, workdir: Path, timeout: float = 600.0) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    micro = micro_of(t)
    micro_path = workdir / "micro.csv"
    micro.to_csv(micro_path, index=False)
    if t["kind"] == "count":
        rules = f"FREQ({t['rules'].threshold},10)"
        response = "one"
    else:
        rules = f"NK(1,85)|FREQ({t['rules'].threshold},10)"
        response = "sales"
    suppress = "OPT(1,60)" if method == "OPT" else "MOD(1,5,0,0,0)"
    spec = {"micro": str(micro_path.resolve()), "dims": t["dims"], "response": response, "rules": rules,
            "suppress": suppress, "workdir": str((workdir / method).resolve())}
    spec_path = workdir / f"{method}.json"
    spec_path.write_text(json.dumps(spec))
    if t["hier"]:
        spec["hrc"] = {d: str(write_hrc(h, workdir / f"{d}.hrc").resolve()) for d, h in t["hier"].items()}
        spec_path.write_text(json.dumps(spec))
    # tau-Argus writes CSPlogfile.txt, FullJJ.log, JJUit.dat, cspSCIP.*, *.lp ... into the
    # current directory: run it inside this table's work dir, never in the repo root
    # its own process group: a timeout stops tau-Argus's engine too, not only the Python wrapper
    proc = subprocess.Popen([str(VENV / "bin" / "python"), str(ROOT / "benchmarks" / "_protect_tau.py"),
                             str(spec_path.resolve())], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(workdir.resolve()), start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": f"not finished in {timeout:g} s (stopped)"}
    proc = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ main
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small tables only")
    ap.add_argument("--no-tau", action="store_true", help="skip tau-Argus")
    ap.add_argument("--install-tau", action="store_true", help="create build/bench-venv with pytauargus")
    ap.add_argument("--only", help="run the tables whose name contains this text")
    ap.add_argument("--no-tau-levels", action="store_true", help="skip the run with tau-Argus's levels")
    ap.add_argument("--tau-timeout", type=float, default=600.0, help="wall seconds per tau-Argus run")
    args = ap.parse_args()
    use_tau, why = (False, "--no-tau") if args.no_tau else tau_ready(args.install_tau)
    if not use_tau:
        print(f"tau-Argus not run: {why}; reference values of issue 13 are shown as '(issue 13)' rows")
    head = (f"{'table':26} {'run':24} {'prim':>5} {'sec':>5} {'hidden value':>13} {'CPU s':>7} {'audit':>6}  method")
    print(head)
    print("-" * len(head))
    work = ROOT / "build" / "bench-tau"
    for name, t in tables(args.quick):
        if args.only and args.only not in name:
            continue
        limit = time_limit_of(name)
        runs = [("ours", our_run(t, singletons=False, time_limit=limit)),
                ("ours singleton-safe", our_run(t, singletons=True, time_limit=limit))]
        if not args.no_tau_levels:
            runs.append(("ours tau levels", our_run(t, singletons=False, levels="tau", time_limit=limit)))
        for label, r in runs:
            print(f"{name:26} {label:24} {r['primaries']:5d} {r['secondaries']:5d} {r['hidden_value']:13.0f} "
                  f"{r['cpu']:7.2f} {'yes' if r['audit'] else 'NO':>6}  {r['method']}")
            sys.stdout.flush()
        if use_tau and t["kind"] == "magnitude" and "contrib" not in t["cells"].columns:
            print(f"{name:26} {'tau OPT / MOD':24} {'-':>5} {'-':>5} {'-':>13} {'-':>7} {'-':>6}  "
                  "(not run: the table has no contributions for tau-Argus's microdata)")
        elif use_tau:
            work.mkdir(parents=True, exist_ok=True)
            tau_lv = runs[-1][1]
            for method in ("OPT", "MOD"):
                # tau-Argus's batch files break on "(", "," or quotes in paths
                out = tau_run(t, method, work / re.sub(r"[^A-Za-z0-9_.-]", "_", name), args.tau_timeout)
                if "error" in out:
                    print(f"{name:26} {'tau ' + method:24} {'-':>5} {'-':>5} {'-':>13} {'-':>7} {'-':>6}  "
                          f"({out['error'][:60]})")
                    continue
                prim, sec, val, ok_tau = audit_hidden(t, tau_lv["res"], out["hidden"])
                _, _, _, ok_ours = audit_hidden(t, runs[0][1]["res"], out["hidden"])
                print(f"{name:26} {'tau ' + method:24} {prim:5d} {sec:5d} {val:13.0f} {out['cpu']:7.2f} "
                      f"{'yes' if ok_tau else 'NO':>6}  (our levels: {'yes' if ok_ours else 'NO'})")
        else:
            for label, val, cpu in TAU_REFERENCE.get(name, []):
                v = f"{val:13.0f}" if val is not None else f"{'not in 900 s':>13}"
                c = f"{cpu:7.2f}" if cpu is not None else f"{'>900':>7}"
                print(f"{name:26} {label + ' (issue 13)':24} {'':>5} {'':>5} {v} {c} {'':>6}")
        sys.stdout.flush()
    print(f"(tau-Argus work files in {work})" if use_tau else "")


if __name__ == "__main__":
    main()
