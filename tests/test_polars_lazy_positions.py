"""Lazy polars frames over a frame of polars' own are placed by their rows' positions in it.

A lazy frame's rows were labelled by their positions in it when its root came from pandas only;
over a frame of polars' own (``pl.DataFrame(...)``, a file read) they were placed by content. Over
a narrow ``select`` (rows repeated) content placed none of a third filter's rows: it was compared
with nothing, and everyone, A or C and B or C gave C's people by 22 + 17 − 37, all ``pass`` (stop
58, found beside issue 22's distinct counts). Linked by rows, as below ``IN_ENGINE_ROWS``.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from test_engines_redteam import PEOPLE
from test_linking_distinct_units import EP
from test_redteam_round4 import AC, BC, _cleared, _recover, _totals


def _native(frame) -> pl.DataFrame:
    """A polars frame of polars' own (not from pandas: no pandas labels)."""
    plain = frame.assign(district=frame.district.astype(object), sex=frame.sex.astype(object))
    return pl.DataFrame({c: plain[c].tolist() for c in plain.columns})


def _tables(frame: pl.DataFrame, stat: pl.Expr, narrow: list[str]) -> list[pl.DataFrame]:
    def one(where: pl.Expr | None) -> pl.DataFrame:
        lf = frame.lazy().select(narrow)
        if where is not None:
            lf = lf.filter(where)
        return lf.group_by("sex").agg(stat.alias("n")).sort("sex").collect()
    return [one(None), one(pl.col("district").is_in(AC)), one(pl.col("district").is_in(BC))]


CASES = {
    "distinct people of episodes": (EP, pl.col("person").n_unique(), ["person", "sex", "district"]),
    "people by district and sex": (PEOPLE, pl.len(), ["sex", "district"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_lazy_narrow_frame_of_polars_own_is_compared(case: str, humanitarian_sessions) -> None:
    data, stat, narrow = CASES[case]
    sess = humanitarian_sessions()
    women_in_c = data[(data.district == "C") & (data.sex == "F")]
    truth = women_in_c.person.nunique() if "person" in narrow else len(women_in_c)
    assert truth < 3  # (C's women are few: the test can fail)
    frame = _native(data)
    outs = [sess.publish(t) for t in _tables(frame, stat, narrow)]
    everyone, ac, bc = (_totals(o) for o in outs)
    assert everyone.get("F") is not None
    assert not (_cleared(*outs) and _recover(ac, bc, everyone, "F") == truth), \
        [o.metadata["sdc_magic"]["status"] for o in outs]


def test_positions_of_a_lazy_filter_are_the_roots(humanitarian_sessions) -> None:
    """The rows a lazy filter keeps are labelled by their positions in the root frame."""
    from sdc_magic.capture.polars.lineage import row_positions

    sess = humanitarian_sessions()
    frame = _native(PEOPLE)
    lf = frame.lazy().select("sex", "district").filter(pl.col("district") != "C")
    expected = np.flatnonzero((PEOPLE.district != "C").to_numpy())
    assert sess is not None and np.array_equal(np.asarray(row_positions(lf)), expected)
