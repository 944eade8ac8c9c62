"""The protection's patterns and its work on the display path, table by table.

For each table: the first display in a fresh session (``Session.publish``, linking on), its
status, the pattern the search found (cells hidden, secondaries, their cost, cells of the model),
the attacker LPs solved, simplex iterations and CPU seconds. A change to the protection that
should only make it cheaper is checked with it: run it before and after (a worktree of the commit
before, ``PYTHONPATH=<worktree>``), the patterns must be the same and the LPs fewer.

Run: ``.venv/bin/python benchmarks/patterns.py [name,name,...]`` (JSON of the rows to
``$QOUT``, default ``patterns.json`` in a temporary folder). Not a test: it asserts nothing.
"""
import importlib
import json
import os
import sys
import tempfile
import time

os.environ["SDC_MAGIC_CONFIG"] = ""
os.chdir(tempfile.mkdtemp())  # (the sessions write their records here)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from sdc_magic.config import preset  # noqa: E402
from sdc_magic.jupyter.session import Session  # noqa: E402

# instrumentation (a benchmark's, not the package's): every attacker LP solved, and the pattern the
# search returns before its final audit
api = importlib.import_module("sdc_magic.protect.api")
LP = importlib.import_module("sdc_magic.protect.lp")
nlp = [0]
orig_run = LP.Attacker._run
def _run(self):
    nlp[0] += 1
    return orig_run(self)
LP.Attacker._run = _run
found = []
orig_find = api._find_pattern
def _find(P, *a, **k):
    got = orig_find(P, *a, **k)
    h = got.hidden
    found.append((int(h.sum()), int((h & ~P.primary).sum()), float(P.cost[h & ~P.primary].sum()), int(P.n)))
    return got
api._find_pattern = _find

def tables():
    from sdc_magic.datasets import make_referrals
    ref = make_referrals()
    yield "seed", None, lambda: ref.groupby(["admin2", "case_category", "age_band", "sex"]).size()
    yield "seed-hum", "humanitarian", lambda: ref.groupby(["admin2", "case_category", "age_band", "sex"]).size()
    yield "seed-3", None, lambda: ref.groupby(["admin2", "case_category", "age_band"]).size()
    rng = np.random.default_rng(5)
    n = 1_000_000
    def skewed(k):
        p = 0.45 ** np.arange(k)
        p /= p.sum()
        return rng.choice(k, n, p=p)
    df = pd.DataFrame({"a": skewed(8), "b": skewed(6), "c": skewed(10), "v": rng.lognormal(3, 1, n)})
    yield "skewed-sacro", "sacro", lambda: pd.crosstab([df.a, df.b], df.c, values=df.v, aggfunc="mean")
    yield "skewed-sum", None, lambda: pd.crosstab([df.a, df.b], df.c, values=df.v, aggfunc="sum")
    rng = np.random.default_rng(1)
    n = 60_000
    d2 = pd.DataFrame({"a": rng.integers(0, 25, n), "b": rng.integers(0, 20, n), "c": rng.zipf(1.3, n).clip(max=10)})
    yield "25x20x10", None, lambda: d2.groupby(["a", "b", "c"]).size()
    for seed in range(3):
        r = np.random.default_rng(100 + seed)
        m = 3000
        d = pd.DataFrame({"x": r.integers(0, 12, m), "y": r.zipf(1.5, m).clip(max=8), "z": r.integers(0, 4, m),
                          "v": r.lognormal(4, 1.2, m)})
        yield f"rand2d-{seed}", None, (lambda d=d: pd.crosstab(d.x, d.y))
        yield f"rand3d-{seed}", None, (lambda d=d: d.groupby(["x", "y", "z"]).size())
        yield f"rand3d-sum-{seed}", "sacro", (lambda d=d: d.groupby(["x", "y", "z"])["v"].sum())

only = sys.argv[1].split(",") if len(sys.argv) > 1 else None
rows = {}
for name, pre, make in tables():
    if only and name not in only:
        continue
    s = Session(rules=preset(pre)) if pre else Session()
    s.capture.install()
    try:
        t = make()
        found.clear()
        nlp[0] = 0
        w0 = LP.work_done()
        c0 = time.process_time()
        out = s.publish(t)
        cpu = time.process_time() - c0
    finally:
        s.capture.uninstall()
    md = out.metadata["sdc_magic"]
    rows[name] = dict(status=md["status"], patterns=found[:], lps=nlp[0], iters=LP.work_done() - w0, cpu=round(cpu, 3))
    print(f"{name:18s} {md['status']:10s} pat={found} lps={nlp[0]:5d} it={LP.work_done()-w0:7d} cpu={cpu:.3f}", flush=True)
with open(os.environ.get("QOUT", os.path.join(tempfile.gettempdir(), "patterns.json")), "w") as fh:
    json.dump(rows, fh, indent=1)
