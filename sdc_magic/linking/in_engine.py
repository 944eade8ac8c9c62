"""Universes whose rows stay in their engine: atoms counted where the data live.

A row universe (:mod:`.universes`) holds a fingerprint per row and the atom of each row.
For a large engine source that meant fetching every row's keys and hashes into Python
(1M rows: most of a DuckDB display's time) and, above ``MAX_LINKED_ROWS``, no linking.
An :class:`EngineUniverse` holds no row at all: the tables of one base (the same
``InEngineRows.identity``) are over the same rows, and each recorded output is its
condition and key expressions with the labels of its groups (:class:`Recorded`). A new
table cuts the atoms by one aggregation in the engine: ``GROUP BY`` every recorded and new
key expression and condition, ``count(*)`` (:func:`split`). Each returned row is placed in
each recorded output's group by its labels, so its atom (the tuple of those groups) is
known exactly; rows of one atom and one new group are merged. O(atoms × key values) rows come
back, none of the data's, and no fingerprint is bet on.

Populations over these atoms are the same :class:`.populations.Population` as over row
universes: differencing and the joint audit read atoms and groups only, so they are
unchanged. What an engine universe cannot do: count distinct units (so it is used only for
tables without a unit), or match rows of another engine, of pandas or of another base
(tables of the same people there are other universes: ``Linker.across_engine_note``). It is
saved for a restart without a row (:mod:`.persistence`); the first count of a new kernel checks
that the rows still add up to its atoms.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..evidence.in_engine import InEngineRows
from . import engine_values
from .engine_units import UnitsMemory
from .engine_values import ValueState
from .identity import combine


@dataclass(frozen=True)
class Recorded:
    """One recorded output of an engine universe: which rows are in it and the group of each."""

    keys: tuple[str, ...]  # key expressions
    condition: str  # the condition selecting its rows
    index: pd.Index  # the labels its groups were counted under (as the engine returns them)
    group_of: np.ndarray  # per label in ``index``, the output's group (-1: a group it does not show)


@dataclass(frozen=True)
class AtomKeys:
    """The atoms of an engine universe: per atom, its group in each recorded output (-1: outside)."""

    groups: np.ndarray  # (atoms, outputs) int64
    recorded: tuple[Recorded, ...]

    def index(self) -> pd.Index:
        """Each atom's key: the combination of its groups (an empty universe: one atom)."""
        return _tuples(self.groups)


class EngineUniverse:
    """The rows of one engine base, never fetched: atoms as combinations of outputs' groups."""

    in_engine = True

    def __init__(self, rows: InEngineRows) -> None:
        self.identity = (rows.engine, rows.identity)
        self.n = 0  # rows, known after the first count
        self.labels = None  # (rows have no labels of ours: row universes' label matching skips it)
        self.labels_hashed = False
        #: the base's column names, for the notes that name the columns outputs share (no hashes)
        self.hashes: dict[Any, np.ndarray] = {c: np.zeros(0, dtype=np.uint64) for c in sorted(rows.columns)}
        self.key_columns: set[Any] = set(rows.keys)
        self.row_atom = AtomKeys(np.zeros((1, 0), dtype=np.int64), ())
        self.atom_size = np.zeros(1, dtype=np.int64)
        self.populations: list[Any] = []
        self.version = 0
        self.frames: dict[int, Any] = {}
        self.uid = secrets.token_hex(6)
        self.hashes_saved = True
        self.stale = False  # the base's rows changed under recorded outputs (see split)
        #: per variable, what the latest table of its sums published of it (:mod:`.engine_values`)
        self.values: dict[str, ValueState] = {}
        #: what counts of units found over this base (:class:`.engine_units.UnitsMemory`: a count
        #: that found too many sets, the most rows of one unit)
        self.units_memory = UnitsMemory()

    @classmethod
    def restore(cls, identity: tuple[str, str], uid: str, n: int, columns: list[str], key_columns: set[Any],
                atoms: AtomKeys, atom_size: np.ndarray) -> EngineUniverse:
        """An engine universe saved by an earlier kernel (its populations are appended by the
        caller). Its first count checks that the base's rows still add up to its atoms."""
        u = cls.__new__(cls)
        u.identity, u.uid, u.n = identity, uid, n
        u.labels, u.labels_hashed = None, False
        u.hashes = {c: np.zeros(0, dtype=np.uint64) for c in columns}
        u.key_columns = set(key_columns)
        u.row_atom, u.atom_size = atoms, atom_size
        u.populations, u.version, u.frames = [], 0, {}
        u.hashes_saved, u.stale = True, False
        u.values, u.units_memory = {}, UnitsMemory()
        return u

    @property
    def n_atoms(self) -> int:
        return len(self.atom_size)

    def nbytes(self) -> int:
        return self.row_atom.groups.nbytes + self.atom_size.nbytes + sum(p.nbytes() for p in self.populations)

    def locate(self, frame: Any, keys: list[str]) -> None:
        """Frames of rows are never found here (their universe is a row universe)."""
        return None


@dataclass
class Split:
    """A new table's cut of an engine universe's atoms (one engine aggregation)."""

    labels: pd.DataFrame  # per new atom, the table's keys as the engine returns them
    inside: np.ndarray  # per new atom: in the table
    parent: np.ndarray  # per new atom, its atom before this table
    atom_size: np.ndarray  # rows per new atom
    earlier: AtomKeys  # the atoms before this table
    rows: InEngineRows
    #: per variable the table sums: (its expression, per new atom the checksum of its values)
    values: dict[str, tuple[str, np.ndarray]] = field(default_factory=dict)
    #: the variables whose values changed since the latest table of their sums (:mod:`.engine_values`)
    edited: tuple[str, ...] = ()
    #: the expressions the engine grouped by, in order (``g0``, ``g1``, …), and per row of its count
    #: (one combination of their values, in the engine's order), its new atom and its rows: what
    #: distinct units are counted over (:mod:`.engine_units`)
    expressions: tuple[str, ...] = ()
    frame_atom: np.ndarray | None = None
    frame_rows: np.ndarray | None = None
    #: the universe's ``units_memory`` (shared: what a count of units found, kept for later tables)
    units_memory: UnitsMemory | None = None

    def atoms(self, index: pd.Index, group_of: np.ndarray, group: np.ndarray) -> AtomKeys:
        """The new atoms once the table's groups are known: ``index`` the labels its groups were
        counted under, ``group_of`` each label's group, ``group`` each new atom's group."""
        done = Recorded(tuple(self.rows.key_expressions), self.rows.condition, index, np.asarray(group_of, np.int64))
        groups = np.column_stack([self.earlier.groups[self.parent], np.asarray(group, dtype=np.int64)])
        return AtomKeys(groups, (*self.earlier.recorded, done))


def place(universes: list[Any], rows: InEngineRows) -> EngineUniverse:
    """The engine universe of ``rows`` among ``universes`` (a new one appended if none)."""
    identity = (rows.engine, rows.identity)
    for u in universes:
        if getattr(u, "in_engine", False) and u.identity == identity and not u.stale:
            u.key_columns.update(rows.keys)
            return u
    u = EngineUniverse(rows)
    universes.append(u)
    return u


def split(u: EngineUniverse, rows: InEngineRows) -> Split | None:
    """Count the base rows of every (atom, group of the new table) in the engine.

    None when the counts do not add up to the universe's atoms, or a recorded output's rows
    show labels it never counted (the base's rows changed since): the universe is marked stale
    (a new one is started for later tables, and the caller names the earlier outputs).
    """
    earlier = u.row_atom
    expressions: list[str] = []

    def column(expression: str) -> str:
        if expression not in expressions:
            expressions.append(expression)
        return f"g{expressions.index(expression)}"

    wanted = [([column(k) for k in r.keys], column(r.condition)) for r in earlier.recorded]
    mine = ([column(k) for k in rows.key_expressions], column(rows.condition))
    names = list(rows.values) if rows.count_values is not None else []
    checked = [f"c{j}" for j in range(len(names))]
    # a variable no table summed before, beside others that were: its zeros' checksums too (the same
    # scan), so that rows all zero in two variables are not taken for one copied (engine_values)
    new_vars = [v for v in names if v not in u.values] if u.values else []
    value_expressions = [rows.values[v] for v in names] + [(rows.zero_of or _zero_of)(rows.values[v]) for v in new_vars]
    zeros_of = {v: len(names) + i for i, v in enumerate(new_vars)}  # (the column c<i> of each one's zeros)
    in_engine_order = True
    joint: _Joint | None = None
    if not earlier.recorded and rows.groups is not None and rows.total is not None \
            and len(set(mine[0]) | {mine[1]}) == len(expressions) and set(checked) <= set(rows.groups.columns):
        # the first table of a base: its own groups (and its values' checksums), one more count
        # (in an order of its own: no distinct units are counted over it, nothing is before it)
        frame, in_engine_order = _from_groups(rows, mine, expressions, checked), False
        if not set(checked) <= set(frame.columns):  # (the engine's count decided: counted again with them)
            frame = rows.count_values(list(expressions), value_expressions)
    elif len(rows.family) > 1 and not any(m.units for m in rows.family):
        # (one of a table's populations: all of them counted in one scan per display, see _joint_count)
        joint, in_engine_order = _joint_count(u, rows, expressions, value_expressions if names else []), False
        frame, rep = joint.marginal(expressions, len(value_expressions) if names else 0)
    elif names:  # (a table of sums: its values' checksums per atom, in the same scan)
        frame = rows.count_values(list(expressions), value_expressions)
    else:
        frame = rows.count(list(expressions))
    n = pd.to_numeric(frame["n"]).to_numpy(dtype=np.int64)
    if joint is not None:  # (each recorded output's group of the count's rows, once per display: _Joint.atoms)
        in_atoms = joint.atoms(earlier)
        if in_atoms is None:
            u.stale = True  # rows under labels an output never counted
            return None
        parent = in_atoms[rep]
    else:
        found = _groups_in_recorded(frame, [cond for _, cond in wanted], LabelLookup(frame),
                                    [keys for keys, _ in wanted], earlier)
        if found is None:
            u.stale = True  # rows under labels an output never counted
            return None
        parent = _rows_in(earlier.groups, found) if earlier.recorded else np.zeros(len(frame), dtype=np.int64)
    if earlier.recorded:
        sizes = np.bincount(np.maximum(parent, 0), weights=n, minlength=u.n_atoms).astype(np.int64)
        if (parent < 0).any() or not np.array_equal(sizes, u.atom_size):
            u.stale = True
            return None
    else:
        u.n = int(n.sum())
        u.atom_size = np.array([u.n], dtype=np.int64)
    # one new atom per (atom, the table's labels) for rows in the table, per atom for the rest
    # (rows the GROUP BY told apart by expressions that do not matter to them are merged back)
    keys, cond = mine
    inside = frame[cond].to_numpy(dtype=bool)
    labels = frame[keys].reset_index(drop=True)
    labels.columns = pd.Index(rows.keys)
    merge = labels.where(pd.Series(inside).to_numpy()[:, None].repeat(len(keys), axis=1)) if keys else labels
    merge = merge.assign(__parent=parent, __inside=inside)
    which = merge.groupby(list(merge.columns), dropna=False, sort=False).ngroup().to_numpy()
    first = np.flatnonzero(np.diff(np.maximum.accumulate(which), prepend=-1) > 0)
    size = np.bincount(which, weights=n, minlength=len(first)).astype(np.int64)
    values, edited = {}, []
    # (an indicator whose flagged rows the table publishes as populations is compared by them, not
    # tested as a copy: on atoms earlier indicators' rows cut, two 0/1 flags that are 1 on every
    # row agree, and a count by sex's flag was called an edited copy of an earlier rate, review)
    linked_as_rows = {k for k in rows.variants if isinstance(k, str)} | ({rows.flag} if rows.flag else set())
    for j, var in enumerate(names):
        state = u.values.get(var)
        if state is not None and engine_values.changed(state, frame, j, parent, inside):
            edited.append(var)
        elif var in zeros_of and f"c{zeros_of[var]}" in frame.columns and var not in linked_as_rows \
                and engine_values.breaks_a_copy(u.values, frame, j, zeros_of[var], parent, inside, n):
            edited.append(var)  # (a copy of another variable, edited on some rows)
        values[var] = (rows.values[var], engine_values.summed_checksums(frame, j, which, len(first)))
    return Split(labels.iloc[first].reset_index(drop=True), inside[first], parent[first], size, earlier, rows,
                 values, tuple(edited), tuple(expressions), which if in_engine_order else None, n, u.units_memory)


#: This display's counts of tables' populations (:func:`_joint_count`), per universe; forgotten
#: when a display starts or ends (:func:`new_display`).
_joint: dict[str, list[_Joint]] = {}


def new_display() -> None:
    """A display starts or ends: the engine is asked again (the base may change between displays)."""
    _joint.clear()


@dataclass
class _Joint:
    """One count of a table's populations (:func:`_joint_count`), and what splits derive from it.

    ``frame`` counts the base rows per combination of ``every`` (columns g<i>) with the checksums of
    ``values`` (c<j>). A split over some of those expressions gets the sums of its rows
    (:func:`_marginal`), and where each of them falls in a recorded output is looked up once per
    display over ``frame`` (:meth:`found`): each split looked up every recorded output's labels in
    its own frame, 0.5 s of a display after 11 tables of two rates (45 outputs, 14 splits)."""

    frame: pd.DataFrame
    every: list[str]
    values: tuple[str, ...]
    memo: dict[int, tuple[Recorded, np.ndarray]] = field(default_factory=dict)
    atoms_memo: dict[int, tuple[AtomKeys, np.ndarray | None]] = field(default_factory=dict)
    #: the count's rows grouped by their labels, kept for the display: a display splits its table's
    #: populations 14 times over mostly the same expressions, and factorizing the count's columns
    #: again for each was a third of the splits' time after 30 tables of two rates
    labels: LabelLookup = field(init=False)

    def __post_init__(self) -> None:
        self.labels = LabelLookup(self.frame)

    def marginal(self, expressions: list[str], n_values: int) -> tuple[pd.DataFrame, np.ndarray]:
        """:func:`_marginal` of this count, its rows' groups kept for the display."""
        columns = [f"g{self.every.index(e)}" for e in expressions]
        whole = columns == [f"g{i}" for i in range(len(self.every))]  # (no grouping: the count itself)
        return _marginal(self.frame, self.every, expressions, n_values, None if whole else self.labels.groups(columns))

    def atoms(self, earlier: AtomKeys) -> np.ndarray | None:
        """Per row of ``frame``, its atom of ``earlier`` (-1: none; no recorded output: 0), None when
        a row inside a recorded output shows labels it never counted; kept for the display.

        Why: a split's rows are sums of this count's rows over expressions that include every
        recorded output's keys and condition, so each takes its representative's groups and atom.
        Each of a display's 14 splits computed them over its own rows: 0.12 CPU s of a display after
        30 tables of two rates (100 recorded populations), now once per display (stop 65)."""
        hit = self.atoms_memo.get(id(earlier))
        if hit is None or hit[0] is not earlier:
            if not earlier.recorded:
                hit = (earlier, np.zeros(len(self.frame), dtype=np.int64))
            else:
                conditions = [f"g{self.every.index(r.condition)}" for r in earlier.recorded]
                old = _groups_in_recorded(self.frame, conditions, self.labels, [], earlier, self.found)
                hit = (earlier, None if old is None else _rows_in(earlier.groups, old))
            self.atoms_memo[id(earlier)] = hit
        return hit[1]

    def found(self, r: Recorded) -> np.ndarray:
        """Per row of ``frame``, its label's position in ``r.index`` (-1: none); a split's rows take
        their representatives' (:func:`_marginal`)."""
        hit = self.memo.get(id(r))
        if hit is None or hit[0] is not r:
            hit = (r, self.labels.positions([f"g{self.every.index(k)}" for k in r.keys], r.index))
            self.memo[id(r)] = hit
        return hit[1]


def _groups_in_recorded(frame: pd.DataFrame, conditions: list[str], lookup: LabelLookup, keys: list[list[str]],
                        earlier: AtomKeys, found_of: Any = None) -> np.ndarray | None:
    """Per row of a count, its group in each recorded output of ``earlier`` (-1: outside it); None
    when a row inside an output shows labels it never counted (the base's rows changed).
    ``conditions``/``keys``: each output's columns in ``frame``; ``found_of``: its labels' positions
    already looked up (a recorded output -> per row), else looked up by ``lookup``."""
    old = np.zeros((len(frame), len(earlier.recorded)), dtype=np.int64)
    for j, (cond, r) in enumerate(zip(conditions, earlier.recorded, strict=True)):
        inside = frame[cond].to_numpy(dtype=bool)
        found = found_of(r) if found_of is not None else lookup.positions(keys[j], r.index)
        if (inside & (found < 0)).any():
            return None
        # (an output of no rows, a flag's sums where it is never at its level, has no group: every
        # row outside it. Such outputs are no longer recorded (``Linker.commit``), but a linking
        # memory saved before stop 60 may hold one: indexing its empty groups raised, and every
        # later table was not linked)
        old[:, j] = np.where(inside, r.group_of[np.maximum(found, 0)], -1) if len(r.group_of) else -1
    return old


class LabelLookup:
    """Where the rows of a count fall in recorded outputs' groups, by their distinct labels.

    Why: the count of a session's atoms has thousands of rows and the outputs' keys take a few
    dozen distinct labels; each recorded output's groups were looked up for every row (a
    MultiIndex of the whole count per output: 0.4 of a 1 s display after 30 tables of two rates,
    95 outputs). The rows of each set of key columns are grouped once (their distinct labels,
    checked 64-bit mixes of the columns' codes), each output looks up the distinct labels only.
    """

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self._codes: dict[str, np.ndarray] = {}
        self._groups: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}
        self._distinct: dict[tuple[tuple[str, ...], bool], pd.Index] = {}

    def groups(self, columns: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """:func:`_row_groups` of the count's rows by ``columns`` (no column: one group), each
        column factorized once."""
        key = tuple(columns)
        if key not in self._groups:
            for c in columns:
                if c not in self._codes:
                    self._codes[c] = pd.factorize(self.frame[c], use_na_sentinel=False)[0]
            codes = np.column_stack([self._codes[c] for c in columns]) if columns \
                else np.zeros((len(self.frame), 1), dtype=np.int64)
            self._groups[key] = _row_groups(codes)
        return self._groups[key]

    def positions(self, columns: list[str], index: pd.Index) -> np.ndarray:
        """Per row of the count, its labels' position in ``index`` (-1: none)."""
        if not columns:
            return np.zeros(len(self.frame), dtype=np.int64)
        key = tuple(columns)
        first, which = self.groups(columns)
        like = (key, isinstance(index, pd.MultiIndex))  # (what _labels reads of the index)
        if like not in self._distinct:
            self._distinct[like] = _labels(self.frame.iloc[first], columns, index)
        at = np.asarray(_missing_as_nan(index).get_indexer(self._distinct[like]), dtype=np.int64)
        return at[which]


def _joint_count(u: EngineUniverse, rows: InEngineRows, expressions: list[str], values: list[str]) -> _Joint:
    """The count a split of ``rows`` over ``expressions`` (with ``values``' checksums) derives its
    frame from: one count per display of every population of ``rows``' table
    (``InEngineRows.family``) with the universe's outputs.

    Why: a table of two rates publishes five populations (its rows, each indicator's rows at its
    level and at its other value), each split from the atoms two or three times as the display
    drafts, audits and records them: 14 scans of the base, 0.8 of a 1.2 s display at 1M rows in
    DuckDB. The first asks the engine for every expression its siblings need as well, with the
    table's values' checksums; the others are sums of that count's rows over their own expressions
    (the rows of each combination of fewer expressions are the sums over the rest; checksums mod
    2**64, as the engine sums them). A request for other values' checksums is counted apart. The
    rows come back in another order than the engine's (``in_engine_order`` False: no units are
    counted over such a split, the family has none).
    """
    wanted = set(expressions)
    for joint in _joint.get(u.uid, []):
        if wanted <= set(joint.every) and (not values or list(joint.values) == list(values)):
            return joint
    every = list(expressions)
    for member in rows.family:
        for e in (*member.key_expressions, member.condition):
            if e not in every:
                every.append(e)
    counter = rows
    if not values:  # (a sibling's: with the table's values, counted by the table over the same base)
        values, counter = _table_values(u, rows.family[0]), rows.family[0]
    if not (values and counter.count_values is not None):
        values = []
    frame = counter.count_values(every, values) if values else rows.count(every)
    joint = _Joint(frame, every, tuple(values))
    _joint.setdefault(u.uid, []).append(joint)
    return joint


def _table_values(u: EngineUniverse, table: InEngineRows) -> list[str]:
    """The value expressions :func:`split` asks with ``table``'s own count (its variables, then the
    zeros of those no table summed before), so that a sibling's first count carries them."""
    if table.count_values is None or not table.values:
        return []
    names = list(table.values)
    new_vars = [v for v in names if v not in u.values] if u.values else []
    return [table.values[v] for v in names] + [(table.zero_of or _zero_of)(table.values[v]) for v in new_vars]


def _marginal(frame: pd.DataFrame, have: list[str], expressions: list[str], n_values: int,
              groups: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """The count over ``expressions`` (columns g0, g1, … in their order, ``n``, c0 … c{n_values-1})
    from ``frame``, a count over ``have`` ⊇ them (its columns g<i> in ``have``'s order; the
    checksums of no value when ``n_values`` is 0), and per row of it a row of ``frame`` it sums
    (every such row has its labels). ``groups``: :func:`_row_groups` of ``frame`` over those
    columns, when known."""
    columns = [f"g{have.index(e)}" for e in expressions]
    if columns == [f"g{i}" for i in range(len(have))]:
        out = frame[[*columns, "n", *[f"c{j}" for j in range(n_values)]]]
        return out.reset_index(drop=True), np.arange(len(frame), dtype=np.int64)
    first, which = LabelLookup(frame).groups(columns) if groups is None else groups
    out = frame.iloc[first][columns].reset_index(drop=True)
    out.columns = pd.Index([f"g{i}" for i in range(len(columns))])
    out["n"] = np.bincount(which, weights=pd.to_numeric(frame["n"]).to_numpy(dtype=np.float64),
                           minlength=len(first)).astype(np.int64)
    for j in range(n_values):
        summed = np.zeros(len(first), dtype=np.uint64)
        np.add.at(summed, which, frame[f"c{j}"].to_numpy().astype(np.uint64))  # (wraps around, as the engine's sums)
        out[f"c{j}"] = summed
    return out, first.astype(np.int64)


def _zero_of(expression: str) -> str:
    """The engine text of zero in the type of ``expression`` (``x * 0``; missing where x is): SQL
    for DuckDB and Spark; for polars, the same steps and the expression times 0."""
    if expression.startswith("polars:"):
        from ..capture.polars.lineage import read, written

        steps, expr = read(expression)
        return written(steps, expr * 0)
    return f"(({expression}) * 0)"


def _from_groups(rows: InEngineRows, mine: tuple[list[str], str], expressions: list[str],
                 checked: list[str] | None = None) -> pd.DataFrame:
    """The count of a fresh universe from the table's own groups (computed with the table) and
    the base's row count: its groups in the table, the rest outside. Saves a scan of the base for
    the first table of each (at 10M rows, 0.13–0.2 s). The groups' sizes must add up to no more
    than the base's rows; if not, or when the table has no group (an indicator never at its
    level), the engine's count of ``expressions`` decides (``mine``: their columns g<i>; until stop
    63 the engine was asked for the columns' names, which failed, and the base's record was let
    go in the middle of a display: red team, a constant indicator beside disjoint ones, ``pass``)."""
    assert rows.groups is not None and rows.total is not None
    keys, cond = mine
    inside = rows.groups.rename(columns=dict(zip(rows.keys, keys, strict=True)))
    inside[cond] = True
    outside_n = rows.total() - int(inside["n"].sum())
    if outside_n < 0:
        return rows.count(list(expressions))
    checked = list(checked or [])
    frame = inside[[*keys, cond, "n", *checked]]
    if outside_n and len(inside):
        # (rows outside the table: no checksum of theirs is kept, see engine_values.published)
        out = pd.DataFrame({k: inside[k].iloc[:1].to_numpy() for k in keys} | {cond: [False], "n": [outside_n]}
                           | {c: np.zeros(1, dtype=np.uint64) for c in checked})
        frame = pd.concat([frame, out], ignore_index=True)
    elif outside_n:
        return rows.count(list(expressions))
    # a fixed order (as the engine's count is sorted): by each column's text, column after column
    # (one factorization per column: joining every row's reprs cost 70 ms for 1,000 groups)
    codes = [pd.factorize(frame[c].astype(object).map(repr), sort=True)[0] for c in [*keys, cond]]
    order = np.lexsort(codes[::-1]) if codes else np.arange(len(frame))
    return frame.iloc[order].reset_index(drop=True)


def _labels(frame: pd.DataFrame, columns: list[str], like: pd.Index) -> pd.Index:
    """The labels in ``columns`` of ``frame`` as an index comparable with ``like``."""
    if len(columns) == 1 and not isinstance(like, pd.MultiIndex):
        return _missing_as_nan(pd.Index(frame[columns[0]]))
    return pd.MultiIndex.from_arrays([frame[c] for c in columns])


def _missing_as_nan(index: pd.Index) -> pd.Index:
    """A one-level index whose missing labels are all NaN (an engine's count returns a boolean
    key's null as None, the table's groups recorded it as NaN, and the two did not match: the
    base was let go and every later table was ``review``, red team)."""
    if isinstance(index, pd.MultiIndex) or index.dtype != object or not index.hasnans:
        return index
    return pd.Index(pd.Series(index, dtype=object).where(pd.notna(index), np.nan), name=index.name)


def _mixed(codes: np.ndarray) -> np.ndarray:
    """A 64-bit mix of each row of a matrix of ints (equal rows, equal mixes; the callers check
    that rows with equal mixes are equal)."""
    return combine([codes[:, j].astype(np.uint64) for j in range(codes.shape[1])])


def _row_groups(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the first row of each group, per row its group) for the equal rows of ``codes`` (ints),
    groups numbered in the order of their first row. By each row's mix, checked: rows of one mix
    that differ (a 64-bit collision) are told apart by sorting them instead."""
    which = pd.factorize(_mixed(codes))[0]
    which = np.asarray(which, dtype=np.int64)
    first = np.unique(which, return_index=True)[1].astype(np.int64)
    if bool((codes == codes[first[which]]).all()):
        return first, which
    _, first, which = np.unique(codes, axis=0, return_index=True, return_inverse=True)
    which = np.asarray(which).reshape(-1)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return first[order].astype(np.int64), rank[which]


def _rows_in(table: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows``, the position of the equal row of ``table`` (rows of group ids, those of
    ``table`` all different), -1 where none is: what ``_tuples(table).get_indexer(_tuples(rows))``
    gives, without a tuple per row (0.2 s of a display after 11 tables of two rates). By each
    row's mix, every match checked; a collision falls back to the tuples."""
    exact = np.asarray(_tuples(table).get_indexer(_tuples(rows)), dtype=np.int64) \
        if table.shape[1] == 0 else None
    if exact is not None:
        return exact
    mixes = pd.Index(_mixed(table))
    if mixes.is_unique:
        position = np.asarray(mixes.get_indexer(_mixed(rows)), dtype=np.int64)
        matched = position >= 0
        if bool((table[position[matched]] == rows[matched]).all()):
            return position
    return np.asarray(_tuples(table).get_indexer(_tuples(rows)), dtype=np.int64)


def _tuples(groups: np.ndarray) -> pd.Index:
    """One label per row of a matrix of group ids: the tuple of its groups."""
    if groups.shape[1] == 0:
        return pd.Index(np.zeros(len(groups), dtype=np.int64))
    return pd.MultiIndex.from_arrays([groups[:, j] for j in range(groups.shape[1])])


def one_atom_per_group(split: Split, ids: np.ndarray) -> tuple[Split, np.ndarray]:
    """The split with one atom per (earlier atom, group of this table), and each atom's group.

    The engine's count tells rows apart by the table's labels; labels that are no group of the
    table (a Spark display fetched only its first groups: the rest are not shown) all fall
    outside it, and their atoms are one (two atoms with the same groups everywhere made the
    universe's atom keys ambiguous: every later table was ``review``)."""
    group = np.asarray(ids, dtype=np.int64)
    codes, _ = pd.factorize(pd.MultiIndex.from_arrays([np.asarray(split.parent), group]), sort=False)
    if codes.max(initial=-1) + 1 == len(group):
        return split, group.astype(np.int32)
    first = np.unique(codes, return_index=True)[1]
    size = np.bincount(codes, weights=split.atom_size, minlength=len(first)).astype(np.int64)
    values = {}
    for var, (expression, checksums) in split.values.items():
        summed = np.zeros(len(first), dtype=np.uint64)
        np.add.at(summed, codes, np.asarray(checksums, dtype=np.uint64))  # (wraps around, as the engine's sums)
        values[var] = (expression, summed)
    frame_atom = None if split.frame_atom is None else codes[split.frame_atom]
    merged = Split(split.labels.iloc[first].reset_index(drop=True), np.asarray(split.inside)[first],
                   np.asarray(split.parent)[first], size, split.earlier, split.rows, values, split.edited,
                   split.expressions, frame_atom, split.frame_rows, split.units_memory)
    return merged, group[first].astype(np.int32)


def counts_agree(entry: Any, group_of_entry: np.ndarray, size: np.ndarray, flag_sums: bool = False) -> bool:
    """Whether the rows the engine counted for linking are those the table counts.

    The table's query and linking's count are two runs of its condition (DuckDB: the query's
    text; polars: its steps replayed on the frame). Every count cell (``count(*)``) must show its
    group's size (a condition that reads the query's own text selected other rows in each run,
    red team: ``person <> 72 OR current_query() LIKE '%AS g0%'``: 35 men shown, 36 linked); every
    cell with rows behind it must be a group the count found, and a statistic's known rows can
    be no more than its group's (a polars step that read other rows than the ones its filter
    kept, replayed on the whole frame, selected none: C's man at ``pass``, red team).
    ``flag_sums``: the table's cells are sums of a 0/1 flag over the rows where it is 1 (the
    count's rows): each sum must be its group's size, as a count.
    """
    ev = entry.evidence
    inner = ~np.asarray(ev.is_margin, dtype=bool)
    stat = np.asarray(ev.stat).astype(str)
    is_size = (stat == "size") | ((stat == "sum") if flag_sums else False)
    with np.errstate(invalid="ignore"):
        value = np.asarray(ev.value, dtype=float)
        units = np.asarray(ev.units, dtype=float)
        behind = np.where(is_size, value, units) > 0
    if (inner & behind & (group_of_entry < 0)).any():
        return False
    found = inner & (group_of_entry >= 0)
    if not found.any():  # (no cell has rows behind it: nothing more to compare)
        return True
    counted = size[np.maximum(group_of_entry, 0)].astype(float)
    sizes = found & is_size & ~np.isnan(value)
    if not np.all(value[sizes] == counted[sizes]):
        return False
    known = found & ~is_size & ~np.isnan(units)
    return bool(np.all(units[known] <= counted[known]))


def groups_agree(rows: InEngineRows, split: Split) -> bool:
    """Whether the engine's count gives the table's own groups (computed with the table, when the
    engine gave them) the rows they had.

    Why: linking's count runs the table's condition again over the base; when the base changed
    since the table's rows were taken (a polars frame filtered, then its buffers changed through
    pandas: red team, the two people over 100 top-coded to 99 and the filtered frame's incomes
    cleared beside the whole) it selects other rows, and for sums the units alone do not show it.
    Anything that cannot be compared counts as a disagreement (the table is then ``review``).
    """
    groups = rows.groups
    keys = list(rows.keys)
    if groups is None:
        return True
    try:
        inside = np.asarray(split.inside, dtype=bool)
        if not keys:  # (a table without keys: one group, its rows in all)
            return int(np.asarray(split.atom_size)[inside].sum()) == int(groups["n"].sum())
        counted = split.labels.loc[inside, keys].assign(__n=np.asarray(split.atom_size)[inside]) \
            .groupby(keys, dropna=False, sort=False)["__n"].sum()
        mine = groups.groupby(keys, dropna=False, sort=False)["n"].sum()
        mine = mine[mine > 0]
        counted = counted[counted > 0]
        if len(mine) != len(counted):
            return False
        found = counted.reindex(mine.index)
        return bool(np.array_equal(found.to_numpy(dtype=float), mine.to_numpy(dtype=float)))
    except Exception:
        return False
