"""Researcher-style snippets executed in a real kernel (nbclient), checked cell by cell.

One notebook is built and executed once per module: ``%load_ext sdc_magic``, a setup
cell, then one snippet per cell. The executed ``.ipynb`` is saved and its JSON text
re-read, and every snippet is compared with a ground truth computed here with plain
pandas (no extension loaded in this process's pandas for the truth):

* every cell whose true value is primary (a count of 1..4 units, or an individual
  min / max value) is the marker ``✕`` in the parsed HTML table, and is listed in
  ``metadata.sdc_magic.reasons`` as hidden;
* every cell shown as a value equals the true value (correctness, not only absence);
* text/plain carries at least as many markers as there are primary cells displayed;
* no other mime type (table schema JSON, LaTeX, markdown) is published for a table;
* a table with hidden cells is never ``pass``.

The tests hold before and after the secondary-protection engine is merged: extra
hidden cells (secondary) are allowed; primary cells must always be hidden.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _nbutil import (
    ALLOWED_MIMES,
    HIDDEN,
    NURSERY_DATA,
    STATUSES,
    TEST_DATA,
    as_frame,
    check_html_cells,
    execute_notebook,
    is_pandas,
    mask_frame,
    pandas_parts,
    restore_options,
    run_like_ipython,
    small,
    text_of,
)

pytestmark = pytest.mark.notebook
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# a checked table carries the lab renderer's payload (protected content only; see test_inline_bundle)
TABLE_MIMES = ALLOWED_MIMES | {WIDGET_VIEW, "application/vnd.sdc-magic.v1+json"}

SETUP = f"""\
import sys, threading
import numpy as np
import pandas as pd
from sdc_magic.datasets import make_referrals
df = make_referrals()
td = pd.read_stata({str(TEST_DATA)!r})
nu = pd.read_stata({str(NURSERY_DATA)!r})
pd.set_option("display.max_columns", 60)
"""

G4 = "['admin2', 'case_category', 'age_band', 'sex']"


@dataclass
class Snippet:
    name: str
    code: str
    # expression evaluated after the truth run, with ``shown`` (the displayed objects) in
    # scope; returns one primary mask per displayed pandas object. Default: count table.
    mask: str | None = None
    truth: str | None = None  # code displaying the same objects, when ``code`` cannot run here
    where: str = "outputs"  # or "widget": the tables are inside an ipywidgets.Output
    status: str | None = None
    kind: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: the output is withheld whole (no table; the placeholder says why): a selection of hidden
    #: cells only, whatever chose its rows (``checking/selection.py``)
    withheld: str | None = None


SNIPPETS: list[Snippet] = [
    # ----------------------------------------------------------- groupby size / unstack
    Snippet("groupby_size_2way", "df.groupby(['admin2', 'sex']).size().unstack()"),
    Snippet("groupby_size_3way", "t3 = df.groupby(['admin2', 'case_category', 'sex']).size().unstack()\nt3"),
    Snippet("groupby_size_4way_unstack", f"t4 = df.groupby({G4}).size().unstack()\nt4"),
    Snippet("groupby_size_4way_series", f"df.groupby({G4}).size()"),
    # ----------------------------------------------------------- crosstab
    Snippet("crosstab_margins", "pd.crosstab([df.admin2, df.case_category], df.age_band, margins=True)"),
    Snippet("crosstab_normalize_true", "pd.crosstab(df.case_category, [df.age_band, df.sex], normalize=True)",
            mask="[small(pd.crosstab(df.case_category, [df.age_band, df.sex]))]"),
    Snippet("crosstab_normalize_index",
            "pd.crosstab([df.admin2, df.case_category], df.age_band, normalize='index')",
            mask="[small(pd.crosstab([df.admin2, df.case_category], df.age_band))]"),
    Snippet("crosstab_normalize_columns_round",
            "pd.crosstab(df.admin2, [df.case_category, df.sex], normalize='columns').round(3)",
            mask="[small(pd.crosstab(df.admin2, [df.case_category, df.sex]))]"),
    Snippet("crosstab_values_aggfunc",
            "pd.crosstab([df.admin2, df.case_category], df.sex, values=df.days_to_first_service, aggfunc='mean')",
            mask="[small(pd.crosstab([df.admin2, df.case_category], df.sex, values=df.days_to_first_service, "
                 "aggfunc='count').reindex_like(shown[0]))]"),
    Snippet("crosstab_nursery", "pd.crosstab([nu.parents, nu.health], nu.recommend, margins=True)"),
    # ----------------------------------------------------------- pivot_table
    Snippet("pivot_table_multi",
            "df.pivot_table(index=['admin2', 'case_category'], columns='sex', "
            "values=['age', 'days_to_first_service'], aggfunc=['mean', 'count'], margins=True)",
            mask="[pivot_mask(shown[0])]"),
    Snippet("pivot_table_function_median",
            "pd.pivot_table(df, index='admin2', columns='age_band', values='age', aggfunc='median')",
            mask="[small(df.pivot_table(index='admin2', columns='age_band', values='age', aggfunc='count')"
                 ".reindex_like(shown[0]))]"),
    Snippet("pivot_table_count_3way",
            "df.pivot_table(index=['case_category', 'age_band'], columns='admin2', values='case_id', "
            "aggfunc='count')"),
    # ----------------------------------------------------------- value_counts
    Snippet("series_value_counts", "df.admin2.value_counts()"),
    Snippet("frame_value_counts", "df[['admin2', 'case_category', 'age_band']].value_counts()"),
    Snippet("frame_value_counts_normalize", "df[['admin2', 'case_category', 'sex']].value_counts(normalize=True)",
            mask="[small(df[['admin2', 'case_category', 'sex']].value_counts().reindex(shown[0].index))]"),
    Snippet("series_value_counts_normalize_sorted",
            "df.loc[df.admin2 == 'Mirebalais', 'age'].value_counts(normalize=True).sort_index()",
            mask="[small(df.loc[df.admin2 == 'Mirebalais', 'age'].value_counts().reindex(shown[0].index))]"),
    Snippet("groupby_value_counts_unstack", "df.groupby(['admin2', 'sex'])['age_band'].value_counts().unstack()"),
    # ----------------------------------------------------------- describe
    Snippet("describe_frame", "df[['age', 'days_to_first_service']].describe()", mask="[describe_mask(shown[0])]"),
    Snippet("describe_series", "df.days_to_first_service.describe()", mask="[describe_mask(shown[0])]"),
    Snippet("describe_groupby", "df.groupby(['admin2', 'sex'])['days_to_first_service'].describe()",
            mask="[describe_mask(shown[0])]"),
    # ----------------------------------------------------------- agg variants
    Snippet("named_aggregation",
            "df.groupby(['admin2', 'case_category', 'age_band']).agg(n=('case_id', 'count'), "
            "mean_age=('age', 'mean'), mean_days=('days_to_first_service', 'mean'))",
            mask="[by_column(shown[0], ['admin2', 'case_category', 'age_band'], "
                 "{'n': ('case_id', 'n'), 'mean_age': ('age', 'n'), 'mean_days': ('days_to_first_service', 'n')})]"),
    Snippet("agg_list",
            "df.groupby(['admin2', 'case_category'])['days_to_first_service'].agg(['count', 'mean', 'median', 'max'])",
            mask="[by_column(shown[0], ['admin2', 'case_category'], {'count': ('days_to_first_service', 'n'), "
                 "'mean': ('days_to_first_service', 'n'), 'median': ('days_to_first_service', 'n'), "
                 "'max': ('days_to_first_service', 'extreme')})]"),
    Snippet("agg_dict",
            "df.groupby(['case_category', 'age_band', 'sex']).agg({'age': 'mean', "
            "'days_to_first_service': ['count', 'std']})",
            mask="[by_column(shown[0], ['case_category', 'age_band', 'sex'], {('age', 'mean'): ('age', 'n'), "
                 "('days_to_first_service', 'count'): ('days_to_first_service', 'n'), "
                 "('days_to_first_service', 'std'): ('days_to_first_service', 'n')})]"),
    Snippet("groupby_mean_unstack",
            "df.groupby(['admin2', 'case_category', 'sex'])['days_to_first_service'].mean().unstack()",
            mask="[count_of('days_to_first_service', ['admin2', 'case_category', 'sex'], shown[0])]"),
    Snippet("groupby_min_unstack",
            "df.groupby(['admin2', 'case_category', 'sex'])['days_to_first_service'].min().unstack()",
            mask="[count_of('days_to_first_service', ['admin2', 'case_category', 'sex'], shown[0], extreme=True)]"),
    Snippet("groupby_max_unstack",
            "df.groupby(['admin2', 'case_category', 'sex'])['age'].max().unstack()",
            mask="[count_of('age', ['admin2', 'case_category', 'sex'], shown[0], extreme=True)]"),
    Snippet("groupby_std_unstack",
            "df.groupby(['admin2', 'case_category', 'sex'])['days_to_first_service'].std().unstack()",
            mask="[count_of('days_to_first_service', ['admin2', 'case_category', 'sex'], shown[0])]"),
    # ----------------------------------------------------------- chained reshapes
    Snippet("unstack_T", "df.groupby(['admin2', 'age_band']).size().unstack().T"),
    Snippet("stack", "df.groupby(['admin2', 'age_band', 'sex']).size().unstack().stack()"),
    # the smallest are all hidden here: a selection of hidden cells only is withheld (tests/test_value_filters.py)
    Snippet("sort_values_head", "df.groupby(['admin2', 'case_category', 'age_band']).size().sort_values().head(10)",
            withheld="every cell this selection"),
    Snippet("reset_index", f"df.groupby({G4}).size().reset_index(name='n')",
            mask="[columns_mask(shown[0], ['n'])]"),
    Snippet("round_mean",
            "df.groupby(['admin2', 'case_category'])['days_to_first_service'].mean().unstack().round(1)",
            mask="[count_of('days_to_first_service', ['admin2', 'case_category'], shown[0])]"),
    Snippet("loc", "t4.loc['Mirebalais']"),
    Snippet("iloc", "t4.iloc[:12]", withheld="every cell this selection"),  # (all hidden in this long session)
    Snippet("iloc_with_published_cells", "t3s = df.groupby(['admin2', 'sex']).size()\nt3s.iloc[:8]"),
    Snippet("rename_columns", "pd.crosstab([df.admin2, df.age_band], df.case_category).rename(columns=str.upper)"),
    Snippet("fillna_zero", "t4.fillna(0)"),
    Snippet("astype_float", "pd.crosstab([df.case_category, df.age_band], df.sex).astype(float)"),
    # ----------------------------------------------------------- display paths
    Snippet("display_loop",
            "for cat in ['GBV', 'Family separation']:\n"
            "    display(df[df.case_category == cat].groupby(['admin2', 'age_band']).size().unstack())"),
    Snippet("list_of_frames", "[t4.loc['Mirebalais'], pd.crosstab(df.sex, df.age_band)]"),
    Snippet("tuple_shape_table", "(df.shape, t4.loc['Leogane'])"),
    Snippet("dict_of_frames", "{'Mirebalais': t4.loc['Mirebalais'], 'Leogane': t4.loc['Leogane']}"),
    Snippet("styler", "t3.style"),
    Snippet("styler_highlight_max", "t3.style.highlight_max()"),
    Snippet("table_schema", "pd.set_option('display.html.table_schema', True)\nt3"),
    Snippet("styler_latex",
            "pd.set_option('display.html.table_schema', False)\n"
            "pd.set_option('styler.render.repr', 'latex')\nt4.loc['Mirebalais'].style"),
    Snippet("thread_display",
            "pd.set_option('styler.render.repr', 'html')\n"
            "def show():\n    display(t4.loc['Gonaives'])\n"
            "th = threading.Thread(target=show)\nth.start()\nth.join()"),
    Snippet("widget_output",
            "import ipywidgets\nout = ipywidgets.Output()\nwith out:\n    display(t4.loc['Saint-Marc'])\nout",
            truth="display(t4.loc['Saint-Marc'])", where="widget"),
    # ----------------------------------------------------------- dtypes and keys
    Snippet("string_dtype_keys",
            "ds = df.assign(case_category=df.case_category.astype('string'), "
            "age_band=df.age_band.astype(pd.StringDtype(na_value=np.nan)))\n"
            "ds.groupby(['admin2', 'case_category', 'age_band']).size().unstack()"),
    Snippet("categorical_unused_observed_false",
            "dc = df.assign(age_band=pd.Categorical(df.age_band, "
            "categories=['0-11', '12-17', '18-59', '60+', 'unknown']))\n"
            "dc.groupby(['admin2', 'case_category', 'age_band'], observed=False).size().unstack()"),
    Snippet("nan_keys_dropna_false",
            "dn = df.assign(served=df.days_to_first_service.map("
            "lambda d: np.nan if pd.isna(d) else ('fast' if d <= 14 else 'slow')))\n"
            "dn.groupby(['admin2', 'served', 'sex'], dropna=False).size().unstack()"),
    # ----------------------------------------------------------- public test data
    Snippet("td_size", "td.groupby(['grant_type', 'year']).size().unstack()"),
    Snippet("td_crosstab_margins", "pd.crosstab(td.year, td.grant_type, margins=True)"),
    Snippet("td_mean", "td.groupby(['grant_type', 'year'])['inc_activity'].mean().unstack()",
            mask="[count_of('inc_activity', ['grant_type', 'year'], shown[0], data=td)]"),
    Snippet("td_categorical_observed_false", "td.groupby(['survivor', 'grant_type'], observed=False).size().unstack()"),
    # ----------------------------------------------------------- microdata
    Snippet("microdata_head", "df.head()", mask="[columns_mask(shown[0], [])]", status="blocked", kind="row-level"),
    Snippet("td_head", "td.head(3)", mask="[columns_mask(shown[0], [])]", status="blocked", kind="row-level"),
]

BY_NAME = {s.name: s for s in SNIPPETS}
assert len(BY_NAME) == len(SNIPPETS) >= 30


# --------------------------------------------------------------------------- truth helpers

def _hidden_rows_last(obj: Any, primary: np.ndarray, meta: dict[str, Any]) -> tuple[Any, np.ndarray]:
    """The truth in the order a value-sorted table is shown: rows with hidden cells last, in
    label order (the documented rule; their labels come from the output's metadata)."""
    hidden = {str(r["cell"][0]) for r in meta["reasons"] if r.get("hidden")}
    data = getattr(obj, "data", obj)
    labels = [str(x) for x in data.index]
    shown = [i for i, lab in enumerate(labels) if lab not in hidden]
    last = sorted((i for i, lab in enumerate(labels) if lab in hidden), key=lambda i: labels[i])
    order = shown + last
    return data.iloc[order], primary[order]

def _truth_helpers(ns: dict[str, Any]) -> dict[str, Any]:
    def count_of(var: str, keys: list[str], like: Any, extreme: bool = False, data: Any = None) -> Any:
        frame = ns["df"] if data is None else data
        counts = frame.groupby(keys, observed=True)[var].count()
        if isinstance(like, pd.DataFrame):
            counts = counts.unstack()
        counts = counts.reindex_like(like)
        return (counts >= 1) if extreme else small(counts)

    def columns_mask(frame: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
        out = pd.DataFrame(False, index=frame.index, columns=frame.columns)
        for c in cols:
            out[c] = small(frame[c])
        return out

    def by_column(frame: pd.DataFrame, keys: list[str], spec: dict[Any, tuple[str, str]]) -> pd.DataFrame:
        g = ns["df"].groupby(keys)
        out = pd.DataFrame(False, index=frame.index, columns=frame.columns)
        for col, (var, how) in spec.items():
            counts = g[var].count().reindex(frame.index)
            out[col] = (counts >= 1) if how == "extreme" else small(counts)
        return out

    def describe_mask(obj: Any) -> pd.DataFrame:
        frame = as_frame(obj)
        stats_in_rows = "count" in frame.index
        grid = frame if stats_in_rows else frame.T
        counts = grid.loc["count"]
        mask = pd.DataFrame(False, index=grid.index, columns=grid.columns)
        for stat in grid.index:
            mask.loc[stat] = (counts >= 1) if stat in ("min", "max") else small(counts)
        return mask if stats_in_rows else mask.T

    def pivot_mask(shown: pd.DataFrame) -> pd.DataFrame:
        df = ns["df"]
        c = df.pivot_table(index=["admin2", "case_category"], columns="sex",
                           values=["age", "days_to_first_service"], aggfunc="count", margins=True)
        both = pd.concat({"mean": c, "count": c}, axis=1)
        return small(both.reindex(index=shown.index, columns=shown.columns))

    return {"count_of": count_of, "columns_mask": columns_mask, "by_column": by_column,
            "describe_mask": describe_mask, "pivot_mask": pivot_mask, "small": small}


@pytest.fixture(scope="module")
def truth() -> dict[str, tuple[list[Any], list[np.ndarray]]]:
    """What each snippet displays, and its primary cells, computed with plain pandas."""
    restore = restore_options(["display.html.table_schema", "styler.render.repr", "display.max_columns"])
    ns: dict[str, Any] = {}
    out: dict[str, tuple[list[Any], list[np.ndarray]]] = {}
    try:
        exec(SETUP, ns)
        ns.update(_truth_helpers(ns))
        for s in SNIPPETS:
            shown = run_like_ipython(s.truth or s.code, ns)
            parts = [p for obj in shown for p in pandas_parts(obj)]
            if s.mask is None:
                masks = [small(as_frame(p)) for p in parts]
            else:
                masks = eval(s.mask, ns, {"shown": [getattr(p, "data", p) for p in parts]})
            out[s.name] = (shown, [mask_frame(m) for m in masks])
    finally:
        restore()
    return out


# --------------------------------------------------------------------------- the notebook
@dataclass
class Executed:
    path: Path
    nb: dict[str, Any]
    cells: dict[str, dict[str, Any]]
    widget_state: dict[str, Any]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Executed:
    workdir = tmp_path_factory.mktemp("nb")
    sources = ["%load_ext sdc_magic", "import sys\nprint(sys.executable)", SETUP]
    sources += [f"# snippet: {s.name}\n{s.code}" for s in SNIPPETS]
    path, nb = execute_notebook(sources, workdir)
    cells = {}
    for cell in nb["cells"]:
        src = text_of(cell["source"])
        if src.startswith("# snippet: "):
            cells[src.split("\n", 1)[0].removeprefix("# snippet: ")] = cell
    widgets = nb.get("metadata", {}).get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return Executed(path, nb, cells, widgets.get("state", {}))


def _outputs(ex: Executed, s: Snippet) -> list[dict[str, Any]]:
    if s.where == "widget":
        found = []
        for model in ex.widget_state.values():
            if model.get("model_name") == "OutputModel":
                found += model.get("state", {}).get("outputs", [])
        return [o for o in found if o.get("output_type") in ("display_data", "execute_result")
                and not _is_other_widget(o)]
    cell = ex.cells[s.name]
    return [o for o in cell["outputs"] if o["output_type"] in ("display_data", "execute_result")
            and not _is_other_widget(o)]


def _is_other_widget(out: dict[str, Any]) -> bool:
    """A widget that is not a checked table (progress bar, the Output widget itself)."""
    return WIDGET_VIEW in out.get("data", {}) and "sdc_magic" not in out.get("metadata", {})


# --------------------------------------------------------------------------- tests
def test_kernel_is_this_venv(executed: Executed) -> None:
    first, exe = executed.nb["cells"][0], executed.nb["cells"][1]
    # the banner is a cleared message (display_data), not printed text
    loaded = "".join(text_of(o.get("text", "")) + text_of(o.get("data", {}).get("text/plain", ""))
                     for o in first["outputs"])
    assert "sdc_magic loaded" in loaded, first["outputs"]
    printed = "".join(text_of(o.get("text", "")) for o in exe["outputs"] if o["output_type"] == "stream")
    assert printed.strip() == sys.executable
    errors = [o for o in executed.nb["cells"][2]["outputs"] if o["output_type"] == "error"]
    assert not errors, errors


def test_saved_notebook_is_valid(executed: Executed) -> None:
    import nbformat

    nbformat.validate(nbformat.read(str(executed.path), as_version=4))


@pytest.mark.parametrize("name", [s.name for s in SNIPPETS])
def test_snippet(executed: Executed, truth: dict[str, Any], name: str) -> None:
    s = BY_NAME[name]
    cell = executed.cells[name]
    errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
    assert not errors, f"{name}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    shown, masks = truth[name]
    outputs = _outputs(executed, s)
    assert len(outputs) == len(shown), (
        f"{name}: {len(outputs)} outputs for {len(shown)} displayed objects: "
        f"{[list(o.get('data', {})) for o in outputs]}")
    mask_iter = iter(masks)
    for k, (out, obj) in enumerate(zip(outputs, shown, strict=True)):
        where = f"{name} output {k}"
        data = out.get("data", {})
        parts = pandas_parts(obj)
        if is_pandas(obj):
            primary = next(mask_iter)
            if s.withheld is not None:
                text = text_of(data["text/plain"])
                assert "output withheld" in text and s.withheld in text, (where, text[:200])
                assert "<table" not in data.get("text/html", ""), where
                assert out.get("metadata", {}).get("sdc_magic", {}).get("status") == "blocked", where
                continue
            _check_table_output(s, where, data, out.get("metadata", {}), obj, primary)
        elif parts:  # a container printed as text/plain
            part_masks = [next(mask_iter) for _ in parts]
            assert set(data) <= TABLE_MIMES and "text/plain" in data, f"{where}: container output has {sorted(data)}"
            text = text_of(data["text/plain"])
            need = sum(int(m.sum()) for m in part_masks)
            assert need > 0, f"{where}: test data should have small cells"
            assert text.count(HIDDEN) >= need, f"{where}: {text.count(HIDDEN)} markers for {need} primary cells"
            assert "sdc_magic" in text
            for p in parts:  # every table of the container is shown checked, with its banner
                assert text.count("sdc_magic:") >= len(parts), (where, p.shape)


def _check_table_output(s: Snippet, where: str, data: dict[str, Any], metadata: dict[str, Any], obj: Any,
                        primary: np.ndarray) -> None:
    assert set(data) <= TABLE_MIMES, f"{where}: unexpected mime types {sorted(set(data) - TABLE_MIMES)}"
    assert {"text/plain", "text/html"} <= set(data), f"{where}: {sorted(data)}"
    meta = metadata.get("sdc_magic")
    assert isinstance(meta, dict), f"{where}: no metadata.sdc_magic"
    assert meta["status"] in STATUSES, meta["status"]
    for key in ("id", "hidden", "reasons", "rules", "digest"):
        assert key in meta, f"{where}: metadata lacks {key}"
    if s.status is not None:
        assert meta["status"] == s.status, (where, meta["status"], meta.get("notes"))
    if s.kind is not None:
        assert meta.get("kind") == s.kind, (where, meta.get("kind"))
    page = text_of(data["text/html"])
    if any("listed last" in n for n in meta.get("notes", [])):
        obj, primary = _hidden_rows_last(obj, primary, meta)
    result = check_html_cells(page, obj, primary, where)
    total = result.total_primary
    if total or result.hidden_shown or meta["hidden"]:
        assert meta["status"] != "pass", f"{where}: status pass with hidden/primary cells ({meta.get('notes')})"
    assert meta["hidden"] >= total, f"{where}: metadata says {meta['hidden']} hidden, {total} cells are primary"
    hidden_positions = {tuple(r["position"]) for r in meta["reasons"] if r.get("hidden")}
    missing = [(int(i), int(j)) for i, j in zip(*np.nonzero(primary), strict=True)
               if (int(i), int(j)) not in hidden_positions]
    assert not missing, f"{where}: primary cells not reported hidden in metadata.reasons: {missing[:10]}"
    text = text_of(data["text/plain"])
    assert text.count(HIDDEN) >= result.displayed_primary, (
        f"{where}: text/plain shows {text.count(HIDDEN)} markers, {result.displayed_primary} primary cells displayed")


def test_snippets_cover_small_cells(truth: dict[str, Any]) -> None:
    """The fixture is meaningful: most snippets display primary cells."""
    with_primary = [n for n, (_, masks) in truth.items() if any(m.any() for m in masks)]
    assert len(with_primary) >= 30, with_primary


def test_no_other_mime_types_anywhere(executed: Executed) -> None:
    """No table-schema JSON, LaTeX or markdown rendering of a table anywhere in the notebook."""
    forbidden = ("application/vnd.dataresource+json", "text/latex", "text/markdown")
    for cell in executed.nb["cells"]:
        for out in cell.get("outputs", []):
            for mime in forbidden:
                assert mime not in out.get("data", {}), (text_of(cell["source"])[:60], mime)
    state_text = json.dumps(executed.widget_state)
    for mime in forbidden:
        assert mime not in state_text


def test_widget_state_holds_only_protected_tables(executed: Executed) -> None:
    outputs = _outputs(executed, BY_NAME["widget_output"])
    assert outputs, "the Output widget's content was not stored in the notebook's widget state"
    for out in outputs:
        assert "sdc_magic" in out.get("metadata", {}), out.get("metadata")


def test_outputs_are_strict_json(executed: Executed) -> None:
    """Metadata with NaN/inf cannot be serialised by the kernel ("Message serialization failed"):
    jupyter_client then stringifies it (deprecated), and a future version drops the output."""
    problems = []
    for cell in executed.nb["cells"]:
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream" and "Message serialization failed" in text_of(out["text"]):
                problems.append(text_of(cell["source"]).split("\n")[0])
            meta = out.get("metadata", {}).get("sdc_magic")
            if meta is not None:
                for item in meta.get("reasons", []):
                    for bound in item.get("interval", []):
                        if not (bound is None or isinstance(bound, int | float)):
                            problems.append(f"{text_of(cell['source']).split(chr(10))[0]}: interval bound {bound!r}")
                            break
    assert not problems, sorted(set(problems))[:10]


def test_widget_state_tables_are_checked_renderings(executed: Executed) -> None:
    """Any table stored in the widget state (reasons, suggestions) is a checked rendering."""
    unchecked = []
    for model_id, model in executed.widget_state.items():
        value = model.get("state", {}).get("value")
        if isinstance(value, str) and "<table" in value and "sdc-magic-output" not in value:
            unchecked.append((model.get("model_name"), model_id, value[:200]))
    assert not unchecked, unchecked[:3]
