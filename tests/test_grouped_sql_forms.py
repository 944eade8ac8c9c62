"""Which SQL queries are read as the plain grouped aggregation they stand for (capture/grouped_sql.py).

A query read here is captured as ``table.where(condition).groupBy(keys).agg(...)`` (Spark SQL) or
the same polars calls; any other is left to the engine's fallback (Spark SQL: row-level data,
``blocked``). Table aliases (``FROM people p`` with ``p.district``), ``GROUP BY ALL`` and keys shown
under another name (``district AS region``) are read: before, those everyday forms of one query were
``blocked`` with every figure on the screen.
"""

from __future__ import annotations

import pytest

pytest.importorskip("sqlglot")

from sdc_magic.capture.grouped_sql import grouped_query


@pytest.mark.parametrize("dialect", ["spark", "postgres"])
@pytest.mark.parametrize(("query", "keys", "where", "aggregates"), [
    ("SELECT district, sex, count(*) AS n FROM people GROUP BY ALL", ("district", "sex"), None, ["COUNT(*)"]),
    ("SELECT p.district, count(*) AS n, avg(p.age) FROM people p WHERE p.age > 3 GROUP BY p.district",
     ("district",), "age > 3", ["COUNT(*)", "AVG(age)"]),
    ("SELECT p.district, count(*) AS n FROM people AS p GROUP BY 1", ("district",), None, ["COUNT(*)"]),
    ("SELECT P.district, sum(p.income) AS s FROM people AS p GROUP BY ALL", ("district",), None, ["SUM(income)"]),
    ("SELECT people.district, count(*) AS n FROM people GROUP BY people.district", ("district",), None,
     ["COUNT(*)"]),
])
def test_aliases_qualifiers_and_group_by_all_are_read(dialect: str, query: str, keys: tuple, where: str | None,
                                                      aggregates: list[str]) -> None:
    got = grouped_query(query, dialect)
    assert got is not None and got.table == "people" and got.keys == keys and got.where == where
    assert [text for _, text, _ in got.aggregates] == aggregates


@pytest.mark.parametrize("dialect", ["spark", "postgres"])
def test_a_key_shown_under_another_name_is_read_as_a_copy_of_its_column(dialect: str) -> None:
    got = grouped_query("SELECT district AS region, sex, count(*) AS n FROM people GROUP BY ALL ORDER BY region",
                        dialect)
    assert got is not None and got.keys == ("region", "sex") and got.renamed == (("district", "region"),)


@pytest.mark.parametrize("query", [
    "SELECT q.district, count(*) AS n FROM people AS p GROUP BY q.district",  # another table's name
    "SELECT people.district, count(*) AS n FROM people p GROUP BY people.district",  # aliased: by its alias
    "SELECT p.district, count(*) AS n FROM people AS p(a, b) GROUP BY 1",  # the alias renames columns
    "SELECT address.city, count(*) AS n FROM people GROUP BY address.city",  # a struct field
    "SELECT district AS sex, sex AS district, count(*) AS n FROM people GROUP BY ALL",  # names swapped
    "SELECT district AS d, count(DISTINCT d) AS n FROM people GROUP BY district",  # the new name read
    "SELECT district AS a, district AS b, count(*) AS n FROM people GROUP BY district",  # one key twice
    "SELECT upper(district), count(*) AS n FROM people GROUP BY ALL",  # a key that is not a column
    "SELECT count(*) AS n FROM people GROUP BY ALL",  # no key: not a grouped table
    "SELECT district, count(*) AS n FROM people GROUP BY ALL HAVING count(*) > 2",
    "SELECT p.district, count(*) AS n FROM people p JOIN people q ON p.person = q.person GROUP BY ALL",
])
def test_other_forms_are_left_to_the_engine(query: str) -> None:
    assert grouped_query(query, "spark") is None
