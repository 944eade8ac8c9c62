"""Parsing DuckDB SQL into an evidence plan, and the SQL of the evidence and linking queries.

Kept apart from :mod:`.duckdb` (which wraps DuckDB's Python API) because the plan is pure
text work over sqlglot's tree: it can be tested without running a query, and the queries
it writes are the only place where the facts are defined.

A :class:`Plan` describes one grouped aggregation the user asked for:

* a ``SELECT ... GROUP BY`` (plain, ``GROUP BY ALL``, positional, or with ``ROLLUP``,
  ``CUBE`` and ``GROUPING SETS``: then :attr:`Plan.sets` lists the grouping sets and the
  evidence carries ``GROUPING(key)`` per key, so a NULL *made by the grouping* (a margin) is
  told apart from a NULL that is real data);
* a DuckDB ``PIVOT src ON col USING agg(x) GROUP BY keys`` (also inside ``SELECT * FROM
  (...)``): planned as the equivalent long ``SELECT keys, col, agg(x) ... GROUP BY ALL``
  whose groups are the pivot's cells; :attr:`Plan.pivot` says how the wide result is laid out.

Everything else returns ``None``: the caller leaves the table without evidence, and the
display pipeline then checks it as unverified or withholds it (never shows it as checked).
"""

from __future__ import annotations

import itertools
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from . import contract
from .entries import MAGNITUDE_EVIDENCE
from .sql_rewrites import all_but_filtered, constant, linear_sum, two_sided
from .sql_rowids import CARRIED, carry_rowid
from .sql_shares import plan_shares

MAX_SETS = 64  # CUBE over 6 keys; beyond that the evidence would dwarf the user's query


@dataclass
class Pivot:
    """Layout of a PIVOT result: row keys as columns, one column per value of ``on``."""

    on: str  # the name the columns' level gets in the checked form
    row_keys: list[str]
    alias: str = ""  # USING agg AS alias: DuckDB names the columns "<value>_<alias>"
    #: several USING aggregates: their aliases, one per measure ``__sdc_value<i>`` (the wide
    #: columns are "<value>_<alias>"); empty for one aggregate
    aliases: list[str] = field(default_factory=list)


@dataclass
class Plan:
    """How to compute the evidence of one grouped aggregation."""

    select: Any  # sqlglot Select: the user's (or, for a PIVOT, the equivalent long) query
    keys: list[str]  # output names of the key columns
    key_nodes: list[Any]  # their projections
    measures: dict[str, tuple[str | None, str]]  # output column -> (variable, statistic)
    columns: dict[str, Any]  # variable -> column node
    group_text: list[str] = field(default_factory=list)  # per key, its GROUP BY expression (for GROUPING())
    sets: list[tuple[int, ...]] | None = None  # grouping sets as key positions; None: one set of every key
    pivot: Pivot | None = None
    having: bool = False
    #: the HAVING condition bounds an aggregate from both sides (``count(*) = 2``, ``BETWEEN``,
    #: ``IN``, ``> 1 AND < 3``): the groups it keeps may pin hidden values (``two_sided``)
    having_pins: bool = False
    #: output column -> (a, b): the column shows ``a * aggregate + b`` (``count(*) * 2 + 1``,
    #: ``max(age) + 0``); absent when it shows the aggregate itself (or a ROUND / CAST of it)
    affine: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: output column -> the keys of its partition: the column shows a function of a count and its
    #: sum over that partition (``count(*) / sum(count(*)) OVER (PARTITION BY a)``, :mod:`.sql_shares`)
    shares: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def grouping(self) -> bool:
        return self.sets is not None


def stat_of(node: Any) -> tuple[str | None, str, Any]:
    """(variable name, statistic, column node) of one aggregate projection."""
    from sqlglot import exp

    while isinstance(node, exp.Alias | exp.Round | exp.Cast | exp.TryCast | exp.Paren):
        node = node.this
    if isinstance(node, exp.Count):
        arg = node.this
        if isinstance(arg, exp.Star) or arg is None or isinstance(arg, exp.Literal):
            return None, "size", None  # (count(1): a literal is never NULL, every row counts)
        if isinstance(arg, exp.Distinct):
            cols = arg.expressions
            if len(cols) == 1 and isinstance(cols[0], exp.Column):
                return cols[0].name, "nunique", cols[0]
            return None, "custom", None
        if isinstance(arg, exp.Column):
            return arg.name, "count", arg
        return None, "custom", None
    if not isinstance(node, exp.AggFunc):
        return None, "custom", None
    arg = node.this
    if isinstance(node, exp.PercentileCont | exp.PercentileDisc | exp.Quantile | exp.ApproxQuantile):
        from .pandas import quantile_stat

        q = node.args.get("quantile") or node.expression
        try:
            stat = quantile_stat(float(q.name)) if q is not None else "custom"
        except (TypeError, ValueError):
            stat = "custom"
        return (arg.name if isinstance(arg, exp.Column) else None), stat, arg if isinstance(arg, exp.Column) else None
    stat = engine_stat(node)
    if isinstance(arg, exp.Column) and not node.args.get("expressions"):
        return arg.name, stat, arg
    return None, "custom", None


def engine_stat(node: Any) -> str:
    """The rules' name of an aggregate function node (``avg`` is ``mean``), or ``custom``."""
    name = type(node).__name__.lower()
    aliases = {"avg": "mean", "stddevsamp": "std", "stddevpop": "std", "variancepop": "var", "variance": "var",
               "anyvalue": "first", "arbitrary": "first"}
    stat = contract.ENGINE_STATS.get(aliases.get(name, name), aliases.get(name, "custom"))
    return stat if stat in contract.ENGINE_STATS.values() else "custom"


#: statistics of a per-row expression planned as the statistic of a derived column
_OF_AN_EXPRESSION = ("sum", "mean", "min", "max", "median", "std", "var")


#: wrappers that keep an aggregate's value (up to rounding or the type): peeled off
_KEEPING = ("Alias", "Paren", "Round", "Cast", "TryCast")


def unwrap_affine(node: Any) -> tuple[Any, float, float] | None:
    """(inner aggregate, a, b) when ``node`` shows ``a * inner + b``; None otherwise.

    Why: the statistic a cell reveals is its inner aggregate, whatever arithmetic with
    constants is written around it (red team: ``max(age) + 0`` showed one person's age
    while ``max(age)`` was blocked; ``count(*) * 2 + 1`` lost secondary suppression).
    ROUND and CAST keep the value (to rounding), so they leave a and b as they are.
    """
    from sqlglot import exp

    a, b = 1.0, 0.0
    while True:
        if type(node).__name__ in _KEEPING:
            node = node.this
            continue
        if isinstance(node, exp.Neg):
            a, b = -a, b
            node = node.this
            continue
        if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
            left, right = node.this, node.expression
            lc, rc = constant(left), constant(right)
            if (lc is None) == (rc is None):
                return None  # two aggregates, or two constants: not one statistic
            c = lc if lc is not None else rc
            assert c is not None
            inner = right if lc is not None else left
            if isinstance(node, exp.Add):
                b += a * c
            elif isinstance(node, exp.Sub):
                if lc is not None:  # c - w
                    b += a * c
                    a = -a
                else:
                    b -= a * c
            elif isinstance(node, exp.Mul):
                a *= c
            else:
                if lc is not None or c == 0:
                    return None  # c / w is not affine in w
                a /= c
            if a == 0:
                return None
            node = inner
            continue
        break
    return node, a, b


def _case_as_condition(case: Any) -> tuple[Any, float] | None:
    """A CASE whose every result is 0, NULL or one constant k ≠ 0 (``CASE WHEN c THEN 1 ELSE
    0 END``, ``CASE WHEN c THEN 0 ELSE 1 END``): (the condition "the CASE gives k", k);
    else None. Its sum is k times the count of the rows meeting that condition."""
    from sqlglot import exp

    if not isinstance(case, exp.Case):
        return None
    ifs = case.args.get("ifs") or []
    results = [i.args.get("true") for i in ifs]
    default = case.args.get("default")
    if default is not None:
        results.append(default)
    values = set()
    for r in results:
        if isinstance(r, exp.Null):
            continue
        v = constant(r)
        if v is None:
            return None
        values.add(v)
    nonzero = values - {0.0}
    if not ifs or len(nonzero) != 1:
        return None
    (k,) = nonzero
    return exp.NEQ(this=exp.Paren(this=case.copy()), expression=exp.Literal.number(0)), float(k)


def masked_sum(arg: Any) -> tuple[Any, Any] | None:
    """(condition, column x) when a summed expression is x on the rows meeting a condition and 0
    (or NULL) on the others, else None: ``CASE WHEN c THEN x [ELSE 0] END``, ``CASE WHEN c THEN 0
    ELSE x END`` (x where c is not true), ``if(c, x, 0)``, ``if(c, 0, x)``, ``x * (c)::int``,
    ``x * c``, ``x * CASE WHEN c THEN 1 ELSE 0 END`` (either factor first)."""
    from sqlglot import exp

    def zero(node: Any) -> bool:
        return node is None or isinstance(node, exp.Null) or constant(node) == 0

    def otherwise(cond: Any) -> Any:
        return exp.Is(this=exp.Paren(this=cond.copy()), expression=exp.Not(this=exp.Boolean(this=True)))

    def branches(cond: Any, then: Any, other: Any) -> tuple[Any, Any] | None:
        if isinstance(then, exp.Column) and zero(other):
            return cond, then
        if isinstance(other, exp.Column) and zero(then):
            return otherwise(cond), other
        return None

    while isinstance(arg, exp.Paren):
        arg = arg.this
    if isinstance(arg, exp.Case) and arg.this is None and len(arg.args.get("ifs") or []) == 1:
        branch = arg.args["ifs"][0]
        return branches(branch.this, branch.args.get("true"), arg.args.get("default"))
    if isinstance(arg, exp.If) and arg.args.get("true") is not None:
        return branches(arg.this, arg.args.get("true"), arg.args.get("false"))
    if isinstance(arg, exp.Mul):
        for column, mask in ((arg.this, arg.expression), (arg.expression, arg.this)):
            cond = _as_mask(mask)
            if isinstance(column, exp.Column) and cond is not None:
                return cond, column
    return None


def conditional_measures(p: Plan) -> list[str]:
    """The derived measures of a plan that cover only the rows meeting a condition (``CASE WHEN c
    THEN x END``: ``sum(x) FILTER (WHERE c)``, ``sum(if(c, 0, x))``, see :func:`masked_sum`)."""
    from sqlglot import exp

    out = []
    for v, node in p.columns.items():
        while isinstance(node, exp.Paren):
            node = node.this
        if v.startswith(DERIVED) and isinstance(node, exp.Case) and node.args.get("default") is None:
            out.append(v)
    return out


def _as_mask(node: Any) -> Any:
    """The condition of a 0/1 factor (``(c)::int``, a bare predicate, ``CASE WHEN c THEN 1 ELSE 0
    END``), else None."""
    from sqlglot import exp

    while isinstance(node, exp.Paren | exp.Cast | exp.TryCast):
        node = node.this
    if isinstance(node, exp.Predicate | exp.Not | exp.And | exp.Or):
        return node
    found = _case_as_condition(node)
    if found is not None and found[1] == 1.0:
        return found[0]
    return None


#: name prefix of a derived measure column (``sum(if(c, x, 0))``'s ``if(c, x, 0)``)
DERIVED = f"{contract.PREFIX}x"
INDICATOR = f"{contract.PREFIX}if_"  # name prefix of a condition's 0/1 indicator column


def indicator_column(cond: Any) -> tuple[str, Any]:
    """(name, node) of ``CASE WHEN cond THEN 1 ELSE 0 END``; the name is derived from the
    condition's text, so two tables counting the same condition share the column (linking
    compares rows by the columns tables have in common)."""
    import hashlib

    import sqlglot

    text = cond.sql("duckdb")
    name = INDICATOR + hashlib.blake2b(text.encode(), digest_size=6).hexdigest()
    return name, sqlglot.parse_one(f"(CASE WHEN {text} THEN 1 ELSE 0 END)", read="duckdb")


def analyse(node: Any, synthetic: str) -> tuple[str | None, str, Any, float, float]:
    """(variable, statistic, column node, a, b) of one aggregate projection, for DuckDB.

    A projection that is none of the shapes below but combines several aggregates of the
    group (``avg(x) * count(*)``, ``sum(x) - min(x)``, ``coalesce(sum(x), 0)``) is planned by
    :func:`_composite`.
    """
    found = _analyse_one(node, synthetic)
    if found[1] == "custom":
        found = _composite(node, synthetic) or found
    return _named_by_expression(found, synthetic)


def _named_by_expression(found: tuple[str | None, str, Any, float, float], synthetic: str
                         ) -> tuple[str | None, str, Any, float, float]:
    """A derived measure (``sum(income * 2)``'s ``income * 2``) named after its expression's text,
    as indicators are: two tables aggregating the same expression share the column, and two
    different ones never do. Named by position, ``sum(income::DOUBLE)`` then ``sum(income * 2)``
    were the same variable whose values had "changed" (review, red team stop 55)."""
    import hashlib

    var, stat, column, a, b = found
    if var is None or column is None or not str(var).startswith(synthetic):
        return found
    text = column.sql("duckdb")
    return DERIVED + hashlib.blake2b(text.encode(), digest_size=6).hexdigest(), stat, column, a, b


#: statistics that are one unit's value, whatever else a composite combines them with
_EXTREMES = ("max", "min", "first", "last", "mode")


def _composite(node: Any, synthetic: str) -> tuple[str | None, str, Any, float, float] | None:
    """A function of several aggregates of the same group, planned as what it reveals.

    Its cells are judged by the most revealing part (red team: ``avg(turnover) * count(*)``
    is the sum, and showed a dominant firm's turnover at review): an extreme (max, min,
    first, ...) makes it one unit's value; else one magnitude variable (sum, mean, std of x,
    with any counts) makes it that variable's statistic, checked with its dominance and
    protected through its totals; a sum beside the group's count, the mean over every row, a
    missing value counting 0 (``sum(child) / count(*)`` passed as a sum: 226 / 0.368 = 614, red
    team of stop 68). Counts only, two magnitude variables, a subquery, or a part we cannot
    read: None (a custom statistic, at review)."""
    from sqlglot import exp

    if node.find(exp.Subquery, exp.Window) is not None:
        return None
    outer = [a for a in node.find_all(exp.AggFunc) if a.find_ancestor(exp.AggFunc) is None]
    if len(outer) < 1:
        return None
    rest = all_but_filtered(node)
    if rest is not None:
        return _analyse_one(rest, synthetic)
    combined = linear_sum(node)
    if combined is not None:
        return _analyse_one(combined, synthetic)
    # an aggregate under FILTER (WHERE c) is analysed with its condition: without it,
    # ``sum(x) + sum(x) FILTER (WHERE c)`` read as two sums of x and was checked as the sum of x
    outer = [a.parent if isinstance(a.parent, exp.Filter) else a for a in outer]
    parts = [_analyse_one(a, f"{synthetic}_{i}") for i, a in enumerate(outer)]
    if any(p[1] == "custom" for p in parts):
        return None
    for var, stat, col, _a, _b in parts:
        if stat in _EXTREMES or stat.startswith("quantile") or stat == "median":
            return var, stat, col, 1.0, 0.0
    if any(str(p[0]).startswith(INDICATOR) or p[1] == "count" for p in parts):
        return None  # (a count of some of the rows: ``count_if(age > 100) + 0 * avg(x)`` showed 1, red team)
    magnitude = [p for p in parts if p[1] in MAGNITUDE_EVIDENCE and p[0] is not None
                 and not str(p[0]).startswith(INDICATOR)]
    if len({p[0] for p in magnitude}) != 1:
        return None
    var, stat, col, _a, _b = magnitude[0]
    if stat == "sum" and col is not None and any(p[1] == "size" for p in parts):
        return synthetic, "mean", exp.Coalesce(this=col.copy(), expressions=[exp.Literal.number(0)]), 1.0, 0.0
    return var, stat, col, 1.0, 0.0


def _analyse_one(node: Any, synthetic: str) -> tuple[str | None, str, Any, float, float]:
    """(variable, statistic, column node, a, b) of one aggregate (possibly wrapped).

    Plans what the cell reveals rather than its syntax:

    * arithmetic with constants around the aggregate (``a``, ``b``: see :func:`unwrap_affine`);
    * a count of the rows meeting a condition (``count(*) FILTER (WHERE c)``, ``count_if(c)``,
      ``sum(CASE WHEN c THEN 1 ELSE 0 END)``, ``count(CASE WHEN c THEN 1 END)``, ``count(expr)``)
      is the sum of the condition's 0/1 indicator (:func:`indicator_column`), as pandas
      plans the sum of a flag: the rules then count the units with and without it, and
      linking takes the rows meeting it as the table's population (red team: the same
      filter in WHERE was caught, inside FILTER it was not: F 37 − 35 = 2);
    * another aggregate with a condition (``sum(x) FILTER (WHERE c)``, ``sum(CASE WHEN c
      THEN x END)``) is the aggregate of a derived column ``synthetic``, NULL where c fails;
    * ``arg_max(x, x)``, ``max_by``, ``first(x ORDER BY ...)``, ``last``: one unit's value
      (max / min when x orders itself, else first).
    """
    import sqlglot
    from sqlglot import exp

    custom: tuple[str | None, str, Any, float, float] = (None, "custom", None, 1.0, 0.0)
    found = unwrap_affine(node)
    if found is None:
        return custom
    agg, a, b = found
    cond = None
    if isinstance(agg, exp.Filter):
        where = agg.expression
        cond = where.this if isinstance(where, exp.Where) else where
        agg = agg.this
    while isinstance(agg, exp.IgnoreNulls | exp.RespectNulls):
        agg = agg.this

    def both(extra: Any) -> Any:
        return extra.copy() if cond is None else exp.and_(exp.Paren(this=cond.copy()), exp.Paren(this=extra.copy()))

    def counted(condition: Any, scale: float = 1.0) -> tuple[str | None, str, Any, float, float]:
        if condition.find(exp.AggFunc, exp.Window, exp.Subquery) is not None:
            return custom
        name, column = indicator_column(condition)
        return name, "sum", column, a * scale, b

    def derived(expr: Any, stat: str) -> tuple[str | None, str, Any, float, float]:
        """The statistic of ``expr`` over the rows meeting ``cond`` (a derived column)."""
        if cond is not None:
            expr = exp.Case(ifs=[exp.If(this=cond.copy(), true=expr.copy())])
        if isinstance(expr, exp.Column):
            return expr.name, stat, expr, a, b
        if expr.find(exp.AggFunc, exp.Window, exp.Subquery) is not None:
            return custom
        return synthetic, stat, sqlglot.parse_one(f"({expr.sql('duckdb')})", read="duckdb"), a, b

    if isinstance(agg, exp.CountIf):
        return counted(both(agg.this))
    if isinstance(agg, exp.Count):
        arg = agg.this
        if isinstance(arg, exp.Star) or arg is None:
            return (None, "size", None, a, b) if cond is None else counted(cond)
        if isinstance(arg, exp.Distinct):
            var, stat, col = stat_of(agg)
            if cond is not None or col is None:
                return custom
            return var, stat, col, a, b
        if isinstance(arg, exp.Column) and cond is None:
            return arg.name, "count", arg, a, b
        # count(expr): the rows where expr is not NULL (and the filter holds)
        return counted(both(exp.Not(this=exp.Is(this=exp.Paren(this=arg.copy()), expression=exp.Null()))))
    if isinstance(agg, exp.ArgMax | exp.ArgMin):
        x, y = agg.this, agg.expression
        if not isinstance(x, exp.Column):
            return custom
        same = isinstance(y, exp.Column) and y.sql("duckdb") == x.sql("duckdb")
        stat = ("max" if isinstance(agg, exp.ArgMax) else "min") if same else "first"
        return derived(x, stat)  # the value of one unit (the one with the extreme y)
    if isinstance(agg, exp.First | exp.Last | exp.AnyValue):
        arg = agg.this
        if isinstance(arg, exp.Order):
            arg = arg.this
        if not isinstance(arg, exp.Column):
            return custom
        return derived(arg, "last" if isinstance(agg, exp.Last) else "first")
    if isinstance(agg, exp.Sum):
        as_count = _case_as_condition(agg.this)
        if as_count is not None:  # sum(CASE WHEN c THEN k ELSE 0 END) = k * count of c
            condition, k = as_count
            return counted(both(condition), k)
        kept = masked_sum(agg.this)
        if kept is not None:
            # sum(CASE WHEN c THEN x [ELSE 0] END), sum(if(c, 0, x)), sum(x * (c)::int): the sum
            # of x over the rows meeting a condition (red team: sum(if(district = 'C', 0, income))
            # beside sum(income) gave C's one man's income, both 'pass')
            condition, column = kept
            cond = both(condition)
            return derived(column, "sum")
    if isinstance(agg, exp.AggFunc) and agg.this is not None and not isinstance(agg.this, exp.Column | exp.Star) \
            and not agg.args.get("expressions") and engine_stat(agg) in _OF_AN_EXPRESSION:
        # sum(income * (age > 100)::int): the sum of a per-row expression is the sum of a derived
        # column, checked by the rules like any (its largest contributions are units' values:
        # one non-zero unit per group is primary; red team: two incomes shown at 'review')
        return derived(agg.this, engine_stat(agg))
    var, stat, col = stat_of(agg)
    if var is None or col is None:
        return custom if stat != "size" else (None, "size", None, a, b)
    if cond is not None:
        return derived(col, stat)
    return var, stat, col, a, b


_PIVOT_TAIL = re.compile(r"\s+(order\s+by|limit)\b(?![^()]*\))[^;]*;?\s*$", re.IGNORECASE)


def parse_last(query: str) -> Any:
    """The last statement, parsed. sqlglot does not parse ``ORDER BY`` / ``LIMIT`` after a
    PIVOT statement; they only order or cut the rows (the facts cover every group), so they
    are left out of the plan."""
    import sqlglot

    try:
        statements = [s for s in sqlglot.parse(query, read="duckdb") if s is not None]
    except Exception:
        if not re.match(r"\s*pivot\b", query, re.IGNORECASE) or ";" in query.strip().rstrip(";"):
            return None
        shorter = _PIVOT_TAIL.sub("", query)
        if shorter == query:
            return None
        try:
            statements = [s for s in sqlglot.parse(shorter, read="duckdb") if s is not None]
        except Exception:
            return None
    return statements[-1] if statements else None


def single_query(query: str) -> bool:
    """One statement, a query (SELECT or PIVOT): binding it as a relation runs nothing."""
    import sqlglot
    from sqlglot import exp

    try:
        statements = [s for s in sqlglot.parse(query, read="duckdb") if s is not None]
    except Exception:
        statements = [] if ";" in query.strip().rstrip(";") else [parse_last(query)]
    return len(statements) == 1 and isinstance(statements[0], exp.Select | exp.Pivot | exp.Union)


def plan(query: str, out_cols: list[str]) -> Plan | None:
    """Parse the last statement; None when it is not a grouped query we understand."""
    from sqlglot import exp

    stmt = parse_last(query)
    if stmt is None:
        return None
    pivot = pivot_node(stmt)
    if pivot is not None:
        return _pivot_plan(pivot, out_cols)
    if not isinstance(stmt, exp.Select):
        return None
    return _select_plan(stmt, out_cols)


def _select_plan(select: Any, out_cols: list[str]) -> Plan | None:
    from sqlglot import exp

    group = select.args.get("group")
    if select.find(exp.Window) is not None and (group is None or select.args.get("qualify") is not None):
        return None  # (windows: only shares of a count over the groups, sql_shares)
    if group is None and not _scalar_aggregate(select):
        return None
    if any(isinstance(t, exp.Pivot) for t in select.find_all(exp.Pivot)):
        return None  # a PIVOT clause inside a select: its output columns are not the projections
    projections = select.expressions
    if len(projections) != len(out_cols) or any(isinstance(p, exp.Star) for p in projections):
        return None
    keys, key_nodes, measures, columns = [], [], {}, {}
    affine: dict[str, tuple[float, float]] = {}
    shared: list[tuple[Any, str]] = []  # (projection, name) of the windows, planned once the keys are known
    for j, (p, name) in enumerate(zip(projections, out_cols, strict=True)):
        if p.find(exp.Window) is not None:
            shared.append((p, name))
            continue
        if p.find(exp.AggFunc) is None:
            if p.find(exp.Grouping) is not None:
                return None  # the user's own GROUPING() column: a label we do not model
            keys.append(name)
            key_nodes.append(p)
            continue
        var, stat, node, a, b = analyse(p, f"{DERIVED}{j}")
        measures[name] = (var, stat)
        if (a, b) != (1.0, 0.0):
            affine[name] = (a, b)
        if var is not None and node is not None:
            columns.setdefault(var, node)
    shares = plan_shares(select, shared, key_nodes, keys, lambda node: analyse(node, DERIVED), measures, columns)
    if shares is None:
        return None
    if group is not None and not keys and group.args.get("all") and not group.expressions:
        group = None  # GROUP BY ALL with nothing to group by: one group (as DuckDB computes it)
    if not measures or (group is not None and not keys):
        return None
    if group is None:
        # a scalar SELECT over a WHERE is one group (red team: count(*) + 100 of district C)
        return Plan(select, [], [], measures, columns, affine=affine)
    sets = _grouping_sets(group, key_nodes, keys)
    if sets is False or (shares and sets[0] is not None):  # type: ignore[index]
        return None  # (a window over grouping sets' rows sums margins and cells together)
    group_sets, group_text = sets  # type: ignore[misc]
    having = select.args.get("having")
    return Plan(select, keys, key_nodes, measures, columns, group_text=group_text, sets=group_sets,
                having=having is not None, having_pins=having is not None and two_sided(having.this), affine=affine,
                shares=shares)


def _scalar_aggregate(select: Any) -> bool:
    """A SELECT without GROUP BY whose every projection is an aggregate: one group.

    No HAVING, DISTINCT, QUALIFY or set operations; the FROM may be anything (a WHERE, a
    join, a subquery): the facts are computed over the same rows by the same FROM.
    """
    from sqlglot import exp

    if any(select.args.get(a) for a in ("having", "qualify", "distinct")):
        return False
    projections = select.expressions
    if not projections or any(isinstance(p, exp.Star) or p.find(exp.AggFunc) is None for p in projections):
        return False
    return (select.args.get("from_") or select.args.get("from")) is not None


def _key_position(g: Any, key_nodes: list[Any], keys: list[str]) -> int | None:
    from sqlglot import exp

    if isinstance(g, exp.Paren):
        g = g.this
    if isinstance(g, exp.Literal) and g.is_int:
        pos = int(g.name) - 1
        # a position names a projection; it must be a key's
        return None if pos < 0 else pos if pos < len(key_nodes) else None
    text = g.sql("duckdb")
    for j, (node, name) in enumerate(zip(key_nodes, keys, strict=True)):
        if text in (node.unalias().sql("duckdb"), node.alias_or_name) or (g.name in (name, node.alias_or_name) \
                and isinstance(g, exp.Column) and not g.table):
            return j
    return None


def _grouping_sets(group: Any, key_nodes: list[Any], keys: list[str]) -> Any:
    """(sets, group text per key): sets None for a plain GROUP BY; False when not understood.

    ``ROLLUP (a, b)`` gives the sets ``(a, b), (a), ()``, ``CUBE`` every subset, ``GROUPING
    SETS`` its listed sets; several items multiply (``a, ROLLUP (b)``). Every grouping
    expression must be a key of the result, and the set of every key must be among the sets
    (its rows are the inner cells; the other sets are margins of it).
    """
    from sqlglot import exp

    n = len(keys)
    text = [key_nodes[j].unalias().sql("duckdb") for j in range(n)]
    if group.args.get("all"):
        return None, text
    options: list[list[frozenset[int]]] = []
    mentioned: set[int] = set()

    def position(g: Any) -> int | None:
        j = _key_position(g, key_nodes, keys)
        if j is not None:
            mentioned.add(j)
            if not (isinstance(g, exp.Literal) or (isinstance(g, exp.Paren) and isinstance(g.this, exp.Literal))):
                text[j] = (g.this if isinstance(g, exp.Paren) else g).sql("duckdb")
        return j

    def members(item: Any) -> list[int] | None:
        nodes = item.expressions if isinstance(item, exp.Tuple) else [item]
        out = [position(x) for x in nodes]
        return None if any(j is None for j in out) else out  # type: ignore[return-value]

    items = list(group.expressions)
    for legacy in ("grouping_sets", "cube", "rollup"):  # older sqlglot keeps them apart
        extra = group.args.get(legacy)
        if extra:
            items += extra if isinstance(extra, list) else [extra]
    for item in items:
        if isinstance(item, exp.Rollup):
            cols = members(exp.Tuple(expressions=list(item.expressions)))
            if cols is None:
                return False
            options.append([frozenset(cols[:i]) for i in range(len(cols), -1, -1)])
        elif isinstance(item, exp.Cube):
            cols = members(exp.Tuple(expressions=list(item.expressions)))
            if cols is None or len(cols) > 6:
                return False
            options.append([frozenset(c) for r in range(len(cols), -1, -1) for c in itertools.combinations(cols, r)])
        elif isinstance(item, exp.GroupingSets):
            listed = []
            for s in item.expressions:
                cols = members(s.this if isinstance(s, exp.Paren) else s)
                if cols is None:
                    return False
                listed.append(frozenset(cols))
            options.append(listed)
        else:
            j = position(item)
            if j is None:
                return False
            options.append([frozenset([j])])
    if set(range(n)) - mentioned:
        return False  # a key column that is not grouped on
    sets = [frozenset()]
    for choice in options:
        sets = [s | o for s in sets for o in choice]
        if len(sets) > MAX_SETS:
            return False
    if len(set(sets)) != len(sets):
        return False  # a repeated set repeats its rows: labels would not identify cells
    full = frozenset(range(n))
    if sets == [full]:
        return None, text
    if full not in sets:
        return False
    return [tuple(sorted(s)) for s in sets], text


def pivot_node(stmt: Any) -> Any:
    """The PIVOT statement, bare or as ``SELECT * FROM (PIVOT ...)``; else None."""
    from sqlglot import exp

    if isinstance(stmt, exp.Pivot):
        return stmt
    if isinstance(stmt, exp.Select) and len(stmt.expressions) == 1 and isinstance(stmt.expressions[0], exp.Star):
        if any(stmt.args.get(a) for a in ("where", "group", "having", "joins", "qualify", "limit", "offset")):
            return None
        src = stmt.args.get("from_") or stmt.args.get("from")
        inner = getattr(src, "this", None)
        if isinstance(inner, exp.Subquery) and isinstance(inner.this, exp.Pivot):
            return inner.this
    return None


def _pivot_plan(node: Any, out_cols: list[str]) -> Plan | None:
    """PIVOT src ON col USING agg GROUP BY keys → the long SELECT whose groups are its cells."""
    import sqlglot
    from sqlglot import exp

    if node.args.get("unpivot"):
        return None
    ons = node.expressions or []
    using = node.args.get("using") or []
    group = node.args.get("group")
    if len(ons) != 1 or not using or group is None:
        return None
    several = len(using) > 1
    aliases = [u.alias if isinstance(u, exp.Alias) else "" for u in using]
    if several and (not all(aliases) or len(set(aliases)) != len(aliases)):
        return None  # DuckDB's own names of unaliased aggregates are not parsed here
    on = ons[0]
    values = None
    if isinstance(on, exp.In):
        on, values = on.this, on.expressions
    if not isinstance(on, exp.Column):
        return None
    row_keys = []
    for g in group.expressions:
        if not isinstance(g, exp.Column):
            return None
        row_keys.append(g.name)
    if not row_keys or row_keys != out_cols[:len(row_keys)] or on.name in out_cols:
        return None
    agg = using[0]
    var, stat, col = stat_of(agg)
    measures: dict[str, tuple[str | None, str]] = {}
    columns: dict[str, Any] = {}
    if several:
        for i, u in enumerate(using):
            v, st, c, a, b = analyse(u, f"{DERIVED}{i}")
            if (a, b) != (1.0, 0.0):
                return None
            measures[f"{contract.PREFIX}value{i}"] = (v, st)
            if v is not None and c is not None:
                columns.setdefault(v, c)
    source = node.this
    if source is None:
        return None
    on_sql = on.sql("duckdb")
    where = f" WHERE {on_sql} IN ({', '.join(v.sql('duckdb') for v in values)})" if values else ""
    keys_sql = ", ".join(g.sql("duckdb") for g in group.expressions)
    measure = f"{contract.PREFIX}value"
    aggs = f'{agg.unalias().sql("duckdb")} AS {measure}' if not several else \
        ", ".join(f'{u.unalias().sql("duckdb")} AS {m}' for u, m in zip(using, measures, strict=True))
    long_sql = (f'SELECT {keys_sql}, coalesce(CAST({on_sql} AS VARCHAR), \'NULL\') AS "{on.name}", '
                f'{aggs} FROM {source.sql("duckdb")}{where} GROUP BY ALL')
    try:
        select = sqlglot.parse_one(long_sql, read="duckdb")
    except Exception:
        return None
    keys = [*row_keys, on.name]
    key_nodes = list(select.expressions[:len(keys)])
    if not several:
        columns = {var: col} if var is not None and col is not None else {}
        measures = {measure: (var, stat)}
    return Plan(select, keys, key_nodes, measures, columns,
                group_text=[n.unalias().sql("duckdb") for n in key_nodes],
                pivot=Pivot(on.name, row_keys, aliases[0] if not several else "", aliases if several else []))


# --------------------------------------------------------------------- evidence queries
def _flags(p: Plan) -> list[str]:
    pre = contract.PREFIX
    return [f"GROUPING({t}) AS {pre}g{j}" for j, t in enumerate(p.group_text)] if p.grouping else []


def combined_query(p: Plan, variables: list[str], magnitudes: set[str], unit: str | None, k: int) -> str:
    """The user's select with the facts appended (no unit, or a unit and counts only).

    With grouping sets, ``GROUPING(key)`` per key tells a margin's NULL from a real one.
    """
    import sqlglot

    pre = contract.PREFIX
    extra = [f"count(*) AS {pre}rows", *_flags(p)]
    if unit is not None:
        extra.append(f'count(DISTINCT "{unit}") AS {pre}units')
    for i, v in enumerate(variables):
        names = contract.fact_names(i)
        col = p.columns[v].sql("duckdb")
        if unit is None:
            extra.append(f"count({col}) AS {names['n']}")
        else:
            extra.append(f'count(DISTINCT CASE WHEN {col} IS NOT NULL THEN "{unit}" END) AS {names["n"]}')
        if v.startswith(INDICATOR):  # a condition's indicator: the units meeting it
            extra.append(f"count(*) FILTER (WHERE {col} = 1) AS {pre}ones_{i}" if unit is None else
                         f'count(DISTINCT CASE WHEN {col} = 1 THEN "{unit}" END) AS {pre}ones_{i}')
        if v in magnitudes and unit is None:
            x = f"CAST({col} AS DOUBLE)"
            extra += [f"sum({x}) AS {names['t']}", f"sum(abs({x})) AS {names['ta']}",
                      f"bool_or({x} < 0) AS {names['neg']}", f"max(abs({x}), {int(k)}) AS {names['top']}"]
            extra.append(f"{contract.checksum_sql(col, known_only=True)} AS {contract.VALUE_CHECKSUM}{i}")  # (linking.engine_values)
            if not v.startswith(INDICATOR):  # is it a 0/1 (two-valued) variable? (see set_indicators)
                extra += [f"min({x}) AS {pre}lo_{i}", f"max({x}) AS {pre}hi_{i}", f"sum({x} * {x}) AS {pre}sq_{i}",
                          f"count({x}) AS {pre}cnt_{i}"]
    select = p.select.copy()
    for e in extra:
        select = select.select(sqlglot.parse_one(e, read="duckdb"), copy=False)
    return select.sql("duckdb")


def facts_query(p: Plan, variables: list[str], magnitudes: set[str], unit: str, k: int) -> str:
    """Facts with a unit column: contributions summed per (group, unit), then per group.

    With grouping sets the per-unit step groups by every set plus the unit (a unit's
    contribution to a margin is its sum over the whole margin, not over each inner cell).
    """
    import sqlglot
    from sqlglot import exp

    pre = contract.PREFIX
    inner = p.select.copy()
    inner.set("expressions", [])
    for arg in ("having", "order", "limit", "offset", "qualify", "distinct"):
        inner.set(arg, None)
    items = [f"{n.unalias().sql('duckdb')} AS {pre}k{j}" for j, n in enumerate(p.key_nodes)]
    items += [f'"{unit}" AS {pre}u', f"count(*) AS {pre}r", *_flags(p)]
    for i, v in enumerate(variables):
        col = p.columns[v].sql("duckdb")
        items.append(f"count({col}) AS {pre}c{i}")
        if v in magnitudes:
            items.append(f"sum(CAST({col} AS DOUBLE)) AS {pre}s{i}")
            if not v.startswith(INDICATOR):  # row values of a possible 0/1 variable, per unit
                items += [f"min(CAST({col} AS DOUBLE)) AS {pre}l{i}", f"max(CAST({col} AS DOUBLE)) AS {pre}h{i}",
                          f"sum(CAST({col} AS DOUBLE) * CAST({col} AS DOUBLE)) AS {pre}q{i}"]
        if v.startswith(INDICATOR):
            items.append(f"max({col}) AS {pre}o{i}")
    for e in items:
        inner = inner.select(sqlglot.parse_one(e, read="duckdb"), copy=False)
    if p.grouping:
        sets = ", ".join("(" + ", ".join([*(p.group_text[j] for j in s), f'"{unit}"']) + ")" for s in p.sets or [])
        inner.set("group", sqlglot.parse_one(f"SELECT 1 GROUP BY GROUPING SETS ({sets})", read="duckdb")
                  .args["group"])
    else:
        inner.set("group", exp.Group(expressions=[exp.Literal.number(j + 1) for j in range(len(p.key_nodes) + 1)]))
    outer = [f'{pre}k{j} AS "{name}"' for j, name in enumerate(p.keys)]
    outer += [f"{pre}g{j}" for j in range(len(p.keys))] if p.grouping else []
    outer += [f"sum({pre}r) AS {pre}rows", f"count(*) AS {pre}units"]
    for i, v in enumerate(variables):
        names = contract.fact_names(i)
        outer.append(f"count(*) FILTER (WHERE {pre}c{i} > 0) AS {names['n']}")
        if v.startswith(INDICATOR):  # units meeting the condition in at least one of their rows
            outer.append(f"count(*) FILTER (WHERE {pre}o{i} = 1) AS {pre}ones_{i}")
        if v in magnitudes:
            x = f"{pre}s{i}"
            outer += [f"sum({x}) AS {names['t']}", f"sum(abs({x})) AS {names['ta']}",
                      f"bool_or({x} < 0) AS {names['neg']}", f"max(abs({x}), {int(k)}) AS {names['top']}"]
            if not v.startswith(INDICATOR):  # a 0/1 variable: row values at two levels, units at the top one
                outer += [f"min({pre}l{i}) AS {pre}lo_{i}", f"max({pre}h{i}) AS {pre}hi_{i}",
                          f"sum({pre}q{i}) AS {pre}sq_{i}", f"sum({pre}c{i}) AS {pre}cnt_{i}",
                          f"sum({pre}h{i}) AS {pre}hsum_{i}", f"count({pre}h{i}) AS {pre}hcnt_{i}"]
    group_cols = [f"{pre}k{j}" for j in range(len(p.keys))] + \
        ([f"{pre}g{j}" for j in range(len(p.keys))] if p.grouping else [])
    tail = f" GROUP BY {', '.join(group_cols)}" if group_cols else ""  # a scalar query: one group
    return f"SELECT {', '.join(outer)} FROM ({inner.sql('duckdb')}) AS {pre}per_unit{tail}"


#: the column of a linking row's ``rowid`` in its base table (see :func:`rows_query`)
ROWID = f"{contract.PREFIX}rowid"
#: a Python frame's row positions in :func:`rows_query` (``positions``)
POSITION = f"{contract.PREFIX}position"
#: in :func:`rows_query`'s catalog checks: how many tables or views of the catalog bear the name
#: (registered Python frames left out), how many registered Python frames do, and for a table its
#: rows and highest ``rowid``
SHADOWED = f"{contract.PREFIX}shadowed"
SCANS = f"{contract.PREFIX}scans"
TABLE_ROWS = f"{contract.PREFIX}table_rows"
TABLE_LAST = f"{contract.PREFIX}table_last"


def _catalog_checks(table: Any, rowid: bool) -> list[str]:
    """Columns that tell what ``table`` (a sqlglot Table, alias dropped) reads in the catalog.

    Why in the rows themselves: a query's parameters (``?``) bind for every evidence query as for
    the user's, and a query of its own would not bind them. DuckDB reads a table or view of its
    catalog before a Python object of the same name, and a registered frame is a temporary view
    over a scan of it."""
    quoted = table.name.replace("'", "''")
    scan = "temporary AND regexp_matches(sql, '(pandas|arrow)_scan[(]')"
    items = [
        f"((SELECT count(*) FROM duckdb_tables() WHERE lower(table_name) = lower('{quoted}')) + "
        f"(SELECT count(*) FROM duckdb_views() WHERE NOT internal AND lower(view_name) = lower('{quoted}') "
        f"AND NOT ({scan}))) AS {SHADOWED}",
        f"(SELECT count(*) FROM duckdb_views() WHERE NOT internal AND lower(view_name) = lower('{quoted}') "
        f"AND {scan}) AS {SCANS}",
    ]
    if rowid:
        bare = table.sql("duckdb")
        items += [f"(SELECT count(*) FROM {bare}) AS {TABLE_ROWS}", f"(SELECT max(rowid) FROM {bare}) AS {TABLE_LAST}"]
    return items


def rows_query(p: Plan, only_known: str | None = None, columns: list[str] | None = None, *,
               raw: bool = False, rowid: bool = False, positions: int | None = None,
               rowid_check: bool = False) -> str | None:
    """One row per source row reaching the aggregation: its keys (as DuckDB computes them
    for the table) and ``hash()`` of every source column, for linking. None if not expressible.

    ``only_known``: a variable whose NULL rows are left out (a table of that variable's
    statistics only covers the rows where it is known). ``columns``: hash only these source
    columns (a wide source: linking reads a few columns, the rest would only cost memory).
    ``rowid``: also each row's ``rowid`` (:data:`ROWID`) when the rows come from one table
    (None otherwise; a view or a Python frame has none, and binding the query then fails):
    linking takes it as the rows' labels, so that tables of the same DuckDB table are placed
    among each other however little their rows overlap (content alone needs half of them).
    ``positions``: the source is a Python frame of this many rows (a replacement scan): each row's
    position in it comes as :data:`ROWID` instead (a ``POSITIONAL JOIN`` with ``range``), which
    the caller turns into the frame's own labels (None when not one table, as for ``rowid``).
    With ``positions`` or ``rowid_check`` the rows also tell what the name reads in the catalog
    (:func:`_catalog_checks`): the caller labels the rows only when that is what it expects.
    """
    import sqlglot

    select = p.select.copy()
    for arg in ("having", "order", "limit", "offset", "qualify", "distinct", "group"):
        select.set(arg, None)
    if only_known is not None and only_known in p.columns:
        select = select.where(sqlglot.parse_one(f"{p.columns[only_known].sql('duckdb')} IS NOT NULL",
                                                read="duckdb"), copy=False)
    with_sql, ctes = "", None
    for name in ("with", "with_"):
        cte = select.args.get(name)
        if cte is not None:
            with_sql, ctes = cte.sql("duckdb") + " ", cte
            select.set(name, None)
    source = select.args.get("from_") or select.args.get("from")  # (sqlglot's name for FROM changed)
    # (out of a CTE or subquery that keeps the table's rows one for one: their rowids, sql_rowids)
    carried = carry_rowid(select, ctes) if rowid and positions is None else None
    if carried is not None and carried[0] is not None:
        with_sql = carried[0].sql("duckdb") + " "
    if (rowid or positions is not None) and carried is None and (
            with_sql or select.args.get("joins") or source is None or not isinstance(source.this, sqlglot.exp.Table)):
        return None
    name_of_frame = None
    if positions is not None:
        table = source.this
        name_of_frame = table.copy()
        name_of_frame.set("alias", None)
        bare = table.copy()
        bare.set("alias", None)
        numbered = sqlglot.parse_one(f"SELECT * FROM {bare.sql('duckdb')} POSITIONAL JOIN "
                                     f"(SELECT range AS {POSITION} FROM range({int(positions)}))", read="duckdb")
        source.set("this", sqlglot.exp.Subquery(
            this=numbered, alias=sqlglot.exp.TableAlias(this=sqlglot.exp.to_identifier(table.alias_or_name))))
    select.set("expressions", [])
    select = select.select(sqlglot.parse_one(f"1 AS {contract.PREFIX}probe", read="duckdb"), copy=False)
    text = select.sql("duckdb")
    head = f"SELECT 1 AS {contract.PREFIX}probe "
    if not text.startswith(head):
        return None
    items = [f'{n.unalias().sql("duckdb")} AS {contract.PREFIX}k{j}' for j, n in enumerate(p.key_nodes)]
    # raw: the values themselves (a small in-process source: pandas' own fingerprints then
    # link this table with pandas and polars tables of the same rows); else DuckDB's hash()
    wrap = "{0}" if raw else "hash({0})"
    # raw: a key that is a source column as it is comes once (linking takes keys from the k
    # columns and skips source columns of the keys' names: fetching them twice cost a copy)
    bare_keys = [n.unalias().name for n in p.key_nodes
                 if raw and isinstance(n.unalias(), sqlglot.exp.Column) and n.unalias().name == n.alias_or_name]
    if columns is None:
        left_out = [*dict.fromkeys(bare_keys), *([POSITION] if positions is not None else []),
                    *([CARRIED] if carried is not None else [])]
        if left_out:
            quoted_keys = ", ".join('"' + c.replace('"', '""') + '"' for c in left_out)
            items.append(wrap.format(f"COLUMNS(* EXCLUDE ({quoted_keys}))") if not bare_keys
                         else f"COLUMNS(* EXCLUDE ({quoted_keys}))")
        else:
            items.append(wrap.format("COLUMNS(*)"))
    else:
        quoted = ['"' + c.replace('"', '""') + '"' for c in columns if c not in bare_keys]
        items += [f"{wrap.format(q)} AS {q}" for q in quoted]
    # a condition's 0/1 indicator, as values (linking takes the rows meeting it as the population)
    items += [f'{node.sql("duckdb")} AS "{v}"' for v, node in p.columns.items() if v.startswith(INDICATOR)]
    # a derived measure (``if(c, x, 0)``), hashed as the source columns are: linking sees which
    # rows keep a column's values (``linking.masked``), and compares nothing else by it
    items += [f'{wrap.format(node.sql("duckdb"))} AS "{v}"' for v, node in p.columns.items()
              if v.startswith(DERIVED)]
    if rowid:
        # a table's rowids name its rows only: numbered in a range of their own per table name, so
        # that they never meet another table's rowids or pandas' labels (a narrow copy of the people
        # sorted by sex, read by rowid 0..72, was taken for the people in pandas' order: red team)
        name = (carried[1] if carried is not None else source.this.sql("duckdb")).lower().encode()
        read = "rowid" if carried is None else f'"{CARRIED}"' if not source.this.alias_or_name \
            else f'{source.this.alias_or_name}."{CARRIED}"'
        items.append(f"{read} + {(zlib.crc32(name) & 0x7FFFFFFF) << 32} AS {ROWID}")
    elif positions is not None:
        items.append(f"{POSITION} AS {ROWID}")
    if positions is not None or (rowid and rowid_check):
        target = (sqlglot.exp.to_table(carried[1]) if carried is not None else source.this.copy()) \
            if positions is None else name_of_frame
        target.set("alias", None)
        items += _catalog_checks(target, rowid)
    return f"{with_sql}SELECT {', '.join(items)} {text[len(head):]}"
