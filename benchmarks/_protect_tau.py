"""Run pytauargus (OPT or MOD, 10 % protection) on one table; called by benchmarks/protect.py.

Runs inside build/bench-venv (pytauargus is not a dependency of sdc_magic).  Input: a
JSON spec on argv[1]; output: JSON on stdout with the hidden cells and CPU seconds.
"""

from __future__ import annotations

import json
import sys
import time

import pandas as pd
from pytauargus import protect


def main() -> None:
    with open(sys.argv[1]) as fh:
        spec = json.load(fh)
    micro = pd.read_csv(spec["micro"], dtype={d: str for d in spec["dims"]})
    t = time.process_time()
    extra = {"hrc": spec["hrc"], "hierleadstring": "@"} if spec.get("hrc") else {}
    res = protect(micro, spec["dims"], response=spec["response"], safety_rules=spec["rules"],
                  suppress=spec["suppress"], totcode="Total", workdir=spec["workdir"], **extra)
    cpu = time.process_time() - t
    df = res.tables[0].dataframe()
    hidden = df[df["status"].isin(["U", "M"])]
    out = {"cpu": cpu, "hidden": hidden[spec["dims"]].astype(str).values.tolist(),
           "status": hidden["status"].tolist()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
