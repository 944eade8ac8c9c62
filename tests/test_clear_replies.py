"""Clear replies instead of tracebacks or misleading words (red team 53b, findings 10, 17 and 18).

Why: ``sdc-magic redact`` ended in a Python traceback for a missing source, a missing target
folder or a file that is JSON but not a notebook; ``%sdc exception`` on a blocked table said
"status review (the output checker decides)" and relabelled it, though blocked outputs are never
released; ``%sdc export --only=out-99`` wrote an empty export and blamed the notebook for what it
left out; ``%sdc rules unit=nosuchcolumn`` was accepted without a word.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from sdc_magic.config import RulesError
from sdc_magic.jupyter.cli import main


# ------------------------------------------------------------------ redact (finding 10)
@pytest.mark.parametrize("case", ["missing source", "missing folder", "cells not a list", "not JSON", "a list",
                                  "cells of numbers", "source is a folder"])
def test_redact_says_what_is_wrong_in_one_line(tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.ipynb"
    target = tmp_path / "out.ipynb"
    if case == "missing folder":
        nbformat.write(nbformat.v4.new_notebook(), source)
        target = tmp_path / "no" / "such" / "out.ipynb"
    elif case == "source is a folder":
        source.mkdir()
    elif case != "missing source":
        text = {"cells not a list": '{"cells": 3}', "not JSON": "not json", "a list": "[]",
                "cells of numbers": '{"cells": [3], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'}[case]
        source.write_text(text)
    code = main(["redact", str(source), str(target)])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("sdc-magic redact: ")
    assert not target.exists()


# ------------------------------------------------------------------ %sdc exception (finding 17)
@pytest.fixture
def people(sdc):
    from test_engines_redteam import PEOPLE

    sdc.ns["df"] = PEOPLE.copy()
    return sdc


def _last_id(ran) -> str:
    return ran.outputs[-1][1]["sdc_magic"]["id"]


def test_an_exception_for_a_blocked_table_is_refused_and_it_stays_blocked(people) -> None:
    from sdc_magic.jupyter.kernel import session

    ran = people.run("df.groupby(['district', 'sex']).income.max()")
    assert ran.outputs[-1][1]["sdc_magic"]["status"] == "blocked"
    out_id = _last_id(ran)
    with pytest.raises(RulesError, match="cannot be released by an exception") as err:
        people.magic(f'sdc exception {out_id} "needed for the report"')
    assert "review" not in str(err.value)
    record = next(r for r in session().outputs if r.id == out_id)
    assert record.status == "blocked" and not record.exception
    assert "blocked" in people.magic("sdc status").stdout.split(out_id, 1)[1].splitlines()[0]


def test_the_lab_panel_gets_the_refusal_in_words(people) -> None:
    # (the front-end's "Request an exception" button goes through the comm: it showed the generic
    # "the kernel could not do this" before)
    from sdc_magic.jupyter import comm
    from sdc_magic.jupyter.kernel import session

    out_id = _last_id(people.run("df.groupby(['district', 'sex']).income.max()"))
    comm.remember(out_id, {}, {"sdc_magic": {"id": out_id, "status": "blocked"}})
    try:
        reply = comm.handle({"action": "exception", "id": out_id, "reason": "needed for the report"})
    finally:
        comm._live.clear()
    assert reply["ok"] is False and "cannot be released by an exception" in reply["error"]
    assert next(r for r in session().outputs if r.id == out_id).status == "blocked"


def test_an_exception_for_a_cleared_table_still_asks_for_review(people) -> None:
    out_id = _last_id(people.run("df.groupby('sex').size()"))
    ran = people.magic(f'sdc exception {out_id} "as it is"')
    assert "status review" in ran.stdout


# ------------------------------------------------------------------ export --only, rules unit= (finding 18)
def test_export_only_an_id_that_does_not_exist_says_so_and_writes_nothing(people, tmp_path: Path) -> None:
    people.run("df.groupby('sex').size()")
    with pytest.raises(RulesError, match="no output out-99") as err:
        people.magic(f"sdc export {tmp_path / 'x'} --only=out-99")
    assert "no longer shows" not in str(err.value) and "nothing was exported" in str(err.value)
    assert not (tmp_path / "x").exists()


def test_export_only_names_the_ids_that_do_not_exist(people, tmp_path: Path) -> None:
    out_id = _last_id(people.run("df.groupby('sex').size()"))
    ran = people.magic(f"sdc export {tmp_path / 'x'} --only={out_id},out-99")
    assert f"exported 1 output(s) to {tmp_path / 'x'}: {out_id}" in ran.stdout
    assert "no such output" in ran.stdout and "out-99" in ran.stdout


def test_a_unit_no_frame_has_is_set_with_a_warning_naming_it(people) -> None:
    ran = people.magic("sdc rules unit=nosuchcolumn")
    assert "warning" in ran.stdout and "'nosuchcolumn'" in ran.stdout


def test_a_unit_a_frame_has_is_set_quietly(people) -> None:
    ran = people.magic("sdc rules unit=household")
    assert "warning" not in ran.stdout
