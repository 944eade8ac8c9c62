"""polars and DuckDB SQL snippets, as a researcher writes them, executed in a real kernel.

One notebook: ``%load_ext sdc_magic``, a setup cell, one snippet per cell. For each
snippet the ground truth is computed here with plain pandas (same data, same grouping)
and the saved notebook's JSON is checked:

* every mime type of every output is one a checked table may carry (no raw polars or
  DuckDB rendering, no table-schema JSON, no LaTeX);
* every output carries an ``sdc_magic`` record with the expected status;
* every cell that is primary in the truth (a count of 1..4 units, a dominated sum, ...)
  is listed as hidden in the record, and the number of ``✕`` in the HTML is the number
  shown hides cells exactly when the record says some are hidden;
* a ``pass`` output has no primary cell at all (nothing disclosive is cleared).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _nbutil import HIDDEN, execute_notebook, text_of

pytest.importorskip("polars")
pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

pytestmark = pytest.mark.notebook

OUTPUT_MIMES = frozenset({"text/plain", "text/html", "application/vnd.jupyter.widget-view+json",
                          "application/vnd.sdc-magic.v1+json"})

SETUP = """\
import pandas as pd, polars as pl, duckdb
from sdc_magic.datasets import make_referrals
df = make_referrals()
p = pl.from_pandas(df)
con = duckdb.connect()
pd.set_option("display.max_rows", 1000)
pd.set_option("display.multi_sparse", False)
"""

G3 = ["admin2", "case_category", "age_band"]
G4 = ["admin2", "case_category", "age_band", "sex"]


def _counts(frame: pd.DataFrame, keys: list[str], unit: str | None = None) -> pd.Series:
    g = frame.groupby(keys, observed=True, dropna=False)
    return g[unit].nunique() if unit else g.size()


def _small(units: pd.Series, threshold: int) -> pd.Series:
    return (units >= 1) & (units < threshold)


def _dominated(frame: pd.DataFrame, keys: list[str], var: str, threshold: int, k: float = 0.85) -> pd.Series:
    g = frame.dropna(subset=[var]).groupby(keys, observed=True)
    n = g[var].count()
    share = g[var].apply(lambda x: x.abs().max()) / g[var].apply(lambda x: x.abs().sum()).replace(0, np.nan)
    return _small(n, threshold) | (share > k).fillna(False)


# name, code, keys, truth(frame) -> primary Series indexed by keys, expected statuses
SNIPPETS: list[tuple[str, str, list[str], Any, set[str]]] = [
    ("pl_len_4way", f"p.group_by({G4}).len()", G4,
     lambda d: _small(_counts(d, G4), 5), {"suppressed"}),
    ("pl_len_sorted", f"p.group_by({G3}).len().sort('len')", G3,
     lambda d: _small(_counts(d, G3), 5), {"suppressed"}),
    ("pl_lazy", f"p.lazy().group_by({G3}).agg(pl.len().alias('n')).collect()", G3,
     lambda d: _small(_counts(d, G3), 5), {"suppressed"}),
    ("pl_to_pandas", f"t = p.group_by({G3}).len()\nt.to_pandas()", G3,
     lambda d: _small(_counts(d, G3), 5), {"suppressed"}),
    ("pl_mean", f"p.group_by({G3[:2]}).agg(pl.col('age').mean().round(1))", G3[:2],
     lambda d: _small(d.dropna(subset=['age']).groupby(G3[:2]).size(), 5), {"suppressed", "pass"}),
    ("pl_value_counts", "p['case_category'].value_counts()", ["case_category"],
     lambda d: _small(_counts(d, ["case_category"]), 5), {"pass", "suppressed"}),
    ("pl_filter", f"p.filter(pl.col('sex') == 'F').group_by({G3}).len()", G3,
     lambda d: _small(_counts(d[d.sex == 'F'], G3), 5), {"suppressed"}),
    ("pl_pivot", "p.pivot(on='sex', index=['admin2', 'case_category'], values='case_id', aggregate_function='len')",
     ["admin2", "case_category", "sex"], lambda d: _small(_counts(d, ["admin2", "case_category", "sex"]), 5),
     {"suppressed"}),
    ("duck_count", f"duckdb.sql('select {', '.join(G4)}, count(*) as n from df group by all')", G4,
     lambda d: _small(_counts(d, G4), 5), {"suppressed"}),
    ("duck_count_ordered_df",
     f"duckdb.sql('select {', '.join(G3)}, count(*) as n from df group by 1, 2, 3 order by n').df()", G3,
     lambda d: _small(_counts(d, G3), 5), {"suppressed"}),
    ("duck_connection_filter",
     f"con.sql(\"select {', '.join(G3)}, count(*) as n from df where sex = 'M' group by all\")", G3,
     lambda d: _small(_counts(d[d.sex == 'M'], G3), 5), {"suppressed"}),
    ("duck_mean", "duckdb.sql('select admin2, case_category, avg(age) as mean_age from df group by all')",
     G3[:2], lambda d: _small(d.dropna(subset=['age']).groupby(G3[:2]).size(), 5), {"suppressed", "pass"}),
    ("duck_polars_source", f"duckdb.sql('select {', '.join(G3)}, count(*) as n from p group by all').pl()", G3,
     lambda d: _small(_counts(d, G3), 5), {"suppressed"}),
    # dominance and units: the INSEE preset (threshold 3, (1, 85) dominance)
    ("preset", "%sdc preset insee", [], None, set()),
    ("pl_sum_dominance", f"p.group_by({G3}).agg(pl.col('days_to_first_service').sum())", G3,
     lambda d: _dominated(d, G3, "days_to_first_service", 3), {"suppressed"}),
    ("duck_sum_dominance",
     f"duckdb.sql('select {', '.join(G3)}, sum(days_to_first_service) as days from df group by all')", G3,
     lambda d: _dominated(d, G3, "days_to_first_service", 3), {"suppressed"}),
    ("units", "%sdc rules unit=household_id", [], None, set()),
    ("pl_units", f"p.group_by({G3}).len()", G3,
     lambda d: _small(_counts(d, G3, "household_id"), 3), {"suppressed"}),
    ("duck_units", f"duckdb.sql('select {', '.join(G3)}, count(*) as n from df group by all')", G3,
     lambda d: _small(_counts(d, G3, "household_id"), 3), {"suppressed"}),
    ("duck_distinct_units",
     f"duckdb.sql('select {', '.join(G3)}, count(distinct household_id) as households from df group by all')",
     G3, lambda d: _small(_counts(d, G3, "household_id"), 3), {"suppressed"}),
    # no evidence: row-level frames are blocked, numbers alone are unverified counts
    ("pl_rows", "p.head(20)", [], None, {"blocked"}),
    ("duck_rows", "duckdb.sql('select * from df')", [], None, {"blocked"}),
    ("lazy_plan", "p.lazy().filter(pl.col('age') > 3)", [], None, {"blocked"}),
    ("arrow_rows", "p.head(5).to_arrow()", [], None, {"blocked"}),
    ("protocol_rows", "class Wrapped:\n    def __init__(self, t):\n        self.t = t\n"
     "    def __arrow_c_stream__(self, requested_schema=None):\n        return self.t.__arrow_c_stream__(requested_schema)\n"
     "    def _repr_html_(self):\n        return self.t.to_pandas().to_html()\n"
     "Wrapped(p.head(5).to_arrow())", [], None, {"blocked"}),
    ("duck_scalar", "duckdb.sql('select count(*) as n from df where age < 1')", [], None, {"review", "pass"}),
]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("engines")
    sources = ["%load_ext sdc_magic", SETUP] + [code for _, code, *_ in SNIPPETS]
    path, nb = execute_notebook(sources, work, name="engines.ipynb", timeout=600)
    return {"nb": nb, "path": path}


def _outputs(nb: dict[str, Any], name: str) -> list[dict[str, Any]]:
    index = [s[0] for s in SNIPPETS].index(name)
    return nb["cells"][2 + index]["outputs"]


def test_setup_ran(executed: dict[str, Any]) -> None:
    for cell in executed["nb"]["cells"][:2]:
        assert not [o for o in cell["outputs"] if o["output_type"] == "error"], cell["outputs"]


def _progress(out: dict[str, Any]) -> bool:
    """The progress bar shown while a protection runs (its own widget, closed afterwards)."""
    plain = text_of(out.get("data", {}).get("text/plain", ""))
    return "sdc_magic" not in out.get("metadata", {}) and "FloatProgress" in plain


def _checked(outs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in outs if o["output_type"] == "display_data" and not _progress(o)]


def test_every_mime_type_is_a_checked_one(executed: dict[str, Any]) -> None:
    for cell in executed["nb"]["cells"][2:]:
        for out in cell["outputs"]:
            assert out["output_type"] != "execute_result", f"raw result in {cell['source']!r}"
            assert out["output_type"] != "error", (cell["source"], out.get("evalue"))
            if out["output_type"] == "display_data" and not _progress(out):
                assert set(out["data"]) <= OUTPUT_MIMES, (cell["source"], set(out["data"]))
                assert "sdc_magic" in out.get("metadata", {}), cell["source"]


def _rows(page: str) -> list[list[str]]:
    """Every body row of the (unsparsified, untruncated) HTML table: labels then values."""
    from bs4 import BeautifulSoup

    table = BeautifulSoup(page, "html.parser").find("table")
    assert table is not None
    return [[c.get_text().strip() for c in tr.find_all(["th", "td"], recursive=False)]
            for tr in table.find("tbody").find_all("tr", recursive=False)]


@pytest.mark.parametrize("name", [s[0] for s in SNIPPETS if s[4]])
def test_snippet(executed: dict[str, Any], name: str) -> None:
    _, _code, keys, truth, statuses = next(s for s in SNIPPETS if s[0] == name)
    outs = _checked(_outputs(executed["nb"], name))
    assert len(outs) == 1, f"{name}: {len(outs)} displays"
    meta = outs[0]["metadata"]["sdc_magic"]
    page = text_of(outs[0]["data"]["text/html"])
    assert meta["status"] in statuses, f"{name}: {meta['status']} ({meta.get('notes')})"
    if meta["status"] == "blocked" or truth is None:
        return
    assert (HIDDEN in page) == bool(meta["hidden"]), f"{name}: markers vs {meta['hidden']} hidden cells"
    primary = truth(_referrals())
    primary = primary[primary]
    if meta["status"] == "pass":
        assert primary.empty, f"{name}: cleared with {len(primary)} primary cells"
        return
    missing = []
    if name.endswith("pivot"):  # rows (admin2, case_category) x columns sex: read the record
        hidden = {tuple(r["cell"]) for r in meta["reasons"] if r.get("hidden")}
        missing = [label for label in primary.index if (str(label[:-1]), str(label[-1])) not in hidden]
    else:  # one value per row, after its key labels
        shown = {tuple(r[-1 - len(keys):-1]): r[-1] for r in _rows(page)}
        for label in primary.index:
            label = label if isinstance(label, tuple) else (label,)
            value = shown.get(tuple(map(str, label)))
            assert value is not None, f"{name}: row {label} not in the table"
            if value != HIDDEN:
                missing.append((label, value))
    assert not missing, f"{name}: primary cells not hidden: {missing[:5]} ({len(missing)})"


def _referrals() -> pd.DataFrame:
    from sdc_magic.datasets import make_referrals

    return make_referrals()


def test_records_are_json(executed: dict[str, Any]) -> None:
    json.dumps(executed["nb"]["metadata"])
    assert Path(executed["path"]).exists()
