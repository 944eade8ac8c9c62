"""A table one measure of which no pattern can protect beside earlier outputs: protected on its own,
then audited with them (``Session._link``), whatever measure's message comes first.

Red team of stop 66 (helper-88): a polars table of counts and a flag's mean was blocked whole.
Its three protections (the counts, and the flag's two sides) give three messages joined by "; ";
the session's fallback looked for "No suppression pattern can protect" at the *start* of a note,
found the counts' "44 primary cell(s) protected ..." there, and never ran.
"""

from __future__ import annotations

import pytest
from table_fixtures import red_team_people

pl = pytest.importorskip("polars")

EARLIER = [
    'p.filter(F("edu") != "none").group_by(["district", "band", "edu"]).agg(pl.len()).sort(["district", "band", "edu"])',
    'p.filter(F("district") != "D7").group_by(["region", "band", "edu"]).agg(pl.len()).sort(["region", "band", "edu"])',
    'p.group_by(["band", "sex", "district"]).agg(pl.len()).sort(["band", "sex", "district"])',
    'p.filter(F("age") != 63).with_columns(old=pl.when(F("age") >= 36).then(pl.lit("old"))'
    '.otherwise(pl.lit("young"))).group_by(["district", "old"]).agg(pl.len()).sort(["district", "old"])',
]
LAST = 'p.group_by(["district", "band", "sex"]).agg(pl.len().alias("n"), F("flag").mean()).sort(["district", "band", "sex"])'


def test_a_measure_pinned_by_earlier_outputs_sends_the_table_to_the_fallback(sdc) -> None:
    sdc.ns.update(pl=pl, F=pl.col, p=pl.from_pandas(red_team_people(23)))
    for code in EARLIER:
        assert sdc.run(code).meta["status"] in ("pass", "suppressed")
    meta = sdc.run(LAST).meta
    assert meta["status"] in ("suppressed", "review"), meta["notes"]
    assert 0 < meta["hidden"] < meta["cells"]
    assert any("protected on its own, then audited with them" in n for n in meta["notes"]), meta["notes"]
