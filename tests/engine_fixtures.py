"""Shared pieces of the engine tests: a local Spark session, a count of polars' aggregations, the
red team's people in a DuckDB table.

Not a test module (no ``test_`` prefix): the Spark, polars and DuckDB test files import it.
"""

from __future__ import annotations

import functools
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


def require_spark() -> None:
    """Skip the calling module, loudly, when PySpark or Java is missing (``make test`` installs both)."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        sys.stderr.write("\n*** JAVA NOT FOUND: the PySpark tests are SKIPPED (install Java 17) ***\n")
        pytest.skip("JAVA NOT FOUND: PySpark tests skipped (install Java 17)", allow_module_level=True)


def local_spark(app: str) -> Iterator[Any]:
    """A ``local[2]`` Spark session for one test module, stopped afterwards (yield from a fixture)."""
    import warnings

    from pyspark.sql import SparkSession

    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    session = (SparkSession.builder.master("local[2]").appName(app)
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    yield session
    session.stop()


def run_spark_connect(script: str, timeout: int = 1200) -> Any:
    """Run ``script`` in a child process that starts pyspark's local Spark Connect server.

    Why a lock: the local server binds port 15002, so two such children (two test modules on two
    pytest-xdist workers) cannot run at once; the second waits for the first."""
    import fcntl
    import subprocess
    import tempfile
    from pathlib import Path

    with open(Path(tempfile.gettempdir()) / "sdc_magic-spark-connect.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def grouped_aggregations() -> Iterator[list[int]]:
    """Count the grouped aggregations polars' own ``LazyFrame.collect`` runs (wrapped below the
    capture's wrapper: make the session after entering). Other collects are not counted: the
    one-pass look at a magnitude's values (is it an indicator?) and linking's rows are separate
    questions, asked of eager frames too."""
    import polars as pl

    calls: list[int] = []
    original = pl.LazyFrame.collect

    @functools.wraps(original)
    def collect(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.explain(optimized=False).lstrip().startswith("AGGREGATE"):
            calls.append(1)
        return original(self, *args, **kwargs)

    pl.LazyFrame.collect = collect
    try:
        yield calls
    finally:
        pl.LazyFrame.collect = original



def people_in_duckdb(people: Any) -> Any:
    """A DuckDB connection with ``people`` (a pandas frame) copied into the table ``people``."""
    import duckdb

    con = duckdb.connect()
    con.register("frame", people)
    con.execute("CREATE TABLE people AS SELECT * FROM frame")
    con.unregister("frame")
    return con
