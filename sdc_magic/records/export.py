"""Export cleared outputs for an output checker, in a folder SACRO-Viewer can open.

``%sdc export DIR`` / :func:`export` writes only outputs with status ``pass`` or
``suppressed``, plus ``review`` outputs that carry an exception request (clearly marked
for the checker's decision) — never blocked or uncleared ones. Per table: a CSV (hidden
cells empty, never a value), optionally an XLSX, and ``<id>.certificate.json``. For the
folder: ``results.json`` in the schema of ACRO's audit record, ``config.json`` (the
rules), ``summary.html`` (one page for the checker) and ``checksums/<file>.txt`` (the
SHA-256 of every file, lowercase hex, no newline, as SACRO-Viewer compares them).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..protect.certificate import restated, versions
from .consistency import TABLE_SCHEMA, certificate_shape, check_csv, model_conflicts
from .layout import (
    AUTO_EXCEPTION,
    CHECK_NAMES,
    MANIFEST,
    RESULTS_VERSION,
    acro_status,
    files_entry,
    outcome,
    sha256,
    summary_html,
    summary_text,
)
from .ledger import OutputRecord


class ExportError(RuntimeError):
    """The export cannot be written (a file in the way, files an export did not write, ...)."""


EXPORT_ROOT = Path("build") / "export"

#: this kernel (one Python process). An export's manifest names the kernel and the notebook
#: that wrote it, so ``--force`` never deletes another notebook's or another kernel's export
#: (red team 53b, finding 14: headless notebooks shared ``build/export/session``).
KERNEL = secrets.token_hex(8)


def export_owner() -> dict[str, Any]:
    """Who writes this export: the notebook (its file-name stem, when the server named it) and this kernel."""
    from .ledger import notebook_stem

    return {"notebook": notebook_stem(), "kernel": KERNEL}


def owner_conflict(folder: Path, owner: Any) -> str | None:
    """Why this kernel may not replace the export in ``folder`` that ``owner`` wrote (None: it may).

    The same notebook (named by the server) may replace its own export after a restart; a kernel
    that was not told its notebook's name may replace only an export it made itself, since it
    cannot tell its own notebook's earlier export from another notebook's; an export that names
    no owner (an earlier sdc_magic version) is nobody's to delete.
    """
    mine = export_owner()
    keep = "Nothing was deleted; choose another folder, or delete that export yourself if it is yours"
    if not isinstance(owner, dict) or not isinstance(owner.get("kernel"), str):
        return (f"{folder} holds an sdc_magic export that does not say which notebook made it (an earlier "
                f"version): --force replaces only an export of this notebook. {keep}")
    theirs = owner.get("notebook")
    if mine["notebook"] is not None:
        if theirs == mine["notebook"]:
            return None
        made_by = f"notebook {theirs!r}" if theirs else "a kernel that was not told its notebook's name"
        return (f"{folder} holds the export of {made_by}, not of this notebook ({mine['notebook']!r}): "
                f"--force replaces only this notebook's own export. {keep}")
    if theirs is None and owner["kernel"] == mine["kernel"]:
        return None
    made_by = f"notebook {theirs!r}" if theirs else "another kernel"
    return (f"{folder} holds an export made by {made_by}. This kernel was not told its "
            "notebook's name (a headless run, a console or a script), so it cannot tell whether that export "
            f"is this notebook's: --force replaces only an export this kernel made. {keep}; or give the "
            "export a folder of its own (%sdc export build/export/NAME)")


def default_export_folder(base: str | Path | None = None) -> Path:
    """``build/export/<notebook>/`` beside the notebook: one folder per notebook.

    The notebook's name comes from the server (``JPY_SESSION_NAME``); a kernel without it
    (plain IPython, a script) uses ``build/export/session``. Why per notebook: all
    notebooks of a folder used to export to one ``build/export`` and overwrite each other.
    """
    from .ledger import notebook_stem

    return Path(base if base is not None else Path.cwd()) / EXPORT_ROOT / (notebook_stem() or "session")


def results_record(records: list[OutputRecord]) -> dict[str, Any]:
    """``results.json`` in the layout of ACRO's audit record (opens in SACRO-Viewer).

    Everything a checker reads here that concerns disclosure (status, hidden cells, flags)
    is derived from the certificates, so ``verify`` can cross-check it.
    """
    from ..config import __version__

    results = {}
    for r in records:
        cert = r.certificate or {}
        hidden = len(cert.get("hidden", [])) if "hidden" in cert else r.hidden
        mitigated = r.status == "suppressed" or hidden > 0
        exception = r.exception or ""
        if not exception and r.status == "suppressed":
            exception = AUTO_EXCEPTION
        results[r.id] = {
            "uid": r.id,
            "status": acro_status(r.status),
            "type": "microdata" if r.kind == "microdata" else "table",
            "properties": {"method": r.call or "table", "mitigation": "suppress" if mitigated else "none",
                           "sdc_magic_status": r.status, "certificate": f"{r.id}.certificate.json",
                           "hidden": hidden, "cells": r.cells, "exception_request": r.exception or "",
                           "reasons": {CHECK_NAMES.get(k, k): int(n) for k, n in sorted(r.reasons.items())}},
            "files": [files_entry(cert.get("file", f"{r.id}.csv"), cert)],
            "outcome": outcome(cert),
            "command": r.command or r.call or "",
            "summary": "",
            "timestamp": r.timestamp,
            "comments": list(r.comments),
            "exception": exception,
        }
        results[r.id]["summary"] = summary_text(results[r.id]["properties"], cert.get("method"))
    return {"version": RESULTS_VERSION,
            "tool": {"@type": "SoftwareApplication", "name": "sdc_magic", "version": __version__},
            "results": results}


def config_record(chosen: list[OutputRecord], rules: dict[str, Any]) -> dict[str, Any]:
    """``config.json``: the rules the exported outputs were checked under (per output, and in
    ``rules`` the most recent output's, or the session's when nothing is exported)."""
    by_output = {r.id: (r.certificate or {}).get("rules", r.rules) for r in chosen}
    certified = [(r.certificate or {}).get("rules") for r in chosen]
    shown = next((v for v in reversed(certified) if isinstance(v, dict)), None) or next(
        (v for v in reversed(by_output.values()) if isinstance(v, dict)), rules)
    return {"rules": shown, "rules_by_output": by_output, "versions": versions()}


# ------------------------------------------------------------------ the folder
def _listing(folder: Path) -> list[str]:
    """Every file (or link) under ``folder``, relative, except the manifest."""
    out = []
    for path in folder.rglob("*"):
        if path.is_symlink() or not path.is_dir():
            rel = path.relative_to(folder).as_posix()
            if rel != MANIFEST:
                out.append(rel)
    return sorted(out)


def read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        return None
    return data


def _names(items: list[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _prepare(folder: Path, force: bool) -> None:
    """Make ``folder`` ready; with ``force`` delete only the files an earlier export wrote, unchanged."""
    if folder.exists() and not folder.is_dir():
        raise ExportError(f"{folder} is a file, not a folder: choose a folder for the export")
    if not folder.exists():
        try:
            folder.mkdir(parents=True)
        except OSError as exc:
            raise ExportError(f"cannot create the folder {folder}: {exc.strerror or exc}") from None
        return
    present = _listing(folder)
    if not present:
        return
    if not force:
        raise ExportError(f"{folder} is not empty: choose an empty folder, or --force to replace an earlier "
                          "sdc_magic export in it")
    manifest = read_manifest(folder) or {"files": {}, "pending": []}
    if manifest["files"] or manifest.get("pending"):
        conflict = owner_conflict(folder, manifest.get("owner"))
        if conflict:
            raise ExportError(conflict)
    ours: dict[str, Any] = manifest["files"]
    pending = set(manifest.get("pending") or [])

    def written_by_export(rel: str) -> bool:
        path = folder / rel
        if path.is_symlink() or not path.is_file():
            return False
        if rel in ours:
            return sha256(path) == ours[rel]
        return rel in pending  # an interrupted export had planned it

    foreign = [rel for rel in present if not written_by_export(rel)]
    if foreign:
        raise ExportError(f"{folder} holds files that no sdc_magic export wrote, or that were changed since: "
                          f"{_names(foreign)}. Nothing was deleted; move them or choose another folder")
    for rel in present:
        (folder / rel).unlink()
    for sub in sorted({(folder / rel).parent for rel in present} - {folder}, key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            sub.rmdir()  # only if empty


def export(records: list[OutputRecord], folder: str | Path | None, rules: dict[str, Any], *, force: bool = False,
           xlsx: bool = False, only: Iterable[str] | None = None,
           left_out: list[str] | None = None) -> list[OutputRecord]:
    """Write the exportable outputs still in the notebook to ``folder``; return the records written.

    ``folder=None``: :func:`default_export_folder`. Outputs superseded by a later run of
    their cell, dropped, blocked or uncleared ones are not written. ``force`` replaces an
    earlier export only (see :data:`MANIFEST`); anything else in the folder stops the
    export, naming the files, and nothing is deleted. ``only``: the output ids the
    notebook holds now (a front-end that knows them can pass them, so outputs of deleted
    cells are left out too). An output whose certificate and CSV disagree is left out (and
    said in ``left_out``); the others are exported.
    """
    folder = Path(folder) if folder is not None else default_export_folder()
    wanted = None if only is None else set(only)
    chosen = [r for r in records if r.exportable and r.superseded_by is None and r.csv is not None
              and r.certificate is not None and (wanted is None or r.id in wanted)]
    disagree = _disagreements(chosen)  # before anything in the folder is touched
    if disagree:
        # one bad output never stops the export of the others (issue 23.9): it is left out, and said
        bad = {d.split(":", 1)[0] for d in disagree}
        chosen = [r for r in chosen if r.id not in bad]
        message = ("; ".join(disagree) + " — the certificate would publish what the table does not "
                   "(%sdc drop the output, or report it as a bug)")
        if not chosen:
            raise ExportError("nothing was exported: " + message)
        if left_out is not None:
            left_out.append(message)
    try:
        _prepare(folder, force)
    except OSError as exc:  # e.g. a file that cannot be removed: say so, no traceback
        raise ExportError(f"cannot prepare {folder} for the export ({exc.strerror or exc})") from None
    planned = [n for r in chosen for n in (f"{r.id}.csv", f"{r.id}.certificate.json")
               + ((f"{r.id}.xlsx",) if xlsx else ())] + ["results.json", "config.json", "summary.html"]
    written: dict[str, str] = {}
    manifest_path = folder / MANIFEST
    owner = export_owner()

    def manifest(done: bool) -> None:
        pending = [] if done else planned + [f"checksums/{n}.txt" for n in planned]
        manifest_path.write_text(json.dumps({"tool": "sdc_magic", "complete": done, "files": written,
                                             "pending": pending, "owner": owner}, indent=1, sort_keys=True),
                                 encoding="utf-8")

    def write(rel: str, text: str) -> None:
        data = text.encode("utf-8")
        (folder / rel).write_bytes(data)
        written[rel] = hashlib.sha256(data).hexdigest()

    from . import reaudit  # (its solver is imported on first export, never at %load_ext)

    try:
        manifest(False)  # an interrupted export can still be replaced with --force
        for r in chosen:
            write(f"{r.id}.csv", r.csv or "")
            write(f"{r.id}.certificate.json", json.dumps(_as_exported(r, reaudit.intervals), indent=1))
            if xlsx:
                _write_xlsx(folder / f"{r.id}.xlsx", r.csv or "")
                written[f"{r.id}.xlsx"] = sha256(folder / f"{r.id}.xlsx")
        results = results_record(chosen)
        config = config_record(chosen, rules)
        write("results.json", json.dumps(results, indent=1))
        write("config.json", json.dumps(config, indent=1))
        write("summary.html", summary_html(json.loads(json.dumps(results)), json.loads(json.dumps(config))["rules"]))
        (folder / "checksums").mkdir(exist_ok=True)
        for rel in list(written):
            write(f"checksums/{rel}.txt", written[rel])
        manifest(True)
    except OSError as exc:
        raise ExportError(f"the export to {folder} could not be written ({exc.strerror or exc}); "
                          "run it again with --force once fixed") from None
    return chosen


def _as_exported(r: OutputRecord, intervals: Any) -> dict[str, Any]:
    """The certificate written for ``r``: a table's restated; a row-level release's with its columns.

    Why the columns (red team 53b, finding 08): ``verify`` compares the released file's columns
    with the certificate's, so raw data put in place of the release does not pass unnoticed.
    """
    cert = r.certificate or {}
    if str(cert.get("schema", "")).startswith("sdc_magic.microdata-certificate"):
        import csv
        import io

        header = next(csv.reader(io.StringIO(r.csv or "")), [])
        return {**cert, "columns": header}
    return restated(cert, intervals)


def _disagreements(chosen: list[OutputRecord]) -> list[str]:
    """Outputs whose certificate and CSV disagree (checked before anything is written).

    The same checks as ``verify``: a certificate that lists a value the CSV does not show
    (an unrounded value of a rounded table, a cell a later audit hid) would leak it.
    """
    out = []
    for r in chosen:
        cert = r.certificate or {}
        if cert.get("schema") != TABLE_SCHEMA:
            continue
        problems = certificate_shape(cert)
        if not problems:
            problems = check_csv(f"{r.id}.csv", r.csv or "", cert) + model_conflicts(cert)
        if problems:
            out.append(f"{r.id}: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    return out


def _write_xlsx(path: Path, csv_text: str) -> None:
    import io

    import pandas as pd

    pd.read_csv(io.StringIO(csv_text), dtype=str, keep_default_na=False).to_excel(path, index=False)


def table_csv(checked: Any) -> str:
    """The published table as CSV: one index column (levels joined), hidden cells empty.

    SACRO-Viewer highlights body row ``row`` and column ``col + 1`` of a CSV, assuming one
    header row and one index column, so multi-level labels are joined with " / ".
    """
    import numpy as np
    import pandas as pd

    frame = checked.frame
    grid = frame.to_frame() if isinstance(frame, pd.Series) else frame
    values = grid.to_numpy(dtype=object).copy()
    values[np.asarray(checked.hidden, dtype=bool)] = ""
    if checked.rounded:
        for idx in zip(*np.nonzero(~np.asarray(checked.hidden, dtype=bool)), strict=True):
            v = values[idx]
            if isinstance(v, int | float | np.integer | np.floating) and float(v).is_integer():
                values[idx] = int(round(float(v) / checked.rounded) * checked.rounded)
    index = [" / ".join(map(str, i)) if isinstance(i, tuple) else str(i) for i in grid.index]
    columns = [" / ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in grid.columns]
    name = " / ".join(str(n) for n in grid.index.names if n is not None) or ""
    out = pd.DataFrame(values, index=pd.Index(index, name=name), columns=columns)
    return out.to_csv(lineterminator="\n")
