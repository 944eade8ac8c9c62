"""Notebook redaction: keep only outputs that carry a valid sdc_magic clearance.

The kernel cannot stop ``print(df)``; the save and export side can. An output is kept
only if its ``metadata["sdc_magic"]`` says ``pass`` or ``suppressed`` *and* its digest
matches the text/html and text/plain it covers (so an edited output, or a marker pasted
on another output, does not pass). Everything else — prints, errors, images, row-level
views, unverified or blocked tables, outputs without a record — is replaced by a
placeholder, and saved widget state is dropped (it can hold anything).

Anyone can recompute a digest, so a hand-edited output can forge a clearance. Two
stronger checks, each optional, close that:

* ``ledger``: keep only outputs whose digest the session ledger recorded, with a cleared
  status when it was published (``sdc-magic redact --ledger .sdc_magic/NB.jsonl``, the
  preprocessor's ``ledger`` trait, ``SDC_MAGIC_REDACT_LEDGER`` for the pre-save hook;
  ``auto`` = the ledger beside the notebook);
* ``require_hmac``: keep only outputs whose ``hmac`` checks under this installation's key
  (:mod:`sdc_magic.records.signing`).

Used by ``sdc-magic redact``, the nbconvert preprocessor :class:`RedactPreprocessor`,
the Jupyter server pre-save hook :func:`pre_save_hook`, and the lab extension's route.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from ..outputs.bundle import MIME as SDC_MIME
from ..outputs.bundle import content_digest, digest

CLEARED = frozenset({"pass", "suppressed"})
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: the words a placeholder may give as its reason (anything else is not a placeholder of ours)
OUTPUT_TYPES = frozenset({"stream", "error", "display_data", "execute_result", "update_display_data", "unknown"})
STATUSES = frozenset({"pass", "suppressed", "review", "blocked", "note", "unknown"})
KNOWN_MIME = frozenset({"image/png", "image/jpeg", "image/gif", "image/svg+xml", "image/bmp", "application/pdf",
                        "application/json", "application/javascript", "text/markdown", "text/latex", "text/csv",
                        "application/vnd.plotly.v1+json", "application/vnd.vegalite.v5+json",
                        "application/vnd.vega.v5+json", "application/vnd.bokehjs_exec.v0+json",
                        "application/vnd.holoviews_exec.v0+json", "application/vnd.dataresource+json"})
FIXED_REASONS = frozenset({"no sdc_magic record", "digest does not match the content",
                           "not in the session ledger", "not cleared in the session ledger", "no valid signature",
                           "malformed output"})
_HEX64 = re.compile(r"[0-9a-f]{64}")
_OUTPUT_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_KINDS = frozenset({"table", "unverified", "row-level", "empty", "microdata", "error", "message", "progress",
                    "note"})


def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10**12


#: the fields of an output's record kept without a signature over the whole record, each with
#: what its value may be (short, of a known form: nothing there can carry a figure or a name)
RECORD_FIELDS: dict[str, Callable[[object], bool]] = {
    "schema": lambda v: v in (1, "1"), "id": lambda v: isinstance(v, str) and bool(_OUTPUT_ID.fullmatch(v)),
    "status": lambda v: v in STATUSES, "kind": lambda v: v in _KINDS, "hidden": _count, "primary": _count,
    "secondary": _count, "cells": _count,
    "digest": lambda v: isinstance(v, str) and bool(_HEX64.fullmatch(v)),
    "hmac": lambda v: isinstance(v, str) and bool(_HEX64.fullmatch(v))}
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


#: what a ledger tells redaction: digest -> statuses the outputs with that content were published with
Known = set[str] | Mapping[str, Iterable[str]]


def clearance(output: dict[str, Any], allowed: Iterable[str] = CLEARED,
              known_digests: Known | None = None, require_hmac: bool = False) -> str | None:
    """None if the output may be released, else the reason it may not.

    ``known_digests``: the outputs the session ledger recorded (a set of digests, or digest
    -> statuses at publication: then that status must be cleared too, so a ``review``
    output relabelled ``pass`` fails). ``require_hmac``: the clearance must carry a valid
    HMAC under this installation's key.
    """
    kind = output.get("output_type")
    if kind not in ("display_data", "execute_result"):
        return f"{kind} output" if kind in OUTPUT_TYPES else "unknown output"
    meta = (output.get("metadata") or {}).get("sdc_magic")
    if not isinstance(meta, dict):
        return None if is_placeholder(output) else "no sdc_magic record"
    status = meta.get("status")
    if status not in set(allowed):
        return f"status {status}" if status in STATUSES else "status unknown"
    data = output.get("data") or {}
    # the widget view is only a reference to a model; its state is dropped with the rest (and
    # the view itself when the output is kept: the digest does not cover it)
    extra = set(data) - {"text/html", "text/plain", WIDGET_VIEW, SDC_MIME}
    if extra:  # named when they are well known (a made-up name is the notebook's text: not repeated)
        return "unchecked mime types " + ", ".join(sorted({m if m in KNOWN_MIME else "other" for m in extra}))
    # the digest covers the protected payload of the lab extension's renderer too
    expected = content_digest(data) if SDC_MIME in data else digest(
        _text(data.get("text/html")), _text(data.get("text/plain")))
    if meta.get("digest") != expected:
        return "digest does not match the content"
    if known_digests is not None:
        if expected not in known_digests:
            return "not in the session ledger"
        if isinstance(known_digests, Mapping) and not set(known_digests[expected]) <= set(allowed):
            return "not cleared in the session ledger"
    if require_hmac:
        from .signing import check_record

        if not check_record(meta):  # the whole record: every field, not only status and digest
            return "no valid signature"
    return None


def kept_output(output: dict[str, Any], require_hmac: bool) -> dict[str, Any]:
    """A cleared output as the redacted copy keeps it: only what its digest (and signature) cover.

    Why (issue 23.8): the widget view, other metadata keys and extra fields of the record were
    kept beside a valid clearance, and could carry anything. The data keep the mime types the
    digest covers; the metadata keep the record alone; without a signature over the whole
    record, only its short fields of known types (a free-text note is not covered by anything).
    """
    data = {k: v for k, v in (output.get("data") or {}).items() if k in ("text/html", "text/plain", SDC_MIME)}
    record = dict(output["metadata"]["sdc_magic"])
    if not require_hmac:
        record = {k: v for k, v in record.items() if k in RECORD_FIELDS and RECORD_FIELDS[k](v)}
    out = {k: v for k, v in output.items() if k in ("output_type", "execution_count")}
    out.update(data=data, metadata={"sdc_magic": record})
    return nbformat.from_dict(out)


def is_placeholder(output: dict[str, Any]) -> bool:
    """A placeholder this module wrote, exactly: a redacted copy opens clean.

    Only the canonical form counts (issue 23.8: a hand-made "placeholder" carried any text in its
    reason and skipped every check): a display output whose only data is the placeholder text,
    whose only metadata is the marker, and whose reason is one this module gives.
    """
    metadata = output.get("metadata") or {}
    marker = metadata.get("sdc_magic_redacted")
    data = output.get("data") or {}
    return (output.get("output_type") == "display_data" and set(metadata) == {"sdc_magic_redacted"}
            and isinstance(marker, dict) and set(marker) == {"reason"} and _canonical_reason(marker["reason"])
            and set(data) == {"text/plain"} and _text(data["text/plain"]) == PLACEHOLDER.format(why=marker["reason"])
            and set(output) <= {"output_type", "data", "metadata"})


def _canonical_reason(reason: object) -> bool:
    if not isinstance(reason, str):
        return False
    if reason.startswith("unchecked mime types "):
        names = reason.removeprefix("unchecked mime types ").split(", ")
        return names == sorted(set(names)) and all(n in KNOWN_MIME or n == "other" for n in names)
    return (reason in FIXED_REASONS or reason in {f"{t} output" for t in OUTPUT_TYPES}
            or reason in {f"status {s}" for s in STATUSES})


def placeholder(why: str) -> Any:
    text = PLACEHOLDER.format(why=why)
    return nbformat.from_dict({
        "output_type": "display_data",
        "data": {"text/plain": text},
        "metadata": {"sdc_magic_redacted": {"reason": why}},
    })


def redact_notebook(nb: Any, allowed: Iterable[str] = CLEARED, known_digests: Known | None = None,
                    require_hmac: bool = False) -> RedactionReport:
    """Redact ``nb`` in place (a NotebookNode or a plain dict); return what was done."""
    allowed = set(allowed)
    report = RedactionReport()
    for i, cell in enumerate(nb.get("cells", [])):
        if not isinstance(cell, dict) or not isinstance(cell.get("outputs", []), list):
            raise ValueError(f"not a notebook: cell {i} is not an object with a list of outputs")
        if cell.get("cell_type") != "code":
            continue
        new_outputs = []
        for output in cell.get("outputs", []):
            try:
                why = clearance(output, allowed, known_digests, require_hmac) if isinstance(output, dict) \
                    else "malformed output"
            except Exception:  # a field of an unexpected type: fail closed
                why = "malformed output"
            if why is None:
                report.kept += 1
                new_outputs.append(output if is_placeholder(output) else kept_output(output, require_hmac))
            else:
                report.note(why)
                new_outputs.append(placeholder(why))
        cell["outputs"] = new_outputs
    metadata = nb.get("metadata", {})
    if not isinstance(metadata, dict):
        raise ValueError("not a notebook: its metadata is not an object")
    if "widgets" in metadata:
        metadata.pop("widgets")
        report.widget_state_dropped = True
    return report


class RedactError(ValueError):
    """The redacted copy cannot be written: a one-line reason for the user, never a traceback."""


def redact_file(source: str | Path, target: str | Path, *, force: bool = False, **kwargs: Any) -> RedactionReport:
    """``sdc-magic redact IN OUT``: write a redacted copy of ``source`` to ``target``.

    Why the checks (red team 53b, findings 09 and 10): redaction removes outputs for good, so
    writing over the source destroyed the analyst's prints, errors and blocked tables, and an
    existing file given as the target (``notes.txt``) was silently replaced. The source is
    never written, whatever ``force`` says (same file by any spelling, link or hard link);
    an existing target is replaced only with ``force``; a missing source, a missing folder or
    a file that is not a notebook is a :class:`RedactError` with one line for the user. The
    copy is written to a temporary file beside the target and then moved into place, so an
    interrupted write never leaves a half notebook under the target's name.
    """
    source, target = Path(source), Path(target)
    if not source.is_file():
        raise RedactError(f"{source}: no such notebook" if not source.exists() else f"{source}: not a file")
    if _same_file(source, target):
        raise RedactError(f"{target} is the source notebook itself: redaction would remove its outputs for good. "
                          "Write the redacted copy to another file (the source is never overwritten, "
                          "not even with --force)")
    if target.is_dir():
        raise RedactError(f"{target} is a folder: give the redacted copy a file name, e.g. {target / source.name}")
    if not target.parent.is_dir():
        raise RedactError(f"cannot write {target}: the folder {target.parent} does not exist")
    if (target.exists() or target.is_symlink()) and not force:
        raise RedactError(f"{target} already exists: nothing was written. Choose a new file name, or add --force "
                          "to replace it")
    try:
        nb = nbformat.read(source, as_version=4)
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list) \
                or not all(isinstance(c, dict) for c in nb["cells"]):
            raise TypeError("no list of cells")
        report = redact_notebook(nb, **kwargs)
    except (OSError, UnicodeDecodeError) as exc:
        raise RedactError(f"{source}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    except Exception as exc:  # nbformat's NotJSONError, ValidationError, TypeError of odd JSON, ...
        raise RedactError(f"{source}: not a notebook that can be read ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:120] if str(exc) else 'malformed'})") from None
    _write_beside(nb, target)
    return report


def _same_file(source: Path, target: Path) -> bool:
    """``target`` names ``source``: the same resolved path, or (links, hard links) the same file."""
    if source.resolve() == target.resolve():
        return True
    try:
        return target.exists() and os.path.samefile(source, target)
    except OSError:
        return False


def _write_beside(nb: Any, target: Path) -> None:
    """Write ``nb`` to a temporary file in ``target``'s folder, then move it into place."""
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            nbformat.write(nb, handle)
        umask = os.umask(0o022)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as an ordinary new file (mkstemp makes it 0600)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise RedactError(f"cannot write {target} ({exc.strerror or exc})") from None


def ledger_clearances(path: str | Path) -> dict[str, frozenset[str]]:
    """Digest -> statuses at publication, from a session ledger file (``OSError`` if unreadable)."""
    from .ledger import clearances_from_file

    return clearances_from_file(path)


def notebook_ledger(notebook: str | Path) -> Path:
    """The ledger the kernel of ``notebook`` writes: ``.sdc_magic/<stem>.jsonl`` beside it.

    (A kernel started without the notebook's name writes ``.sdc_magic/ledger.jsonl``: used
    when the per-notebook file does not exist.)
    """
    from .ledger import LEDGER_DIR, LEDGER_FILE, safe_stem

    notebook = Path(notebook)
    own = notebook.parent / LEDGER_DIR / f"{safe_stem(notebook.stem) or '_'}.jsonl"
    return own if own.is_file() else notebook.parent / LEDGER_DIR / LEDGER_FILE


def hook_known(ledger: str | None, os_path: str | None) -> dict[str, frozenset[str]] | None:
    """The ledger's clearances for a hook; an unreadable ledger clears nothing (fail closed)."""
    if not ledger:
        return None
    if ledger == "auto" and not os_path:
        return {}  # the notebook's place is unknown: no ledger, nothing cleared
    path = notebook_ledger(os_path) if ledger == "auto" else Path(ledger)
    try:
        return ledger_clearances(path)
    except OSError:
        return {}


def make_pre_save_hook(ledger: str | None = None, require_hmac: bool = False) -> Any:
    """A pre-save hook with the ledger check (``ledger="auto"``: beside the notebook) and/or HMAC.

    In ``jupyter_server_config.py``::

        from sdc_magic.records.redact import make_pre_save_hook
        c.FileContentsManager.pre_save_hook = make_pre_save_hook(ledger="auto", require_hmac=True)
    """

    def hook(model: dict[str, Any], **kwargs: Any) -> None:
        if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
            return
        os_path = None
        manager, path = kwargs.get("contents_manager"), kwargs.get("path")
        if manager is not None and path is not None:
            try:
                os_path = manager._get_os_path(path)
            except Exception:  # not a file-backed contents manager
                root = getattr(manager, "root_dir", None)
                os_path = os.path.join(root, path) if root else None
        redact_notebook(model["content"], known_digests=hook_known(ledger, os_path), require_hmac=require_hmac)

    return hook


def pre_save_hook(model: dict[str, Any], **kwargs: Any) -> None:
    """Jupyter server pre-save hook: notebooks are saved redacted.

    ``c.FileContentsManager.pre_save_hook = "sdc_magic.records.redact.pre_save_hook"``. The
    environment can ask for the stronger checks: ``SDC_MAGIC_REDACT_LEDGER=auto`` (or a
    ledger path) and ``SDC_MAGIC_REQUIRE_HMAC=1``.
    """
    ledger = os.environ.get("SDC_MAGIC_REDACT_LEDGER") or None
    require = os.environ.get("SDC_MAGIC_REQUIRE_HMAC", "").lower() in ("1", "true", "yes")
    make_pre_save_hook(ledger, require)(model, **kwargs)


from traitlets import Bool, Unicode  # noqa: E402 - traitlets comes with IPython

try:  # nbconvert is optional at import time: the kernel never needs it
    from nbconvert.preprocessors import Preprocessor
except ImportError:  # pragma: no cover
    Preprocessor = object  # type: ignore[assignment,misc]


class RedactPreprocessor(Preprocessor):  # type: ignore[misc,valid-type]
    """nbconvert preprocessor: ``--Exporter.preprocessors='["sdc_magic.records.redact.RedactPreprocessor"]'``.

    ``--RedactPreprocessor.ledger=PATH`` keeps only outputs the session ledger recorded as
    cleared; ``--RedactPreprocessor.require_hmac=True`` only outputs signed with this
    installation's key. An unreadable ledger is an error (nothing is written).
    """

    ledger = Unicode("", help="session ledger: keep only outputs it recorded as cleared").tag(config=True)
    require_hmac = Bool(False, help="keep only outputs signed with this installation's key").tag(config=True)

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        known = ledger_clearances(self.ledger) if self.ledger else None
        redact_notebook(nb, known_digests=known, require_hmac=bool(self.require_hmac))
        return nb, resources
