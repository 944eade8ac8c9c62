"""The Python frames a DuckDB connection reads, and the tables copied from them: whose rows they are.

Why: linking places the rows behind a table among other tables' rows by their labels (pandas'
index) or by their content. DuckDB reads a pandas frame without its index, and a table copied
from a frame (``CREATE TABLE people AS SELECT * FROM df``) numbers its rows anew (``rowid``):
when the columns cannot tell people apart (district, sex, a flag), a count in DuckDB and a count
in pandas over a shuffled copy of the same people were never compared, and 37 − 35 gave C's two
women (red team of issue 22: 39 of 300 seeded sessions, all through such a table).

So the capture remembers, per connection (weakly), the frames registered under a name
(``con.register``) and the tables made from a frame by a plain ``CREATE TABLE t AS SELECT * FROM
x`` (every row, in order: DuckDB keeps the insertion order), each with the pandas labels of its
rows (:func:`.row_origins.labels_of`; a polars frame made by ``pl.from_pandas`` has them too).
Only the labels are kept (an Index pandas shares), never a frame. Any later statement that is not
a query and names such a table forgets it (an ``INSERT``, a ``DELETE``, a ``DROP``); the reader
still checks that the table holds exactly as many rows as the frame had, numbered from 0
(``sql.rows_query(rowid_check=True)``), and linking confirms labels by the rows' content.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pandas as pd

from ...evidence import row_origins
from ...evidence.weak_table import WeakTable
from .. import read_back
from ..depth import passthrough

#: Connections whose frames and tables are remembered at once.
MAX_CONNECTIONS = 64
#: Names remembered per connection.
MAX_NAMES = 256

#: What a name of a query reads: a Python frame by a replacement scan, a frame registered on the
#: connection, or a table copied from a frame.
PYTHON, REGISTERED, TABLE = "python", "registered", "table"
#: a table made by ``CREATE TABLE t AS SELECT`` with computed columns (``income * 2 AS i2``): its rows
#: name nothing of the rows it was made from (``evidence.rows.COMPUTED_SOURCE``); no labels
COMPUTED = "computed"

_known = WeakTable(MAX_CONNECTIONS)  # connection -> {lower-case name: FrameRows}


class FrameRows:
    """The rows a name reads: how many (``n``), how (:data:`PYTHON`...), and their pandas labels in
    the order DuckDB reads them (:attr:`labels`: worked out when first asked, at display, and
    only when the rows are read; a polars frame's replays its filters, which the user's query
    call must not pay for)."""

    def __init__(self, kind: str, n: int, labels: pd.Index | None = None,
                 make: Callable[[], pd.Index | None] | None = None) -> None:
        self.kind, self.n = kind, n
        self._labels, self._make = labels, make

    @property
    def labels(self) -> pd.Index | None:
        if self._make is not None:
            made, self._make = self._make(), None
            self._labels = made if made is not None and len(made) == self.n and made.is_unique else None
        return self._labels

    def copied(self) -> FrameRows:
        """The same rows copied into a table (``CREATE TABLE t AS SELECT * FROM x``)."""
        return FrameRows(TABLE, self.n, make=lambda: self.labels)


def frame_rows(obj: Any, kind: str) -> FrameRows | None:
    """The rows of a Python frame: a pandas frame's labels (those before a re-indexing), or those a
    polars frame made by ``pl.from_pandas`` keeps (worked out later); None for anything else."""
    if isinstance(obj, pd.DataFrame):
        labels = row_origins.labels_of(obj)
        return FrameRows(kind, len(labels), labels) if len(labels) and labels.is_unique else None
    if type(obj).__module__.startswith("polars") and type(obj).__name__ == "DataFrame":
        from ..polars import origins

        if origins.pandas_labels(obj) is None:
            return None

        def make() -> pd.Index | None:
            with passthrough():  # (a replayed filter is the extension's own work)
                return origins.row_labels(obj)
        return FrameRows(kind, obj.height, make=make)
    return None


#: Relations of Python frames remembered at once (``duckdb.from_df`` and filters of one).
MAX_RELATIONS = 256
_relations = WeakTable(MAX_RELATIONS)  # relation -> (the from_df relation, its FrameRows, conditions)


def from_frame(rel: Any, obj: Any) -> None:
    """``rel`` is ``duckdb.from_df(obj)`` (or ``con.from_df``, ``duckdb.df``): its rows are the frame's.

    Why: a relation of a pandas frame reads it without its index, like a replacement scan; a
    count of everyone over ``duckdb.from_df(people)`` beside a pandas count without C was
    compared with nothing when the columns could not tell people apart, and 37 − 35 gave C's two
    women (red team of issue 22: 10 of 2,000 seeded sessions)."""
    rows = frame_rows(obj, PYTHON)
    if rows is not None:
        _relations.set(rel, (rel, rows, ()))


def filtered(result: Any, rel: Any, condition: Any) -> None:
    """``result`` is ``rel.filter(condition)``: the same frame's rows where a SQL condition holds."""
    hit = _relations.get(rel)
    # (a subquery may name a Python frame, which the evidence, run from here, would not find)
    if hit is not None and isinstance(condition, str) and result is not rel \
            and not re.search(r"\bselect\b", condition, re.I):
        _relations.set(result, (hit[0], hit[1], (*hit[2], condition)))


#: ``project("district, sex")``: plain column names (quoted or not), or ``*``
_PLAIN_COLUMNS = re.compile(r'\s*(\*|"?[A-Za-z_][A-Za-z0-9_]*"?(\s*,\s*"?[A-Za-z_][A-Za-z0-9_]*"?)*)\s*')


def same_rows(result: Any, rel: Any, args: tuple) -> None:
    """``result`` is ``rel.project("district, sex")`` (plain columns) or ``rel.set_alias(name)``:
    the same rows of the same frame, under the same conditions.

    Why: a projection dropped the relation's rows' labels, and A's count over
    ``from_df(people).project("district, sex").filter(...)`` beside B's and everyone's was
    compared with nothing: 37 − 20 − 15 = C's two women (red team of issue 22)."""
    hit = _relations.get(rel)
    if hit is None or result is rel:
        return
    if all(isinstance(a, str) and _PLAIN_COLUMNS.fullmatch(a) for a in args) or \
            (len(args) == 1 and isinstance(args[0], str) and args[0].isidentifier() and not args[0].startswith("__")):
        _relations.set(result, hit)


def relation_of(rel: Any) -> tuple[Any, FrameRows, tuple[str, ...]] | None:
    """(the ``from_df`` relation ``rel`` is made from, its frame's rows, the filters' SQL conditions
    since, in order), or None when ``rel`` is not a remembered relation of a Python frame."""
    return _relations.get(rel)


def _names(con: Any) -> dict[str, FrameRows]:
    names = _known.get(con)
    if names is None:
        names = {}
        _known.set(con, names)
    return names


def _keep(con: Any, name: str, source: FrameRows | None) -> None:
    names = _names(con)
    names.pop(name.lower(), None)
    if source is not None:
        names[name.lower()] = source
        while len(names) > MAX_NAMES:
            names.pop(next(iter(names)))


def registered(con: Any, name: Any, obj: Any) -> None:
    """``con.register(name, obj)``: the name reads ``obj``'s rows (or, if not a frame, unknown rows)."""
    if isinstance(name, str):
        _keep(con, name, frame_rows(obj, REGISTERED))


def unregistered(con: Any, name: Any) -> None:
    if isinstance(name, str):
        _keep(con, name, None)


def executed(con: Any, query: Any, lookup: Callable[[str], Any] | None) -> None:
    """A statement ran on ``con``: a plain copy of a frame into a table is remembered; any other
    statement that is not a query forgets the remembered tables it names."""
    if not isinstance(query, str):
        return
    names = _known.get(con)
    created = _created_table(query)
    if created is not None and reads_a_written_file(created[1]):
        # (a file this session wrote, even copied whole: its columns may be computed, :mod:`..read_back`)
        _keep(con, created[0].name, FrameRows(COMPUTED, 0))
        return
    copied = _copy_of(created)
    if copied is not None:
        table, source = copied
        origin = resolve(con, source, lookup)
        _keep(con, table, origin.copied() if origin is not None else None)
        return
    computed = _computed_table(created)
    if computed is not None:
        _keep(con, computed, FrameRows(COMPUTED, 0))
        return
    if names and not re.match(r"\s*(select|with|from|pivot|summarize|describe|show|explain)\b", query, re.I):
        updated = _updated_table(query)
        for name in [n for n in names if names[n].kind in (TABLE, COMPUTED)
                     and re.search(rf"\b{re.escape(n)}\b", query, re.I)]:
            if name != updated:
                names.pop(name, None)


def _updated_table(query: str) -> str | None:
    """The table a plain ``UPDATE t SET … [WHERE …]`` changes, when it reads no other table; else None.

    Why it is not forgotten: an UPDATE keeps the table's rows and their order (``rowid``), so the
    frame's labels still name them, and linking confirms each row by most of its columns. Forgotten,
    the rows were named by ``rowid`` instead, and a row whose income an UPDATE set to 0 was a new
    person beside the old one: the sums by sex before and after told his income, both ``pass``
    (red team, 2026-12-05)."""
    found = re.match(r"\s*update\s+([A-Za-z_][A-Za-z0-9_]*)\s+set\b", query, re.I)
    if found is None or re.search(r"\b(from|join|select)\b", query[found.end():], re.I):
        return None
    return found.group(1).lower()


def resolve(con: Any, name: str, lookup: Callable[[str], Any] | None) -> FrameRows | None:
    """What ``FROM name`` reads on ``con``, when its rows' labels are known: a table copied from a
    frame, a registered frame (DuckDB's catalog first, as DuckDB reads it), else a Python frame of
    the caller's by a replacement scan."""
    hit = (_known.get(con) or {}).get(name.lower())
    if hit is not None:
        return hit
    if lookup is None:
        return None
    return frame_rows(lookup(name), PYTHON)


def resolver(con: Any, lookup: Callable[[str], Any] | None) -> Callable[[str], FrameRows | None]:
    """:func:`resolve` on ``con`` with the caller's names (what the evidence of a query reads)."""
    return lambda name: resolve(con, name, lookup)


def _created_table(query: str) -> tuple[Any, Any] | None:
    """(target table, the query that fills it) of ``CREATE [OR REPLACE] [TEMP] TABLE t AS <query>``
    (sqlglot nodes), else None."""
    if not re.match(r"\s*create\b", query, re.I):
        return None
    try:
        import sqlglot

        tree = sqlglot.parse_one(query, read="duckdb")
    except Exception:
        return None
    exp = sqlglot.exp
    if not isinstance(tree, exp.Create) or str(tree.args.get("kind", "")).upper() != "TABLE":
        return None
    target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
    if not isinstance(target, exp.Table) or not isinstance(tree.expression, exp.Query):
        return None
    return target, tree.expression


def _copy_of(created: tuple[Any, Any] | None) -> tuple[str, str] | None:
    """(table, source) of ``CREATE [OR REPLACE] TABLE table AS SELECT * FROM source`` (``created``:
    what :func:`_created_table` read of the statement), else None."""
    from sqlglot import exp

    if created is None or not isinstance(created[1], exp.Select):
        return None
    target, select = created
    source = select.args.get("from_") or select.args.get("from")
    others = [a for a in ("where", "group", "having", "order", "limit", "offset", "qualify", "distinct",
                          "joins", "with", "with_") if select.args.get(a)]
    if others or source is None or not isinstance(source.this, exp.Table) or source.this.args.get("db") \
            or len(select.expressions) != 1 or not isinstance(select.expressions[0], exp.Star):
        return None
    if target.args.get("db") or target.args.get("catalog"):
        return None
    return target.name, source.this.name


def _computed_table(created: tuple[Any, Any] | None) -> str | None:
    """The table ``CREATE [OR REPLACE] [TEMP] TABLE t AS <query>`` (``created``, as for
    :func:`_copy_of`) makes when the query computes a column (anything but a plain column or ``*``
    in its SELECT list: ``income * 2 AS i2``, an aggregate, a UNION of such), else None. Red team
    (stop 56): its rows, fingerprinted by the computed columns, were taken for other people than
    the table they were computed from."""
    from sqlglot import exp

    if created is None:
        return None
    target, made = created
    if not any(isinstance(t.this, exp.Identifier) for t in made.find_all(exp.Table)):
        return None  # (made of no table's rows: range(), VALUES, literals)
    selects = list(made.find_all(exp.Select))
    plain = all(isinstance(e.unalias(), exp.Column | exp.Star) for s in selects for e in s.expressions)
    return None if plain and isinstance(made, exp.Select) else target.name


def reads_a_written_file(select: Any) -> bool:
    """Whether the query reads, anywhere, a file this session wrote (:mod:`..read_back`):
    ``FROM 'f.parquet'``, ``read_parquet('f')``, ``read_csv(['a.csv', 'b.csv'])``, a glob."""
    from sqlglot import exp

    for table in select.find_all(exp.Table):
        if isinstance(table.this, exp.Identifier):
            named = [str(table.name)] if table.this.args.get("quoted") else []
        else:  # (a reading function: its file names are its text literals)
            named = [str(lit.this) for lit in table.this.find_all(exp.Literal) if lit.is_string]
        if named and read_back.written_this_session(named):
            return True
    return False
