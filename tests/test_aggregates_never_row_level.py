"""The result of an aggregation is never drawn as row-level data (issue 23.3).

Red team round 3: one date, text or list cell made an aggregation's result "row-level", and
row-level tables were drawn verbatim: a district's count of 2 and its two people's visit dates,
lists of names, a merge of aggregates with the oldest person's age.  Now such results are
checked as unverified tables: whole numbers as counts, every date, text or list withheld.
Microdata itself (``df.head()``) is still shown to the analyst, never exportable.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

SECRET = ["2024-02-03", "2024-05-06", "zed", "zoe", "101"]


def _people() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame({
        "district": rng.choice(list("ABCD"), n), "sex": rng.choice(["F", "M"], n),
        "age": rng.integers(0, 90, n),
        "visit_date": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 300, n), unit="D"),
        "name": [f"p{i}" for i in range(n)], "case_id": np.arange(n)})
    few = pd.DataFrame({"district": ["Z", "Z"], "sex": ["F", "F"], "age": [101, 99],
                        "visit_date": pd.to_datetime(["2024-02-03", "2024-05-06"]), "name": ["zed", "zoe"],
                        "case_id": [900, 901]})
    return pd.concat([df, few], ignore_index=True)


SNIPPETS = [
    'df.groupby("district")["visit_date"].agg(["min", "max", "count"])',
    'df.groupby("district").agg(first=("visit_date", "min"), n=("case_id", "count"))',
    'df.groupby("district")["visit_date"].max()',
    'df.groupby("district")["visit_date"].agg(["min", "max", "count"]).reset_index()',
    'df.groupby("district", as_index=False).agg(last=("visit_date", "max"), n=("case_id", "size"))',
    'df.describe(include="all")',
    'df.groupby("district")["name"].agg(list)',
    'df.groupby("district")["name"].agg(", ".join)',
    'df.groupby("district")["name"].first()',
    'df.groupby("district").size().reset_index(name="n").merge(df.groupby("district")["age"].max().reset_index(), '
    'on="district")',
    'pd.merge(df.groupby("district").size().reset_index(name="n"), df.groupby("district")["age"].max().reset_index())',
    'df.groupby("district").size().to_frame("n").join(df.groupby("district")["visit_date"].min())',
    'pd.concat([df.groupby("district").size().rename("n"), df.groupby("district")["name"].last()], axis=1)',
]


@pytest.mark.parametrize("code", SNIPPETS)
def test_no_aggregation_is_drawn_as_row_level(session, code: str) -> None:
    df = _people()
    out = session.publish(eval(code, {"df": df, "pd": pd}))
    meta = out.metadata["sdc_magic"]
    assert meta.get("kind") != "row-level", code
    for mime in ("text/plain", "text/html"):
        text = out.data[mime]
        for secret in SECRET:
            assert secret not in text, f"{code}: {secret} drawn in {mime}"
    assert meta["status"] in ("review", "blocked", "suppressed", "pass")


def test_microdata_is_still_shown_to_the_analyst(session) -> None:
    df = _people()
    out = session.publish(df.tail(3))
    assert out.metadata["sdc_magic"]["kind"] == "row-level"
    assert out.metadata["sdc_magic"]["status"] == "blocked"  # never exportable
    assert "zoe" in out.data["text/plain"]  # (the analyst looks at their own rows)


def test_merge_concat_and_reset_index_give_the_same_values_as_plain_pandas(session) -> None:
    df = _people()
    a = df.groupby("district").size().reset_index(name="n")
    b = df.groupby("district")["age"].max().reset_index()
    merged = a.merge(b, on="district")
    joined = a.set_index("district").join(b.set_index("district"))
    both = pd.concat([a, b], axis=1)
    session.capture.uninstall()
    try:
        a0 = df.groupby("district").size().reset_index(name="n")
        b0 = df.groupby("district")["age"].max().reset_index()
        pd.testing.assert_frame_equal(merged, a0.merge(b0, on="district"))
        pd.testing.assert_frame_equal(joined, a0.set_index("district").join(b0.set_index("district")))
        pd.testing.assert_frame_equal(both, pd.concat([a0, b0], axis=1))
    finally:
        session.capture.install()
