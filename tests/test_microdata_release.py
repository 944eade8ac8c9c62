"""Row-level frames leave only through the k-anonymity path, and the export re-checks them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sdc_magic.records.verification import verify


def _people(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"sex": rng.choice(["F", "M"], n), "birth_band": rng.choice(["1960s", "1970s", "1980s"], n),
                         "region": rng.choice(["N", "S"], n), "hiv": rng.choice(["pos", "neg"], n)})


def test_row_level_is_blocked_without_microdata_rules(session) -> None:
    published = session.publish(_people())
    assert published.metadata["sdc_magic"]["status"] == "blocked"
    assert published.metadata["sdc_magic"]["kind"] == "row-level"
    assert not session.outputs[-1].exportable


def test_k_anonymous_frame_is_released_and_verified(session, tmp_path: Path) -> None:
    session.set_microdata(["sex", "birth_band", "region"], k=3, sensitive="hiv", l=2)
    published = session.publish(_people())
    meta = published.metadata["sdc_magic"]
    assert (meta["status"], meta["kind"]) == ("pass", "microdata")
    session.export(tmp_path)
    assert verify(tmp_path) == []
    # a record edited into a class of one is caught on the file itself
    lines = (tmp_path / "out-1.csv").read_text().splitlines()
    lines[1] = "M,1990s,N,pos"
    (tmp_path / "out-1.csv").write_text("\n".join(lines) + "\n")
    problems = verify(tmp_path)
    assert any("not 3-anonymous" in p for p in problems)


def test_violations_and_identifiers_keep_it_blocked(session) -> None:
    people = _people()
    session.set_microdata(["sex", "birth_band", "region"], k=3)
    rare = pd.concat([people, pd.DataFrame([{"sex": "M", "birth_band": "1930s", "region": "N", "hiv": "neg"}])],
                     ignore_index=True)
    meta = session.publish(rare).metadata["sdc_magic"]
    assert meta["status"] == "blocked" and any("1 of 301 records" in n for n in meta["notes"])
    meta = session.publish(people.assign(person_id=range(len(people)))).metadata["sdc_magic"]
    assert meta["status"] == "blocked" and any("person_id" in n for n in meta["notes"])
    with pytest.raises(ValueError, match="k must"):
        session.set_microdata(["sex"], k=1)


def test_a_table_with_every_cell_hidden_is_blocked(session) -> None:
    tiny = pd.DataFrame({"a": ["x", "x", "y", "z"], "b": ["p", "q", "p", "q"]})
    meta = session.publish(tiny.groupby(["a", "b"]).size().unstack()).metadata["sdc_magic"]
    assert meta["status"] == "blocked"
    assert any("every cell" in n for n in meta["notes"])


def test_risk_report_goes_into_the_certificate_and_can_block(session, tmp_path: Path) -> None:
    import json

    from sdc_magic.microdata import make_hdss, match_risk, person_table

    people = _people()
    events = make_hdss(n_people=300, seed=3)
    table = person_table(events)
    risk = match_risk(table, table)  # no anonymisation at all: everyone is at risk
    session.set_microdata(["sex", "birth_band", "region"], k=3, risk=risk, max_risk=5.0)
    meta = session.publish(people).metadata["sdc_magic"]
    assert meta["status"] == "blocked" and any("re-identification risk" in n for n in meta["notes"])
    session.set_microdata(["sex", "birth_band", "region"], k=3, risk=risk)
    assert session.publish(people).metadata["sdc_magic"]["status"] == "pass"
    session.export(tmp_path)
    cert = json.loads(next(tmp_path.glob("*.certificate.json")).read_text())
    assert "risk" in cert["microdata"] and cert["microdata"]["k_anonymous"]
    assert verify(tmp_path) == []
