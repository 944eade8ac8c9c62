"""A polars table's rows written over the frame they come from, for linking inside polars.

Why: linking compares the rows behind the cells of different outputs. Below
``evidence/rows.py`` ``IN_ENGINE_ROWS`` source rows polars hands them to Python (values,
fingerprinted as pandas' are); above it, a table whose rows come from a *root* frame through
steps that keep or drop whole rows and make columns row by row is described instead
(:class:`~sdc_magic.evidence.in_engine.InEngineRows`): the steps (:func:`lineage`), and at their
end its condition (which rows reach the aggregation) and its keys, each written as text
(:func:`written`: the steps and the expression, serialized). Linking keeps them with every
recorded output and counts the session's atoms with one ``group_by(...).len()`` over the root
(:func:`count_query`): every output's steps replayed on the root with filters turned into a
mark (:func:`replay`), the results side by side (the steps keep the root's rows in order), one
row per atom back, none of the data's.

Steps written this way (eager ``DataFrame`` methods, from :mod:`.origins`, and lazy ones after
``df.lazy()``): ``filter`` with expressions, ``with_columns``, ``select``, ``rename`` (a mapping)
and ``drop`` (names). Every expression must be *row-wise* (``plan.row_wise``: columns,
literals, arithmetic, comparisons, casts, boolean and string functions, ``when/then``): a step
after a filter sees only the rows the filter kept, and a row-wise expression gives each of those
rows the same value on the root; a window or an aggregate (``pl.col("x") > pl.col("x").mean()``)
does not. Anything else (``head``, ``join``, ``with_row_index``, a lazy scan of a file, ...) is
linked by its rows, as before.

The root is identified by its content (:func:`identity`: schema, height and polars' row hashes,
remembered per frame): the same rows read again (after a restart, or another
``pl.from_pandas`` of the same frame) are the same base, so the outputs saved before are
compared with the tables after. A frame changed in place keeps its remembered identity, and
linking's count check (``linking/in_engine.py`` ``split``) finds that the atoms no longer add up.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...evidence import rows as row_limits
from ...evidence.in_engine import (
    VARIANT_KEY,
    InEngineRows,
    SmallAtoms,
    indicator_sets,
    link_family,
)
from ...evidence.weak_table import WeakTable
from .. import contract
from ..depth import depth
from . import grouping, origins

#: Root frames whose identity is remembered at once (the newest).
MAX_IDENTITIES = 64
#: The steps a table's rows may have been through since the root (see the module docstring).
MAX_STEPS = 32

_identities = WeakTable(MAX_IDENTITIES)  # root frame -> its content identity


def forget_identities() -> None:
    """Forget every root frame's content identity (as a fresh kernel has none: benchmarks)."""
    _identities.clear()


#: The mark of the rows a replay keeps (filters turned into a column, :func:`replay`).
MARK = "__sdc_magic_kept"
#: Steps written over the root (see the module docstring).
STEPS = frozenset({"filter", "with_columns", "select", "rename", "drop"})


@dataclass(frozen=True)
class Lineage:
    """A table's rows over its root frame: the root and the steps from it, written (:func:`_step`)."""

    root: Any  # the root polars DataFrame
    steps: tuple[dict, ...]


def lineage(frame: Any) -> Lineage | None:
    """The root of ``frame`` (eager or lazy) and the steps between them, or None when a step is
    not one of :data:`STEPS` with row-wise expressions (then the table is linked by its rows)."""
    import polars as pl

    steps: list[dict] = []
    current = frame
    for _ in range(MAX_STEPS):
        found = origins.step(current)
        if found is None:
            if isinstance(current, pl.DataFrame) or origins.scan_of(current) is not None:
                return Lineage(current, tuple(reversed(steps)))
            return None  # (a lazy frame made some other way: its rows are read)
        source, name, args, kwargs, written_step = found
        if not origins.unchanged_since(current):
            return None  # (its source was changed in place after it was made)
        if name == "lazy" or name in origins.COPIES:
            if args or kwargs:
                return None
        else:
            if written_step is None:
                return None
            steps.append(written_step)
        current = source
    return None


def written_step(name: str, args: tuple, kwargs: dict) -> dict | None:
    """One step as JSON-able data (expressions serialized), or None when it is not written.

    Made when the user's call is (:mod:`.origins` keeps it): the arguments are read once, so a
    list or mapping changed afterwards does not change the step. Never raises."""
    try:
        return _step(name, args, kwargs)
    except Exception:
        return None


def _step(name: str, args: tuple, kwargs: dict) -> dict | None:
    import polars as pl

    if name not in STEPS:
        return None
    flat = _flat(args)
    if name == "rename":
        mapping = args[0] if len(args) == 1 and not kwargs else None
        if not isinstance(mapping, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in mapping.items()):
            return None
        return {"m": name, "map": sorted(mapping.items())}
    if name == "drop":
        if set(kwargs) - {"strict"} or not all(isinstance(a, str) for a in flat):
            return None
        return {"m": name, "cols": list(flat), "strict": bool(kwargs.get("strict", True))}
    if name == "filter" and kwargs:
        return None  # (keyword constraints: written by rows)
    out: list[str] = []
    for a in flat:
        if isinstance(a, str):
            a = pl.col(a)
        if not isinstance(a, pl.Expr) or not row_wise(a) or _multiple(a):
            return None
        out.append(_serialized(a))
    named: list[list[str]] = []
    for k, v in sorted(kwargs.items()):
        if isinstance(v, str):
            v = pl.col(v)
        if not isinstance(v, pl.Expr) or not row_wise(v) or _multiple(v):
            return None
        named.append([str(k), _serialized(v)])
    if name == "filter" and not out:
        return None
    return {"m": name, "e": out, "named": named}


#: Functions that give each row a value computed from that row alone. Others (``all``/``any``,
#: ``is_unique``, ``is_duplicated``, ``is_first_distinct``, ``str.join``, windows, aggregates,
#: ranges) read other rows: after a filter they see other rows than on the whole frame (red team:
#: ``filter((col != "C").all())`` replayed on the frame was false everywhere, C's man at ``pass``).
ELEMENTWISE = {
    "Boolean": {"Not", "IsNull", "IsNotNull", "IsNan", "IsNotNan", "IsFinite", "IsInfinite", "IsIn", "IsBetween",
                "AnyHorizontal", "AllHorizontal"},
    "StringExpr": {"Lowercase", "Uppercase", "Titlecase", "LenChars", "LenBytes", "Contains", "StartsWith",
                   "EndsWith", "Slice", "Head", "Tail", "StripChars", "StripCharsStart", "StripCharsEnd",
                   "StripPrefix", "StripSuffix", "Replace", "ZFill", "PadStart", "PadEnd"},
    "": {"Abs", "Round", "Floor", "Ceil", "FillNull", "Negate", "Clip", "Sign", "Sqrt"},
}


def row_wise(expr: Any) -> bool:
    """Whether a polars expression gives each row a value from that row alone (see :data:`ELEMENTWISE`;
    a literal Series is positional, allowed only as the set of values of ``is_in``)."""
    try:
        return _elementwise(json.loads(expr.meta.serialize(format="json")))
    except Exception:  # (an expression polars cannot serialize: not written)
        return False


def _elementwise(node: Any, values: bool = False) -> bool:
    if isinstance(node, list):
        return all(_elementwise(n) for n in node)
    if not isinstance(node, dict) or len(node) != 1:
        return False
    (kind, body), = node.items()
    if kind == "Column":
        return isinstance(body, str)
    if kind == "Literal":
        return isinstance(body, dict) and (set(body) <= {"Scalar", "Dyn"} or (values and set(body) == {"Series"}))
    if values:
        return False  # is_in's values must be a literal: a column there is the set of the frame's values
    if kind == "Alias":
        return isinstance(body, list) and len(body) == 2 and _elementwise(body[0])
    if kind == "Cast":
        return _elementwise(body.get("expr"))
    if kind == "BinaryExpr":
        return _elementwise(body.get("left")) and _elementwise(body.get("right"))
    if kind == "Ternary":
        return all(_elementwise(body.get(k)) for k in ("predicate", "truthy", "falsy"))
    if kind == "Function":
        fn = body.get("function")
        family, member = ("", fn) if isinstance(fn, str) else next(iter(fn.items())) if isinstance(fn, dict) and \
            len(fn) == 1 else ("?", None)
        name = member if isinstance(member, str) else next(iter(member)) if isinstance(member, dict) and member \
            else None
        if family not in ELEMENTWISE or name not in ELEMENTWISE[family]:
            return False
        inputs = body.get("input", [])
        if not isinstance(inputs, list) or not inputs:
            return False
        is_in = family == "Boolean" and name == "IsIn"
        return _elementwise(inputs[0]) and all(_elementwise(n, values=is_in) for n in inputs[1:])
    return False


def _multiple(expr: Any) -> bool:
    try:
        return bool(expr.meta.has_multiple_outputs())
    except Exception:
        return True


def _flat(args: tuple) -> list[Any]:
    out: list[Any] = []
    for a in args:
        out.extend(a if isinstance(a, list | tuple) else [a])
    return out


def _serialized(expr: Any) -> str:
    return base64.b64encode(expr.meta.serialize(format="binary")).decode()


def _expr(text: str) -> Any:
    import polars as pl

    return pl.Expr.deserialize(io.BytesIO(base64.b64decode(text)), format="binary")


def replay(root: Any, steps: tuple[dict, ...] | list[dict]) -> Any:
    """The root (lazily) through the steps, every row kept: a filter only clears :data:`MARK`
    (a predicate that is NULL for a row does not keep it, as ``filter`` does not)."""
    import polars as pl

    lf = root.lazy().with_columns(pl.lit(True).alias(MARK))
    for st in steps:
        m = st["m"]
        if m == "filter":
            kept = pl.col(MARK)
            for e in st["e"]:
                kept = kept & _expr(e).fill_null(False)
            lf = lf.with_columns(kept.alias(MARK))
        elif m == "with_columns":
            lf = lf.with_columns(*[_expr(e) for e in st["e"]], **{k: _expr(e) for k, e in st["named"]})
        elif m == "select":
            lf = lf.select(*[_expr(e) for e in st["e"]], pl.col(MARK), **{k: _expr(e) for k, e in st["named"]})
        elif m == "rename":
            lf = lf.rename(dict(st["map"]))
        elif m == "drop":
            lf = lf.drop(*st["cols"], strict=st.get("strict", True))
        else:
            raise ValueError(f"not a written step: {m}")
    return lf


def row_positions(frame: Any) -> Any:
    """:func:`.origins.row_positions`, and for a lazy frame whose root came from pandas
    (``pl.from_pandas(f).lazy().filter(...)``) each row's pandas label (an Index).

    Why: a lazy frame has no remembered eager origin, so its rows were numbered 0..n-1 and
    placed by content alone; over a narrow frame (district, sex) nothing placed them, a lazy count
    of everyone was compared with nothing beside a count without C, and 37 − 35 gave C's two
    women (red team of issue 22: 8 of 2,000 seeded sessions). The steps since the root are
    replayed with their filters as a mark (:func:`replay`; run at display, as the extension's own
    work). A root of polars' own (``pl.DataFrame(...)``, a file read) gives its positions, as an
    eager filter's rows have (:func:`.origins.row_positions`): a lazy count of everyone, then of
    A or C and of B or C over ``select("person", "sex", "district")`` (rows repeated, so content
    placed none of the last) were compared with nothing, and 22 + 17 − 37 gave C's two women, all
    ``pass`` (stop 58). A lazy scan keeps its own positions."""
    import polars as pl

    if not isinstance(frame, pl.LazyFrame):
        return origins.row_positions(frame)
    depth.value += 1
    try:
        line = lineage(frame)
        if line is None or not isinstance(line.root, pl.DataFrame):
            return None
        labels = origins.row_labels(line.root) if origins.from_pandas(frame) else None
        filtered = any(st["m"] == "filter" for st in line.steps)
        if labels is not None and not filtered:
            return labels
        if not filtered:  # (the root's rows in order: their own positions are the root's)
            return origins.row_positions(line.root)
        kept = np.flatnonzero(replay(line.root, line.steps).select(MARK).collect().get_column(MARK).to_numpy())
        if labels is not None:
            return labels.take(kept)
        at = origins.row_positions(line.root)  # (the root's own rows in its first frame, if any)
        return kept if at is None else np.asarray(at)[kept]
    except Exception:  # (a step that cannot be replayed: its rows are placed by content, as before)
        return None
    finally:
        depth.value -= 1


def scan_identity(name: str, source: Any, kwargs: dict) -> str:
    """The identity of a lazy scan of local files: the function, its options, and every file's
    path, size and modification time (every file under a directory), read now (a file rewritten
    is another base). Raises for anything else (a URL, a buffer, a file gone): the table's rows
    are then read as before. What it cannot see (a file rewritten with the same size and its
    modification time put back) is left to the count's checks (``linking/in_engine.split``,
    ``in_engine.groups_agree``)."""
    import glob
    import os

    sources = list(source) if isinstance(source, list | tuple) else [source]
    files: list[tuple[str, int, int]] = []
    for item in sources:
        if not isinstance(item, str | os.PathLike) or "://" in str(item):
            raise ValueError("not a local file")
        text = os.fspath(item)
        matches = sorted(glob.glob(text)) if kwargs.get("glob", True) and glob.has_magic(text) else [text]
        if not matches:
            raise FileNotFoundError(text)
        for path in matches:
            inside = [path]
            if os.path.isdir(path):  # (a directory's own stat does not change when a file in it is rewritten)
                inside = sorted(os.path.join(top, f) for top, _, names in os.walk(path) for f in names)
            for one in inside:
                st = os.stat(one)
                files.append((os.path.abspath(one), int(st.st_size), int(st.st_mtime_ns)))
    digest = hashlib.blake2b(digest_size=16)
    digest.update(repr((name, sorted((str(k), repr(v)) for k, v in kwargs.items()), files)).encode())
    return f"polars scan {digest.hexdigest()}"


def identity(root: Any) -> str:
    """The root's content identity: schema, height and the sum and xor of polars' row hashes.

    Remembered per frame (:data:`MAX_IDENTITIES`), so each root is hashed once per session
    (1M rows × 5 columns: some 20 ms; 10M: 0.2 s). Polars' hashes are stable within a polars version, which
    a saved session's count checks anyway (a universe whose atoms no longer add up is let go).
    """
    scan = origins.scan_of(root)
    if scan is not None:
        return scan_identity(*scan)  # (worked out each time: the files may change under a scan)
    got = _identities.get(root)
    if got is not None:
        return str(got)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(repr([(str(k), str(v)) for k, v in root.schema.items()]).encode())
    digest.update(str(root.height).encode())
    h = root.hash_rows(seed=0).to_numpy()  # (the sum and the xor: 128 bits of the rows' content)
    digest.update(np.uint64(h.sum(dtype=np.uint64)).tobytes())
    digest.update(np.uint64(np.bitwise_xor.reduce(h) if len(h) else 0).tobytes())
    got = f"polars frame {digest.hexdigest()}"
    _identities.set(root, got)
    return got


#: DataFrame methods that change a frame in place (its content identity is worked out again).
IN_PLACE = ("insert_column", "replace_column", "extend", "vstack", "hstack", "drop_in_place", "__setitem__")


def forget(frame: Any) -> None:
    """``frame`` changed in place: its identity is worked out again when next needed (red team: a
    column recoded in place kept the identity of the rows it had, and a table of it was counted
    as if over them, the same counts by design: C's 2 and 1 at ``pass``), and frames made from it
    before are no longer written over it (:func:`.origins.changed`: their steps replayed on the new
    content would select other rows)."""
    _identities.discard(frame)
    origins.changed(frame)


def written(steps: tuple[dict, ...] | list[dict], expr: Any) -> str:
    """An expression at the end of the steps as linking keeps it: the same steps and expression,
    the same text; readable by :func:`read`, also by the next kernel."""
    return "polars:" + json.dumps({"steps": list(steps), "e": _serialized(expr)}, sort_keys=True,
                                  separators=(",", ":"))


def read(text: str) -> tuple[list[dict], Any]:
    """The steps and expression :func:`written` wrote."""
    if not text.startswith("polars:"):
        raise ValueError("not a polars expression written by linking")
    got = json.loads(text[len("polars:"):])
    return got["steps"], _expr(got["e"])


def count_query(root: Any, expressions: list[str], values: list[str] | tuple[str, ...] = ()) -> pd.DataFrame:
    """Rows of ``root`` per combination of the expressions' values: columns g0, g1, … and n,
    sorted (the same order on every run). Expressions after the same steps share one replay.
    ``values``: expressions whose rows' values are summed as hashes per combination (c0, c1, …:
    the sum mod 2**64 of a 64-bit hash of each value, ``linking.engine_values``)."""
    import polars as pl

    if not expressions and not values:
        return pd.DataFrame({"n": [_height(root)]})
    names = [f"g{i}" for i in range(len(expressions))]
    hashed = [f"v{j}" for j in range(len(values))]
    by_steps: dict[str, list[tuple[str, Any]]] = {}
    for name, text in zip([*names, *hashed], [*expressions, *values], strict=True):
        steps, expr = read(text)
        by_steps.setdefault(json.dumps(steps, sort_keys=True), []).append((name, expr))
    if len(by_steps) == 1 and names:  # (one replay: grouped first by the columns read, when that pays)
        (key, exprs), = by_steps.items()
        frame = replay(root, json.loads(key)).lazy()
        first = grouping.first_by(frame, identity(root), key, [e for n, e in exprs if n in names])
        if first:
            try:
                return grouping.grouped_count(frame, first, [(n, e) for n, e in exprs if n in names],
                                              [(n, e) for n, e in exprs if n not in names]).to_pandas()
            except grouping.failures():  # (the direct count decides: the same error, or none)
                pass
    # (with_columns, then select: a literal expression is one value per row, not one row)
    parts = [replay(root, json.loads(key)).with_columns([e.alias(n) for n, e in exprs]).select([n for n, _ in exprs])
             for key, exprs in by_steps.items()]
    both = parts[0] if len(parts) == 1 else pl.concat(parts, how="horizontal")
    sums = [pl.col(h).hash(seed=0).sum().alias(f"c{j}") for j, h in enumerate(hashed)]  # (u64: wraps around)
    if not names:
        return both.select(pl.len().alias("n"), *sums).collect().to_pandas()
    counted = both.group_by(names).agg(pl.len().alias("n"), *sums).sort(names, nulls_last=True).collect()
    return counted.to_pandas()


def unit_query(root: Any, expressions: list[str], unit: str, most_sets: int, small: SmallAtoms | None = None
               ) -> pd.DataFrame:
    """Per unit (each value of ``unit``), the sorted positions in :func:`count_query`'s order of
    the combinations of ``expressions``' values its rows fall in: the rows of
    ``sql_lineage.lineage_unit_query`` (``kind``, ``s``, ``r``, ``n``, ``most``), from polars;
    ``small``: the sets cut down to the positions of small atoms, with ``kind`` 3 (the units with
    a value and the most rows one has), only the rows there joined."""
    import inspect

    import polars as pl

    names = [f"g{i}" for i in range(len(expressions))]
    by_steps: dict[str, list[tuple[str, Any]]] = {}
    for name, text in zip([*names, "u"], [*expressions, unit], strict=True):
        steps, expr = read(text)
        by_steps.setdefault(json.dumps(steps, sort_keys=True), []).append((name, expr))
    parts = [replay(root, json.loads(key)).with_columns([e.alias(n) for n, e in exprs]).select([n for n, _ in exprs])
             for key, exprs in by_steps.items()]
    both = (parts[0] if len(parts) == 1 else pl.concat(parts, how="horizontal")).lazy()
    if both.collect_schema()["u"].is_float():  # (NaN is missing, as null: one unit with them, as by rows)
        both = both.with_columns(pl.col("u").fill_nan(None))
    combos = both.group_by(names).agg(pl.len().alias("n")).sort(names, nulls_last=True).with_row_index("r")
    counted = combos.collect()
    equal = {"nulls_equal" if "nulls_equal" in inspect.signature(pl.LazyFrame.join).parameters else "join_nulls": True}
    alone = both.filter(pl.col("u").is_null()).join(counted.lazy().select([*names, "r"]), on=names, how="left",
                                                    **equal).group_by("r").agg(pl.len().alias("n")).collect()
    extra = []
    kept = counted
    if small is not None:  # (every unit's rows first: the most rows of one; then the small atoms' rows only)
        told = small.told()
        if told is None:
            overall = both.filter(pl.col("u").is_not_null()).group_by("u").agg(pl.len().alias("rows")) \
                .select(pl.len().alias("n"), pl.col("rows").max().fill_null(0).alias("most")).collect()
            told = int(overall["n"][0]), int(overall["most"][0])
        units, top = told
        kept = counted.filter(pl.col("r").is_in(small.kept(top, int(alone["n"].sum())).tolist()))
        extra.append((3, [-1], [-1], [units], [top]))
    sets = both.filter(pl.col("u").is_not_null()).join(kept.lazy().select([*names, "r"]), on=names, how="inner",
                                                       **equal) \
        .group_by("u").agg(pl.col("r").unique().sort().alias("sig"), pl.len().alias("rows")) \
        .group_by("sig").agg(pl.len().alias("n"), pl.col("rows").max().alias("most")) \
        .head(most_sets + 1).with_row_index("s").explode("sig").rename({"sig": "r"}).collect()

    def part(kind: int, s: Any, r: Any, n: Any, most: Any) -> pd.DataFrame:
        return pd.DataFrame({"kind": kind, "s": np.asarray(s, dtype=np.int64), "r": np.asarray(r, dtype=np.int64),
                             "n": np.asarray(n, dtype=np.int64), "most": np.asarray(most, dtype=np.int64)})

    return pd.concat([part(0, sets["s"], sets["r"], sets["n"], sets["most"]),
                      part(1, np.full(alone.height, -1), alone["r"], alone["n"], np.ones(alone.height)),
                      part(2, np.full(counted.height, -1), counted["r"], counted["n"], np.zeros(counted.height)),
                      *[part(*x) for x in extra]],
                     ignore_index=True)


def in_engine_rows(line: Lineage, keys: list[str], key_exprs: list[Any], known: str | None,
                   groups: pd.DataFrame | None, flag: str | None = None, variant: bool = False,
                   level: float = 1.0, summed: list[str] | None = None,
                   distinct: list[str] | None = None, side_by_side: list[tuple[str, float]] | None = None
                   ) -> InEngineRows:
    """The table's rows left in polars (see the module docstring). ``key_exprs``: one per key,
    over the root's columns; ``known``: the variable whose known rows the table covers (a table
    of one variable's statistics), or None; ``groups``: the table's own groups (its keys and
    ``n`` rows each), computed with the table; ``flag``: the rows where this indicator is at its
    ``level`` only (a table of its sums, or with ``variant`` the flagged rows a table publishes
    besides its own); ``side_by_side``: (indicator, level) pairs, the rows at any of those levels
    (disjoint indicators side by side as one population, :func:`at_levels`).
    The root is held as long as the table's evidence
    is: a notebook displays ``pl.read_parquet(...).filter(...).group_by(...).len()`` after the
    frame read is gone, and the rows path held a frame of the source rows' values as long (a
    frame the user keeps shares its buffers with it)."""
    import polars as pl

    # the filters after the last step that makes a column are written into the condition: outputs
    # that differ only in them share one replay of the steps before (and with none, one select of
    # the root itself: every output of the session filtered that way shares it)
    steps, predicates = _trailing_filters(line.steps)
    condition = pl.col(MARK) if steps else pl.lit(True)
    for p in predicates:
        condition = condition & p.fill_null(False)
    if flag is not None:  # (a table of the flag's sums: its rows are those at its level)
        condition = condition & (pl.col(flag).cast(pl.Float64) == float(level)).fill_null(False)
    elif side_by_side:
        condition = condition & pl.any_horizontal(at_levels(side_by_side))
    elif known is not None:
        condition = condition & pl.col(known).is_not_null()
    root = line.root

    def count(expressions: list[str]) -> pd.DataFrame:
        return _ours(lambda: count_query(root, expressions))

    def count_values(expressions: list[str], values: list[str]) -> pd.DataFrame:
        return _ours(lambda: count_query(root, expressions, values))

    # (the variables of sums or means: their values as the table's steps compute them)
    values = {v: written(steps, pl.col(v)) for v in summed or []}

    def total() -> int:
        return _height(root)

    def count_units(expressions: list[str], unit: str, most_sets: int, small: SmallAtoms | None = None
                    ) -> pd.DataFrame:
        return _ours(lambda: unit_query(root, expressions, unit, most_sets, small))

    return InEngineRows("polars", identity(line.root), written(steps, condition),
                        [written(steps, e) for e in key_exprs],
                        list(keys), frozenset(str(c) for c in line.root.lazy().collect_schema().names()), count,
                        groups, total, None if variant else flag, level=level, variant=variant,
                        base_rows=int(root.height) if isinstance(root, pl.DataFrame) else None, values=values,
                        count_values=count_values if values else None,
                        units={v: written(steps, pl.col(v)) for v in distinct or []}, count_units=count_units)


def at_levels(indicators: list[tuple[str, float]]) -> list[Any]:
    """Per (indicator, level), whether a row is at that level (never null)."""
    import polars as pl

    return [(pl.col(v).cast(pl.Float64) == float(level)).fill_null(False) for v, level in indicators]


def which_indicator(indicators: list[tuple[str, float]]) -> Any:
    """The position of the indicator at its level on each row (null at none): the key of disjoint
    indicators side by side (``VARIANT_KEY``)."""
    import polars as pl

    tests = at_levels(indicators)
    chain = pl.when(tests[0]).then(pl.lit(0, dtype=pl.Int64))
    for j, test in enumerate(tests[1:], start=1):
        chain = chain.when(test).then(pl.lit(j, dtype=pl.Int64))
    return chain.otherwise(pl.lit(None, dtype=pl.Int64))


def _ours(query: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """Run linking's own query with the capture's guard up: its aggregations are no tables of the
    user's (unit_query's count of the rows without a unit was registered as one, and its rows read
    into Python; red team of stop 60)."""
    depth.value += 1
    try:
        return query()
    finally:
        depth.value -= 1


def _height(root: Any) -> int:
    """Rows of a root frame, or of a lazy scan (one count, from the files' metadata where they have it)."""
    import polars as pl

    if isinstance(root, pl.DataFrame):
        return int(root.height)
    return int(root.select(pl.len()).collect().item())


def _trailing_filters(steps: tuple[dict, ...]) -> tuple[tuple[dict, ...], list[Any]]:
    """(the steps up to the last one that makes a column, the predicates of the filters after it).

    After that step only rows and columns are dropped (``filter``, ``drop``, a ``select`` of plain
    columns under their own names): the kept rows are those of the replayed steps (their mark)
    where every later predicate holds, each evaluated on the same columns as in the user's call."""
    predicates: list[Any] = []
    cut = len(steps)
    for i in range(len(steps) - 1, -1, -1):
        st = steps[i]
        if st["m"] == "filter":
            predicates[:0] = [_expr(e) for e in st["e"]]
        elif st["m"] == "drop" or (st["m"] == "select" and not st["named"]
                                   and all(_expr(e).meta.is_column() for e in st["e"])):
            pass
        else:
            break
        cut = i
    return tuple(steps[:cut]), predicates


def masks_a_column(source: Any, derived: dict[str, Any] | None, variables: list[str], *,
                   nulls_counted: bool = False) -> bool:
    """Whether a column made by the analyst's steps (or inside the aggregation) equals another
    numeric column of its rows except on rows holding one same value (``when(c).then(income)
    .otherwise(0)``, ``income * (district != "C")``), as ``linking.masked.kept_rows`` tests by
    rows. Such a table publishes sums over the rows the copy kept, a population the engine does
    not count: its rows are read instead. One pass of polars over the rows, only for such columns.
    ``nulls_counted``: a copy missing where it masks (``col.filter(cond).sum()``) is no such column,
    the engine counting a table of one variable over its known rows.
    """
    import polars as pl

    frame = source.lazy()
    if derived:
        frame = frame.with_columns([e.alias(v) for v, e in derived.items()])
    schema = frame.collect_schema()
    numeric = [c for c, t in schema.items() if t.is_numeric()]
    tests = []
    for i, v in enumerate(variables):
        if v not in schema or not schema[v].is_numeric():
            continue
        x = pl.col(v).cast(pl.Float64)
        for j, y in enumerate(c for c in numeric if c != v):
            differ = x.ne_missing(pl.col(y).cast(pl.Float64))
            masked_as = x.filter(differ)
            # (as ``linking.masked.kept_against``: few values or few rows written over)
            few = ((masked_as.n_unique() <= row_limits.MASKED_VALUES) | (differ.sum() < row_limits.MASKED_FEW_ROWS)) \
                & (x.filter(~differ).n_unique() >= row_limits.MASKED_KEPT_VALUES)
            test = differ.any() & (~differ).any() & few
            if nulls_counted:  # (missing where it differs: counted over its known rows)
                test = test & masked_as.is_not_null().any()
            tests.append(test.alias(f"t{i}_{j}"))
    if not tests:
        return False
    found = frame.select(tests).collect()
    return bool(any(found.row(0)))


def key_expressions(by: list[Any], named_by: dict) -> list[Any] | None:
    """The table's keys as expressions, in its column order; None if one is not row-wise."""
    import polars as pl

    out = [pl.col(b) if isinstance(b, str) else b for b in by]
    out += [(pl.col(e) if isinstance(e, str) else e).alias(str(n)) for n, e in named_by.items()]
    if not all(isinstance(e, pl.Expr) and row_wise(e) for e in out):
        return None
    return out



#: Statistics whose table is not counted inside polars: each publishes another population
#: than its rows (distinct units, non-null counts beside a count of rows) or cannot be told.
NOT_COUNTED = frozenset({"count", "custom"})


def in_engine(source: Any, by: list[Any], named_by: dict, keys: list[str],
              resolved: dict[str, tuple[str | None, str]], ge: Any, facts: pd.DataFrame | None,
              derived: dict[str, Any] | None = None, unit: str | None = None) -> InEngineRows | None:
    """The rows of an eager table over ``source`` left in polars, or None (linked by its rows).

    The caller decides by size. ``unit``: the declared unit column, whose distinct values linking
    counts in polars (``InEngineRows.units``, as for a distinct count's column; until stop 60 such
    tables sent every row's keys and unit to Python below 5M rows and were not linked above).
    None also for statistics of :data:`NOT_COUNTED`, indicators the engine cannot count
    (``contract.flagged_variables``; sums of one flag alone are its rows where it is 1, a flag's
    mean publishes those rows besides the table's: ``variants``), steps or keys that are not
    written over the root (:func:`lineage`, :func:`key_expressions`) and anything that fails.
    ``derived``: variables made inside the aggregation (``col.filter(cond).sum()``: the column
    ``when(cond).then(col)``), one more ``with_columns`` step when they are row-wise.
    """
    stats = {st for _, st in resolved.values()}
    variables = sorted({v for v, _ in resolved.values() if v is not None})
    # (non-null counts of one column alone, or beside its other statistics: its known rows, the
    # ``known`` condition below; beside ``len`` they are a population besides the rows)
    alone = len(variables) == 1 and "size" not in stats
    if stats & (NOT_COUNTED - ({"count"} if alone else set())) or not resolved:
        return None
    flag = contract.summed_flag(ge, stats, variables)  # (its table counts the rows where it is 1)
    countable, flagged = contract.flagged_variables(ge, list(resolved.values()))
    if flag is None and not countable:
        return None
    # (with a unit, the facts count an indicator's units at its level, not its rows: polars counts them)
    units = [unit] if unit is not None else []
    try:
        line = lineage(source)
        exprs = key_expressions(by, named_by)
        if line is None or exprs is None or len(exprs) != len(keys):
            return None
        schema = set(source.collect_schema() if hasattr(source, "collect_schema") else source.schema)
        if derived:
            made = written_step("with_columns", tuple(e.alias(v) for v, e in derived.items()), {})
            if made is None:
                return None
            line = Lineage(line.root, (*line.steps, made))
            schema |= set(derived)
        if not all(v in schema for v in variables) or (unit is not None and unit not in schema):
            # a variable made inside the aggregation (``col.filter(cond).sum()``, ``(col * 2).sum()``):
            # its rows are those of the derived column, which the rows path reads (red team: the
            # filter inside ``agg`` was lost here, C's man at ``pass``)
            return None
        known = variables[0] if len(variables) == 1 and "size" not in stats else None
        made = sorted({v for v, st in resolved.values() if st in ("sum", "mean") and v is not None}
                      - set(line.root.lazy().collect_schema().names()))
        if made and masks_a_column(source, derived, made, nulls_counted=known is not None):
            return None  # (read by its rows, where the rows it keeps are its population: linking.masked)
        if flag is not None:
            return in_engine_rows(line, keys, exprs, None,
                                  None if units else contract.counted_groups(facts, keys, False, ge.variables[flag].ones),
                                  flag, level=contract.level_of(ge, flag), distinct=units, summed=units)
        # (a distinct count's column too, and a declared unit: their values rewritten move units
        # without moving rows)
        distinct = {v for v, st in resolved.values() if st == "nunique" and v is not None} | \
            ({unit} if unit is not None else set())
        summed = sorted({v for v, st in resolved.values() if st in ("sum", "mean") and v is not None} | distinct)
        order = list(ge.variables)  # (the facts' checksums of the summed variables, computed with the table)
        checksums = [order.index(v) for v in summed] if all(v in order for v in summed) else None
        # (with a unit, the facts count a variable's known values in units, not rows: counted in polars)
        groups = None if unit is not None and known is not None else \
            contract.counted_groups(facts, keys, known is not None, checksums=checksums)
        table = in_engine_rows(line, keys, exprs, known, groups, summed=summed, distinct=sorted(distinct))
        for key, flag_name, value, ones in contract.variant_populations(ge, flagged):
            # (its flagged rows and the others: more populations, see ``contract.flagged_variables``)
            table.variants[key] = in_engine_rows(line, keys, exprs, None,
                                                 None if units else contract.counted_groups(facts, keys, False, ones),
                                                 flag_name, variant=True, level=value, distinct=units, summed=units)
        for chosen in indicator_sets(table, flagged):  # (rows never meeting: one population over (group, indicator))
            levels = [(v, contract.level_of(ge, v)) for v in chosen]
            table.variants[("combined", tuple(chosen))] = in_engine_rows(
                line, [*keys, VARIANT_KEY], [*exprs, which_indicator(levels)], None,
                None if units else contract.combined_groups(ge, facts, keys, chosen), variant=True,
                distinct=units, summed=units, side_by_side=levels)
        return link_family(table)
    except Exception:  # (written by rows instead)
        return None
