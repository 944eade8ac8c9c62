"""Linked outputs: differencing through filters, overlapping recodings, joint audit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdc_magic.outputs.render import HIDDEN


def test_all_districts_minus_one_district_hides_the_few_girls(session, referrals) -> None:
    first = session.publish(referrals.groupby(["sex", "age_band"]).size().unstack())
    assert first.metadata["sdc_magic"]["status"] == "pass"
    outside = referrals[referrals["admin2"] != "Mirebalais"]
    second = session.publish(outside.groupby(["sex", "age_band"]).size().unstack())
    meta = second.metadata["sdc_magic"]
    assert meta["status"] == "suppressed"
    hidden = {tuple(r["cell"]): r for r in meta["reasons"] if r["hidden"]}
    girls = hidden[("F", "0-11")]
    reason = girls["reasons"][0]
    assert reason["rule"] == "differencing" and "out-1" in reason["message"]
    assert "2" not in reason["message"].replace("out-1", "")  # the revealed count is never stated
    # the hidden cell is really hidden in every mime type, and protected by an interval: the one
    # the published cells allow, stated by the certificate (the display states none: the
    # protection's followed from margins this table does not show, red team of stop 50)
    table = outside.groupby(["sex", "age_band"]).size().unstack()
    assert HIDDEN in second.data["text/plain"]
    assert f">{table.loc['F', '0-11']}<" not in second.data["text/html"]
    assert "interval" not in girls or not girls["interval"]
    from sdc_magic.protect import certificate

    cert = certificate.restated(certificate.build("out-2", second.checked, "out-2.csv", "digest"))
    cells = [c for t in cert["tables"] for c in t["cells"] if sorted(c["labels"]) == ["0-11", "F"]]
    assert cells and all(c["status"] != "safe" for c in cells)
    low, high = cells[0]["lower"], cells[0]["upper"]
    assert high is None or high - low >= 0.2 * table.loc["F", "0-11"]


def test_overlapping_recodings_are_caught(session, referrals) -> None:
    kids = referrals[referrals["age"] < 18]
    keys = ["admin2", "case_category", "band"]
    old = kids.assign(band=np.where(kids["age"] < 12, "0-11", "12-17")).groupby(keys).size()
    first = session.publish(old)
    # 0-5 / 6-17: wherever few children are 6-11, subtracting 0-5 from 0-11 reveals them
    new = kids.assign(band=np.where(kids["age"] < 6, "0-5", "6-17")).groupby(keys).size()
    second = session.publish(new)
    old_hidden = dict(zip(old.index, first.checked.hidden[:, 0], strict=True))
    new_hidden = dict(zip(new.index, second.checked.hidden[:, 0], strict=True))
    middle = kids[(kids["age"] >= 6) & (kids["age"] < 12)].groupby(["admin2", "case_category"]).size()
    expected = [(a, c) for (a, c), n in middle.items() if 0 < n < 5
                and not old_hidden.get((a, c, "0-11"), True) and new.get((a, c, "0-5"), 0) >= 5]
    assert expected, "the synthetic data should have such a cell"
    for a, c in expected:
        assert new_hidden[(a, c, "0-5")], (a, c)
    flagged = [k for k, rs in zip(new.index, [second.checked.reasons.get((i, 0), []) for i in range(len(new))],
                                  strict=True) if any(r.rule == "differencing" for r in rs)]
    assert set(flagged) >= {(a, c, "0-5") for a, c in expected}


def test_linked_area_tables_pass_the_joint_audit(session, referrals) -> None:
    first = session.publish(referrals.groupby(["admin2", "case_category"]).size().unstack())
    second = session.publish(referrals.groupby(["admin2", "case_category", "sex"]).size().unstack())
    assert first.metadata["sdc_magic"]["status"] == "pass"
    assert second.metadata["sdc_magic"]["status"] == "suppressed"
    assert not any("joint audit" in n for n in second.metadata["sdc_magic"]["notes"])
    assert [p.out_id for p in session.populations] == ["out-1", "out-2"]


def test_unrelated_frames_are_not_linked(session) -> None:
    rng = np.random.default_rng(1)
    a = pd.DataFrame({"g": rng.choice(list("xyz"), 300), "h": rng.choice(list("pq"), 300)})
    b = pd.DataFrame({"g": rng.choice(list("xyz"), 300), "h": rng.choice(list("pq"), 300)})  # same RangeIndex
    session.publish(a.groupby(["g", "h"]).size())
    second = session.publish(b[b["g"] != "x"].groupby(["g", "h"]).size())
    assert not any(x["rule"] == "differencing" for r in second.metadata["sdc_magic"]["reasons"]
                   for x in r["reasons"])


def test_cells_published_earlier_are_never_chosen_as_secondaries(session, referrals) -> None:
    session.publish(referrals.groupby(["admin2", "case_category"]).size().unstack())
    second = session.publish(referrals.groupby(["admin2", "case_category", "age_band", "sex"]).size())
    assert second.metadata["sdc_magic"]["status"] == "suppressed"
    model = second.checked.models[0]
    cells, columns = model["cells"], dict(zip(model["dims"], model["columns"], strict=True))
    area_by_category = cells[(cells[columns["age_band"]] == "Total") & (cells[columns["sex"]] == "Total")
                             & (cells[columns["admin2"]] != "Total") & (cells[columns["case_category"]] != "Total")]
    assert len(area_by_category) == 28
    assert (area_by_category["status"] == "safe").all()
