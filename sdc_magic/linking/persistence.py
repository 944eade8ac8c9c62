"""The linking memory on disk, next to the ledger, so that it survives a kernel restart.

The atoms and populations are saved next to the ledger (``.sdc_magic/<ledger>.linking.npz``,
with the per-column hashes of the rows, and of their index labels, in a file per universe);
after a restart a frame whose rows hash to a saved universe, or whose index labels hash to
its rows' labels, is linked to the outputs of the earlier kernel as if nothing had happened.
Only numbers, output labels as JSON and hashes are written (no pickles, no values of the
data, no index labels). When and in which thread the memory is saved is ``Linker.save``'s
business; this module only writes and reads the files.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .edits import Published
from .engine_values import ValueState
from .in_engine import AtomKeys, EngineUniverse, Recorded
from .populations import Population
from .universes import Universe

#: Universes above this many rows are not saved (their row hashes alone would be large).
MAX_SAVED_ROWS = 2_000_000

#: What is saved: per universe, its atoms (row_atom, atom_size) and each population with its
#: group per atom, taken at one moment (arrays are replaced, never changed in place).
Snapshot = list[tuple[Any, Any, np.ndarray, list[tuple[Population, np.ndarray]]]]


def _hashes_path(path: Path, uid: str) -> Path:
    return path.with_name(f"{path.name}.{uid}.rows.npz")


def _published_path(path: Path, uid: str) -> Path:
    return path.with_name(f"{path.name}.{uid}.published.npz")


def save(path: Path, snapshot: Snapshot, unlinked: list[str] | None = None) -> None:
    """Atoms and populations in one file (rewritten after each output, small); the row hashes
    of each universe in a file of their own, written only when its rows change.

    ``unlinked``: outputs shown without linking (``Linker.unlinked``). The outputs of a universe
    too large to save join them: a later kernel cannot compare with them, and says so.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {"schema": 1, "universes": [], "unlinked": list(unlinked or [])}
    meta["engine_universes"] = []
    for ui, (u, row_atom, atom_size, populations) in enumerate(snapshot):
        if getattr(u, "in_engine", False):  # no row: the outputs' conditions, keys and labels, the atoms
            meta["engine_universes"].append(_save_engine(ui, u, row_atom, atom_size, populations, arrays))
            continue
        if u.n > MAX_SAVED_ROWS:
            meta["unlinked"].extend(p.out_id for p, _ in populations)
            continue
        names = {c: _column_name(c) for c in [*u.hashes, *u.key_columns]}
        cols = [c for c in u.hashes if names[c] is not None]
        if not u.hashes_saved:
            rows = _hashes_path(path, u.uid)
            tmp = rows.with_name(rows.name + ".tmp.npz")
            saved = {f"h{ci}": u.hashes[c] for ci, c in enumerate(cols)}
            label_hashes = u.saved_label_hashes()
            if label_hashes is not None:
                saved["labels"] = label_hashes
            np.savez(tmp, **saved)
            tmp.replace(rows)
            u.hashes_saved = True
        umeta: dict[str, Any] = {"uid": u.uid, "n": len(row_atom), "columns": [names[c] for c in cols],
                                 "key_columns": sorted((names[k] for k in u.key_columns if names[k] is not None),
                                                       key=str)}
        umeta["published"] = _save_published(path, u)
        umeta["computed_source"] = bool(getattr(u, "computed_source", False))  # (rows out of a query: linker)
        arrays[f"u{ui}_row_atom"] = row_atom

        arrays[f"u{ui}_atom_size"] = atom_size
        umeta["populations"] = _save_populations(f"u{ui}", populations, arrays)
        umeta["index"] = ui
        meta["universes"].append(umeta)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, meta=np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8), **arrays)
    tmp.replace(path)
    keep = {_hashes_path(path, u["uid"]).name for u in meta["universes"]}
    keep |= {_published_path(path, u["uid"]).name for u in meta["universes"]}
    for pattern in ("rows", "published"):
        for old in path.parent.glob(f"{path.name}.*.{pattern}.npz"):
            if old.name not in keep:
                old.unlink(missing_ok=True)


def _save_published(path: Path, u: Universe) -> list[str]:
    """The hashes of the values the latest cleared tables of sums showed per variable (:mod:`.edits`;
    hashes only, never the values), in a file of their own rewritten only when a table of sums
    was recorded since; returns the variables, in order."""
    published = dict(u.published)
    if published and not getattr(u, "published_saved", False):
        target = _published_path(path, u.uid)
        tmp = target.with_name(target.name + ".tmp.npz")
        np.savez(tmp, **{f"l{j}": pub.hashes for j, pub in enumerate(published.values())})
        tmp.replace(target)
        u.published_saved = True
    return list(published)


def _load_published(path: Path, uid: str, n: int, variables: list[str]) -> dict[str, Published]:
    """What :func:`_save_published` wrote (nothing when the file is missing: an older ledger)."""
    out: dict[str, Published] = {}
    target = _published_path(path, uid)
    if not variables or not target.is_file():
        return out
    with np.load(target, allow_pickle=False) as data:
        for j, var in enumerate(variables):
            # (rows appended since it was written: nothing published of them)
            out[str(var)] = Published(np.asarray(data[f"l{j}"], dtype=np.uint64)[:n]).grown(n)
    return out


def _save_populations(prefix: str, populations: list[tuple[Population, np.ndarray]],
                      arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Each population's arrays into ``arrays`` (``<prefix>_p<i>_…``), its labels and the rest as JSON."""
    out = []
    for pi, (p, group) in enumerate(populations):
        arrays[f"{prefix}_p{pi}_group"] = group
        arrays[f"{prefix}_p{pi}_size"] = p.size
        arrays[f"{prefix}_p{pi}_published"] = p.published
        arrays[f"{prefix}_p{pi}_hidden"] = p.hidden_shown
        out.append({
            "out_id": p.out_id, "title": p.title, "keys": list(p.keys), "threshold": p.threshold,
            "margins_public": p.margins_public, "totals_of": [list(t) for t in p.totals_of], "labels": [[_json_label(v) for v in lab] for lab in p.labels],
            "counted": None if p.counted is None else str(p.counted),
            "tells": None if p.tells is None else sorted([list(m) for m in p.tells]),
            "hidden_model": [[list(k), sorted(int(x) for x in v)] for k, v in p.hidden_model.items()],
            "margins_hidden": [[list(k), sorted(int(x) for x in v)] for k, v in p.margins_hidden.items()]})
    return out


def _load_populations(prefix: str, metas: list[dict[str, Any]], data: Any, u: Any) -> None:
    for pi, pm in enumerate(metas):
        u.populations.append(Population(
            out_id=pm["out_id"], title=pm["title"], universe=u, keys=tuple(pm["keys"]),
            group=np.asarray(data[f"{prefix}_p{pi}_group"], dtype=np.int32),
            labels=[tuple(lab) for lab in pm["labels"]],
            size=np.asarray(data[f"{prefix}_p{pi}_size"], dtype=np.int64),
            published=np.asarray(data[f"{prefix}_p{pi}_published"], dtype=bool),
            hidden_shown=np.asarray(data[f"{prefix}_p{pi}_hidden"], dtype=bool),
            threshold=int(pm["threshold"]), margins_public=bool(pm["margins_public"]),
            hidden_model={tuple(k): set(v) for k, v in pm["hidden_model"]},
            margins_hidden={tuple(k): set(v) for k, v in pm.get("margins_hidden", [])},
            totals_of=tuple(tuple(t) for t in pm.get("totals_of", [])),
            counted=pm.get("counted"),
            tells=None if pm.get("tells") is None else frozenset(tuple(m) for m in pm["tells"])))


def _save_engine(ui: int, u: EngineUniverse, atoms: AtomKeys, atom_size: np.ndarray,
                 populations: list[tuple[Population, np.ndarray]], arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """An engine universe: its base, each recorded output's condition, keys and the labels its
    groups were counted under (the published labels: no value of the data that is not shown)."""
    prefix = f"e{ui}"
    arrays[f"{prefix}_groups"] = atoms.groups
    arrays[f"{prefix}_atom_size"] = atom_size
    recorded = []
    for ri, r in enumerate(atoms.recorded):
        arrays[f"{prefix}_r{ri}_group_of"] = r.group_of
        labels = [list(t) if isinstance(t, tuple) else [t] for t in r.index]
        recorded.append({"keys": list(r.keys), "condition": r.condition, "levels": r.index.nlevels,
                         "labels": [[_typed_label(v) for v in lab] for lab in labels]})
    values = []
    for vi, (var, state) in enumerate(dict(u.values).items()):
        if len(state.anchor) != len(atom_size):
            continue  # (recorded after the snapshot was taken: saved with the next one)
        arrays[f"{prefix}_v{vi}_published"], arrays[f"{prefix}_v{vi}_anchor"] = state.published, state.anchor
        values.append({"index": vi, "variable": str(var), "expression": state.expression})
    return {"index": ui, "uid": u.uid, "engine": u.identity[0], "identity": u.identity[1], "n": int(u.n),
            "columns": sorted(map(str, u.hashes)), "key_columns": sorted(map(str, u.key_columns)),
            "recorded": recorded, "populations": _save_populations(prefix, populations, arrays), "values": values}


def _load_engine(em: dict[str, Any], data: Any) -> EngineUniverse:
    prefix = f"e{em['index']}"
    recorded = []
    for ri, rm in enumerate(em["recorded"]):
        tuples = [tuple(_untyped_label(v) for v in lab) for lab in rm["labels"]]
        index = pd.MultiIndex.from_tuples(tuples) if rm["levels"] > 1 else pd.Index([t[0] for t in tuples])
        recorded.append(Recorded(tuple(rm["keys"]), rm["condition"], index,
                                 np.asarray(data[f"{prefix}_r{ri}_group_of"], dtype=np.int64)))
    atoms = AtomKeys(np.asarray(data[f"{prefix}_groups"], dtype=np.int64).reshape(-1, len(recorded)),
                     tuple(recorded))
    u = EngineUniverse.restore((em["engine"], em["identity"]), str(em["uid"]), int(em["n"]), em["columns"],
                               set(em["key_columns"]), atoms, np.asarray(data[f"{prefix}_atom_size"], dtype=np.int64))
    _load_populations(prefix, em["populations"], data, u)
    for vm in em.get("values", []):  # (what the tables of sums published: linking.engine_values)
        anchor = np.asarray(data[f"{prefix}_v{vm['index']}_anchor"], dtype=np.int64)
        if len(anchor) == len(u.atom_size):
            u.values[str(vm["variable"])] = ValueState(str(vm["expression"]),
                                                       np.asarray(data[f"{prefix}_v{vm['index']}_published"],
                                                                  dtype=np.uint64), anchor)
    return u


def _typed_label(v: Any) -> Any:
    """A label the engine returned, as JSON that gives it back with its type (dates and times
    as themselves: as text they matched nothing after a restart, and the next table was
    ``review``: red team)."""
    if isinstance(v, pd.Timestamp):
        return {"timestamp": v.isoformat()}
    if isinstance(v, datetime.datetime):
        return {"timestamp": pd.Timestamp(v).isoformat()}
    if isinstance(v, datetime.date):
        return {"date": v.isoformat()}
    if isinstance(v, np.datetime64):
        return {"timestamp": pd.Timestamp(v).isoformat()}
    return _json_label(v)


def _untyped_label(v: Any) -> Any:
    if isinstance(v, dict) and "timestamp" in v:
        return pd.Timestamp(v["timestamp"])
    if isinstance(v, dict) and "date" in v:
        return datetime.date.fromisoformat(v["date"])
    return v


def _json_label(v: Any) -> Any:
    if isinstance(v, bool | int | float | str) or v is None:
        return v
    if isinstance(v, np.generic):
        return v.item()
    return str(v)


def _column_name(c: Any) -> Any:
    """A column's name as JSON that reads back equal to it (None: a name that cannot be saved).

    Why not ``str``: a frame read with ``header=None`` has integer column names; saved as text,
    a restarted kernel's frame (columns 0, 1, …) matched none of them, so its tables were
    never linked to the earlier kernel's (red team: the values edited between a table of sums
    before the restart and one after it, both ``pass``)."""
    if isinstance(c, np.generic):
        c = c.item()
    if isinstance(c, bool | int | str) or (isinstance(c, float) and np.isfinite(c)):
        return c
    if isinstance(c, tuple):
        parts = [_column_name(x) for x in c]
        return None if any(x is None for x in parts) else {"tuple": parts}
    if isinstance(c, datetime.datetime | datetime.date) and not pd.isna(c):  # (pandas' Timestamp too)
        return _typed_label(c)  # (a wide frame of dates as columns, red team stop 49)
    return None


def _column_of(v: Any) -> Any:
    """The column name :func:`_column_name` saved."""
    if isinstance(v, dict) and "tuple" in v:
        return tuple(_column_of(x) for x in v["tuple"])
    return _untyped_label(v)


def load_unlinked(path: Path) -> list[str]:
    """The outputs an earlier kernel showed without linking (or could not keep), by label."""
    if not path.is_file():
        return []
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(bytes(data["meta"]).decode("utf-8"))
    return [str(o) for o in meta.get("unlinked", [])]


def load(path: Path) -> list[Universe]:
    """The universes saved at ``path`` with their populations (none if there is no file)."""
    if not path.is_file():
        return []
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(bytes(data["meta"]).decode("utf-8"))
        out = []
        for um in meta["universes"]:
            ui = um["index"]
            n = int(um["n"])
            uid = str(um["uid"])
            with np.load(_hashes_path(path, uid), allow_pickle=False) as rows:
                hashes = {_column_of(c): np.asarray(rows[f"h{ci}"], dtype=np.uint64)[:n]
                          for ci, c in enumerate(um["columns"])}
                label_hashes = np.asarray(rows["labels"], dtype=np.uint64) if "labels" in rows.files else None
            u = Universe.restore(uid=uid, n=n, hashes=hashes, key_columns={_column_of(k) for k in um["key_columns"]},
                                 row_atom=np.asarray(data[f"u{ui}_row_atom"], dtype=np.int32),
                                 atom_size=np.asarray(data[f"u{ui}_atom_size"], dtype=np.int64),
                                 label_hashes=label_hashes)
            _load_populations(f"u{ui}", um["populations"], data, u)
            u.computed_source = bool(um.get("computed_source", False))
            u.published = _load_published(path, uid, n, um.get("published", []))
            u.published_saved = True
            out.append(u)
        out.extend(_load_engine(em, data) for em in meta.get("engine_universes", []))
    return out
