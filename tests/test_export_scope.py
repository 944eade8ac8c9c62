"""Export is what the notebook shows (issue 24.2): the panel names the outputs the notebook holds
(``--only``); typed in a cell, ``%sdc export`` writes this kernel's outputs and names those of
earlier kernels instead of exporting them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest


def _cleared_tables(sdc) -> list[str]:
    sdc.ns["pd"] = __import__("pandas")
    sdc.run("t1 = pd.DataFrame({'area': ['A', 'B'], 'n': [40, 50]}).set_index('area')['n']")
    ids = []
    for code in ("referrals.groupby('admin2').size()", "referrals.groupby('sex').size()",
                 "referrals.groupby('case_category').size()"):
        ran = sdc.run(code)
        ids.append(ran.outputs[-1][1]["sdc_magic"]["id"])
    return ids


@pytest.fixture
def shown(sdc, referrals):
    sdc.ns["referrals"] = referrals
    return _cleared_tables(sdc)


def test_only_exports_the_named_outputs_and_says_which_are_unknown(sdc, shown, tmp_path: Path) -> None:
    a, _, c = shown
    ran = sdc.magic(f"sdc export {tmp_path / 'x'} --only {a},{c},out-987654321")
    assert f"exported 2 output(s) to {tmp_path / 'x'}: {a}, {c}" in ran.stdout
    assert "out-987654321" in ran.stdout and "no record" in ran.stdout
    csvs = sorted(p.stem for p in (tmp_path / "x").rglob("out-*.csv"))
    assert csvs == sorted([a, c])


def test_only_with_nothing_exports_nothing(sdc, shown, tmp_path: Path) -> None:
    ran = sdc.magic(f"sdc export {tmp_path / 'x'} --only=")
    assert "exported 0 output(s)" in ran.stdout
    assert not list((tmp_path / "x").rglob("out-*.csv"))


def test_a_cell_exports_this_kernels_outputs_and_names_earlier_kernels_ones(sdc, shown, tmp_path: Path) -> None:
    from sdc_magic.jupyter.kernel import session

    sess = session()
    a, b, c = shown
    for record in sess.outputs:  # as if every other output had been made before a restart
        if record.id not in (b, c):
            record.kernel_session = "an-earlier-kernel"
    ran = sdc.magic(f"sdc export {tmp_path / 'x'}")
    assert f"exported 2 output(s) to {tmp_path / 'x'}: {b}, {c}" in ran.stdout
    # no front-end has said which outputs the notebook shows (a headless run): said in words
    assert "no front-end told this kernel which outputs the notebook shows" in ran.stdout
    assert "made by an earlier kernel; the notebook may no longer show them): " in ran.stdout
    assert f" {a}" in ran.stdout.split("earlier kernel", 1)[1]
    assert sorted(p.stem for p in (tmp_path / "x").rglob("out-*.csv")) == sorted([b, c])


def test_a_bad_only_is_a_usage_error(sdc, shown, tmp_path: Path) -> None:
    from sdc_magic.config import RulesError

    with pytest.raises(RulesError, match="usage"):
        sdc.magic(f"sdc export {tmp_path / 'x'} --only")


def test_a_cell_leaves_out_what_the_front_end_said_the_notebook_no_longer_shows(sdc, shown, tmp_path: Path) -> None:
    """The lab extension says which outputs the notebook holds, and has held, whenever that changes
    (comm action ``shown``): a typed ``%sdc export`` leaves out those held but no longer shown (a
    deleted cell, a cleared output) and names them; outputs it has not held yet are exported."""
    from sdc_magic.jupyter import comm

    a, b, c = shown
    assert comm.handle({"action": "shown", "ids": [a, c], "seen": [a, b, c]}) == {"ok": True}  # b's cell deleted
    d = sdc.run("referrals.groupby('age_band').size()").outputs[-1][1]["sdc_magic"]["id"]  # not told yet
    ran = sdc.magic(f"sdc export {tmp_path / 'x'}")
    written = {p.stem for p in (tmp_path / "x").rglob("out-*.csv")}
    assert {a, c, d} <= written and b not in written
    gone = _no_longer_shown(ran.stdout)
    assert b in gone and not {a, c, d} & gone, ran.stdout
    assert "no front-end told" not in ran.stdout
    assert comm.handle({"action": "shown", "ids": "out-1"})["ok"] is False


def test_the_panel_export_names_this_kernels_outputs_it_leaves_out(sdc, shown, tmp_path: Path) -> None:
    a, b, c = shown
    ran = sdc.magic(f"sdc export {tmp_path / 'x'} --only={a}")
    assert f"exported 1 output(s) to {tmp_path / 'x'}: {a}" in ran.stdout
    gone = _no_longer_shown(ran.stdout)
    assert {b, c} <= gone and a not in gone, ran.stdout


def _no_longer_shown(stdout: str) -> set[str]:
    line = re.search(r"not exported \(the notebook no longer shows them: [^)]*\): (.*)", stdout)
    assert line, stdout
    return set(re.findall(r"out-\d+", line.group(1)))
