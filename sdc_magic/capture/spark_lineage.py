"""A Spark table's rows written over the plan they come from, for linking inside Spark.

Why: linking compares the rows behind the cells of different outputs. Below
``evidence/rows.py`` ``IN_ENGINE_ROWS`` source rows Spark hands them to the driver (values,
fingerprinted as pandas' are); above it, and with no size limit, a table whose rows come from a
*root* plan through steps that keep or drop whole rows and make columns row by row is described
instead (:class:`~sdc_magic.evidence.in_engine.InEngineRows`), and linking counts the session's
atoms with one ``groupBy(...).count()`` over the root (:func:`count_query`): one row per atom
back to the driver, none of the data's.

Unlike polars, nothing needs tracking while the user works: a Spark DataFrame is immutable and
carries its analyzed plan. :func:`lineage` reads the aggregation's source plan from the top:
``Filter`` and ``Project`` nodes are the steps, written as SQL text (Catalyst's own ``sql`` of
each resolved expression), down to the *root*: the first other node (a relation read, a join, a
window, an aggregate), a plan Spark has cached (the count then reads the cache, as your tables
do), or the first step that is not *row-wise* — deterministic and made only of the expressions
in :data:`ROW_WISE` (columns, literals, arithmetic, comparisons, casts, ``CASE``, string and date
functions), whose value on a row is the same whether or not the other rows are there. The root
is any plan whose rows are the same on every run: deterministic, without a limit or a sample,
without Python, and without a union, a join or an explode, which may put one person in two rows
(:data:`ROW_REPEATING`). The written steps, replayed on the root as filters, must give a plan Spark
calls the same as the source (``sameSemantics``); otherwise the table is linked by its rows.

The root is identified by Spark's semantic hash of its plan and its schema: the same relation
read again (another ``spark.read`` of the same files, the same local data, after a restart) is
the same base. A file rewritten between outputs keeps the identity; linking's count checks
(``linking/in_engine.split``, ``in_engine.groups_agree``) find that the atoms no longer add up.

Spark Connect DataFrames have no analyzed plan on the client: the unresolved plan it holds is
read into the same steps (:mod:`.spark_connect_plan`) and checked the same way
(:func:`_connect_lineage`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..evidence.in_engine import (
    VARIANT_KEY,
    InEngineRows,
    SmallAtoms,
    indicator_sets,
    link_family,
)
from . import contract

#: The mark of the rows a replay keeps (filters turned into a column, :func:`count_query`).
MARK = "__sdc_magic_kept"
#: Prefix of the replay's own columns; a source with such a column is linked by its rows.
INTERNAL = "__sdc_"
#: Plan nodes read as steps (anything else is the root).
STEP_NODES = ("Filter", "Project")
#: Steps followed from the aggregation down to the root.
MAX_STEPS = 32
#: The module of Spark Connect's classes
CONNECT = "pyspark.sql.connect"

#: Catalyst expressions that give each row a value from that row alone (simple class names).
#: Others (``Rand``, ``MonotonicallyIncreasingID``, Python UDFs, subqueries, lambdas...) are not
#: written as steps: the plan from their step down is the root (a random value there, or a
#: Python UDF, which sees a batch of rows, leaves the table to the rows path).
ROW_WISE = frozenset({
    "AttributeReference", "Alias", "Literal", "Cast", "CheckOverflow", "PromotePrecision",
    "Add", "Subtract", "Multiply", "Divide", "IntegralDivide", "Remainder", "Pmod", "UnaryMinus",
    "UnaryPositive", "Abs", "Signum", "Sqrt", "Exp", "Log", "Log10", "Log2", "Pow", "Round", "BRound",
    "Floor", "Ceil", "RoundFloor", "RoundCeil", "Greatest", "Least",
    "EqualTo", "EqualNullSafe", "LessThan", "LessThanOrEqual", "GreaterThan", "GreaterThanOrEqual",
    "And", "Or", "Not", "IsNull", "IsNotNull", "IsNaN", "In", "InSet", "CaseWhen", "If", "Coalesce",
    "NaNvl",
    "Lower", "Upper", "InitCap", "Substring", "Left", "Right", "StartsWith", "EndsWith", "Contains",
    "Like", "ILike", "RLike", "Length", "StringTrim", "StringTrimLeft", "StringTrimRight", "Concat",
    "ConcatWs", "StringLPad", "StringRPad", "StringReplace", "RegExpReplace", "RegExpExtract",
    "StringSplit", "GetArrayItem", "ElementAt", "SubstringIndex", "StringInstr",
    "Year", "Month", "DayOfMonth", "DayOfWeek", "DayOfYear", "WeekOfYear", "Quarter", "Hour", "Minute",
    "Second", "DateFormatClass", "ParseToDate", "ParseToTimestamp", "DateDiff", "DateAdd", "DateSub",
    "TruncDate", "TruncTimestamp", "Murmur3Hash", "XxHash64", "FormatString", "FormatNumber", "Hex",
    "Sha1", "Sha2", "Md5", "Crc32", "Ascii", "StringRepeat", "Reverse", "Levenshtein", "SoundEx",
    "DateFromUnixDate", "UnixDate", "FromUnixTime", "ToUnixTimestamp", "UnixTimestamp", "MakeDate",
    "NullIf", "Nvl", "Nvl2", "IfNull", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot",
    "ShiftLeft", "ShiftRight", "Cbrt", "Log1p", "Expm1", "Rint", "Hypot", "ToDegrees", "ToRadians",
    "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Atan2", "Sinh", "Cosh", "Tanh", "Bin", "Conv",
    "CreateNamedStruct", "GetStructField", "CreateArray", "Size", "ArrayContains",
})


@dataclass(frozen=True)
class Lineage:
    """A table's rows over its root plan: the root (a DataFrame), its identity and the steps."""

    root: Any
    identity: str
    steps: tuple[dict, ...]


def lineage(source: Any) -> Lineage | None:
    """The root of a (classic) Spark DataFrame and the steps from it, or None when the plan
    holds a step that is not written (see the module docstring). Never raises."""
    try:
        with quiet():
            return _lineage(source)
    except Exception:
        return None


#: PySpark's loggers of analysis errors (they print a failed expression's error to the notebook:
#: the trials here fail by design on plans that are not written)
_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """PySpark's own error logging off while linking tries its expressions."""
    try:  # (made by PySpark's own class: a plain logger made first would break its keyword arguments)
        from pyspark.logger import PySparkLogger
    except ImportError:  # (pyspark 3.5 logs no such errors)
        yield
        return
    loggers = [PySparkLogger.getLogger(name) for name in _ERROR_LOGGERS]
    saved = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, saved, strict=True):
            lg.disabled = was


def _lineage(source: Any) -> Lineage | None:
    jdf = getattr(source, "_jdf", None)
    if jdf is None:  # (Connect: a streaming read is no root there; ``isStreaming`` would ask the server)
        return _connect_lineage(source) if type(source).__module__.startswith(CONNECT) else None
    if source.isStreaming:
        return None
    session = source.sparkSession
    node = jdf.queryExecution().analyzed()
    steps: list[dict] = []
    for _ in range(MAX_STEPS):
        if node.getClass().getSimpleName() not in STEP_NODES or _cached(session, node):
            break  # (a cached plan is a root: linking's count reads the cache your tables read)
        step = _filter(node) if node.getClass().getSimpleName() == "Filter" else _project(node)
        if step is None:
            break  # (a step that is not written: the root starts here)
        steps.append(step)
        node = node.child()
    else:
        return None
    if not node.deterministic() or not node.resolved() or not _repeatable(node):
        return None
    root = _frame(source, node)
    names = list(root.columns)
    if not _distinct_names(node) or any(n.startswith(INTERNAL) for n in names):
        return None  # (names a replay cannot tell apart, or our own)
    steps.reverse()
    return _replayed(source, root, steps, node.semanticHash)


def _connect_lineage(source: Any) -> Lineage | None:
    """A Spark Connect DataFrame's root and steps, read from the client's plan
    (:mod:`.spark_connect_plan`) and checked as a classic plan's are: the steps replayed on the
    root are the source (``sameSemantics``, the server's analysis), the root identified by the
    server's semantic hash of its plan and its schema."""
    from .spark_connect_plan import steps_over_root

    found = steps_over_root(source, MAX_STEPS)
    if found is None:
        return None
    root, steps = found
    names = list(root.columns)
    if len({n.lower() for n in names}) != len(names) or any(n.startswith(INTERNAL) for n in names):
        return None  # (names a replay cannot tell apart, or our own)
    return _replayed(source, root, steps, root.semanticHash)


def _replayed(source: Any, root: Any, steps: list[dict], semantic_hash: Callable[[], Any]) -> Lineage | None:
    """The lineage when the steps replayed on the root are the source (``sameSemantics``), the
    root identified by Spark's semantic hash of its plan (asked only then) and its schema; else
    None (by rows). The classic and the Connect path share it."""
    if not _plain_replay(root, steps).sameSemantics(source):
        return None
    digest = hashlib.blake2b(digest_size=16)
    digest.update(str(semantic_hash()).encode())
    digest.update(repr([(f.name, f.dataType.simpleString()) for f in root.schema.fields]).encode())
    return Lineage(root, f"spark plan {digest.hexdigest()}", tuple(steps))


def functions_of(frame: Any) -> Any:
    """PySpark's functions for a DataFrame's flavour (Spark Connect's columns for a Connect frame,
    whichever session the process made first)."""
    if type(frame).__module__.startswith(CONNECT):
        from pyspark.sql.connect.functions import builtin
        return builtin
    from pyspark.sql import functions
    return functions


def _cached(session: Any, plan: Any) -> bool:
    """Whether Spark's cache holds this plan's rows (``df.cache()``)."""
    manager = session._jsparkSession.sharedState().cacheManager()
    for args in ((session._jsparkSession, plan), (plan,)):  # (Spark 4, then 3.5)
        try:
            return bool(manager.lookupCachedData(*args).isDefined())
        except Exception:
            continue
    return False


#: Plan nodes whose rows may differ from one run to the next (which rows a limit or a sample
#: keeps depends on the partitions' order): a root holding one is linked by its rows.
UNREPEATABLE = frozenset({"GlobalLimit", "LocalLimit", "Limit", "Tail", "Offset", "Sample", "CollectLimit",
                          "GlobalLimitAndOffset", "RebalancePartitions"})
#: Plan nodes that may put one person in two rows of a root: a union of a frame with a tagged copy of
#: itself, a join repeating people, an ``explode``. Counted as one base, each row is another person
#: for linking, so the two copies' tables were never compared (red team helper-80: the second copy's
#: count outside C passed where linking by rows blocks). A root holding one is linked by its rows.
ROW_REPEATING = frozenset({"Union", "Join", "Generate"})
#: Plan nodes and expressions that run Python: a pandas UDF sees a batch of rows, which may be
#: another batch on the next run (a root holding one is linked by its rows).
PYTHON = ("Python", "Pandas", "InArrow")
#: Plan nodes of a root looked at (a larger plan is linked by its rows).
MAX_ROOT_NODES = 500


def _repeatable(plan: Any) -> bool:
    """Whether no node of the root's plan is one of :data:`UNREPEATABLE` or :data:`ROW_REPEATING`
    or runs Python (walked node by node: a plan's JSON would hold local data)."""
    stack, seen = [plan], 0
    while stack:
        node = stack.pop()
        seen += 1
        kind = node.getClass().getSimpleName()
        if seen > MAX_ROOT_NODES or kind in UNREPEATABLE or kind in ROW_REPEATING \
                or any(w in kind for w in PYTHON):
            return False
        expressions = node.expressions()
        for i in range(expressions.size()):
            if any(w in str(n.get("class", "")) for n in json.loads(expressions.apply(i).toJSON()) for w in PYTHON):
                return False
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return True


def _written(expression: Any) -> str | None:
    """A row-wise expression's SQL over unqualified column names, or None (not row-wise).

    Catalyst writes a column read through an alias or a view with its qualifier
    (``people.district``); the replay's columns have none, so the qualifiers are taken off the
    text. A literal that happened to hold the same text would change too: the replay as written
    would then not be the source, which :func:`_lineage` checks (``sameSemantics``)."""
    if not expression.deterministic():
        return None
    nodes = json.loads(expression.toJSON())
    if not all(isinstance(n, dict) and str(n.get("class", "")).rsplit(".", 1)[-1] in ROW_WISE for n in nodes):
        return None
    text = str(expression.sql())
    prefixes = {".".join(_quoted_if_needed(q) for q in _parts(n.get("qualifier"))) + "."
                for n in nodes if _parts(n.get("qualifier"))}
    for prefix in sorted(prefixes, key=len, reverse=True):
        text = text.replace(prefix, "")
    return text


def _parts(qualifier: Any) -> list[str]:
    """A qualifier's name parts, as Catalyst's JSON gives them (a list, or its text ``[a, b]``)."""
    if isinstance(qualifier, list):
        return [str(q) for q in qualifier]
    if isinstance(qualifier, str) and qualifier.startswith("[") and qualifier.endswith("]") and len(qualifier) > 2:
        return qualifier[1:-1].split(", ")
    return []


def _quoted_if_needed(part: str) -> str:
    """A name part as Catalyst's ``quoteIfNeeded`` writes it."""
    return part if re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", part) else quoted(part)


def _filter(node: Any) -> dict | None:
    written = _written(node.condition())
    return None if written is None else {"m": "filter", "e": written}


def _project(node: Any) -> dict | None:
    """The step of a Project; None (the root starts here) if it is not row-wise or repeats a name."""
    out: list[list[str | None]] = []
    items = node.projectList()
    for i in range(items.size()):
        item = items.apply(i)
        kind = item.getClass().getSimpleName()
        if kind == "AttributeReference":
            out.append([None, item.name()])  # (a column kept as it is)
            continue
        written = _written(item.child()) if kind == "Alias" else None
        if written is None:
            return None
        out.append([written, item.name()])
    names = [n for _, n in out]
    if any(str(n).startswith(INTERNAL) for n in names) or len({str(n).lower() for n in names}) != len(names):
        return None  # (Spark's own Project over a window repeats the window's column)
    return {"m": "select", "cols": out}


def _distinct_names(plan: Any) -> bool:
    """Whether a plan's output columns are told apart by their names (case aside): a name
    given twice is one column given twice (the same attribute), as Spark repeats a window's."""
    output = plan.output()
    seen: dict[str, int] = {}
    for i in range(output.size()):
        attribute = output.apply(i)
        name, exid = str(attribute.name()).lower(), int(attribute.exprId().id())
        if seen.setdefault(name, exid) != exid:
            return False
    return True


def _frame(like: Any, plan: Any) -> Any:
    """A DataFrame of a logical plan (Spark 4's classic Dataset, or 3.5's)."""
    session = like.sparkSession
    jvm = session._jvm
    try:
        jdf = jvm.org.apache.spark.sql.classic.Dataset.ofRows(session._jsparkSession, plan)
    except Exception:
        jdf = jvm.org.apache.spark.sql.Dataset.ofRows(session._jsparkSession, plan)
    return type(like)(jdf, session)


def quoted(name: str) -> str:
    """A column name as Spark SQL reads it."""
    return "`" + name.replace("`", "``") + "`"


def _plain_replay(root: Any, steps: list[dict] | tuple[dict, ...]) -> Any:
    """The steps replayed as written (filters filter): to check they are the source."""
    F = functions_of(root)

    frame = root
    for st in steps:
        if st["m"] == "filter":
            frame = frame.filter(F.expr(st["e"]))
        else:
            frame = frame.select(*[F.col(quoted(n)) if e is None else F.expr(e).alias(n) for e, n in st["cols"]])
    return frame


def written(steps: list[dict] | tuple[dict, ...], expression: str) -> str:
    """An expression (SQL over the columns after the steps) as linking keeps it: the same steps
    and expression, the same text, readable by :func:`read` (also by the next kernel)."""
    return "spark:" + json.dumps({"steps": list(steps), "e": expression}, sort_keys=True, separators=(",", ":"))


def read(text: str) -> tuple[list[dict], str]:
    """The steps and expression :func:`written` wrote."""
    if not text.startswith("spark:"):
        raise ValueError("not a Spark expression written by linking")
    got = json.loads(text[len("spark:"):])
    return got["steps"], got["e"]


def _side_by_side(root: Any, named: list[tuple[str, str]]) -> tuple[Any, dict[str, str]]:
    """``root`` with each (name, expression) of ``named`` computed as its steps compute it, as a
    column of a hidden name (the second value: per name, its column), every output's steps
    replayed one after the other on one frame (see :func:`count_query`)."""
    F = functions_of(root)

    inner = {n: f"{INTERNAL}{n}" for n, _ in named}
    by_steps: dict[str, list[tuple[str, str]]] = {}
    for name, text in named:
        steps, expr = read(text)
        by_steps.setdefault(json.dumps(steps, sort_keys=True), []).append((name, expr))
    # expressions after no step read the root's columns as they are (with the outputs' filters
    # written into their conditions, most of a session's): one select, no copies
    direct = [F.expr(e).alias(inner[n]) for n, e in by_steps.pop("[]", [])]
    done = [inner[n] for n, _ in named if n not in {m for exprs in by_steps.values() for m, _ in exprs}]
    columns = list(dict.fromkeys(root.columns))  # (a column repeated by Spark under one name: once)
    hidden = [f"{INTERNAL}r{j}" for j in range(len(columns))]
    if not by_steps:
        frame = root.select(*direct) if direct else root
    else:
        frame = root.select(*[F.col(quoted(c)).alias(h) for c, h in zip(columns, hidden, strict=True)], *direct)
    for key, exprs in by_steps.items():
        carry = [F.col(c) for c in [*hidden, *done]]
        frame = frame.select(*carry, *[F.col(h).alias(c) for c, h in zip(columns, hidden, strict=True)],
                             F.lit(True).alias(MARK))
        visible = list(columns)
        for st in json.loads(key):
            kept = F.col(MARK)
            if st["m"] == "filter":
                test = F.when(kept, F.coalesce(F.expr(st["e"]), F.lit(False))).otherwise(F.lit(False))
                frame = frame.select(*carry, *[F.col(quoted(c)) for c in visible], test.alias(MARK))
            else:
                made = [F.col(quoted(n)) if e is None else F.when(kept, F.expr(e)).alias(n) for e, n in st["cols"]]
                frame = frame.select(*carry, kept, *made)
                visible = [n for _, n in st["cols"]]
        frame = frame.select(*carry, *[F.expr(e).alias(inner[n]) for n, e in exprs])
        done += [inner[n] for n, _ in exprs]
    return frame, inner


def unit_query(root: Any, expressions: list[str], unit: str, most_sets: int, group_by: Callable[[Any, list[str]], Any],
               to_pandas: Callable[[Any], pd.DataFrame], small: SmallAtoms | None = None) -> pd.DataFrame:
    """Per unit (each value of ``unit``), the positions in :func:`count_query`'s order of the
    combinations of ``expressions``' values its rows fall in: the rows of
    ``sql_lineage.lineage_unit_query`` (``kind``, ``s``, ``r``, ``n``, ``most``), from Spark. Two
    jobs besides the count (the sets of at most ``most_sets + 1`` signatures, and the rows without
    a unit); each combination comes back as its values and is placed by them, as the count's are.

    ``small`` (a declared unit): two more small jobs, the most rows of one unit and, per
    combination, a hash of its values; the sets are then made of the rows of small atoms only
    (their combinations' hashes, a hash shared by a combination kept or not only adds rows whose
    positions are exact too), and ``kind`` 3 tells the units with a value and the most rows one
    has (``SmallAtoms.most``: the first job is not run)."""
    F = functions_of(root)

    names = [f"g{i}" for i in range(len(expressions))]
    frame, inner = _side_by_side(root, list(zip([*names, "u"], [*expressions, unit], strict=True)))
    frame = frame.select(*[F.col(inner[n]).alias(n) for n in [*names, "u"]])
    if dict(frame.dtypes).get("u") in ("float", "double"):  # (NaN is missing, as null: one unit, as by rows)
        frame = frame.withColumn("u", F.when(F.isnan(F.col("u")), F.lit(None)).otherwise(F.col("u")))
    counted = count_query(root, expressions, group_by, to_pandas)
    position = {_combination(row): i for i, row in enumerate(counted[names].itertuples(index=False, name=None))}
    if len(position) != len(counted):
        raise ValueError("combinations the count does not tell apart")  # (units unknown: review)
    combo = F.struct(*[F.col(n) for n in names])
    extra: list[tuple[Any, ...]] = []
    rows_of_units = frame.where(F.col("u").isNotNull())
    if small is not None:
        hashed = F.xxhash64(*[F.col(n) for n in names])
        per_combo = to_pandas(group_by(frame, names).agg(F.first(hashed).alias("h"),
                                                         F.sum(F.col("u").isNull().cast("long")).alias("alone")))
        told = small.told()
        if told is None:
            overall = to_pandas(group_by(rows_of_units, ["u"]).agg(F.count(F.lit(1)).alias("rows"))
                                .agg(F.count(F.lit(1)).alias("n"), F.max("rows").alias("most")))
            found = overall["most"].iloc[0] if len(overall) else None
            told = (int(overall["n"].iloc[0]) if len(overall) else 0,
                    0 if found is None or pd.isna(found) else int(found))
        units, top = told
        kept = np.zeros(len(counted), dtype=bool)
        kept[small.kept(top, int(per_combo["alone"].sum()))] = True
        where = np.array([position.get(_combination(t), -1) for t in per_combo[names].itertuples(index=False, name=None)])
        hashes = sorted({int(h) for h, w in zip(per_combo["h"], where, strict=True) if w >= 0 and kept[w]})
        rows_of_units = rows_of_units.where(hashed.isin(hashes) if hashes else F.lit(False))
        extra.append((3, [-1], [-1], [units], [top]))
    per_unit = group_by(rows_of_units, ["u"]) \
        .agg(F.array_sort(F.collect_set(combo)).alias("sig"), F.count(F.lit(1)).alias("rows"))
    sets = group_by(per_unit, ["sig"]).agg(F.count(F.lit(1)).alias("n"), F.max("rows").alias("most")) \
        .limit(most_sets + 1).withColumn("s", F.monotonically_increasing_id()) \
        .select("s", F.explode("sig").alias("c"), "n", "most").select("s", "n", "most", *[F.col(f"c.{n}") for n in names])
    found = to_pandas(sets)
    if small is not None:  # (the per-combination job counted them already)
        alone = per_combo[per_combo["alone"] > 0].rename(columns={"alone": "n"})
    else:
        alone = to_pandas(group_by(frame.where(F.col("u").isNull()), names).agg(F.count(F.lit(1)).alias("n")))

    def at(frame_: pd.DataFrame) -> np.ndarray:
        return np.array([position.get(_combination(t), -1) for t in frame_[names].itertuples(index=False, name=None)],
                        dtype=np.int64)

    def part(kind: int, s: Any, r: Any, n: Any, most: Any) -> pd.DataFrame:
        return pd.DataFrame({"kind": kind, "s": np.asarray(s, dtype=np.int64), "r": np.asarray(r, dtype=np.int64),
                             "n": np.asarray(n, dtype=np.int64), "most": np.asarray(most, dtype=np.int64)})

    return pd.concat([part(0, found["s"], at(found), found["n"], found["most"]),
                      part(1, np.full(len(alone), -1), at(alone), alone["n"], np.ones(len(alone))),
                      part(2, np.full(len(counted), -1), np.arange(len(counted)), counted["n"], np.zeros(len(counted))),
                      *[part(*x) for x in extra]],
                     ignore_index=True)


def _combination(values: tuple) -> tuple:
    """A combination of values as the count's order reads them (each value's text; missing as one)."""
    return tuple("<missing>" if v is None or (isinstance(v, float) and v != v) or v is pd.NA or v is pd.NaT
                 else repr(v) for v in values)


def count_query(root: Any, expressions: list[str], group_by: Callable[[Any, list[str]], Any],
                to_pandas: Callable[[Any], pd.DataFrame], values: list[str] | tuple[str, ...] = ()) -> pd.DataFrame:
    """Rows of ``root`` per combination of the expressions' values: columns g0, g1, … and n,
    sorted. One Spark job; one row per combination comes to the driver. ``values``: expressions
    whose rows' values are summed as hashes per combination (c0, c1, …: the sum mod 2**64 of
    ``xxhash64`` of each value, as uint64; ``linking.engine_values``), in the same job.

    Spark frames have no row order to set replays side by side, so the outputs' steps are
    replayed one after the other on one frame: the root's columns are carried under hidden
    names, each output's steps start again from them, and its keys and condition are kept as
    new columns. A filter only clears :data:`MARK`; a column made after it is made only on the
    rows it keeps (``CASE WHEN mark``: on the others it could fail, e.g. a division by zero the
    filter was there to avoid)."""
    F = functions_of(root)

    names = [f"g{i}" for i in range(len(expressions))]
    hashed = [f"v{j}" for j in range(len(values))]
    frame, inner = _side_by_side(root, list(zip([*names, *hashed], [*expressions, *values], strict=True)))

    def sums(column: Callable[[str], str]) -> list[Any]:
        # (each hash as its two 32-bit halves, summed as BIGINT: exact below 2**31 rows per atom, and
        # the halves recombined mod 2**64 are the sum of the hashes; a DECIMAL(38) sum of the hashes
        # gave the same numbers at 3-4 times the cost, 0.2-0.3 s of a 1M-row display)
        return [part for j, h in enumerate(hashed) for part in (
            F.expr(f"sum(xxhash64({column(h)}) & 4294967295)").alias(f"c{j}_lo"),
            F.expr(f"sum(xxhash64({column(h)}) >> 32)").alias(f"c{j}_hi"))]

    if not names:
        out = to_pandas((frame if hashed else root).select(F.count(F.lit(1)).alias("n"), *sums(inner.get)))
        return _as_checksums(out, len(hashed))
    counted = group_by(frame.select(*[F.col(inner[n]).alias(n) for n in [*names, *hashed]]), names)
    out = _as_checksums(to_pandas(counted.agg(F.count(F.lit(1)).alias("n"), *sums(str))), len(hashed))
    # a fixed order (the same on every run): by each column's text, column after column
    codes = [pd.factorize(out[n].astype(object).map(repr), sort=True)[0] for n in names]
    return out.iloc[np.lexsort(codes[::-1])].reset_index(drop=True)


def _as_checksums(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    """The columns c0 … c{k-1}: the sums of the signed hashes mod 2**64 as uint64, from the sums of
    their low (unsigned) and high (signed) 32-bit halves (``hash = hi * 2**32 + lo``)."""
    for j in range(k):
        lo, hi = frame.pop(f"c{j}_lo"), frame.pop(f"c{j}_hi")
        frame[f"c{j}"] = np.array([(0 if pd.isna(a) else int(a)) + ((0 if pd.isna(b) else int(b)) << 32) & ((1 << 64) - 1)
                                   for a, b in zip(lo, hi, strict=True)], dtype=np.uint64)
    return frame


#: Statistics whose table is not counted inside Spark: each publishes another population than
#: its rows (non-null counts beside other statistics) or cannot be told. (Distinct counts are
#: counted: their units too, :func:`unit_query`.)
NOT_COUNTED = frozenset({"count", "custom"})


def in_engine_rows(source: Any, keys: list[str], measures: dict[str, tuple[str | None, str]], ge: Any,
                   facts: pd.DataFrame | None, group_by: Callable[[Any, list[str]], Any],
                   to_pandas: Callable[[Any], pd.DataFrame], unit: str | None = None) -> InEngineRows | None:
    """The rows of a Spark table over ``source`` (its keys as columns) left in Spark, or None
    (linked by its rows). The caller decides by size. ``unit``: the declared unit column, whose
    distinct values linking counts in Spark as a distinct count's (:func:`unit_query`). None also
    for statistics of :data:`NOT_COUNTED`, indicators the engine cannot count
    (``contract.flagged_variables``), a source that is not written (:func:`lineage`) and anything
    that fails. Sums of one indicator alone are its rows at its level; an indicator's mean
    (or sums beside others) publishes those rows besides the table's: one more population
    (``variants``). ``group_by``/``to_pandas``: Spark's own methods, not the capture's wrappers
    (linking's count is not a table of the user's)."""
    try:
        stats = {st for _, st in measures.values()}
        variables = sorted({v for v, _ in measures.values() if v is not None})
        if stats & NOT_COUNTED or not measures:
            return None
        flag = contract.summed_flag(ge, stats, variables)  # (its table counts the rows where it is 1)
        countable, flagged = contract.flagged_variables(ge, list(measures.values()))
        if flag is None and not countable:
            return None
        names = {str(c).lower() for c in source.columns}  # (Spark reads names without case by default)
        if not all(str(k).lower() in names for k in [*keys, *variables, *([unit] if unit is not None else [])]):
            return None
        line = lineage(source)
        if line is None:
            return None
        steps, predicates = _trailing_filters(line.steps)
        known = variables[0] if len(variables) == 1 and "size" not in stats else None
        root_names = {str(c).lower() for c in line.root.columns}
        made = sorted({v for v, st in measures.values() if st in ("sum", "mean") and v is not None
                       and str(v).lower() not in root_names})
        if made and masks_a_column(source, made, to_pandas, nulls_counted=known is not None):
            return None  # (read by its rows, where the rows it keeps are its population: linking.masked)
        tests = [f"coalesce(({p}), false)" for p in predicates]
        root = line.root

        def count(expressions: list[str]) -> pd.DataFrame:
            with quiet():
                return count_query(root, expressions, group_by, to_pandas)

        def count_values(expressions: list[str], values: list[str]) -> pd.DataFrame:
            with quiet():
                return count_query(root, expressions, group_by, to_pandas, values)

        def count_units(expressions: list[str], unit: str, most_sets: int, small: SmallAtoms | None = None
                        ) -> pd.DataFrame:
            with quiet():
                return unit_query(root, expressions, unit, most_sets, group_by, to_pandas, small)

        # (the variables of sums or means: their values as the table's steps compute them)
        # (a distinct count's column too, and a declared unit: their values rewritten move units
        # without moving rows)
        counted = {v for v, st in measures.values() if st == "nunique" and v is not None} | \
            ({unit} if unit is not None else set())
        summed = sorted({v for v, st in measures.values() if st in ("sum", "mean") and v is not None} | counted)
        values = {v: written(steps, quoted(v)) for v in summed}
        distinct = {v: written(steps, quoted(v)) for v in sorted(counted)}

        def rows(extra: str | None, groups: pd.DataFrame | None, which: str | None = None, **kw: Any
                 ) -> InEngineRows:
            condition = " AND ".join([*tests, extra] if extra else tests) or "true"
            if steps:
                condition = f"CASE WHEN {quoted(MARK)} THEN ({condition}) ELSE false END"
            every_row = not steps and not extra and not tests and groups is not None
            total = (lambda: int(groups["n"].sum())) if every_row else None  # (the table's rows are the root's)
            # (``which``: the key of disjoint indicators side by side, the position of each row's one)
            return InEngineRows("spark", line.identity, written(steps, condition),
                                [written(steps, quoted(k)) for k in keys] + ([written(steps, which)] if which else []),
                                list(keys) + ([VARIANT_KEY] if which else []),
                                frozenset(str(c) for c in root.columns), count, groups, total, **kw)

        def at_level(v: str, level: float | None = None) -> tuple[str, float]:
            level = contract.flag_level(ge, v) if level is None else level
            assert level is not None  # (summed_flag and flagged_variables name indicators with a level)
            return f"coalesce(CAST({quoted(v)} AS DOUBLE) = CAST('{level!r}' AS DOUBLE), false)", level

        # (with a unit, the facts count an indicator's units at its level, not its rows: Spark counts them)
        # (and its values compared between tables, as everywhere: ids rewritten between two tables)
        unit_only = {"units": {unit: distinct[unit]}, "count_units": count_units, "values": {unit: values[unit]},
                     "count_values": count_values} if unit is not None else {}
        if flag is not None:
            test, level = at_level(flag)
            return rows(test, None if unit is not None else
                        contract.counted_groups(facts, keys, False, ge.variables[flag].ones), flag=flag,
                        level=level, **unit_only)
        table = rows(f"({quoted(known)} IS NOT NULL)" if known is not None else None,
                     # (with a unit, the facts count a variable's known values in units: counted in Spark)
                     None if unit is not None and known is not None else
                     contract.counted_groups(facts, keys, known is not None), values=values,
                     count_values=count_values if values else None, units=distinct, count_units=count_units)
        for key, flag_name, value, ones in contract.variant_populations(ge, flagged):
            # (its flagged rows and the others: more populations, see ``contract.flagged_variables``)
            test, _ = at_level(flag_name, value)
            table.variants[key] = rows(test, None if unit is not None else contract.counted_groups(facts, keys, False, ones),
                                       variant=True, level=value, **unit_only)
        for chosen in indicator_sets(table, flagged):  # (rows never meeting: one population over (group, indicator))
            at = [at_level(v)[0] for v in chosen]
            which = "CAST(CASE " + " ".join(f"WHEN {t} THEN {j}" for j, t in enumerate(at)) + " END AS BIGINT)"
            table.variants[("combined", tuple(chosen))] = rows(
                "(" + " OR ".join(at) + ")",
                None if unit is not None else contract.combined_groups(ge, facts, keys, chosen), which,
                variant=True, **unit_only)
        return link_family(table)
    except Exception:
        return None


#: Spark's numeric column types (``DataFrame.dtypes`` names)
_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")


def masks_a_column(source: Any, variables: list[str], to_pandas: Callable[[Any], pd.DataFrame], *,
                   nulls_counted: bool = False) -> bool:
    """Whether a column made by the analyst's steps equals another numeric column of its rows
    except on rows holding one same value (``when(c, income).otherwise(0)``), as
    ``linking.masked.kept_rows`` tests by rows: such a table publishes sums over the rows the copy
    kept, which the engine does not count (its rows are read instead). One Spark job, one row to
    the driver. ``nulls_counted``: a copy missing where it masks is no such column (a table of one
    variable is counted over its known rows)."""
    F = functions_of(source)

    types = {name: kind for name, kind in source.dtypes}
    numeric = [c for c, kind in types.items() if kind.startswith(_NUMERIC)]
    tests = []
    for v in variables:
        if v not in types or not types[v].startswith(_NUMERIC):
            continue
        x = f"CAST({quoted(v)} AS DOUBLE)"
        for y in (c for c in numeric if c != v):
            differ = f"NOT ({x} <=> CAST({quoted(y)} AS DOUBLE))"
            tests.append(F.expr(contract.masking_test(x, differ, nulls_counted=nulls_counted)).alias(f"t{len(tests)}"))
    if not tests:
        return False
    with quiet():
        found = to_pandas(source.select(*tests))
    return bool(found.astype(bool).to_numpy().any())


def _trailing_filters(steps: tuple[dict, ...]) -> tuple[tuple[dict, ...], list[str]]:
    """(the steps up to the last one that makes a column, the predicates of the filters after it).

    After that step only rows and columns are dropped (filters, selects of columns as they
    are): the kept rows are those of the steps before where every later predicate holds, each
    evaluated on the same columns as in the user's plan. Outputs that differ only in their
    filters share one replay (with no step left, a select of the root itself)."""
    predicates: list[str] = []
    cut = len(steps)
    for i in range(len(steps) - 1, -1, -1):
        st = steps[i]
        if st["m"] == "filter":
            predicates[:0] = [st["e"]]
        elif not all(e is None for e, _ in st["cols"]):
            break
        cut = i
    return tuple(steps[:cut]), predicates
