"""The demo notebooks run headless and show what the lesson says they show."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdc_magic.jupyter.notebooks import execute, summarise

DEMOS = Path(__file__).resolve().parent.parent / "demo_notebooks"


@pytest.fixture(scope="module")
def nineteen_cells(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("demo") / "01.ipynb"
    nb = execute(DEMOS / "01_nineteen_cells.ipynb", out, cwd=out.parent)
    return nb, summarise(nb)


@pytest.mark.notebook
def test_no_cell_raised(nineteen_cells) -> None:
    _, rows = nineteen_cells
    assert [r for r in rows if r.output_type == "error"] == []


@pytest.mark.notebook
def test_four_way_table_hides_every_small_cell(nineteen_cells) -> None:
    _, rows = nineteen_cells
    tables = [r for r in rows if r.kind == "table"]
    four_way = next(r for r in tables if r.cells == 200)
    assert four_way.hidden >= 85  # 85 primary cells, plus secondaries once protection applies
    assert four_way.status in {"suppressed", "blocked"}
    assert four_way.meta["primary"] == 85
    assert "✕" in four_way.data["text/plain"] and "✕" in four_way.data["text/html"]


@pytest.mark.notebook
def test_area_by_category_and_rates_are_cleared(nineteen_cells) -> None:
    _, rows = nineteen_cells
    tables = [r for r in rows if r.kind == "table"]
    by_area = next(r for r in tables if r.cells == 28)
    assert (by_area.status, by_area.hidden) == ("pass", 0)
    rates = next(r for r in tables if r.cells == 6)
    assert (rates.status, rates.hidden) == ("pass", 0)
    html = rates.data["text/html"]
    assert "202" in html and "1436" in html and "54" in html and "663" in html


@pytest.mark.notebook
def test_row_level_view_is_blocked(nineteen_cells) -> None:
    _, rows = nineteen_cells
    row_level = [r for r in rows if r.kind == "row-level"]
    assert len(row_level) == 1 and row_level[0].status == "blocked"
    assert "never exportable" in row_level[0].data["text/plain"]


@pytest.mark.notebook
def test_messages_are_cleared_and_nothing_is_left_of_progress(nineteen_cells) -> None:
    """The banner and %sdc status are harmless cleared messages; no progress output remains."""
    _, rows = nineteen_cells
    messages = [r for r in rows if r.kind == "message"]
    assert len(messages) == 2 and all(r.status == "pass" for r in messages)
    assert not [r for r in rows if r.kind == "progress"]
    assert [r for r in rows if r.status == "uncleared"] == []  # every output of demo 01 carries a record
    # every checked table carries the renderer's payload, with the same status as its record
    for r in rows:
        if r.kind == "table":
            payload = r.data["application/vnd.sdc-magic.v1+json"]
            assert payload["status"] == r.status and payload["id"] == r.meta["id"]


@pytest.mark.notebook
def test_redacted_copy_opens_clean(nineteen_cells) -> None:
    import copy

    from sdc_magic.records.redact import clearance, redact_notebook

    nb, _ = nineteen_cells
    redacted = copy.deepcopy(nb)
    first = redact_notebook(redacted)
    assert first.removed == 1  # the row-level view only: messages and cleared tables stay
    again = redact_notebook(redacted)
    assert again.removed == 0
    assert all(clearance(o) is None for c in redacted.cells if c.cell_type == "code" for o in c.outputs)
