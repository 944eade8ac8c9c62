"""A long, ordinary analysis session on the synthetic referrals data (used by the linking tests
and by ``benchmarks/session.py``): 80+ tables a researcher would plausibly display one after
another — counts, crosstabs, pivots, means, describes, filtered sub-populations, regions
built from districts, bands cut from age, re-indexed copies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd

#: Regions of the seven districts (a hierarchy the analyst builds herself).
REGIONS = {
    "Port-au-Prince": "West", "Croix-des-Bouquets": "West", "Leogane": "West",
    "Cap-Haitien": "North", "Gonaives": "North",
    "Saint-Marc": "Centre", "Mirebalais": "Centre",
}


def long_session_tables(df: pd.DataFrame) -> Iterator[tuple[str, Callable[[], object]]]:
    """(name, thunk) pairs; each thunk computes one table with plain pandas."""
    d = df.assign(region=df["admin2"].map(REGIONS))
    kids = d[d["age"] < 18]
    adults = d[d["age"] >= 18]
    consent = d[d["consent_to_refer"]]
    gbv = d[d["case_category"] == "GBV"]
    served = d[d["days_to_first_service"].notna()]
    yield "district", lambda: d.groupby("admin2").size()
    yield "region", lambda: d.groupby("region").size()
    yield "district x category", lambda: d.groupby(["admin2", "case_category"]).size().unstack()
    yield "region x category", lambda: d.groupby(["region", "case_category"]).size().unstack()
    yield "region x sex", lambda: pd.crosstab(d["region"], d["sex"])
    yield "district x sex", lambda: pd.crosstab(d["admin2"], d["sex"])
    yield "sex x age band", lambda: d.groupby(["sex", "age_band"]).size().unstack()
    yield "category x age band", lambda: d.groupby(["case_category", "age_band"]).size().unstack()
    yield "category x sex", lambda: d.groupby(["case_category", "sex"]).size().unstack()
    yield "region x age band", lambda: d.groupby(["region", "age_band"]).size().unstack()
    yield "district x age band", lambda: d.groupby(["admin2", "age_band"]).size().unstack()
    yield "region x category x sex", lambda: d.groupby(["region", "case_category", "sex"]).size().unstack()
    yield "district x category x sex", lambda: d.groupby(["admin2", "case_category", "sex"]).size().unstack()
    yield "category value_counts", lambda: d["case_category"].value_counts()
    yield "sex value_counts", lambda: d["sex"].value_counts()
    yield "age band value_counts", lambda: d["age_band"].value_counts()
    yield "disability by district", lambda: pd.crosstab(d["admin2"], d["disability_reported"])
    yield "consent by region", lambda: pd.crosstab(d["region"], d["consent_to_refer"])
    yield "accepted by category", lambda: pd.crosstab(d["case_category"], d["referral_accepted"])
    yield "mean days by district", lambda: d.groupby("admin2")["days_to_first_service"].mean()
    yield "mean days by region", lambda: d.groupby("region")["days_to_first_service"].mean()
    yield "mean days by category", lambda: d.groupby("case_category")["days_to_first_service"].mean()
    yield "median days by region", lambda: d.groupby("region")["days_to_first_service"].median()
    yield "days count+mean by region", lambda: d.groupby("region")["days_to_first_service"].agg(["count", "mean"])
    yield "days by category x sex", lambda: d.pivot_table(index="case_category", columns="sex",
                                                          values="days_to_first_service", aggfunc="mean")
    yield "age mean by region", lambda: d.groupby("region")["age"].mean()
    yield "age describe", lambda: d["age"].describe()
    yield "days describe", lambda: d["days_to_first_service"].describe()
    yield "kids by district", lambda: kids.groupby("admin2").size()
    yield "kids by region", lambda: kids.groupby("region").size()
    yield "kids by sex x age band", lambda: kids.groupby(["sex", "age_band"]).size().unstack()
    yield "kids by category", lambda: kids.groupby("case_category").size()
    yield "kids region x category", lambda: kids.groupby(["region", "case_category"]).size().unstack()
    yield "adults by district", lambda: adults.groupby("admin2").size()
    yield "adults by region x sex", lambda: adults.groupby(["region", "sex"]).size().unstack()
    yield "adults by category", lambda: adults.groupby("case_category").size()
    yield "consenting by district", lambda: consent.groupby("admin2").size()
    yield "consenting by category x sex", lambda: consent.groupby(["case_category", "sex"]).size().unstack()
    yield "consenting accepted by region", lambda: pd.crosstab(consent["region"], consent["referral_accepted"])
    yield "gbv by district", lambda: gbv.groupby("admin2").size()
    yield "gbv by region x sex", lambda: gbv.groupby(["region", "sex"]).size().unstack()
    yield "gbv by age band", lambda: gbv.groupby("age_band").size()
    yield "served by region", lambda: served.groupby("region").size()
    yield "served days mean by category", lambda: served.groupby("case_category")["days_to_first_service"].mean()
    yield "served by district x sex", lambda: served.groupby(["admin2", "sex"]).size().unstack()
    yield "wait band", lambda: served.assign(wait=pd.cut(served["days_to_first_service"], [0, 7, 30, 365]))\
        .groupby("wait", observed=True).size()
    yield "wait band by region", lambda: served.assign(
        wait=pd.cut(served["days_to_first_service"], [0, 7, 30, 365])).groupby(["region", "wait"], observed=True)\
        .size().unstack()
    yield "decade", lambda: d.assign(decade=(d["age"] // 10) * 10).groupby("decade").size()
    yield "decade by sex", lambda: d.assign(decade=(d["age"] // 10) * 10).groupby(["decade", "sex"]).size().unstack()
    yield "older 60", lambda: d.groupby(pd.cut(d["age"], [59, 120]), observed=True).size()
    yield "older 65", lambda: d.groupby(pd.cut(d["age"], [64, 120]), observed=True).size()
    yield "age quartile", lambda: d.groupby(pd.qcut(d["age"], 4), observed=True).size()
    yield "households by district", lambda: d.groupby("admin2")["household_id"].nunique()
    yield "pivot category x region", lambda: d.pivot_table(index="case_category", columns="region",
                                                           values="case_id", aggfunc="count")
    yield "pivot region x sex margins", lambda: d.pivot_table(index="region", columns="sex", values="case_id",
                                                              aggfunc="count", margins=True)
    yield "crosstab district x category margins", lambda: pd.crosstab(d["admin2"], d["case_category"], margins=True)
    yield "crosstab region x age band norm", lambda: pd.crosstab(d["region"], d["age_band"], normalize="index")
    yield "share consent by district", lambda: d.groupby("admin2")["consent_to_refer"].mean()
    yield "reset kids by sex", lambda: kids.reset_index(drop=True).groupby("sex").size()
    yield "reset adults by region", lambda: adults.reset_index(drop=True).groupby("region").size()
    yield "outside PaP by sex x age", lambda: d[d["admin2"] != "Port-au-Prince"].groupby(["sex", "age_band"])\
        .size().unstack()
    yield "outside Mirebalais by category", lambda: d[d["admin2"] != "Mirebalais"].groupby("case_category").size()
    yield "West by district x category", lambda: d[d["region"] == "West"].groupby(["admin2", "case_category"])\
        .size().unstack()
    yield "North by category x sex", lambda: d[d["region"] == "North"].groupby(["case_category", "sex"])\
        .size().unstack()
    yield "Centre by age band", lambda: d[d["region"] == "Centre"].groupby("age_band").size()
    yield "category x consent x accepted", lambda: d.groupby(["case_category", "consent_to_refer",
                                                              "referral_accepted"]).size().unstack()
    yield "disability x sex", lambda: pd.crosstab(d["disability_reported"], d["sex"])
    yield "disability x category", lambda: pd.crosstab(d["case_category"], d["disability_reported"])
    yield "age band x disability x sex", lambda: d.groupby(["age_band", "disability_reported", "sex"]).size()\
        .unstack()
    yield "mean age by category x sex", lambda: d.groupby(["case_category", "sex"])["age"].mean().unstack()
    yield "age agg by region", lambda: d.groupby("region")["age"].agg(["count", "mean", "median"])
    yield "days sum by region", lambda: d.groupby("region")["days_to_first_service"].sum()
    yield "days sum by district", lambda: d.groupby("admin2")["days_to_first_service"].sum()
    yield "region value_counts", lambda: d["region"].value_counts()
    yield "district value_counts", lambda: d["admin2"].value_counts()
    yield "kids value_counts age band", lambda: kids["age_band"].value_counts()
    yield "category x region (again)", lambda: d.groupby(["case_category", "region"]).size().unstack()
    yield "region x category x age band", lambda: d.groupby(["region", "case_category", "age_band"]).size()\
        .unstack()
    yield "district x sex x age band", lambda: d.groupby(["admin2", "sex", "age_band"]).size().unstack()
    yield "consent x disability by region", lambda: d.groupby(["region", "consent_to_refer",
                                                               "disability_reported"]).size().unstack()
    yield "served by category x age band", lambda: served.groupby(["case_category", "age_band"]).size().unstack()
    yield "kids served by region", lambda: served[served["age"] < 18].groupby("region").size()
    yield "accepted share by region", lambda: d.groupby("region")["referral_accepted"].mean()
    yield "accepted share by category x sex", lambda: d.groupby(["case_category", "sex"])["referral_accepted"]\
        .mean().unstack()
    yield "total", lambda: d.assign(all="all").groupby("all").size()
    yield "sex x region (transposed)", lambda: pd.crosstab(d["sex"], d["region"])
    yield "region x category (again, sorted)", lambda: d.groupby(["region", "case_category"]).size()\
        .sort_values(ascending=False)
    yield "age band by region (kids reset)", lambda: kids.reset_index(drop=True).groupby(["region", "age_band"])\
        .size().unstack()
    yield "district x category x age band", lambda: d.groupby(["admin2", "case_category", "age_band"]).size()
    yield "households by region", lambda: d.groupby("region")["household_id"].nunique()


def n_tables(df: pd.DataFrame) -> int:
    return sum(1 for _ in long_session_tables(df))


__all__ = ["REGIONS", "long_session_tables", "n_tables", "np"]
