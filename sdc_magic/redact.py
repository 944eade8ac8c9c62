"""Notebook redaction: keep only outputs that carry a valid sdc_magic clearance.

The kernel cannot stop ``print(df)``; the save and export side can. An output is kept
only if its ``metadata["sdc_magic"]`` says ``pass`` or ``suppressed`` *and* its digest
matches the text/html and text/plain it covers (so an edited output, or a marker pasted
on another output, does not pass). Everything else — prints, errors, images, row-level
views, unverified or blocked tables, outputs without a record — is replaced by a
placeholder, and saved widget state is dropped (it can hold anything).

Used by ``sdc-magic redact``, the nbconvert preprocessor :class:`RedactPreprocessor`,
the Jupyter server pre-save hook :func:`pre_save_hook`, and the lab extension's route.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import nbformat

from .bundle import MIME as SDC_MIME
from .bundle import content_digest
from .check import digest

CLEARED = frozenset({"pass", "suppressed"})
PLACEHOLDER = "[sdc_magic: output removed — it was not cleared for release ({why})]"


@dataclass
class RedactionReport:
    """What redaction kept and removed."""

    kept: int = 0
    removed: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    widget_state_dropped: bool = False

    def note(self, why: str) -> None:
        self.removed += 1
        self.reasons[why] = self.reasons.get(why, 0) + 1


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(value)
    return value if isinstance(value, str) else ""


def clearance(output: dict[str, Any], allowed: Iterable[str] = CLEARED,
              known_digests: set[str] | None = None) -> str | None:
    """None if the output may be released, else the reason it may not."""
    if output.get("output_type") not in ("display_data", "execute_result"):
        return output.get("output_type", "unknown") + " output"
    meta = (output.get("metadata") or {}).get("sdc_magic")
    if not isinstance(meta, dict):
        return None if is_placeholder(output) else "no sdc_magic record"
    status = meta.get("status")
    if status not in set(allowed):
        return f"status {status}"
    data = output.get("data") or {}
    # the widget view is only a reference to a model; its state is dropped with the rest
    extra = set(data) - {"text/html", "text/plain", "application/vnd.jupyter.widget-view+json", SDC_MIME}
    if extra:
        return "unchecked mime types " + ", ".join(sorted(extra))
    # the digest covers the protected payload of the lab extension's renderer too
    expected = content_digest(data) if SDC_MIME in data else digest(
        _text(data.get("text/html")), _text(data.get("text/plain")))
    if meta.get("digest") != expected:
        return "digest does not match the content"
    if known_digests is not None and expected not in known_digests:
        return "not in the session ledger"
    return None


def is_placeholder(output: dict[str, Any]) -> bool:
    """A placeholder this module wrote (text only, the reason only): a redacted copy opens clean."""
    marker = (output.get("metadata") or {}).get("sdc_magic_redacted")
    data = output.get("data") or {}
    return (isinstance(marker, dict) and set(data) == {"text/plain"}
            and _text(data["text/plain"]) == PLACEHOLDER.format(why=marker.get("reason")))


def placeholder(why: str) -> Any:
    text = PLACEHOLDER.format(why=why)
    return nbformat.from_dict({
        "output_type": "display_data",
        "data": {"text/plain": text},
        "metadata": {"sdc_magic_redacted": {"reason": why}},
    })


def redact_notebook(nb: Any, allowed: Iterable[str] = CLEARED, known_digests: set[str] | None = None
                    ) -> RedactionReport:
    """Redact ``nb`` in place (a NotebookNode or a plain dict); return what was done."""
    allowed = set(allowed)
    report = RedactionReport()
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        new_outputs = []
        for output in cell.get("outputs", []):
            why = clearance(output, allowed, known_digests)
            if why is None:
                report.kept += 1
                new_outputs.append(output)
            else:
                report.note(why)
                new_outputs.append(placeholder(why))
        cell["outputs"] = new_outputs
    metadata = nb.get("metadata", {})
    if "widgets" in metadata:
        metadata.pop("widgets")
        report.widget_state_dropped = True
    return report


def redact_file(source: str, target: str, **kwargs: Any) -> RedactionReport:
    """``sdc-magic redact IN OUT``."""
    nb = nbformat.read(source, as_version=4)
    report = redact_notebook(nb, **kwargs)
    nbformat.write(nb, target)
    return report


def pre_save_hook(model: dict[str, Any], **kwargs: Any) -> None:
    """Jupyter server pre-save hook: notebooks are saved redacted.

    ``c.FileContentsManager.pre_save_hook = "sdc_magic.redact.pre_save_hook"``.
    """
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    redact_notebook(model["content"])


try:  # nbconvert is optional at import time: the kernel never needs it
    from nbconvert.preprocessors import Preprocessor
except ImportError:  # pragma: no cover
    Preprocessor = object  # type: ignore[assignment,misc]


class RedactPreprocessor(Preprocessor):  # type: ignore[misc,valid-type]
    """nbconvert preprocessor: ``--Exporter.preprocessors='["sdc_magic.redact.RedactPreprocessor"]'``."""

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        redact_notebook(nb)
        return nb, resources
