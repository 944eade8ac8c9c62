"""Row identity limits shared by the engines that compute linking evidence and by linking.

Linking compares the rows behind the cells of different outputs. The engines (:mod:`sdc_magic.capture`)
decide how many source rows and columns they fingerprint; :mod:`sdc_magic.linking` reads the same
limits. They live here, below both, so capture never imports linking. Read them as module
attributes (``rows.MAX_LINKED_ROWS``) so a change applies to every reader.
"""

from __future__ import annotations

from typing import Any

#: source rows above which a table is not linked (its note says so, and every later table of the
#: session is ``review``): the rows linking reads in Python, a pandas frame's own. Was 5,000,000
#: until stop 55, which made every table after the first of a 10M-row pandas session ``review``
#: (9 of 10 in ``benchmarks/engines.py --rows 1e7 --only pandas --session 10``); linked, those 10
#: tables were 4 ``suppressed`` and 6 ``pass`` at 1.26× plain per display, and linking kept 1.2 GB
#: more memory, no more after 30 tables (``--session 30``: 1.13×): some 120 bytes per source row
MAX_LINKED_ROWS = 20_000_000
#: source rows up to which an engine hands its rows to Python for linking (polars and Spark tables
#: that are not linked inside their engine): above, such a table is not linked. Moving rows out of
#: an engine is what linking inside it avoids (issue 22); this bounds what the fallback moves
MAX_FETCHED_ROWS = 5_000_000
#: source rows up to which an engine hands linking the values themselves (fingerprinted like pandas
#: rows, so tables of the same people are compared across engines); above, the engine's own hash
RAW_LINKED_ROWS = 1_000_000
#: source rows from which a DuckDB count is linked in the engine (``linking/in_engine.py``: nothing per
#: row leaves DuckDB) rather than by its rows' values. Below, the values let linking compare it with
#: pandas and polars tables of the same people; above, such tables are named as not compared (review)
IN_ENGINE_ROWS = 100_000
#: columns fingerprinted per source row (keys first)
MAX_HASHED_COLUMNS = 16

#: How every engine's note about a table whose rows are not linked begins (linking reads it:
#: such a table is compared with nothing, see ``Linker.unlinked_note``)
NOT_LINKED = "not linked with other tables"
#: ``DataFrame.attrs`` key of linking rows whose index is a DuckDB table's ``rowid``: such labels
#: are checked row by row against the rows they name (a sample could miss a few rows moved to
#: other rowids in a copy of the table: 601 − 599 = C's two women, red team)
ROWID_LABELS = "sdc_magic.rowid_labels"
#: ``DataFrame.attrs`` key of linking rows read through an engine and labelled with the pandas
#: labels of the Python frame it read (``pl.from_pandas``, a DuckDB replacement scan, ...): they
#: place rows as pandas' do, but do not count as labels of their own for the key-only ``review``
#: (``linker.unidentified_note``: a narrow DuckDB count, then a count over a copy rebuilt from
#: ``.values`` and shuffled, whose labels name other people, were compared with nothing)
FRAME_LABELS = "sdc_magic.frame_labels"
#: ``DataFrame.attrs`` key of the columns of linking rows that are no content of the rows but a
#: table's derived measure (a DuckDB ``sum(if(c, x, 0))``'s ``if(c, x, 0)``, read so that linking
#: sees which rows it keeps, ``linking.masked``): never used to tell rows apart (two queries
#: name different expressions alike)
DERIVED_COLUMNS = "sdc_magic.derived_columns"
#: ``DataFrame.attrs`` key of linking rows read out of a query (a CTE, a subquery in FROM, a
#: view) rather than a table or a Python frame: the columns such a query computes (``income * 2
#: AS i2``) are no content of the base's rows, and tell nothing of whether they are the people
#: of earlier outputs (``linker.unidentified_note``)
COMPUTED_SOURCE = "sdc_magic.computed_source"
#: a column is read as a masked copy of another (``linking.masked.kept_against``; the engines'
#: tests) when the rows where they differ hold at most this many values (one constant, or two:
#: ``where(c, income, where(sex == "F", 1, 0))``) or are fewer than ``MASKED_FEW_ROWS`` (any values:
#: ``where(c, person)`` over C's three rows). Not "kept on most rows whatever the rest": income is
#: work income on two thirds of a survey's rows, and a red team's session of 25 tables got 12
#: stricter for it (and a decoy column equal to the income on most rows took C's man out of every
#: income table's population)
MASKED_VALUES = 2
MASKED_FEW_ROWS = 5
#: ... and keeps at least this many distinct values of the other (a 1/2 coding is no masked copy of a
#: column it equals on a few rows: ``flag + 1`` against household numbers 1 and 2)
MASKED_KEPT_VALUES = 3


def too_many_rows_note(limit: int | None = None) -> str:
    """The note of a table whose source has more rows than linking reads (``limit``: the limit
    that stopped it, ``MAX_LINKED_ROWS`` by default)."""
    return f"{NOT_LINKED} (more than {MAX_LINKED_ROWS if limit is None else limit:,} source rows)"


def unreadable_rows_note() -> str:
    """The note of a table whose source rows could not be read for linking."""
    return f"{NOT_LINKED} (its source rows could not be read)"
#: Frames from this many rows are matched by content only when most rows are distinct
#: (``linking.universes``) ...
MIN_RANKED_ROWS = 20
#: ... at least this share of them (and columns tell rows apart when they tell this share apart)
DISTINCT_SHARE = 0.95


def told_apart_by_content(rows: Any) -> bool:
    """Whether rows read as values (a frame) can be placed among earlier rows by their content:
    fewer than :data:`MIN_RANKED_ROWS`, or at least :data:`DISTINCT_SHARE` of them distinct.

    Why: rows without labels (Spark's) are placed by content only; a narrow frame
    (``select("sex", "district")``) repeats its rows, content places none, and its table is
    compared with nothing (everyone, A or C, B or C: C's two women by 22 + 17 − 37, all ``pass``,
    stop 58). Such a table is counted in its engine instead, where rows need no content."""
    import pandas as pd

    if len(rows) < MIN_RANKED_ROWS:
        return True
    hashed = pd.util.hash_pandas_object(rows, index=False)
    return bool(hashed.nunique() >= DISTINCT_SHARE * len(rows))
