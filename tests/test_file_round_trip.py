"""Rows written to a file during the session and read back (``capture/read_back.py``).

The leak (left open in stop 56, closed in stop 57): the sums of incomes by sex of everyone, then
the people under 100 written to a file with a computed column (``income * 2``) and read back,
their sums by sex shown. The rows read back, fingerprinted by ``sex`` and the computed column,
were tied to no earlier output's rows and taken for other people: both ``pass`` in pandas,
polars and DuckDB, CSV and Parquet alike, and half the second table's cells subtracted from
the first's gave the two people over 100 their incomes. A file written since the extension was
installed is recognised when it is read: its rows are read as a query's rows, and tied to no
earlier output's rows with the same key columns (by name, or by values when a key was renamed),
the table is ``review``, in either order.

Over-protection checks: a file keeping the rows' own columns is compared as before; a file
written before the extension was loaded (the data the analysis starts from) is a data set.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_engines_redteam import PEOPLE

pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")

CLEARED = ("pass", "suppressed")


def _status(out: Any) -> str:
    return out.metadata["sdc_magic"]["status"]


def _notes(out: Any) -> str:
    return " ".join(out.metadata["sdc_magic"].get("notes", []))


def _never_both_cleared(first: Any, second: Any) -> None:
    """The two tables' difference is the two people over 100: not both cleared with figures shown."""
    both = _status(first) in CLEARED and _status(second) in CLEARED
    assert not both, (first.data["text/plain"], second.data["text/plain"], _notes(second))


def _pandas(path: Path, fmt: str, rename: bool = False) -> tuple[Callable[[], Any], Callable[[], Any]]:
    df = PEOPLE.copy()

    def written() -> Any:
        w = df[df.age < 100].assign(i2=df.income * 2)[["sex", "i2"]]
        if fmt == "csv":
            w.to_csv(path, index=False)
            back = pd.read_csv(path)
        else:
            w.to_parquet(path, index=False)
            back = pd.read_parquet(path)
        if rename:
            back = back.rename(columns={"sex": "gender", "i2": "x"})
            return back.groupby("gender")["x"].sum()
        return back.groupby("sex")["i2"].sum()
    return (lambda: df.groupby("sex")["income"].sum()), written


def _polars(path: Path, fmt: str, rename: bool = False) -> tuple[Callable[[], Any], Callable[[], Any]]:
    df = pl.from_pandas(PEOPLE)

    def written() -> Any:
        w = df.filter(pl.col("age") < 100).with_columns(i2=pl.col("income") * 2).select("sex", "i2")
        if fmt == "csv":
            w.write_csv(path)
            back = pl.read_csv(path)
        else:
            w.write_parquet(path)
            back = pl.scan_parquet(path).collect()
        if rename:
            back = back.rename({"sex": "gender", "i2": "x"})
            return back.group_by("gender").agg(pl.col("x").sum()).sort("gender")
        return back.group_by("sex").agg(pl.col("i2").sum()).sort("sex")
    return (lambda: df.group_by("sex").agg(pl.col("income").sum()).sort("sex")), written


def _duckdb(path: Path, fmt: str, rename: bool = False) -> tuple[Callable[[], Any], Callable[[], Any]]:
    con = duckdb.connect()
    con.register("frame", PEOPLE)
    con.execute("CREATE TABLE people AS SELECT * FROM frame")
    con.unregister("frame")
    reader = f"read_csv('{path}')" if fmt == "csv" else f"'{path}'"
    sex = "sex AS gender" if rename else "sex"

    def written() -> Any:
        con.execute(f"COPY (SELECT {sex}, income * 2 AS i2 FROM people WHERE age < 100) TO '{path}' "
                    f"(FORMAT {fmt})")
        key = "gender" if rename else "sex"
        return con.sql(f"SELECT {key}, sum(i2) AS v FROM {reader} GROUP BY {key} ORDER BY {key}").df()
    return (lambda: con.sql("SELECT sex, sum(income) AS v FROM people GROUP BY sex ORDER BY sex").df()), written


ENGINES = {"pandas": _pandas, "polars": _polars, "duckdb": _duckdb}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("engine", list(ENGINES))
def test_sums_of_a_computed_column_read_back_after_everyones(sess: Any, tmp_path: Path, engine: str, fmt: str) -> None:
    everyone, written = ENGINES[engine](tmp_path / f"people.{fmt}", fmt)
    first = sess.publish(everyone())
    second = sess.publish(written())
    assert _status(first) == "pass"
    _never_both_cleared(first, second)
    assert _status(second) == "review", _notes(second)
    assert "file written during this session" in _notes(second)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_the_file_first_then_everyones_sums(sess: Any, tmp_path: Path, engine: str) -> None:
    everyone, written = ENGINES[engine](tmp_path / "people.parquet", "parquet")
    first = sess.publish(written())
    second = sess.publish(everyone())
    _never_both_cleared(first, second)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_a_key_renamed_on_the_way(sess: Any, tmp_path: Path, engine: str) -> None:
    """``sex`` read back as ``gender``: the key is found among the earlier rows' keys by its values."""
    everyone, written = ENGINES[engine](tmp_path / "people.csv", "csv", rename=True)
    first = sess.publish(everyone())
    second = sess.publish(written())
    _never_both_cleared(first, second)


def test_a_file_of_the_rows_own_columns_is_compared_as_before(sess: Any, tmp_path: Path) -> None:
    """Over-protection: the people written whole and read back are the same people (found by
    their columns): the filtered table is compared with everyone's, as without the file."""
    df = PEOPLE.copy()
    path = tmp_path / "people.parquet"
    first = sess.publish(df.groupby("sex")["income"].sum())
    df.to_parquet(path)
    back = pd.read_parquet(path)
    second = sess.publish(back[back.age < 100].groupby("sex")["income"].sum())
    assert _status(first) == "pass"
    assert _status(second) == "blocked", _notes(second)  # compared: each cell one person away
    assert "cannot be matched" not in _notes(second)


def test_a_file_written_before_the_session_is_a_data_set(sess: Any, tmp_path: Path) -> None:
    """Over-protection: the data the analysis reads (written before the extension was loaded) is
    no file read back; two unrelated data sets of it are not held against each other."""
    from sdc_magic.capture import read_back

    path = tmp_path / "households.csv"
    pd.DataFrame({"sex": ["F", "M"] * 30, "size": list(range(60))}).to_csv(path, index=False)
    os.utime(path, ns=(0, 0))  # (as a file written long before)
    assert not read_back.written_this_session(path)
    people = PEOPLE.copy()
    first = sess.publish(people.groupby("sex")["income"].sum())
    households = pd.read_csv(path)
    second = sess.publish(households.groupby("sex")["size"].sum())
    assert (_status(first), _status(second)) == ("pass", "pass"), _notes(second)


def test_what_counts_as_written_this_session(tmp_path: Path) -> None:
    from sdc_magic.capture import read_back

    read_back.note_start()
    new = tmp_path / "new.csv"
    new.write_text("a\n1\n")
    old = tmp_path / "old.csv"
    old.write_text("a\n1\n")
    os.utime(old, ns=(0, 0))
    assert read_back.written_this_session(new) and read_back.written_this_session(str(new))
    assert not read_back.written_this_session(old)
    assert read_back.written_this_session([old, new])  # (a list of files: any of them)
    assert read_back.written_this_session(str(tmp_path / "*.csv"))  # (a glob)
    assert read_back.written_this_session(tmp_path)  # (a folder of files: a partitioned data set)
    assert not read_back.written_this_session(tmp_path / "missing.csv")
    assert not read_back.written_this_session("https://example.org/new.csv")
    assert not read_back.written_this_session(None)


def test_readers_are_restored_on_uninstall(tmp_path: Path) -> None:
    """Plain pandas and polars keep working: the readers wrapped are the originals afterwards."""
    from sdc_magic.jupyter.session import Session

    before = (pd.read_csv, pd.read_parquet, pl.read_csv, pl.read_parquet)
    s = Session()
    s.capture.install()
    import polars  # noqa: F401  (wrapped when imported)

    try:
        assert pd.read_csv is not before[0]
        path = tmp_path / "x.csv"
        pd.DataFrame({"a": [1, 2]}).to_csv(path, index=False)
        assert pd.read_csv(path)["a"].tolist() == [1, 2]
        assert pd.read_csv.__name__ == "read_csv"
    finally:
        s.capture.uninstall()
    assert (pd.read_csv, pd.read_parquet, pl.read_csv, pl.read_parquet) == before


@pytest.mark.parametrize("made", ["SELECT * FROM '{path}'", "SELECT sex, i2 FROM read_parquet('{path}')"])
def test_a_duckdb_table_made_from_the_file(sess: Any, tmp_path: Path, made: str) -> None:
    """``CREATE TABLE t AS SELECT * FROM 'f.parquet'``, then ``FROM t`` (red team of the change)."""
    path = tmp_path / "people.parquet"
    con = duckdb.connect()
    con.register("frame", PEOPLE)
    con.execute("CREATE TABLE people AS SELECT * FROM frame")
    first = sess.publish(con.sql("SELECT sex, sum(income) AS v FROM people GROUP BY sex ORDER BY sex").df())
    con.execute(f"COPY (SELECT sex, income * 2 AS i2 FROM people WHERE age < 100) TO '{path}' (FORMAT parquet)")
    con.execute("CREATE TABLE t AS " + made.format(path=path))
    second = sess.publish(con.sql("SELECT sex, sum(i2) AS v FROM t GROUP BY sex ORDER BY sex").df())
    _never_both_cleared(first, second)


@pytest.mark.parametrize("how", ["an open file", "a file URL"])
def test_read_through_an_open_file_or_a_file_url(sess: Any, tmp_path: Path, how: str) -> None:
    df = PEOPLE.copy()
    path = tmp_path / "people.csv"
    first = sess.publish(df.groupby("sex")["income"].sum())
    df[df.age < 100].assign(i2=df.income * 2)[["sex", "i2"]].to_csv(path, index=False)
    if how == "an open file":
        with open(path, encoding="utf-8") as handle:
            back = pd.read_csv(handle)
    else:
        back = pd.read_csv(f"file://{path}")
    second = sess.publish(back.groupby("sex")["i2"].sum())
    _never_both_cleared(first, second)


def test_labels_the_file_kept_are_labels(sess: Any, tmp_path: Path) -> None:
    """Written with its index and read with ``index_col``, a filtered copy's rows keep the labels
    that name them: placed by them and compared (each cell one person away: blocked), as before."""
    df = PEOPLE.copy()
    path = tmp_path / "people.csv"
    first = sess.publish(df.groupby("sex")["income"].sum())
    df[df.age < 100].assign(i2=df.income * 2)[["sex", "age", "i2"]].to_csv(path)
    back = pd.read_csv(path, index_col=0)
    second = sess.publish(back.groupby("sex")["i2"].sum())
    assert _status(first) == "pass"
    assert _status(second) == "blocked", _notes(second)
