"""A column recoded under its own name (bands cut from ages) confirms the labels of its rows.

Red team of stop 50 (helper-49, 04): ``pd.cut(df.age, bins).value_counts()`` brings the rows of
``df`` under their labels with ``age`` in bands; its values matched nothing, so its rows were
read as other people. (a) bands stopping at 100 count 71 people, the counts by sex 73: two
people over 100, both ``pass``; (b) everyone by band, then the bands of the ages outside
district C: C's three people by band, both ``pass``. A column that is a many-to-one function of
the same-named column at the rows the labels name (``identity.recoded``, with enough repeated
values to rule out chance) now confirms them as a column equal to it does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sdc_magic.linking.identity import recoded

X = "✕"


def _status(out: Any) -> str:
    return out.metadata["sdc_magic"]["status"]


def _cells(out: Any) -> list[str]:
    body = out.data["text/plain"].split("\nsdc_magic:")[0]
    last = [line.split()[-1] for line in body.splitlines()[1:] if line.split()]
    return [c for c in last if c == X or c.isdigit()]


def test_bands_that_leave_people_out_beside_the_counts_by_sex(sess: Any, df: pd.DataFrame) -> None:
    bands = sess.publish(pd.cut(df.age, [0, 30, 60, 100]).value_counts(sort=False))
    by_sex = sess.publish(df.groupby("sex").size())
    shown = [int(c) for out in (bands, by_sex) for c in _cells(out) if c != X]
    # never both complete: 73 - 71 = the two people over 100
    assert not (_status(bands) in ("pass", "suppressed") and _status(by_sex) in ("pass", "suppressed")
                and sum(shown) == 71 + 73), (bands.data["text/plain"], by_sex.data["text/plain"])


def test_bands_of_everyone_then_outside_a_district(sess: Any, df: pd.DataFrame) -> None:
    bins = [0, 30, 60, 120]
    everyone = sess.publish(df.groupby(pd.cut(df.age, bins), observed=False).size())
    outside = sess.publish(pd.cut(df[df.district != "C"].age, bins).value_counts(sort=False))
    a, b = _cells(everyone), _cells(outside)
    differences = [int(x) - int(y) for x, y in zip(a, b, strict=True) if X not in (x, y)]
    assert not any(0 < d < 5 for d in differences), (everyone.data["text/plain"], outside.data["text/plain"])


def test_a_recode_needs_repeated_values_and_a_coarser_side() -> None:
    rng = np.random.default_rng(0)
    ages = rng.integers(18, 90, 2000).astype(np.uint64)
    bands = (ages // 20).astype(np.uint64) + np.uint64(1000)
    assert recoded(ages, bands) and recoded(bands, ages)  # either direction
    assert not recoded(ages, ages + np.uint64(31))  # one to one: other people's ages
    assert not recoded(ages, rng.integers(0, 3, 2000).astype(np.uint64))  # no function
    assert not recoded(ages, np.zeros(2000, dtype=np.uint64))  # a constant proves nothing
    few = ages[:12]  # too few repeats to rule out chance
    assert not recoded(few, (few // 40).astype(np.uint64))


def test_other_people_with_a_coarser_column_of_the_same_name_stay_apart(sess: Any, df: pd.DataFrame) -> None:
    # 73 other people numbered 0..72 whose "age" is in bands that follow nothing of ours
    rng = np.random.default_rng(5)
    others = pd.DataFrame({"age": rng.choice(["young", "middle", "old"], len(df)),
                           "sex": rng.choice(["F", "M"], len(df))})
    outs = [sess.publish(df.groupby("sex").size()), sess.publish(others.groupby("age").size())]
    assert [_status(o) for o in outs] == ["pass", "pass"]
