"""Redaction keeps only what a clearance covers (issue 23.8: 4 of 5 forgeries survived).

A hand-made placeholder carried any text in its reason and skipped every check; the widget
view, other metadata keys and extra fields of a cleared output's record were kept beside its
clearance; the HMAC signed the status and digest only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sdc_magic.outputs.bundle import digest
from sdc_magic.records import signing
from sdc_magic.records.redact import PLACEHOLDER, clearance, is_placeholder, placeholder, redact_notebook

SECRET = "Leogane F 60+: 3"


@pytest.fixture(autouse=True)
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config" / "sdc_magic" / "key"
    monkeypatch.setenv(signing.KEY_ENV, str(path))
    signing._cache.clear()
    return path


def cleared(extra_record: dict[str, Any] | None = None, sign: bool = False) -> dict[str, Any]:
    page, plain = "<table><td>28</td></table>", "28"
    record: dict[str, Any] = {"schema": 1, "id": "out-1", "status": "pass", "kind": "table", "hidden": 0,
                              "cells": 1, "digest": digest(page, plain), **(extra_record or {})}
    if sign:
        record["hmac"] = signing.sign_record(record)
    return {"output_type": "execute_result", "execution_count": 1, "data": {"text/html": page, "text/plain": plain},
            "metadata": {"sdc_magic": record}}


def redacted(*outputs: dict[str, Any], require_hmac: bool = False) -> tuple[list[dict[str, Any]], Any]:
    nb = {"cells": [{"cell_type": "code", "outputs": list(outputs)}], "metadata": {}}
    report = redact_notebook(nb, require_hmac=require_hmac)
    return nb["cells"][0]["outputs"], report


@pytest.mark.parametrize("forge", [
    lambda: {"output_type": "display_data", "data": {"text/plain": PLACEHOLDER.format(why=SECRET)},
             "metadata": {"sdc_magic_redacted": {"reason": SECRET}}},
    lambda: {**placeholder("status review"), "metadata": {"sdc_magic_redacted": {"reason": "status review"},
                                                          "notes": SECRET}},
    lambda: {**placeholder("status review"), "data": {"text/plain": PLACEHOLDER.format(why="status review"),
                                                      "text/html": SECRET}},
    lambda: {"output_type": "stream", "name": "stdout", "text": SECRET,
             "metadata": {"sdc_magic_redacted": {"reason": "status review"}},
             "data": {"text/plain": PLACEHOLDER.format(why="status review")}},
    lambda: {**placeholder("status review"), "metadata": {"sdc_magic_redacted": {"reason": "status review",
                                                                                 "rows": SECRET}}},
], ids=["free reason", "extra metadata", "extra mime type", "a stream dressed as one", "extra marker field"])
def test_a_hand_made_placeholder_is_not_one(forge) -> None:
    output = json.loads(json.dumps(forge()))
    assert not is_placeholder(output)
    outputs, report = redacted(output)
    assert report.removed == 1 and SECRET not in json.dumps(outputs)
    assert is_placeholder(outputs[0])


def test_our_own_placeholders_stay_as_they_are() -> None:
    first, _ = redacted(cleared({"status": "review"}))
    again, report = redacted(*json.loads(json.dumps(first)))
    assert again == json.loads(json.dumps(first)) and report.kept == 1


def test_a_mime_type_name_cannot_carry_text() -> None:
    output = cleared()
    output["data"][f"text/x-{SECRET}"] = "x"
    assert clearance(output) == "unchecked mime types other"
    outputs, _ = redacted(output)
    assert SECRET not in json.dumps(outputs)


@pytest.mark.parametrize("smuggle", [
    lambda o: o["data"].update({"application/vnd.jupyter.widget-view+json": {"model_id": "m", "note": SECRET}}),
    lambda o: o["metadata"].update(notes=SECRET),
    lambda o: o["metadata"]["sdc_magic"].update(notes=[SECRET]),
    lambda o: o["metadata"]["sdc_magic"].update(hidden_rows=[{"district": "Leogane", "n": 3}]),
    lambda o: o["metadata"]["sdc_magic"].update(kind=SECRET),
], ids=["widget view", "metadata key", "record note", "record field", "record kind as text"])
def test_what_a_clearance_does_not_cover_is_not_kept(smuggle) -> None:
    output = cleared()
    smuggle(output)
    outputs, report = redacted(output)
    assert report.kept == 1
    assert "28" in outputs[0]["data"]["text/plain"]
    assert SECRET not in json.dumps(outputs) and "Leogane" not in json.dumps(outputs)


def test_the_signature_covers_the_whole_record() -> None:
    honest = cleared({"notes": ["2 of 14 cells hidden"]}, sign=True)
    outputs, report = redacted(json.loads(json.dumps(honest)), require_hmac=True)
    assert report.kept == 1 and outputs[0]["metadata"]["sdc_magic"]["notes"] == ["2 of 14 cells hidden"]
    tampered = json.loads(json.dumps(honest))
    tampered["metadata"]["sdc_magic"]["notes"] = [SECRET]  # status and digest untouched
    assert clearance(tampered, require_hmac=True) == "no valid signature"
    outputs, report = redacted(tampered, require_hmac=True)
    assert report.removed == 1 and SECRET not in json.dumps(outputs)
