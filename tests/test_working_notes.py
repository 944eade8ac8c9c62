"""Working notes (issue 24.7): a dict of summary figures, a list, a number shown while working is
not a table the extension can check. Its record says so ("note"), so the panel shows it quietly
instead of as a failure; it is still never exported, and a subclass such as ``Counter`` (a
frequency table) keeps "not cleared"."""

from __future__ import annotations

from collections import Counter
from typing import Any

import nbformat

from sdc_magic.records.redact import clearance, redact_notebook


def _format(shell: Any, value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    return shell.ip.display_formatter.format(value)


def test_values_carry_a_note_record_and_unloading_removes_it(sdc: Any) -> None:
    for value in ({"violations": 2790}, [1, 2], (1, "a"), {3, 4}, 12, 0.5, "text", True):
        data, meta = _format(sdc, value)
        assert data == {"text/plain": repr(value)}, value  # drawn as IPython draws it
        record = meta["sdc_magic"]
        assert record["kind"] == "note" and record["status"] == "note", value
        assert "never exported" in record["notes"][0]
    for value in (Counter("aab"),):  # a frequency table by another name: not a note
        assert "sdc_magic" not in _format(sdc, value)[1]
    sdc.magic("unload_ext sdc_magic")
    assert _format(sdc, {"a": 1}) == ({"text/plain": "{'a': 1}"}, {})


def test_a_table_inside_a_dict_is_still_checked(sdc: Any) -> None:
    import pandas as pd

    table = pd.DataFrame({"k": ["a"] * 2 + ["b"] * 40 + ["c"] * 50 + ["d"] * 60}).groupby("k").size()
    data, meta = _format(sdc, {"by k": table})
    assert "60" in data["text/plain"] and "✕" in data["text/plain"]
    assert "a    2" not in data["text/plain"]
    assert meta["sdc_magic"]["status"] == "note"


def test_a_note_is_never_exported(sdc: Any) -> None:
    data, meta = _format(sdc, {"suppressions": 2, "percent": 0.05})
    output = {"output_type": "execute_result", "execution_count": 1, "data": data, "metadata": meta}
    assert clearance(output) == "status note"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=[nbformat.from_dict(output)])])
    report = redact_notebook(nb)
    assert report.removed == 1 and report.reasons == {"status note": 1}
    kept = nb.cells[0].outputs[0]
    assert "suppressions" not in str(kept) and "status note" in str(kept)
