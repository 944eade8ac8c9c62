"""A cell is public through an earlier output only when that output told the same figure of its rows.

Red team of stop 50 (helper-49, 01): medians of income by district (C hidden; medians add up to
nothing, so no secondary), then the district counts, then the district shares. The counts hid C
alone — standing alone they hide B too — because A's and B's rows, published by the medians,
were taken for public *counts* (``differencing.published_elsewhere``): never chosen as
secondaries. The shares then gave the total, 40 / 0.547945 = 73, and C = 73 − 40 − 30 = 3, all
three tables cleared. Any statistic that is not a count did it (std, var, sem, quantiles,
nunique), in two dimensions too (a crosstab, then its column shares: C's 2 women and 1 man), and
on 50,000 households. Populations now keep what their cells told (``populations.measures_of``),
and only outputs that told the same figures make cells public; the memory saved for a restart
keeps it too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from test_engines_redteam import PEOPLE

X = "✕"

FIRST = {
    "median": lambda d: d.groupby("district").income.median(),
    "std": lambda d: d.groupby("district").income.std(),
    "quantile": lambda d: d.groupby("district").income.quantile(0.9),
    "nunique": lambda d: d.groupby("district").household.nunique(),
    "max of age": lambda d: d.groupby("district").age.max(),
}


def _cells(out: Any) -> dict[str, str]:
    body = out.data["text/plain"].split("\nsdc_magic:")[0]
    return {p[0]: p[1] for p in (line.split() for line in body.splitlines()) if len(p) == 2}


@pytest.mark.parametrize("first", sorted(FIRST))
def test_counts_after_another_statistic_keep_their_secondary(sess: Any, df: pd.DataFrame, first: str) -> None:
    sess.publish(FIRST[first](df))
    counts = sess.publish(df.district.value_counts())
    shares = sess.publish(df.district.value_counts(normalize=True))
    c, sh = _cells(counts), _cells(shares)
    assert c["C"] == X and c["B"] == X, counts.data["text/plain"]  # as the counts alone: B protects C
    # nothing left to subtract: the total from A's share, then C = total - A - B
    if sh.get("A", X) != X and c["A"] != X and c["B"] != X:
        total = float(c["A"]) / float(sh["A"])
        assert round(total) - int(c["A"]) - int(c["B"]) != 3


def test_a_crosstab_after_medians_keeps_its_secondaries(sess: Any, df: pd.DataFrame) -> None:
    sess.publish(df.groupby(["district", "sex"]).income.median().unstack())
    alone = sess.publish(pd.crosstab(df.district, df.sex))
    text = alone.data["text/plain"]
    # C's two cells below the threshold, and B's beside them so that C cannot be subtracted
    assert text.count(X) == 4, text


def test_a_count_table_after_counts_still_takes_them_as_public(sess: Any, df: pd.DataFrame) -> None:
    # over-protection check: the same figures shown before are public (nothing to hide twice)
    first = sess.publish(df.groupby("district").size())
    second = sess.publish(df.district.value_counts())
    assert first.data["text/plain"].count(X) == second.data["text/plain"].count(X) == 2


def test_what_a_population_told_survives_a_restart(tmp_path: Path, df: pd.DataFrame) -> None:
    from sdc_magic.config import preset
    from sdc_magic.jupyter.session import Session
    from sdc_magic.records.ledger import Ledger

    def kernel(table_of: Any) -> Any:
        s = Session(rules=preset("humanitarian"))
        s.ledger = Ledger(folder=tmp_path)
        s.capture.install()
        try:
            return s.publish(table_of(PEOPLE.copy()))
        finally:
            s.capture.uninstall()

    kernel(FIRST["median"])
    counts = kernel(lambda d: d.district.value_counts())
    assert _cells(counts)["B"] == X, counts.data["text/plain"]


def test_two_of_count_sum_and_mean_tell_the_third() -> None:
    # (a flag's sum and count shown, then its sum and mean: the same figures, n = sum / mean)
    from types import SimpleNamespace

    import numpy as np

    from sdc_magic.linking.populations import measures_of

    def told(*pairs: tuple[str, str | None]) -> frozenset[tuple[str, str]]:
        stat = np.array([p[0] for p in pairs], dtype=object)
        var = np.array([p[1] for p in pairs], dtype=object)
        return measures_of(SimpleNamespace(evidence=SimpleNamespace(stat=stat, var=var)))

    assert told(("sum", "flag"), ("count", "flag")) == told(("sum", "flag"), ("mean", "flag"))
    assert ("mean", "flag") in told(("size", None), ("sum", "flag"))
    assert told(("size", None)) == told(("count", None)) == told(("count", "income"))
    assert told(("median", "income")) == frozenset({("median", "income")})
    assert ("count", "") not in told(("mean", "income"))
