"""Session state: the rules in force, the evidence registry, and the record of outputs.

One :class:`Session` per kernel. The display path, the magics and the Python API all
go through it, so a change of rules applies to the next output and every output
records the rules it was checked under.
"""

from __future__ import annotations

import contextlib
import gc
import math
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..capture import Capture
from ..checking.check import Checked, check
from ..checking.derived import remember_displayed_hidden
from ..checking.intervals import settle_intervals
from ..checking.revealed import RevealedSides
from ..config import Rules, apply_settings, load_rules, preset
from ..evidence.in_engine import InEngineRows
from ..evidence.registry import Registry
from ..outputs.bundle import MIME as PAYLOAD_MIME
from ..outputs.bundle import canonical, digest
from ..outputs.render import (
    extras_html,
    mask_label,
    render_html,
    render_payload,
    render_placeholder,
    render_plain,
)
from ..protect import certificate, patterns
from ..protect.messages import UNPROTECTABLE
from ..records import signing
from ..records.export import table_csv
from ..records.ledger import Ledger, OutputRecord
from .decisions import DecisionKey, DecisionMemory, decision_key
from .tracebacks import safe_format_exc

METADATA_SCHEMA = 1
#: Larger tables are shown protected but not kept for export (certificates would be huge).
MAX_EXPORT_CELLS = 200_000
#: Per-cell reasons kept in an output's metadata (the count of the others is recorded).
MAX_REASONS_IN_METADATA = 5_000



@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for one display, then left as it was.

    Why: a display builds tens of thousands of small containers (a certificate states every
    cell, the ledger line, the rendered rows); every 700 of them start a collection, and in a
    notebook that holds millions of objects one of those is now and then a full one. Measured
    beside 2M live lists: a 10,000-cell certificate 0.21 s with the collector, 0.07 s paused; a
    10,000-cell display 0.77 → 0.70 s (docs/performance.md).
    Reference counting still frees everything that is not a cycle; cycles made during the
    display are collected by the next collection after it. Nested displays leave it to the
    outermost; a collector the user turned off stays off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()

@dataclass
class Published:
    """What one display publishes: the bundle, its metadata, and the decision behind it."""

    id: str
    data: dict[str, str]
    metadata: dict[str, Any]
    checked: Checked | None


_internal = threading.local()


def carry_linking_memory_over(path: Path) -> None:
    """A notebook whose files were renamed (issue 23.10: names that collided now carry a hash)
    keeps the linking memory of its earlier outputs: copied from the old name, never moved (the
    old files may be another notebook's too: sharing them protects more, forgetting would not)."""
    from ..records.ledger import legacy_ledger_file_name

    legacy = legacy_ledger_file_name()
    if legacy is None or path.exists():
        return
    old = path.with_name(legacy + ".linking.npz")
    if not old.is_file():
        return
    import shutil

    for source in [old, *old.parent.glob(old.name + ".*.rows.npz")]:
        shutil.copy2(source, path.with_name(path.name + source.name[len(old.name):]))


@contextlib.contextmanager
def internal_work() -> Iterator[None]:
    """Marks the extension's own work (checking, rendering, suggestions): pandas may turn
    frames into text inside it (a groupby over unnamed Series does), and the print warning
    must only speak of the user's own ``print``/``str`` (issue 24: false warnings). The warnings
    filters that libraries it imports meanwhile install are noted (:func:`remove_added_filters`)."""
    depth = getattr(_internal, "depth", 0)
    _internal.depth = depth + 1
    before = list(warnings.filters) if depth == 0 else None
    try:
        yield
    finally:
        _internal.depth = depth
        if before is not None and len(warnings.filters) != len(before):
            _ADDED_FILTERS.extend(f for f in warnings.filters if f not in before)


#: warnings filters installed during the extension's own work (scipy.sparse, imported lazily with
#: the solvers, ignores "the matrix subclass is not the recommended way" and three more)
_ADDED_FILTERS: list[Any] = []


def remove_added_filters() -> None:
    """Take out the warnings filters the extension's own work installed (``%unload_ext``
    restores the state before ``%load_ext``; red team 53b, 15: one filter stayed)."""
    for f in _ADDED_FILTERS:
        with contextlib.suppress(ValueError):
            warnings.filters.remove(f)
    _ADDED_FILTERS.clear()
    warnings._filters_mutated()  # type: ignore[attr-defined]  # (the module's cache of the filters)


def in_internal_work() -> bool:
    """True while this thread runs the extension's own work (see :func:`internal_work`)."""
    return getattr(_internal, "depth", 0) > 0


def _letters(k: int) -> str:
    """``a``, ``b``, … ``z``, ``aa``: names of better answers with no digit (outputs are ordered by
    the digits of their ids, ``linking.names.output_order``)."""
    out = ""
    k += 1
    while k:
        k, r = divmod(k - 1, 26)
        out = chr(97 + r) + out
    return out


#: displayed margins the joint audit tries to show again, one audit each, after hiding them all
#: (``Session._audit_without_margins``; a count, not a time: the same pattern on any machine)
MAX_MARGINS_SHOWN_AGAIN = 24


class Session:
    """Rules, registry, capture wrappers and the output record of one kernel."""

    def __init__(self, rules: Rules | None = None, config_path: Path | None = None) -> None:
        if rules is None:
            rules, config_path = load_rules()
        self.rules = rules
        self.config_path = config_path
        self.registry = Registry()
        self.capture = Capture(self.registry, lambda: self.rules)
        self.ledger = Ledger(persist=False)
        from ..linking import Linker

        self.populations = Linker()  # rows behind each published cell of earlier outputs (linking)
        self._answers_named: dict[str, int] = {}  # better answers recorded per output (record_suggestions)
        self.linking = True
        self.microdata: dict[str, Any] | None = None  # %sdc microdata keys=... k=... (row-level releases)
        self.last_error: str | None = None
        self.protector: Any = None
        self.decisions = DecisionMemory()  # the same table shown again: the same decision
        self.revealed = RevealedSides()  # what selections by value told of hidden cells, output after output
        self._decision_key: DecisionKey | None = None

    # ------------------------------------------------------------ rules
    def set_rules(self, **settings: Any) -> Rules:
        """Change some rules (validated; an unknown key is an error naming it)."""
        self.rules = apply_settings(self.rules, settings)
        return self.rules

    def use_preset(self, name: str) -> Rules:
        self.rules = preset(name)
        return self.rules

    # ------------------------------------------------------------ checking
    def check(self, obj: Any, protect: bool = True) -> Checked:
        """Check a table without displaying it (the Python API).

        ``protect=False`` applies the primary rules only (fast; used to screen candidate
        tables, whose status is then ``blocked`` whenever a cell is primary). Cells that earlier
        outputs would reveal by subtraction are primary here too: a suggested table (and the
        counts its text quotes) must not undo the linking.
        """
        return check(obj, self.registry, self.rules, self.protector if protect else False,
                     linker=self._differencing if self.linking else None)

    def bundle(self, obj: Any, execution_count: int | None = None, record: bool = True
               ) -> tuple[dict[str, str], dict[str, Any]]:
        """The mime bundle and metadata to publish for ``obj``; fails closed."""
        published = self.publish(obj, execution_count, record)
        return published.data, published.metadata

    def publish(self, obj: Any, execution_count: int | None = None, record: bool = True,
                progress: Any = None, suggest: Any = None) -> Published:
        """Check and render ``obj`` (see :meth:`_publish`), as the extension's own work."""
        with internal_work(), collector_paused():
            return self._publish(obj, execution_count, record, progress, suggest)

    def _publish(self, obj: Any, execution_count: int | None = None, record: bool = True,
                 progress: Any = None, suggest: Any = None) -> Published:
        """Check and render ``obj``; any exception gives a withheld placeholder.

        The traceback is kept for ``%sdc debug`` and never shown in the output (an error
        message can quote data). ``suggest(checked)`` (optional) gives the better answers
        of a table with hidden cells; they join the renderer's payload and the HTML.
        """
        out_id = self.ledger.new_id() if record else "out-nested"
        checked: Checked | None = None
        payload: dict[str, Any] | None = None
        from ..linking import clear_cache

        clear_cache()  # (a new display: drafts and fresh hashes of the last one are not this one's)
        try:
            linked = record and self.linking
            self._decision_key = None
            # the patterns found by searches are kept beside a persisted ledger: a re-run of the
            # notebook (or another notebook in the folder) audits them instead of searching again
            patterns.use_store(self.ledger.folder / "patterns" if self.ledger.persist else None)
            checked = check(obj, self.registry, self.rules, self.protector,
                            linker=self._differencing if linked else None, progress=progress,
                            published=self._published if linked else None,
                            reuse=self._recall if linked else None,
                            revealed=self.revealed if self.linking else None)
            reused = getattr(checked, "reused_from", None) is not None
            if linked and not reused:
                self._link(out_id, checked, obj)
                certificate.finalise(checked)  # models, intervals and display: one final decision
                self.decisions.remember(self._decision_key, out_id, checked)
            settle_intervals(checked)  # what the record may state of hidden cells, after every decision
            remember_displayed_hidden(checked)  # a selection of the table object hides them too
            if checked.kind == "row-level" and self.microdata is not None:
                self._microdata_check(checked)
            checked.notes.extend(self.ledger.take_warnings())  # e.g. persistence off: said once, inline
            text = render_plain(checked)
            found = None
            if suggest is not None and checked.hidden_count and checked.kind == "table":
                try:
                    found = suggest(checked)
                    if linked and found is not None:
                        self.record_suggestions(out_id, found, checked)
                except Exception:  # suggestions are an extra: the protected table stands without them
                    self.last_error = safe_format_exc()
                    found = None
            payload = render_payload(checked, out_id, found)
            page = render_html(checked, extras_html(payload))
            meta = self._metadata(out_id, checked, text, page, payload)
            if self.linking and checked.status != "blocked" and checked.told_sides:
                self.revealed.remember(checked.told_sides)  # shown: what its selection told is public now
        except KeyboardInterrupt:
            checked = payload = None
            text, page = render_placeholder("checking was interrupted")
            meta = self._failure_metadata(out_id, "interrupted", text, page)
        except Exception as exc:  # fail closed
            checked = payload = None
            self.last_error = safe_format_exc()
            documented = bool(getattr(exc, "sdc_note", False))
            reason = str(exc) if documented else f"checking failed ({type(exc).__name__})"
            text, page = render_placeholder(reason, expected=documented)
            meta = self._failure_metadata(out_id, reason, text, page)
        signature = signing.sign_record(meta)
        if signature is not None:  # lets redact --require-hmac tell our clearances from hand-made ones
            meta["hmac"] = signature
        if record:
            self.ledger.add(self._record(out_id, meta, checked, execution_count))
        clear_cache()  # group ids are only shared within one display (frames may change later)
        data: dict[str, Any] = {"text/plain": text, "text/html": page}
        if payload is not None:
            data[PAYLOAD_MIME] = payload
        return Published(out_id, data, {"sdc_magic": meta}, checked)

    def _record(self, out_id: str, meta: dict[str, Any], checked: Checked | None,
                execution_count: int | None) -> OutputRecord:
        """The ledger record; exportable kinds also keep their CSV and certificate."""
        csv_text = cert = None
        if checked is not None and checked.kind == "microdata" and meta["status"] == "pass":
            frame = checked.frame if isinstance(checked.frame, pd.DataFrame) else checked.frame.to_frame()
            hidden = np.asarray(checked.hidden, dtype=bool)
            if hidden.shape == frame.shape and hidden.any():
                # cells drawn hidden (a window count beside the rows) are left empty, as on screen
                # (red team: pl.len().over("district") was ✕ on screen and 3 in the CSV)
                values = frame.to_numpy(dtype=object).copy()
                values[hidden] = ""
                frame = pd.DataFrame(values, columns=frame.columns)
            csv_text = frame.to_csv(index=False, lineterminator="\n")
            cert = {"schema": "sdc_magic.microdata-certificate/1", "id": out_id, "file": f"{out_id}.csv",
                    "status": "pass", "digest": meta["digest"], "microdata": checked.microdata_certificate,
                    "versions": certificate.versions()}
        elif checked is not None and checked.hidden.size > MAX_EXPORT_CELLS:
            checked.notes.append(f"more than {MAX_EXPORT_CELLS:,} cells: not exportable from a notebook")
        elif checked is not None and checked.kind == "table" and meta["status"] in ("pass", "suppressed", "review"):
            try:
                csv_text = table_csv(checked)
                cert = certificate.build(out_id, checked, f"{out_id}.csv", meta["digest"])
            except Exception:  # not exportable then; the display itself is unaffected
                self.last_error = safe_format_exc()
                csv_text = cert = None
        return OutputRecord(
            id=out_id, status=meta["status"], kind=meta.get("kind", "error"), hidden=meta.get("hidden", 0),
            cells=meta.get("cells", 0), call=meta.get("call"), digest=meta["digest"],
            execution_count=execution_count, reasons=meta.get("rules_hit", {}), rules=meta.get("rules"),
            method=meta.get("method"), hidden_cells=[r for r in meta.get("reasons", []) if r.get("hidden")],
            notes=meta.get("notes", []), csv=csv_text, certificate=cert)

    # ------------------------------------------------------------ row-level releases
    def set_microdata(self, keys: list[str], k: int = 3, sensitive: str | None = None, l: int | None = None,  # noqa: E741
                      *, risk: Any = None, noise: Any = None, suppression: Any = None,
                      max_risk: float | None = None) -> dict[str, Any]:
        """Declare the quasi-identifiers under which a row-level frame may be released.

        ``risk`` (a :class:`~sdc_magic.microdata.RiskReport`), ``noise`` and ``suppression``
        reports from the anonymisation pipeline go into the released frame's certificate;
        ``max_risk`` (percent of people whose true record is among their nearest anonymised
        neighbours, for any event type) blocks the release when the risk report exceeds it,
        or when no risk report is given.
        """
        if not keys:
            raise ValueError("microdata needs at least one key (quasi-identifier)")
        if k < 2:
            raise ValueError("k must be at least 2")
        self.microdata = {"keys": list(keys), "k": int(k), "sensitive": sensitive,
                          "l": (int(l) if l is not None else (2 if sensitive else None)),
                          "risk": risk, "noise": noise, "suppression": suppression, "max_risk": max_risk}
        return self.microdata

    def _microdata_check(self, checked: Checked) -> None:
        """k-anonymity (and l-diversity) of a displayed row-level frame under the declared keys.

        A frame that passes, with no column that identifies records on its own, becomes
        releasable (status pass, with its k-anonymity report as certificate); otherwise it
        stays blocked and the report says why. The report never shows sensitive values.
        """
        from ..microdata import certificate as microdata_certificate
        from ..microdata import check_k_anonymity

        spec = self.microdata or {}
        frame = checked.frame if isinstance(checked.frame, pd.DataFrame) else checked.frame.to_frame()
        missing = [k for k in spec["keys"] + ([spec["sensitive"]] if spec.get("sensitive") else [])
                   if k not in frame.columns]
        if missing:
            checked.notes.append(f"microdata keys not in this frame: {', '.join(map(str, missing))}")
            return
        report = check_k_anonymity(frame, spec["keys"], k=spec["k"], sensitive=spec.get("sensitive"),
                                   l=spec.get("l"))
        summary = report.summary()
        checked.notes.append(
            f"k-anonymity (k={spec['k']}) over {', '.join(spec['keys'])}: {summary['violations']} of "
            f"{summary['n_records']} records in classes smaller than k; smallest class sizes "
            f"{summary['smallest_class_sizes']}")
        if spec.get("sensitive"):
            checked.notes.append(f"l-diversity (l={summary['l']}) of {spec['sensitive']}: "
                                 f"{summary['l_violations']} records in classes with too few distinct values")
        identifying = [c for c in frame.columns if c not in spec["keys"] and c != spec.get("sensitive")
                       and len(frame) > 1 and frame[c].nunique(dropna=True) == len(frame)]
        if identifying:
            checked.notes.append("columns unique to each record (identifiers): " + ", ".join(map(str, identifying))
                                 + " — drop them or declare them as keys")
        risk, max_risk = spec.get("risk"), spec.get("max_risk")
        too_risky = False
        if max_risk is not None:
            worst = max((float(v.get("percent", 0.0)) for v in risk.per_event.values()), default=0.0) \
                if risk is not None else None
            too_risky = worst is None or worst > float(max_risk)
            checked.notes.append(
                f"re-identification risk: no risk report given (required: at most {max_risk:g} %)" if worst is None
                else f"re-identification risk {worst:g} % for the worst event type (limit {max_risk:g} %)")
        if report.ok and not identifying and not too_risky:
            checked.status = "pass"
            checked.kind = "microdata"
            checked.notes = [n for n in checked.notes if "never exportable" not in n]
            suppression = spec.get("suppression")
            consistent = suppression is not None and tuple(suppression.keys) == tuple(report.keys) \
                and suppression.k == report.k
            checked.microdata_certificate = microdata_certificate(
                report, suppression if consistent else None, risk, spec.get("noise"))

    # ------------------------------------------------------------ linked outputs
    def _title(self, entry: Any) -> str:
        """How messages name an output: its statistic and its keys ("counts by sex × age band")."""
        source = getattr(entry, "source", None)
        keys = [str(k) for k in (getattr(source, "keys", None) or list(entry.dims))]
        call = str(entry.call or "table")
        if call.endswith(" of counts"):
            call = "reaggregate"
        elif call.endswith(" of sums"):
            call = "sum"  # (sums of a table of sums: sums, as the same table made from the rows)
        what = {"reaggregate": "sums of counts", "size": "counts", "count": "counts", "value_counts": "counts", "crosstab": "counts",
                "sum": "sums", "mean": "means", "median": "medians", "describe": "summary", "nunique": "distinct counts",
                "pivot_table": "pivot table", "agg": "aggregates", "aggregate": "aggregates"}.get(
            call.rsplit(".", 1)[-1], call)
        return f"{what} by {' × '.join(keys)}" if keys else f"{what} of all rows"

    def _linker(self) -> Any:
        """The linking memory, saved next to a persisted ledger (it survives a kernel restart).

        Whatever a ledger holds is exported together, so whatever writes to a ledger links with
        its earlier outputs: a notebook the server names has its own ledger and memory; a
        headless run (nbclient, papermill: nobody names the notebook), a console or a script
        share the working directory's default ledger and, since issue 23.13, its memory too
        (a restarted headless run used to start with an empty memory while its outputs joined
        the earlier run's in the ledger and the export: 766 − 765 = 1)."""
        from ..linking import Linker

        if not isinstance(self.populations, Linker):
            self.populations = Linker()
        ledger = self.ledger
        path = None
        if getattr(ledger, "persist", False):
            try:
                path = ledger.path.with_name(ledger.path.name + ".linking.npz")
                carry_linking_memory_over(path)
            except Exception:  # no folder: memory only
                path = None
        if path != self.populations.path:
            if self.populations.path is not None:  # another notebook's ledger: another memory
                self.populations = Linker()
            self.populations.attach(path)
        return self.populations

    def _draft(self, entry: Any, positions: Any, hidden: Any = None, out_id: str = "this table",
               flagged: Any = None) -> Any:
        return self._linker().draft(out_id, self._title(entry), entry, positions, hidden, self.rules.threshold,
                                    flagged=flagged)

    def _recall(self, entry: Any, positions: Any, frame: Any, notes: list[str]) -> Checked | None:
        """The decision of the same table shown earlier (see :mod:`.decisions`), or None."""
        self._decision_key = decision_key(self.rules, entry, positions, frame, notes, self._draft(entry, positions))
        return self.decisions.recall(self._decision_key, entry)

    def _differencing(self, entry: Any, positions: Any, is_margin: Any) -> dict[int, Any]:
        """Cells that earlier outputs would reveal by subtraction (made primary before protection):
        for the table's rows, and for the flagged rows its indicator means or sums publish."""
        from ..linking import indicator_variables, variant_cells

        variants = [*indicator_variables(entry), None]
        if not self._linker() and len(variants) == 1:
            return {}
        out: dict[int, Any] = {}
        for flagged in variants:
            draft = self._draft(entry, positions, flagged=flagged)
            if draft is None or not self.populations.related(draft):
                continue
            found = self.populations.differencing_reasons(draft, positions)
            for i, reasons in variant_cells(found, entry, positions, flagged).items():
                out.setdefault(i, []).extend(reasons)
        if len(variants) > 1:  # populations published side by side in this one table
            within = self._linker().within_table(self._title(entry), entry, positions, self.rules.threshold,
                                                 [None, *variants[:-1]])
            for i, reasons in within.items():
                out.setdefault(i, []).extend(reasons)
        return out

    def _published(self, entry: Any, positions: Any) -> dict:
        """Cells of this table that earlier outputs already published (never chosen as secondaries),
        per figure the table shows: ``{(statistic, variable): {level: labels}}`` (the counts of a
        table of a flag's sums and counts are public after the same counts, its sums are not)."""
        if not self._linker():
            return {}
        draft = self._draft(entry, positions)
        if draft is None or not self.populations.related(draft):
            return {}
        # (figures unknown: one entry for every measure, None, as before figures were told apart)
        measures = sorted(draft.pop.tells) if draft.pop.tells else [None]
        public = {m: found for m in measures if (found := self.populations.published_elsewhere(draft, m))}
        self._public_given = bool(public)
        return public

    def _link(self, out_id: str, checked: Checked, obj: Any = None) -> None:
        """Joint audit with related earlier outputs; then remember this output's population.

        ``obj``: the object displayed. A table protected again on its own is checked from it,
        not from ``checked.frame``, which may be reordered (rows with hidden cells last): the
        evidence of a reordered copy was matched to the cells in the original order, and the
        values drawn were another row's (a MultiIndex ``value_counts`` in a long session)."""
        from ..linking import record_hidden_margins, record_hidden_model

        pinned = getattr(self, "_public_given", False) and checked.kind == "table" and checked.status == "blocked" \
            and any(UNPROTECTABLE in n for n in checked.notes)
        self._public_given = False
        if pinned:
            # the cells earlier outputs published pin some small cells: those are public knowledge
            # already, hiding them protects nothing. Protect the table on its own, and let the joint
            # audit with the earlier outputs judge what this table adds (and only that).
            alone = check(checked.frame if obj is None else obj, self.registry, self.rules, self.protector, linker=self._differencing)
            if alone.status != "blocked":
                alone.notes.append("some hidden cells were already recoverable from earlier outputs: "
                                   "this table was protected on its own, then audited with them")
                checked.__dict__.update(alone.__dict__)
        if checked.kind != "table" or checked.status not in ("pass", "suppressed", "review") \
                or checked.hidden.size > MAX_EXPORT_CELLS:
            return
        linker = self._linker()
        draft = self._draft(checked.entry, checked.entry_positions, checked.hidden_flat, out_id)
        if linker.notes:  # e.g. the saved linking memory of an earlier kernel could not be read
            checked.notes.extend(linker.notes)
            linker.notes.clear()
        if draft is None:
            unread = linker.not_linked(out_id, checked.entry, checked.notes)
            if unread is not None:
                checked.notes.append(unread)
                if checked.status in ("pass", "suppressed"):
                    checked.status = "review"  # never cleared beside "not compared"
            return
        pop = draft.pop
        record_hidden_model(pop, checked.models)  # the joint audit must know the margins this table hid
        record_hidden_margins(draft, checked.entry, checked.entry_positions, checked.hidden_flat)

        earlier = linker.related(draft)
        unlinked = linker.unlinked_note(draft) or linker.unidentified_note(draft) or linker.after_unlinked_note(draft) \
            or linker.across_engine_note(draft) or linker.edited_note(draft)
        if unlinked is not None:
            checked.notes.append(unlinked)
            if checked.status in ("pass", "suppressed"):
                checked.status = "review"  # never cleared beside "not compared"
        if earlier or draft.audited_alone():  # (hidden cells, small groups the outputs separate together)
            draft = self._audit_jointly(draft, checked, out_id)
            if draft is None:
                return
        uncounted = linker.units_note(draft)
        if uncounted is not None:
            checked.notes.append(uncounted)
            if checked.status in ("pass", "suppressed"):
                checked.status = "review"  # never cleared beside "not compared"
        draft.cleared = checked.status in ("pass", "suppressed")  # (what it shows: linking.edits)
        linker.commit(draft, settle=False)
        recorded = [draft]
        try:
            self._link_indicator_rows(out_id, checked, linker, recorded)
        finally:
            linker.settle(recorded)

    def _audit_jointly(self, draft: Any, checked: Checked, out_id: str, flagged: Any = None,
                       recorded: list[Any] | None = None) -> Any:
        """The joint audit of one population of a displayed table with related earlier ones; the
        cells it hides are hidden in ``checked`` (and in the populations of this output already
        ``recorded``). Returns the population's draft under the final pattern (None: blocked, or
        the table can no longer be drafted)."""
        from ..linking import joint_audit
        from ..rules import Reason

        linker = self._linker()
        added, problems, notes, unproven = joint_audit(draft, linker, self.rules.protection, siblings=recorded,
                                                       hidden_flat=checked.hidden_flat)
        if problems and not recorded:
            retried = self._audit_without_margins(draft, checked, out_id, flagged)
            if retried is not None:
                draft, (added, problems, notes, unproven) = retried
        checked.notes.extend(notes)
        if unproven and checked.status in ("pass", "suppressed"):
            checked.status = "review"  # never cleared beside "not audited" (issue 21)
        checked.notes.extend(unproven)
        newly = 0
        for g in added:
            # every displayed cell of the group (an indicator's population: its means, sums and
            # other statistics; the table's own rows: the whole row)
            for i in np.flatnonzero(draft.display_group == g):
                r, c = int(checked.cell_rows[i]), int(checked.cell_cols[i])
                if not checked.hidden[r, c]:
                    checked.hidden[r, c] = True
                    checked.hidden_flat[i] = True
                    checked.secondary_count += 1
                    newly += 1
                    checked.reasons.setdefault((r, c), []).append(Reason(
                        "secondary", "hidden so that cells hidden here or in earlier outputs cannot be "
                        "recovered from the two together"))
        if newly and checked.status == "pass":
            checked.status = "suppressed"
        if problems:
            checked.status = "blocked"
            checked.hidden[:] = True
            checked.hidden_flat[:] = True
            checked.intervals = {}  # bounds of a pattern that is not shown
            checked.notes.extend(problems)
            if recorded:  # (a blocked output publishes nothing, and hides nothing that others must hide)
                linker.hide_more(recorded, checked.hidden_flat, blocked=True)
            return None
        if not newly:
            return draft
        checked.notes.append(f"{newly} more cell(s) hidden after a joint audit with earlier outputs")
        if recorded:
            linker.hide_more(recorded, checked.hidden_flat)
        hidden_model = draft.pop.hidden_model
        draft = self._draft(checked.entry, checked.entry_positions, checked.hidden_flat, out_id, flagged)
        if draft is not None:
            from ..linking import record_hidden_margins

            draft.pop.hidden_model = hidden_model
            record_hidden_margins(draft, checked.entry, checked.entry_positions, checked.hidden_flat)
        return draft

    def _audit_without_margins(self, draft: Any, checked: Checked, out_id: str, flagged: Any
                               ) -> tuple[Any, tuple[list[int], list[str], list[str], list[str]]] | None:
        """The joint audit once more with the displayed margins hidden (then shown again one by one
        while it still passes); on success the margins left hidden are hidden in ``checked`` and
        the draft and audit result of that pattern returned, else None (the table is blocked).

        Why (over-protection, stop 67): the joint audit hides more *inner* cells only, and a
        crosstab with margins after two filters (districts A or C, B or C, by sex) was blocked
        whole: its sex margins give C's women as F(A, C) + F(B, C) − F, whatever inner cell is
        hidden. Hiding the margin (and, as the audit decides, an inner cell it would be the sum of)
        protects them; the audit's LP proves it as for any pattern."""
        from ..linking import joint_audit, record_hidden_margins, record_hidden_model
        from ..rules import Reason

        margins = draft.display_margin
        if margins is None or not len(margins):
            return None
        margins = [int(i) for i in margins if 0 <= int(i) < len(checked.hidden_flat) and not checked.hidden_flat[int(i)]]
        if not margins:
            return None
        linker = self._linker()

        def audit(hide: list[int]) -> tuple[Any, tuple] | None:
            hidden_flat = np.asarray(checked.hidden_flat, dtype=bool).copy()
            hidden_flat[hide] = True
            trial = self._draft(checked.entry, checked.entry_positions, hidden_flat, out_id, flagged)
            if trial is None:
                return None
            record_hidden_model(trial.pop, checked.models)
            record_hidden_margins(trial, checked.entry, checked.entry_positions, hidden_flat)
            found = joint_audit(trial, linker, self.rules.protection, hidden_flat=hidden_flat)
            return None if found[1] else (trial, found)

        best = audit(margins)
        if best is None:
            return None
        hide = list(margins)
        for i in margins[:MAX_MARGINS_SHOWN_AGAIN]:  # (show again each margin the pattern does not need)
            fewer = [j for j in hide if j != i]
            found = audit(fewer)
            if found is not None:
                hide, best = fewer, found
        for i in hide:
            r, c = int(checked.cell_rows[i]), int(checked.cell_cols[i])
            checked.hidden[r, c] = True
            checked.hidden_flat[i] = True
            checked.secondary_count += 1
            checked.reasons.setdefault((r, c), []).append(Reason(
                "secondary", "margin hidden so that cells hidden here or in earlier outputs cannot be recovered "
                "from the two together"))
        if hide and checked.status == "pass":
            checked.status = "suppressed"
        best[1][2].append(f"{len(hide)} margin(s) hidden after a joint audit with earlier outputs")
        return best

    def _link_indicator_rows(self, out_id: str, checked: Checked, linker: Any, recorded: list[Any]) -> None:
        """Record the rows an indicator's means or sums publish (its flagged rows, its other rows,
        side by side), each audited jointly with earlier outputs first.

        Why the audit: those rows add up with other outputs' rows like a count of them does
        (the unflagged counted by sex; a count and the flag's mean by sex in A, then in B:
        23 − 12 − 10 = C's one unflagged woman), and the table's own rows do not show it."""
        from ..linking import MAX_INDICATORS, indicator_variables, indicators_left_out

        left_out = indicators_left_out(checked.entry)
        if left_out:
            checked.notes.append(f"the rows that {len(left_out)} more indicator(s) publish ("
                                 f"{', '.join(map(repr, left_out[:5]))}{', …' if len(left_out) > 5 else ''}) were not "
                                 "compared with other outputs (a table's means or sums of at most "
                                 f"{MAX_INDICATORS} indicators are): an output checker decides, or show fewer")
            if checked.status in ("pass", "suppressed"):
                checked.status = "review"  # never cleared beside "not compared"
        unchecked = linker.side_by_side_unchecked(checked.entry)
        if unchecked is not None:
            checked.notes.append(unchecked)
            if checked.status in ("pass", "suppressed"):
                checked.status = "review"  # never cleared beside "not compared"
        done: set[Any] = set()  # variants recorded
        for flagged in indicator_variables(checked.entry):
            # the flagged rows a mean (or sum) of an indicator publishes: a second population
            extra = self._draft(checked.entry, checked.entry_positions, checked.hidden_flat, out_id, flagged)
            if extra is None:
                if isinstance(getattr(checked.entry.source, "rows", None), InEngineRows):
                    # counted in the engine and not found there (its count failed, or did not give the
                    # flagged rows their groups' counts): not compared, never cleared beside others
                    unread = linker.not_linked(out_id, checked.entry, checked.notes)
                    if unread is not None:
                        checked.notes.append(unread)
                        if checked.status in ("pass", "suppressed"):
                            checked.status = "review"
                continue
            if not len(extra.pop.labels):
                continue  # nobody at the indicator's level here (a table filtered on its flag): no rows published
            if not _implied(flagged, done) and any(p.out_id != out_id for p in linker.related(extra)):
                extra = self._audit_jointly(extra, checked, out_id, flagged, recorded)
                if extra is None:
                    return
            linker.commit(extra, settle=False)
            recorded.append(extra)
            done.add(flagged)

    @property
    def outputs(self) -> list[OutputRecord]:
        return self.ledger.records

    def output(self, out_id: str) -> OutputRecord:
        return self.ledger.get(out_id)

    def request_exception(self, out_id: str, reason: str) -> OutputRecord:
        """Record the analyst's reason to release an output as it is: status becomes review."""
        return self.ledger.request_exception(out_id, reason)

    def export(self, folder: Any, force: bool = False, xlsx: bool = False,
               left_out: list[str] | None = None, only: Any = None) -> list[OutputRecord]:
        """Write the exportable outputs of this session for an output checker (``left_out``: why
        outputs that could not be exported were left out; ``only``: these output ids alone)."""
        from ..records.export import export

        return export(self.ledger.records, folder, self.rules.as_dict(), force=force, xlsx=xlsx, left_out=left_out,
                      only=only)

    def suggestions(self, checked: Checked, name_of: Any = None, candidates: int | None = None,
                    budget: float | None = None) -> tuple[Any, Any]:
        """Better answers for a checked table (see :meth:`_suggestions`), as the extension's own work.

        ``candidates``: how many regroupings and rate tables to try (default: those of a first
        display). ``budget`` (seconds) is accepted for notebooks written before the search was
        bounded in work (issue 21) and has no effect: a time budget would make the
        suggestions depend on the machine's load.
        """
        del budget
        with internal_work():
            return self._suggestions(checked, name_of, candidates)

    def _suggestions(self, checked: Checked, name_of: Any = None, candidates: int | None = None
                     ) -> tuple[Any, Any]:
        """Better answers for a checked table (see :mod:`sdc_magic.outputs.suggest`), or (None, None)."""
        from collections import Counter

        from ..outputs.suggest import Suggester

        entry = checked.entry
        source = getattr(entry, "source", None)
        frame = getattr(source, "frame", None)
        if entry is None or frame is None or not getattr(source, "keys", None):
            return None, None
        pairs = Counter(zip(entry.evidence.var.tolist(), entry.evidence.stat.tolist(), strict=True))
        (var, stat), _ = pairs.most_common(1)[0]
        if stat in ("count", "size", "proportion", "percent", "nunique"):
            var, stat = None, "size"
        if stat not in ("size", "sum", "mean", "median", "min", "max", "std", "var", "count"):
            return None, None
        name = (name_of(frame, source.keys) if name_of else None) or "df"
        suggester = Suggester(frame, [str(k) for k in source.keys], var, stat, self.rules, self.check, name=name,
                              capturing=self.capturing)
        found = suggester.run() if candidates is None else suggester.run(candidates=candidates,
                                                                          rate_groupings=candidates)
        # the request in words ("counts by admin2 × sex", not pandas' call), and three alternatives
        # where the search found them: the better answers first, then further clean regroupings
        self._answer(checked, found)
        return found, suggester

    def _answer(self, checked: Checked, found: Any) -> None:
        """The request in words and its better answers, from the suggestions kept."""
        from ..outputs.suggest import answer

        spare = [s for s in found.explored if s.publishes_cleanly and s not in found.items]
        found.answer = answer(self._title(checked.entry), checked, [*found.items, *spare])

    def record_suggestions(self, out_id: str, found: Any, checked: Checked | None = None) -> None:
        """Record what the better answers show — a preview's cells, a rate's figures — as outputs of
        their own, each audited jointly with everything recorded before; a better answer that the
        audit would hide more of is dropped (not shown, and withdrawn from the record).

        Why (red team, stop 50): previews and rates were checked against earlier outputs but never
        recorded, so later tables were not compared with them: a district × sex table showed A's
        20/20 and previewed the totals by sex, 37/36; a later table of everyone outside C, 35/35,
        was ``pass``: C's 2 women and 1 man, in the notebook and its redacted copy."""
        if not self.linking:
            return
        kept = []
        for s in found.items:
            if s.recorded is None:
                shown = s.checked if s.checked is not None and s.publishes_cleanly else s.stated
                # (a name is never given twice: one withdrawn must not stand for the next)
                k = self._answers_named[out_id] = self._answers_named.get(out_id, -1) + 1
                s.recorded = shown is None or self._record_statement(f"{out_id} (better answer "
                                                                     f"{_letters(k)})", shown)
            if s.recorded:
                kept.append(s)
        if len(kept) != len(found.items):
            found.items = kept
            found.explored = [s for s in found.explored if s.recorded is not False]
            if checked is not None:  # (``checked``: the table they answer, for the answer in words)
                self._answer(checked, found)

    def _record_statement(self, name: str, shown: Checked) -> bool:
        """Record one better answer's table (see :meth:`record_suggestions`); False when the joint
        audit hid more of it or it could not be recorded (then nothing of it stays recorded)."""
        status, hidden = shown.status, shown.hidden.copy()
        self._link(name, shown)
        linker = self._linker()
        if shown.status == status and np.array_equal(shown.hidden, hidden) \
                and any(p.out_id == name for p in linker):
            return True
        linker.withdraw(name)
        return False

    def capturing(self) -> Any:
        """Context manager: evidence capture on for the duration (suggestions need it)."""
        import contextlib

        @contextlib.contextmanager
        def _on() -> Any:
            if self.capture.installed:
                yield
                return
            self.capture.install()
            try:
                yield
            finally:
                self.capture.uninstall()

        return _on()

    def plain(self, obj: Any) -> str:
        """text/plain of the protected version (for tables inside lists, tuples, dicts)."""
        return self.bundle(obj, record=False)[0]["text/plain"]

    def _metadata(self, out_id: str, checked: Checked, text: str, page: str,
                  payload: dict[str, Any] | None = None) -> dict[str, Any]:
        reasons = []
        frame = checked.frame
        truncated = 0
        for (i, j), rs in sorted(checked.reasons.items()):
            if not checked.hidden[i, j] and not any(r.rule in ("unverified", "negative", "custom") for r in rs):
                continue
            if len(reasons) >= MAX_REASONS_IN_METADATA:
                truncated += 1
                continue
            row = mask_label(frame.index[i], checked.hidden_labels)  # a rare numeric label stays hidden
            col = mask_label(frame.columns[j] if isinstance(frame, pd.DataFrame) else frame.name, checked.hidden_labels)
            item: dict[str, Any] = {"cell": [str(row), str(col)], "position": [i, j],
                                    "hidden": bool(checked.hidden[i, j]),
                                    "reasons": [r.as_dict() for r in rs]}
            interval = checked.intervals.get((i, j))
            if interval is not None:
                # JSON has no infinity: an unbounded side is null
                item["interval"] = [float(b) if math.isfinite(b) else None for b in interval]
            reasons.append(item)
        return {
            "schema": METADATA_SCHEMA,
            "id": out_id,
            "status": checked.status,
            "kind": checked.kind,
            "hidden": checked.hidden_count,
            "primary": checked.primary_count,
            "secondary": checked.secondary_count,
            "cells": int(checked.hidden.size),
            "rules_hit": checked.reason_summary(),
            "reasons": reasons,
            "reasons_truncated": truncated,
            "notes": list(dict.fromkeys(checked.notes)),
            "rules": checked.rules.as_dict() if checked.rules else None,
            "call": checked.call,
            "method": checked.method,
            "digest": digest(page, text) if payload is None else digest(page, text, canonical(payload)),
        }

    def _failure_metadata(self, out_id: str, reason: str, text: str, page: str) -> dict[str, Any]:
        return {"schema": METADATA_SCHEMA, "id": out_id, "status": "blocked", "kind": "error", "hidden": 0,
                "cells": 0, "reasons": [], "notes": [reason], "rules": self.rules.as_dict(),
                "digest": digest(page, text)}



def _implied(variant: Any, recorded: set[Any]) -> bool:
    """Whether the output's populations recorded already say all that ``variant`` says.

    The rows at an indicator's other value are the table's rows less its flagged ones, and the
    side-by-side population's groups are its variants' groups: with those recorded (the table's
    rows always are), every equation of ``variant`` is a sum or difference of theirs over the
    same groups of rows, shown by the same cells. Its joint audit would solve the same LPs again
    (the seed lesson's rates beside its four-way table: 417 small groups of rows, twice)."""
    if isinstance(variant, tuple) and variant[:1] == ("other",):
        return variant[1] in recorded
    if isinstance(variant, tuple) and variant[:1] == ("combined",):
        return all(v in recorded for v in variant[1])
    return False
