"""Utility of an anonymised event file compared with the original (the HDSS article's checks).

Why these two: the article judges noise levels by (1) the days between an
in-migration and the person's next out-migration -- mean, SD and the share under 100
days, which noise inflates when events are close -- and (2) a chi-square comparison
of a 4-way contingency table of the anonymised data against the original (its
statistics 46-121 were far below the critical value 237.2: no significant change).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["chi_square_comparison", "in_out_spans", "utility_summary"]


def in_out_spans(events: pd.DataFrame, person: str = "person_id", date: str = "date", kind: str = "event",
                 in_kind: str = "in_migration", out_kind: str = "out_migration") -> np.ndarray:
    """Days from each in-migration to the same person's next out-migration (none -> not counted)."""
    pos = np.arange(len(events))
    frame = pd.DataFrame({
        "p": events[person].to_numpy(), "d": pd.to_datetime(events[date]).to_numpy(),
        "k": events[kind].to_numpy(), "pos": pos,
    }).dropna(subset=["d"]).sort_values(["p", "d", "pos"], kind="stable")
    out_day = frame["d"].where(frame["k"] == out_kind)
    nxt = out_day.groupby(frame["p"]).shift(-1)
    nxt = nxt.groupby(frame["p"]).bfill()
    is_in = (frame["k"] == in_kind).to_numpy() & nxt.notna().to_numpy()
    span = (nxt.to_numpy()[is_in] - frame["d"].to_numpy()[is_in]).astype("timedelta64[D]").astype(np.int64)
    return span


def _span_stats(span: np.ndarray) -> dict[str, Any]:
    if len(span) == 0:
        return {"n": 0, "mean": None, "sd": None, "min": None, "max": None, "share_under_100_days": None}
    return {
        "n": len(span),
        "mean": round(float(span.mean()), 2),
        "sd": round(float(span.std(ddof=1)), 2) if len(span) > 1 else 0.0,
        "min": int(span.min()),
        "max": int(span.max()),
        "share_under_100_days": round(100.0 * float((span < 100).mean()), 2),
    }


def _table_dims(events: pd.DataFrame, kind: str, sex: str, date: str, birth: str) -> pd.DataFrame:
    when = pd.to_datetime(events[date])
    age = (when - pd.to_datetime(events[birth])).dt.days / 365.25
    return pd.DataFrame({
        "event": events[kind].astype(object).to_numpy(),
        "sex": events[sex].astype(object).to_numpy(),
        "period": (when.dt.year // 5 * 5).astype("Int64").to_numpy(),
        "age_band": (np.floor(age / 10) * 10).astype("Int64").to_numpy(),
    })


def chi_square_comparison(original: pd.DataFrame, anonymised: pd.DataFrame, dims: Sequence[str] | None = None,
                          kind: str = "event", sex: str = "sex", date: str = "date",
                          birth: str = "birth_date", alpha: float = 0.05) -> dict[str, Any]:
    """Chi-square of the anonymised counts of a contingency table against the original counts.

    Default table (4-way, as in the article): event type x sex x 5-year period of the
    event x 10-year age band at the event. ``dims`` names columns to use instead (taken
    as they are from both frames). Statistic ``sum((anon - orig)^2 / orig)`` over cells
    with an original count, df = cells - 1, critical value at ``1 - alpha``.
    """
    if dims is None:
        a = _table_dims(original, kind, sex, date, birth)
        b = _table_dims(anonymised, kind, sex, date, birth)
        names = list(a.columns)
    else:
        names = list(dims)
        a, b = original[names], anonymised[names]
    ca = a.value_counts(dropna=False)
    cb = b.value_counts(dropna=False)
    joined = pd.concat([ca.rename("original"), cb.rename("anonymised")], axis=1).fillna(0)
    expected = joined["original"].to_numpy(dtype=float)
    observed = joined["anonymised"].to_numpy(dtype=float)
    used = expected > 0
    statistic = float((((observed - expected) ** 2)[used] / expected[used]).sum())
    df = int(used.sum()) - 1
    critical = float(stats.chi2.ppf(1 - alpha, df)) if df > 0 else float("nan")
    p_value = float(stats.chi2.sf(statistic, df)) if df > 0 else float("nan")
    return {
        "dims": names,
        "cells": int(used.sum()),
        "anonymised_records_in_new_cells": int(observed[~used].sum()),
        "statistic": round(statistic, 2),
        "df": df,
        "critical_value": round(critical, 2),
        "alpha": alpha,
        "p_value": round(p_value, 6),
        "significant": bool(statistic > critical),
    }


def utility_summary(original: pd.DataFrame, anonymised: pd.DataFrame, person: str = "person_id",
                    date: str = "date", kind: str = "event", sex: str = "sex", birth: str = "birth_date",
                    dims: Sequence[str] | None = None) -> dict[str, Any]:
    """JSON-ready utility report: in -> out-migration spans before/after and the chi-square comparison."""
    before = _span_stats(in_out_spans(original, person, date, kind))
    after = _span_stats(in_out_spans(anonymised, person, date, kind))
    return {
        "in_out_migration_days": {"original": before, "anonymised": after},
        "chi_square": chi_square_comparison(original, anonymised, dims=dims, kind=kind, sex=sex,
                                            date=date, birth=birth),
    }
