"""What the better answers show is recorded for linking, as an output of its own.

Red team of stop 50 (helper-50, 01): the suggestions' previews (and a rate's figures, "37.8 % of
37 with sex = F") were checked against earlier outputs but never recorded, so later tables were
not compared with them. ``df.groupby(["district", "sex"]).size()`` showed A's 20/20 and
previewed the totals by sex, 37/36; a later ``df[df.district != "C"].groupby("sex").size()``
(35/35) was ``pass``: C's 2 women and 1 man, in the notebook and in its redacted copy. Each
shown preview and rate is now recorded under ``<id> (better answer a)``…, audited jointly with
everything recorded before it; one the audit would hide more of is dropped.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session

X = "✕"
PAYLOAD = "application/vnd.sdc-magic.v1+json"


def _publish(sess: Session, obj: Any) -> Any:
    return sess.publish(obj, suggest=lambda checked: sess.suggestions(checked)[0])


def _cells(out: Any) -> dict[str, str]:
    body = out.data["text/plain"].split("\nsdc_magic:")[0]
    return {p[0]: p[1] for p in (line.split() for line in body.splitlines()) if len(p) == 2}


def _shown(sess: Session, out: Any) -> list[dict[str, Any]]:
    return [s for s in out.data[PAYLOAD].get("suggestions") or [] if s["preview"] or s["detail"]]


@pytest.fixture
def people(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(employed=df.flag == 1)


def test_a_previewed_total_is_compared_with_later_tables(sess: Session, people: pd.DataFrame) -> None:
    first = _publish(sess, people.groupby(["district", "sex"]).size())
    previews = {s["title"]: s for s in _shown(sess, first)}
    assert "sex (without district)" in previews  # the totals by sex, 37/36, shown in the output
    assert any(p.out_id.startswith(f"{first.id} (better answer") for p in sess.populations)
    later = sess.publish(people[people.district != "C"].groupby("sex").size())
    c = _cells(later)
    assert later.metadata["sdc_magic"]["status"] == "blocked" or c["F"] == X, later.data["text/plain"]


def test_a_rates_figures_are_compared_with_later_tables(sess: Session, people: pd.DataFrame) -> None:
    first = _publish(sess, people.groupby(["district", "sex"]).size())
    rates = [s for s in _shown(sess, first) if s["kind"] == "rate"]
    assert rates and "of 37 with sex = F" in rates[0]["detail"]
    later = sess.publish(people[people.district != "C"].groupby("sex").employed.agg(["sum", "count"]))
    assert "35" not in later.data["text/plain"].split("\nsdc_magic:")[0], later.data["text/plain"]


def test_the_more_path_records_what_it_adds(sess: Session, people: pd.DataFrame) -> None:
    checked = sess.check(people.groupby(["district", "sex"]).size())
    found, suggester = sess.suggestions(checked, candidates=1)
    sess.record_suggestions("out-9", found, checked)
    more = suggester.more(found)
    sess.record_suggestions("out-9", more)
    assert all(s.recorded is not None for s in more.items)
    names = [p.out_id for p in sess.populations if p.out_id.startswith("out-9 (better answer")]
    assert names and all(not any(ch.isdigit() for ch in n[len("out-9"):]) for n in names)


def test_without_linking_nothing_is_recorded(people: pd.DataFrame) -> None:
    from sdc_magic.config import preset

    s = Session(rules=preset("humanitarian"))
    s.linking = False
    s.capture.install()
    try:
        out = _publish(s, people.groupby(["district", "sex"]).size())
        assert _shown(s, out)
        assert not list(s.populations)
    finally:
        s.capture.uninstall()
