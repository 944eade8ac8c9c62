"""The bundle each checked output publishes for the lab renderer, and the extension's own messages.

* The ``application/vnd.sdc-magic.v1+json`` payload holds only protected content (hidden
  cells are ✕, reasons never state a count), only JSON types that survive a round trip
  through JavaScript, and is covered by the digest (an edited payload is not cleared).
* Messages (banner, ``%sdc`` replies, progress) and the redactor's placeholders are
  cleared, so a demo or a redacted copy does not trip the export guard.
* Progress is transient: the table replaces the progress display (same display id).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from sdc_magic.outputs.bundle import MIME, STATUS_LABEL, canonical, content_digest, message_bundle
from sdc_magic.outputs.render import HIDDEN, interval_text, number_text
from sdc_magic.records.redact import clearance, placeholder, redact_notebook


def _json_types(value: Any, path: str = "$") -> list[str]:
    """Paths of values JavaScript would not write back identically (floats, numpy types)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _json_types(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _json_types(v, f"{path}[{i}]")]
    if value is None or isinstance(value, str | bool) or (type(value) is int and abs(value) < 2**53):
        return []
    return [f"{path}: {type(value).__name__}"]


@pytest.fixture
def four_way(session: Any, referrals: Any) -> tuple[Any, Any]:
    table = referrals.groupby(["admin2", "case_category", "age_band", "sex"]).size()
    published = session.publish(
        table, suggest=lambda checked: session.suggestions(checked, name_of=lambda f, k: "referrals")[0])
    return table, published


def test_payload_holds_only_the_protected_table(four_way: tuple[Any, Any]) -> None:
    table, published = four_way
    payload = published.data[MIME]
    checked = published.checked
    assert payload["id"] == published.id and payload["status"] == checked.status == "suppressed"
    assert payload["label"] == "cleared, cells hidden" and payload["hidden"] == checked.hidden_count > 85
    assert _json_types(payload) == []
    rows = payload["table"]["rows"]
    assert 0 < len(rows) < len(table)  # long tables are truncated as pandas truncates them
    values = table.to_numpy()
    for row in rows:
        i, cell = row["i"], row["cells"][0]
        assert (cell == HIDDEN) == bool(checked.hidden[i, 0]), (i, cell)
        assert (row["hidden"] == [0]) == bool(checked.hidden[i, 0])
        if cell != HIDDEN:
            assert cell == str(int(values[i])), (i, cell)  # counts as integers
    # every hidden cell has a reason, in words, never with its count
    assert payload["reasons_total"] == checked.hidden_count == len(payload["reasons"])
    text = json.dumps(payload["reasons"])
    assert "fewer than 5 records" in text
    assert not re.findall(r"(?<!fewer than )\b\d+ records", text)
    assert "-0 " not in text and "-0\"" not in text
    # suggestions: code for the user's own variable, previews that publish with nothing hidden
    suggestions = payload["suggestions"]
    assert suggestions and all(s["code"].startswith("referrals") for s in suggestions)
    for s in suggestions:
        if s["preview"] is not None:
            assert s["clean"] and HIDDEN not in json.dumps(s["preview"])
    # the HTML fallback carries the same reasons and the code, statically
    page = published.data["text/html"]
    assert "Why cells are hidden" in page and "Better answers" in page
    assert suggestions[0]["code"].replace("'", "&#x27;") in page


def test_digest_covers_the_payload(four_way: tuple[Any, Any]) -> None:
    _, published = four_way
    output = {"output_type": "display_data", "data": json.loads(json.dumps(published.data)),
              "metadata": json.loads(json.dumps(published.metadata))}
    assert clearance(output) is None
    assert published.metadata["sdc_magic"]["digest"] == content_digest(output["data"])
    # key order and spacing do not matter (a front-end may write the JSON back differently)
    reordered = json.loads(json.dumps(output["data"][MIME], sort_keys=True, indent=2))
    assert canonical(reordered) == canonical(output["data"][MIME])
    # a hidden cell edited in the payload: no longer cleared
    edited = json.loads(json.dumps(output))
    row = next(r for r in edited["data"][MIME]["table"]["rows"] if r["cells"][0] == HIDDEN)
    row["cells"][0] = "3"
    assert clearance(edited) == "digest does not match the content"
    # a status raised in the payload alone: not cleared either
    raised = json.loads(json.dumps(output))
    raised["data"][MIME]["status"] = "pass"
    assert clearance(raised) == "digest does not match the content"


def test_one_status_vocabulary() -> None:
    from sdc_magic.outputs.render import STATUS_TEXT

    assert STATUS_TEXT == STATUS_LABEL == {"pass": "cleared", "suppressed": "cleared, cells hidden",
                                           "review": "needs review", "blocked": "blocked"}
    ts = (__import__("pathlib").Path(__file__).resolve().parents[1] / "labextension" / "src" / "payload.ts").read_text()
    for status, label in STATUS_LABEL.items():
        assert f"{status}: '{label}'" in ts, (status, label)


def test_interval_bounds_in_plain_numbers() -> None:
    assert number_text(-0.0) == "0" and number_text(-1e-12) == "0"
    assert number_text(62.0) == "62" and number_text(2.5) == "2.5"
    assert interval_text((-0.0, 281.0)) == "somewhere between 0 and 281"
    assert interval_text((3.0, float("inf"))) == "at least 3"


def test_messages_and_placeholders_are_cleared() -> None:
    data, meta = message_bundle("sdc_magic loaded — preset humanitarian: threshold 5")
    assert clearance({"output_type": "display_data", "data": data, "metadata": meta}) is None
    assert meta["sdc_magic"]["kind"] == "message" and meta["sdc_magic"]["hidden"] == 0
    forged = {"output_type": "display_data", "data": {"text/plain": "C0001 42"}, "metadata": meta}
    assert clearance(forged) == "digest does not match the content"
    # a redacted copy opens clean: its placeholders are kept as they are
    nb = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": "C0001 42\n"},
        {"output_type": "display_data", "data": data, "metadata": meta}]}], "metadata": {}}
    first = redact_notebook(nb)
    assert (first.kept, first.removed) == (1, 1)
    again = redact_notebook(nb)
    assert (again.kept, again.removed) == (2, 0)
    edited = dict(placeholder("stream output"))
    edited["data"] = {"text/plain": "C0001 42"}
    assert clearance(edited) == "no sdc_magic record"


def test_magics_reply_with_cleared_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    from sdc_magic.jupyter.magics import sdc_magic

    shown: list[tuple[dict[str, Any], dict[str, Any]]] = []

    class FakeIP:
        kernel = object()

    from sdc_magic.jupyter import kernel

    monkeypatch.setattr(kernel, "shell", FakeIP())
    monkeypatch.setattr("IPython.display.display", lambda data, raw, metadata: shown.append((data, metadata)))
    sdc_magic("rules")
    sdc_magic("status")
    assert len(shown) == 2
    for data, meta in shown:
        assert meta["sdc_magic"]["status"] == "pass" and meta["sdc_magic"]["kind"] == "message"
        assert clearance({"output_type": "display_data", "data": data, "metadata": meta}) is None
    assert "threshold" in shown[0][0]["text/plain"]


def test_progress_is_replaced_by_the_table(monkeypatch: pytest.MonkeyPatch, session: Any, referrals: Any) -> None:
    """A slow check shows progress under a display id; the table replaces it; nothing is left."""
    import IPython.display

    from sdc_magic.jupyter import extension

    calls: list[tuple[str, dict[str, Any], dict[str, Any], str | None]] = []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw, metadata, display_id=None:
                        calls.append(("display", data, metadata, display_id)))
    monkeypatch.setattr(IPython.display, "update_display", lambda data, raw, metadata, display_id:
                        calls.append(("update", data, metadata, display_id)))
    real = extension._Progress.__init__

    def eager(self: Any, enabled: bool, delay: float = 1.0, every: float = 0.3) -> None:
        real(self, enabled, delay=0.0, every=0.0)  # show progress at once

    monkeypatch.setattr(extension._Progress, "__init__", eager)

    class FakeIP:
        kernel = object()
        execution_count = 3

        def __init__(self) -> None:
            self.user_ns = {"referrals": referrals}

    table = referrals.groupby(["admin2", "case_category", "age_band", "sex"]).size()
    extension._display(FakeIP(), session, table)
    kinds = [c[0] for c in calls]
    assert kinds[0] == "display" and kinds[-1] == "update" and kinds.count("display") == 1, kinds
    ids = {c[3] for c in calls}
    assert len(ids) == 1 and next(iter(ids)).startswith("sdc-progress-")
    for _, data, meta, _ in calls[:-1]:  # progress: a harmless message, never a value
        assert meta["sdc_magic"]["kind"] == "progress" and set(data) <= {"text/plain", "text/html"}
        assert not re.search(r"\b(Cap-Haitien|Mirebalais)\b", json.dumps(data))
    final = calls[-1]
    assert MIME in final[1] and final[2]["sdc_magic"]["status"] == "suppressed"
    assert final[1][MIME]["suggestions"], "suggestions are computed when a kernel is there"


def test_comm_actions(monkeypatch: pytest.MonkeyPatch, session: Any, referrals: Any) -> None:
    """The front-end's requests: an exception re-renders the output as needs review; more options append."""
    from sdc_magic.jupyter import comm, kernel

    monkeypatch.setattr(kernel, "_session", session)
    pushed: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(comm, "push_update", lambda out_id, output: pushed.append((out_id, output)))
    table = referrals.groupby(["admin2", "case_category", "age_band", "sex"]).size()
    found: dict[str, Any] = {}

    def suggest(checked: Any) -> Any:
        found["found"], found["suggester"] = session.suggestions(checked, name_of=lambda f, k: "referrals")
        return found["found"]

    published = session.publish(table, suggest=suggest)
    comm.remember(published.id, published.data, published.metadata, found["found"], found["suggester"])
    try:
        assert comm.handle({"action": "ping", "id": published.id}) == {"ok": True, "known": True}
        assert comm.handle({"action": "exception", "id": "out-999", "reason": "x"})["ok"] is False
        assert comm.handle({"action": "exception", "id": published.id, "reason": " "})["ok"] is False
        before = [s["title"] for s in published.data[MIME]["suggestions"]]
        more = comm.handle({"action": "more", "id": published.id})
        titles = [s["title"] for s in more["suggestions"]]
        assert more["ok"] and titles[:len(before)] == before  # earlier answers stay, first
        reply = comm.handle({"action": "exception", "id": published.id, "reason": "needed for the district plan"})
        assert reply["ok"] and reply["status"] == "review"
        output = reply["output"]
        assert output["metadata"]["sdc_magic"]["status"] == "review" == output["data"][MIME]["status"]
        assert output["data"][MIME]["label"] == "needs review"
        assert output["data"][MIME]["exception"] == "needs review".replace("needs review", "needed for the district plan")
        assert clearance(output) == "status review"
        from sdc_magic.records import signing

        record = output["metadata"]["sdc_magic"]
        if "hmac" in published.metadata["sdc_magic"]:  # signed like the session signs: the whole new record
            assert record["status"] == "review" and signing.check_record(record)
        assert pushed and pushed[-1][0] == published.id
        assert session.output(published.id).status == "review"
        # the same protected table as published, whatever later outputs did to the decision
        assert output["data"][MIME]["table"] == published.data[MIME]["table"]
        published.checked.hidden[:] = False  # (a later change to the decision must not matter)
        again = comm.rerender(published.id, comm._live[published.id], "again")
        assert again["data"][MIME]["table"] == published.data[MIME]["table"]
        assert "needs review" in output["data"]["text/html"] and "needs review" in output["data"]["text/plain"]
        assert "cleared, cells hidden" not in output["data"]["text/html"]
    finally:
        comm._live.clear()


def test_magic_exception_updates_the_output(monkeypatch: pytest.MonkeyPatch, session: Any, referrals: Any) -> None:
    """``%sdc exception out-N`` pushes the output's new bundle (needs review) to the front-end."""
    from sdc_magic.jupyter import comm, kernel
    from sdc_magic.jupyter.magics import sdc_magic

    monkeypatch.setattr(kernel, "_session", session)
    pushed: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(comm, "push_update", lambda out_id, output: pushed.append((out_id, output)))
    published = session.publish(referrals.groupby(["admin2", "case_category", "age_band", "sex"]).size())
    comm.remember(published.id, published.data, published.metadata)
    try:
        sdc_magic(f'exception {published.id} "needed for the district plan"')
        assert [p[0] for p in pushed] == [published.id]
        output = pushed[0][1]
        assert output["metadata"]["sdc_magic"]["status"] == "review"
        assert output["data"][MIME]["exception"] == "needed for the district plan"
    finally:
        comm._live.clear()


def test_cells_formatted_as_pandas_shows_counts() -> None:
    """Counts as integers (not 20.0), missing cells empty (not NaN), decimals aligned per column."""
    import pandas as pd

    from sdc_magic.outputs.render import table_payload

    frame = pd.DataFrame({"n": [20.0, float("nan"), 3.0], "rate": [0.5, 1.25, float("nan")]},
                         index=pd.Index(["0-11", "12-17", "18+"], name="age_band"))
    t = table_payload(frame)
    assert [r["cells"] for r in t["rows"]] == [["20", "0.50"], ["", "1.25"], ["3", ""]]
    assert t["index_names"] == ["age_band"] and t["columns"] == [["n", "rate"]]
    assert _json_types(t) == []


def test_the_print_warning_speaks_only_of_the_users_print(sdc) -> None:
    """The extension's own work (a groupby over unnamed Series in a suggestion, the API's
    suggestions()) must not trigger "print() of a pandas table is NOT checked"; the user's does."""
    from sdc_magic.datasets import make_referrals
    from sdc_magic.jupyter.kernel import session

    sdc.ns["referrals"] = make_referrals()
    ran = sdc.run('cells = referrals.groupby(["admin2", "case_category", "age_band", "sex"]).size()\n'
                  "checked = __import__('sdc_magic').jupyter.kernel.session().check(cells)\n"
                  "found, _ = __import__('sdc_magic').jupyter.kernel.session().suggestions(checked)")
    assert "NOT checked" not in ran.stderr, ran.stderr
    assert session() is not None
    ran = sdc.run("print(cells.head(2))")
    assert "NOT checked" in ran.stderr
