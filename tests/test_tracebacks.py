"""``%sdc debug`` never quotes table values: tracebacks keep frames, withhold messages."""

from __future__ import annotations

from sdc_magic.jupyter.tracebacks import WITHHELD, safe_format_exc, safe_format_exception


def _fail_with_value() -> None:
    counts = {"Total": 3, "words": ("has", "people", "failed")}
    try:
        raise KeyError(" ".join(map(str, ["cell Total", counts["words"][0], counts["Total"], counts["words"][1]])))
    except KeyError as exc:
        raise ValueError("checking 'D13 / neglect' = " + str(counts["Total"] - 1) + " " + counts["words"][2]) from exc


def test_messages_are_withheld_frames_kept() -> None:
    try:
        _fail_with_value()
    except ValueError as exc:
        text = safe_format_exception(exc)
    assert "has 3 people" not in text and "= 2 failed" not in text
    assert "ValueError: " + WITHHELD in text and "KeyError: " + WITHHELD in text
    assert "_fail_with_value" in text and "direct cause" in text


def test_format_exc_inside_handler() -> None:
    try:
        [1, 2][5]
    except IndexError:
        text = safe_format_exc()
    assert text.startswith("Traceback") and "IndexError" in text and "out of range" not in text
    assert safe_format_exc() == "no exception"
