"""A Spark Connect DataFrame's rows written over the plan they come from (its root and steps).

Why: a classic DataFrame carries its analyzed plan, which :mod:`.spark_lineage` reads into
row-wise steps over a root so that linking counts the session's atoms inside Spark. A Spark
Connect client has no analyzed plan, only the *unresolved* one it sends to the server
(``DataFrame._plan``: ``Filter``, ``Project``, ``WithColumns`` … nodes over a relation, with
expressions as trees of function names). Until stop 62 a Connect table was therefore linked by
its rows: every source row's keys and hashes came to Python below 5M rows, and above that the
table was not linked at all (``review`` beside any other output). Here the client plan is read
the same way the classic one is:

* Steps are ``Filter``, ``Project``, ``WithColumns``, ``Drop`` and ``WithColumnsRenamed`` nodes
  whose expressions are *row-wise* by an allow-list of Spark SQL function names
  (:data:`ROW_WISE_FUNCTIONS`, the functions of the classic ``ROW_WISE`` Catalyst classes);
  each is written as the SQL text of the same step, the output columns' names taken from the
  server (one analysis per node, no job).
* The *root* is the first other node, or the first cached one (``storageLevel``: the count then
  reads the cache, as in the classic path); its whole plan must be made of leaves (a table or files
  read, local data, a range), the same row-wise nodes, and aggregates whose expressions are
  deterministic (:data:`ROOT_NODES`; not joins or unions, which may put a person in two rows);
  the server's analyzed plan of it may hold only :data:`ANALYZED_NODES` and nothing of
  :data:`UNREPEATABLE_TEXT` (a view read by name hides its plan from the client). Otherwise the
  table goes the rows path.
* Nothing written here is trusted: :mod:`.spark_lineage` replays the steps on the root and
  keeps them only when the server calls the replay the same plan as the user's
  (``sameSemantics``), and identifies the root by the server's semantic hash — the checks the
  classic path makes.
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
from collections.abc import Callable
from typing import Any

#: Plan nodes read as steps (anything else starts the root).
STEP_NODES = frozenset({"Filter", "Project", "WithColumns", "Drop", "WithColumnsRenamed", "ToDF"})
#: Leaves: a table or files read, local data, a range.
LEAVES = frozenset({"Read", "DataSource", "LocalRelation", "CachedLocalRelation",
                    "ChunkedCachedLocalRelation",
                    "CachedRemoteRelation", "Range"})
#: Plan nodes a root may hold: leaves whose rows are the same on every run, row-wise steps, and
#: nodes whose rows are the same on every run when their expressions are deterministic (checked
#: by :func:`_deterministic`: an aggregate, a distinct over every column) or that only order or
#: place rows (a sort, a hint, a repartition).
#: (Not joins or unions: a union of a frame with a tagged copy of itself, or a join that repeats
#: people, puts the same person in two rows of one base, which a count of rows cannot tell — red team
#: helper-80: two tables over the two copies passed where linking by rows blocks; they go by rows.)
ROOT_NODES = frozenset({*LEAVES, "SubqueryAlias", "Aggregate", "Deduplicate", "Sort", "Hint", "Repartition",
                        "RepartitionByExpression", *STEP_NODES})
#: Aggregate functions whose result does not depend on the rows' order (``first``, ``collect_list``,
#: ``max_by`` on ties do; a root holding one is linked by its rows).
DETERMINISTIC_AGGREGATES = frozenset({"sum", "count", "avg", "mean", "min", "max", "stddev", "stddev_samp",
                                      "stddev_pop", "variance", "var_samp", "var_pop", "bool_and", "bool_or",
                                      "every", "some", "any", "count_if"})
#: What the server's analyzed plan of a root must not show (a view read by name hides its plan from
#: the client: ``df.sample(0.5).createOrReplaceTempView("v")`` then ``spark.table("v")``): the
#: classic path's unrepeatable nodes, Python, and functions whose value changes from run to run.
UNREPEATABLE_TEXT = re.compile(
    r"\b(?:Sample|GlobalLimit|LocalLimit|Limit|Tail|Offset|CollectLimit|GlobalLimitAndOffset"
    r"|RebalancePartitions)\b"
    r"|Python|Pandas|InArrow|BatchEval|ArrowEval"
    r"|\b(?:rand|randn|random|uuid|shuffle|monotonically_increasing_id|spark_partition_id|input_file_name"
    r"|input_file_block_start|input_file_block_length|current_timestamp|current_date|now|localtimestamp"
    r"|randstr|uniform|reflect|java_method|try_reflect|first|first_value|last|last_value|any_value"
    r"|collect_list|collect_set|array_agg|row_number|rank|dense_rank|percent_rank|ntile|lag|lead|nth_value"
    r"|current_timezone|current_user|user|session_user|current_database|current_schema|current_catalog"
    r"|udf|pandas_udf)\s*\(|<lambda>|more fields|more characters|truncated|\bvariable\b|session\.",
    re.IGNORECASE)
#: Plan nodes the server's analyzed plan of a root may show (the first word of each line; a view's
#: plan is read there only): anything else — a window, a generator, a deduplication of some
#: columns, a join the client did not show — leaves the table to the rows path.
ANALYZED_NODES = frozenset({"Project", "Filter", "SubqueryAlias", "View", "LocalRelation", "Relation",
                            "LogicalRDD", "Range", "Aggregate", "Distinct", "Sort", "Repartition",
                            "RepartitionByExpression", "ResolvedHint"})
#: Analyses a reading may ask of the server (each costs more on a deeper plan: 95 selects under a
#: distinct took 73 s, red team); a plan needing more is linked by its rows.
MAX_ANALYSES = 40
#: Plan nodes of a root looked at (a larger plan is linked by its rows).
MAX_ROOT_NODES = 200

#: Operators written infix (the client's function name, SQL's).
INFIX = {"==": "=", "<=>": "<=>", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "+": "+",
         "-": "-", "*": "*", "/": "/", "%": "%", "and": "AND", "or": "OR", "&": "&", "|": "|", "^": "^"}
#: Spark SQL functions whose value on a row comes from that row alone (deterministic; the names
#: of the classic path's ``ROW_WISE`` Catalyst expressions). Anything else is not written.
ROW_WISE_FUNCTIONS = frozenset({
    "not", "negative", "positive", "isnull", "isnotnull", "isnan", "in", "nanvl", "coalesce", "nullif",
    "nvl", "nvl2", "ifnull", "if", "greatest", "least", "abs", "signum", "sign", "sqrt", "exp", "log",
    "ln", "log10", "log2", "pow", "power", "round", "bround", "floor", "ceil", "ceiling", "pmod", "mod",
    "div", "cbrt", "log1p", "expm1", "rint", "hypot", "degrees", "radians", "sin", "cos", "tan",
    "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "bin", "conv", "bitwise_not", "~",
    "shiftleft", "shiftright", "lower", "upper", "lcase", "ucase", "initcap", "substring", "substr",
    "left", "right", "startswith", "endswith", "contains", "like", "ilike", "rlike", "length",
    "char_length", "character_length", "trim", "ltrim", "rtrim", "btrim", "concat", "concat_ws",
    "lpad", "rpad", "replace", "regexp_replace", "regexp_extract", "split", "element_at",
    "substring_index", "instr", "locate", "year", "month", "day", "dayofmonth", "dayofweek",
    "dayofyear", "weekofyear", "quarter", "hour", "minute", "second", "date_format", "to_date",
    "to_timestamp", "datediff", "date_diff", "date_add", "date_sub", "trunc", "date_trunc", "hash",
    "xxhash64", "format_string", "format_number", "hex", "sha1", "sha", "sha2", "md5", "crc32",
    "ascii", "repeat", "reverse", "levenshtein", "soundex", "date_from_unix_date", "unix_date",
    "from_unixtime", "to_unix_timestamp", "unix_timestamp", "make_date", "named_struct", "struct",
    "array", "size", "array_contains", "timestamp_micros",
})
#: SQL text given by the analyst (``F.expr``, ``where("…")``) is parsed to check its functions:
#: sqlglot's names of the row-wise ones that differ from Spark's.
_SQLGLOT_NAMES = frozenset({"and", "or", "xor", "tsordsadd", "cast", "trycast", "case", "if", "in",
                            "strposition", "dateadd", "datesub", "datediff", "timestrtotime",
                            "strtodate", "strtotime", "tsordstodate",
                            "timetostr", "unixtotime", "timetounix", "regexpextract", "regexpreplace",
                            "regexplike", "regexpilike", "concatws", "splitpart", "arraycontains",
                            "arraysize", "pad", "trim", "dayofweek", "dayofmonth", "dayofyear",
                            "weekofyear", "substring", "struct", "array",
                            "bitwisenot", "mod", "pow", "ln", "log", "sqrt", "round", "floor", "ceil",
                            "abs", "sign", "exp", "lower", "upper", "initcap", "length", "concat",
                            "coalesce", "nullif", "greatest", "least", "year", "month", "day", "quarter",
                            "hour", "minute", "second", "md5", "sha", "sha2", "hex", "levenshtein",
                            "soundex", "ascii", "repeat", "reverse", "startswith", "endswith",
                            "contains", "left", "right", "todate", "totimestamp", "datetrunc",
                            "timestamptrunc", "dateformat", "nvl2", "isnan", "unhex", "crc32",
                            "formatstring", "numbertostr"})


def steps_over_root(source: Any, max_steps: int) -> tuple[Any, list[dict]] | None:
    """(the root as a Connect DataFrame, the steps from it in order) of a Spark Connect
    DataFrame, written as :mod:`.spark_lineage` writes a classic plan's; None when the plan is
    not written so (see the module docstring), or when more than ``max_steps`` steps are. May
    raise (the caller catches).

    A node's output names are derived from its input's where Spark's rule is plain (a filter
    keeps them, ``withColumn`` replaces a name or appends one, a rename, a drop of names,
    ``toDF``), else asked of the server (an analysis of the plan up to it: 60 ms at 30 steps); the
    derived names of the whole chain must be the source's, else every node is asked. A chain
    longer than ``max_steps`` is refused before anything is asked (red team: a 150-step chain
    took 18 s to be refused; a 30-step one 2.3 s to be read, one analysis per node)."""
    from pyspark.sql.connect.dataframe import DataFrame

    session = source.sparkSession
    chain, node = 0, source._plan
    while type(node).__name__ in STEP_NODES and chain <= max_steps:
        chain, node = chain + 1, node._child
    if chain > max_steps:
        return None
    asked = [0]
    for derive in (True, False):
        known: dict[int, list[str]] = {}

        def columns(of: Any, derive: bool = derive, known: dict[int, list[str]] = known) -> list[str]:
            if id(of) not in known:
                found = _derived_columns(of, columns) if derive else None
                if found is None:
                    asked[0] += 1
                    if asked[0] > MAX_ANALYSES:  # (the caller reads this as "not written": by rows)
                        raise RuntimeError("a plan too long to read on the client")
                    found = list(DataFrame(of, session).columns)
                known[id(of)] = found
            return known[id(of)]

        node = source._plan
        steps: list[dict] = []
        while type(node).__name__ in STEP_NODES and not getattr(node, "_references", None):
            if _cached(DataFrame(node, session)):
                break  # (a cached plan is a root, as in the classic path: the count reads the cache)
            step = _step(node, columns)
            if step is None:
                break  # (a step that is not written: the root starts here)
            steps.append(step)
            node = node._child
        if not derive or not steps or columns(source._plan) == list(source.columns):
            break
    if not _repeatable(node, session, columns):
        return None
    steps.reverse()
    return DataFrame(node, session), steps


def _cached(frame: Any) -> bool:
    """Whether the server caches this plan's rows (``df.cache()``; one analysis, no job).

    Why: the client's plan does not show a cache. Read as steps over the plan below, a cached
    frame's columns were computed again from their source by every count of linking's (1M rows of
    ``spark.range().select(...).cache()``: 1.6 s per display, a job testing its columns 1.7 s more)."""
    level = frame.storageLevel
    return bool(level.useMemory or level.useDisk or level.useOffHeap)


def _derived_columns(node: Any, columns: Callable[[Any], list[str]]) -> list[str] | None:
    """A node's output names from its input's, where Spark's rule is plain; None: ask the server
    (a name matching another in case only, a drop of a column object, any other node)."""
    kind = type(node).__name__
    if kind in ("Filter", "Sort", "Hint", "Repartition", "RepartitionByExpression"):
        return columns(node._child)
    if kind not in ("WithColumns", "WithColumnsRenamed", "Drop", "ToDF"):
        return None
    given = columns(node._child)
    if len({n.lower() for n in given}) != len(given):
        return None
    lower = {n.lower(): n for n in given}
    if kind == "ToDF":
        out = [str(n) for n in node._cols]
        return out if len(out) == len(given) else None
    if kind == "Drop":
        names = [c for c in node._columns]
        if not all(isinstance(c, str) for c in names) \
                or any(c.lower() in lower and c not in given for c in names):
            return None
        return [n for n in given if n not in set(names)]
    pairs = list(node._colsMap.items()) if kind == "WithColumnsRenamed" else \
        [(str(n), str(n)) for n in node._columnNames]
    if any(old.lower() in lower and old not in given for old, _ in pairs):
        return None
    out = list(given)
    for old, new in pairs:
        if kind == "WithColumns":
            if new not in out:
                out.append(new)
        elif old in out:
            out[out.index(old)] = new
    return out if len({n.lower() for n in out}) == len(out) else None


def _step(node: Any, columns: Callable[[Any], list[str]]) -> dict | None:
    """The step a node stands for, in :mod:`.spark_lineage`'s form, or None (not written);
    ``columns``: a node's output names."""
    kind = type(node).__name__
    if kind == "Filter":
        written = expression_sql(node.filter._expr)
        return None if written is None else {"m": "filter", "e": written}
    out = columns(node)
    if len({n.lower() for n in out}) != len(out):
        return None  # (a name given twice: a replay could not tell its columns apart)
    given = columns(node._child)
    inputs = {n.lower(): n for n in given}
    cols: list[list[str | None]]
    if kind == "ToDF":
        # (every column renamed in order: a renamed copy is the same rows, red team; also the names
        # ``createDataFrame`` gives local data, whose root's columns are then ``_0, _1, …``: a pandas
        # frame renamed and sent again is the same base)
        if len(given) != len(out) or len(inputs) != len(given):
            return None
        cols = [[None, n] if n == old else [_quoted(old), n] for old, n in zip(given, out, strict=True)]
    elif kind == "Project":
        made = _projected(node._columns, list(inputs.values()))
        if made is None or len(made) != len(out):
            return None
        cols = []
        for (text, own), name in zip(made, out, strict=True):
            if text is None and own is not None and own.lower() == name.lower() and name.lower() in inputs:
                cols.append([None, name])
            elif text is None:
                return None
            else:
                cols.append([text, name])
    elif kind == "WithColumns":
        if node._metadata:
            return None
        new = {}
        for name, column in zip(node._columnNames, node._columns, strict=True):
            text = expression_sql(column._expr)
            if text is None:
                return None
            new[str(name).lower()] = text
        cols = [[new[n.lower()], n] if n.lower() in new else [None, n] for n in out]
    elif kind == "Drop":
        cols = [[None, n] for n in out]
        if any(n.lower() not in inputs for n in out):
            return None
    else:  # WithColumnsRenamed
        renamed = {str(new).lower(): str(old) for old, new in node._colsMap.items()
                   if str(old).lower() in inputs}
        cols = [[_quoted(inputs[renamed[n.lower()].lower()]), n] if n.lower() in renamed else [None, n]
                for n in out]
        if any(e is None and n.lower() not in inputs for e, n in cols):
            return None
    return {"m": "select", "cols": cols}


def _projected(columns: list[Any], inputs: list[str]) -> list[tuple[str | None, str | None]] | None:
    """Per output column of a ``Project``: (its SQL, or None for a column kept as it is; the
    column's own name when it reads one), the star expanded to the input's columns."""
    from pyspark.sql.connect.expressions import ColumnAlias, ColumnReference, UnresolvedStar

    made: list[tuple[str | None, str | None]] = []
    for column in columns:
        expr = getattr(column, "_expr", None)
        if isinstance(expr, UnresolvedStar):
            if getattr(expr, "_unparsed_target", None):
                return None
            made += [(None, n) for n in inputs]
        elif isinstance(expr, ColumnReference):
            name = _plain_name(expr._unparsed_identifier)
            made.append((None, name) if name is not None else (expression_sql(expr), None))
        elif isinstance(expr, ColumnAlias):
            if len(expr._alias) != 1 or expr._metadata:
                return None
            made.append((expression_sql(expr._child), None))
        else:
            made.append((expression_sql(expr), None))
    return made


def _plain_name(identifier: str) -> str | None:
    """A column reference's name when it is one plain name (no qualifier, no nested field)."""
    if "." in identifier or "`" in identifier:
        return None
    return identifier


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def expression_sql(expr: Any) -> str | None:
    """A client expression as Spark SQL text, or None when it is not row-wise (or not written)."""
    from pyspark.sql.connect.expressions import (
        CaseWhen,
        CastExpression,
        ColumnReference,
        LiteralExpression,
        SQLExpression,
        UnresolvedFunction,
    )

    if isinstance(expr, ColumnReference):
        if getattr(expr, "_is_metadata_column", False):
            return None
        identifier = expr._unparsed_identifier
        return _quoted(identifier) if _plain_name(identifier) is not None else identifier
    if isinstance(expr, LiteralExpression):
        return _literal(expr._value, expr._dataType)
    if isinstance(expr, SQLExpression):
        return f"({expr._expr})" if _row_wise_text(expr._expr) else None
    if isinstance(expr, CastExpression):
        inner = expression_sql(expr._expr)
        kind = expr._data_type if isinstance(expr._data_type, str) else expr._data_type.simpleString()
        if inner is None or expr._eval_mode not in (None, "try") or not re.fullmatch(r"[\w(), <>:]+", kind):
            return None
        return f"{'TRY_CAST' if expr._eval_mode == 'try' else 'CAST'}({inner} AS {kind})"
    if isinstance(expr, CaseWhen):
        parts = []
        for condition, value in expr._branches:
            c, v = expression_sql(condition), expression_sql(value)
            if c is None or v is None:
                return None
            parts.append(f"WHEN {c} THEN {v}")
        other = "" if expr._else_value is None else expression_sql(expr._else_value)
        if other is None:
            return None
        return "(CASE " + " ".join(parts) + (f" ELSE {other}" if other else "") + " END)"
    if isinstance(expr, UnresolvedFunction):
        return _function(expr)
    return None


def _function(expr: Any) -> str | None:
    name, args = str(expr._name), [expression_sql(a) for a in expr._args]
    if expr._is_distinct or any(a is None for a in args):
        return None
    if name in INFIX and len(args) == 2:
        return f"({args[0]} {INFIX[name]} {args[1]})"
    low = name.lower()
    if low not in ROW_WISE_FUNCTIONS or not re.fullmatch(r"[a-z_][a-z0-9_]*|~", low) or not args:
        return None  # (with no argument some read the clock: ``unix_timestamp()``, red team)
    if low == "not" and len(args) == 1:
        return f"(NOT {args[0]})"
    if low in ("negative", "~") and len(args) == 1:
        return f"({'-' if low == 'negative' else '~'} {args[0]})"
    if low in ("isnull", "isnotnull") and len(args) == 1:
        return f"({args[0]} IS {'NOT ' if low == 'isnotnull' else ''}NULL)"
    if low == "in":
        return f"({args[0]} IN ({', '.join(args[1:])}))" if len(args) > 1 else None
    return f"{low}({', '.join(args)})"


def _literal(value: Any, kind: Any) -> str | None:
    """A literal as SQL of its exact type (a client literal carries its type)."""
    from pyspark.sql import types as T

    type_name = kind.simpleString()
    if value is None:
        return f"CAST(NULL AS {type_name})" if not isinstance(kind, T.NullType) else "NULL"
    if isinstance(kind, T.BooleanType):
        return "true" if value else "false"
    if isinstance(kind, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        # (SQL's typed literals: 1Y, 1S, 1, 1L; a CAST would be another plan than the client's)
        suffix = {"tinyint": "Y", "smallint": "S", "int": "", "bigint": "L"}.get(type_name)
        return None if suffix is None else f"{int(value)}{suffix}"
    if isinstance(kind, T.FloatType | T.DoubleType):
        v = float(value)
        if isinstance(kind, T.DoubleType) and math.isfinite(v):
            return f"{v!r}D"
        named = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
        text = repr(v) if math.isfinite(v) else named[repr(v)]
        return f"CAST('{text}' AS {type_name})"
    if isinstance(kind, T.DecimalType) and isinstance(value, decimal.Decimal):
        return f"CAST('{value}' AS {type_name})"
    if isinstance(kind, T.StringType) and isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    # (the client keeps dates as days and timestamps as microseconds since the epoch: written as
    # SQL's typed literals, a timestamp with its UTC offset, so that no session time zone moves it)
    if isinstance(kind, T.DateType) and isinstance(value, int):
        return f"DATE '{(datetime.date(1970, 1, 1) + datetime.timedelta(days=value)).isoformat()}'"
    if isinstance(kind, T.TimestampType) and isinstance(value, int):
        moment = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(microseconds=value)
        return f"TIMESTAMP '{moment.isoformat(sep=' ')}'"
    return None


def _row_wise_text(text: str) -> bool:
    """Whether SQL text of the analyst's (``F.expr``, ``where("…")``) calls row-wise functions
    only: parsed with sqlglot (Spark's dialect); no query, window, lambda or other function."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(text, read="spark")
    except Exception:
        return False
    for node in tree.walk():
        if isinstance(node, exp.Query | exp.Subquery | exp.Window | exp.Lambda | exp.Star | exp.AggFunc):
            return False
        if isinstance(node, exp.Func):
            name = (node.name if isinstance(node, exp.Anonymous) else node.key).lower()
            if name not in ROW_WISE_FUNCTIONS and name not in _SQLGLOT_NAMES:
                return False
    return True


def _repeatable(root: Any, session: Any, columns: Callable[[Any], list[str]]) -> bool:
    """Whether the root's rows are the same on every run: its whole plan made of :data:`ROOT_NODES`
    with deterministic expressions (the client's plan), and nothing of :data:`UNREPEATABLE_TEXT`
    in the server's analyzed plan of it (views read by name included)."""
    from pyspark.sql.connect.dataframe import DataFrame

    stack, seen = [root], 0
    while stack:
        node = stack.pop()
        seen += 1
        kind = type(node).__name__
        if seen > MAX_ROOT_NODES or kind not in ROOT_NODES or getattr(node, "_references", None):
            return False
        if not _node_deterministic(node, kind, columns):
            return False
        stack.extend(c for c in (getattr(node, "_child", None), getattr(node, "left", None),
                                 getattr(node, "right", None), getattr(node, "other", None)) if c is not None)
    text = DataFrame(root, session)._explain_string(extended=True)
    if "== Analyzed Logical Plan ==" not in text:
        return False
    analyzed = text.split("== Analyzed Logical Plan ==", 1)[1].split("== Optimized Logical Plan ==", 1)[0]
    lines = [line for line in analyzed.splitlines() if line.strip()][1:]  # (the first: the output's names)
    nodes = {m.group(1) for line in lines if (m := re.match(r"[\s:+\-]*(\w+)", line))}
    return bool(lines) and nodes <= ANALYZED_NODES and UNREPEATABLE_TEXT.search(analyzed) is None


def _node_deterministic(node: Any, kind: str, columns: Callable[[Any], list[str]]) -> bool:
    """Whether one node of a root keeps the same rows on every run (see :data:`ROOT_NODES`)."""
    if kind == "ToDF":
        return True  # (names only)
    if kind in STEP_NODES:
        return _step(node, columns) is not None
    if kind == "Read":
        return not getattr(node, "_is_streaming", None)
    if kind == "Join":
        on = node.on if isinstance(node.on, list) else [node.on]
        return all(isinstance(c, str) or c is None or _deterministic(c._expr) for c in on)
    if kind == "Aggregate":
        return node._group_type in ("groupby", "rollup", "cube") and node._pivot_col is None \
            and all(_deterministic(c._expr) for c in [*node._grouping_cols, *node._aggregate_cols])
    if kind == "Deduplicate":  # (a subset of columns keeps any one row of each duplicate)
        return bool(node.all_columns_as_keys) and not node.within_watermark
    if kind == "SetOperation":
        return node.other is not None
    return True


def _deterministic(expr: Any) -> bool:
    """Whether an expression's value does not change from one run to the next: row-wise ones
    (:func:`expression_sql`) and :data:`DETERMINISTIC_AGGREGATES` of them."""
    from pyspark.sql.connect.expressions import (
        CaseWhen,
        CastExpression,
        ColumnAlias,
        UnresolvedFunction,
        UnresolvedStar,
    )

    if isinstance(expr, UnresolvedFunction):
        name = str(expr._name)
        known = name in INFIX or name.lower() in ROW_WISE_FUNCTIONS \
            or name.lower() in DETERMINISTIC_AGGREGATES
        return known and all(_deterministic(a) for a in expr._args)
    if isinstance(expr, ColumnAlias):
        return _deterministic(expr._child)
    if isinstance(expr, CastExpression):
        return _deterministic(expr._expr)
    if isinstance(expr, CaseWhen):
        parts = [x for branch in expr._branches for x in branch] + \
            ([] if expr._else_value is None else [expr._else_value])
        return all(_deterministic(x) for x in parts)
    if isinstance(expr, UnresolvedStar):
        return True
    return expression_sql(expr) is not None
