"""Helpers shared by the sdc_magic test modules: notebook execution, HTML-table parsing,
ground truth computed with plain pandas, and cell-by-cell comparison of a protected table.

Nothing here imports sdc_magic's checking code: the ground truth must come from pandas
alone, so that a bug in the extension cannot hide itself in the test's expectations.
"""

from __future__ import annotations

import ast
import json
import math
import os
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HIDDEN = "✕"
STATUSES = frozenset({"pass", "suppressed", "review", "blocked"})
NA_TEXT = frozenset({"NaN", "nan", "<NA>", "None", "NaT", ""})
ALLOWED_MIMES = frozenset({"text/plain", "text/html"})
REPO = Path(__file__).resolve().parents[1]
def _acro_data_dir() -> Path:
    """The project's shared/ folder sits beside the repository (also in CI's fresh clone)."""
    here = Path(__file__).resolve().parents[1]
    for candidate in (here.parent / "shared" / "data" / "acro", Path("/work/shared/data/acro")):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("shared/data/acro not found beside the repository")


TEST_DATA = _acro_data_dir() / "test_data.dta"
NURSERY_DATA = _acro_data_dir() / "nursery_dataset.dta"


# --------------------------------------------------------------------------- kernels
def venv_kernel_manager(root: Path, name: str = "python3") -> Any:
    """A KernelManager whose only kernelspec runs *this* interpreter (the project's venv).

    A ``python3`` kernelspec elsewhere on the Jupyter path (system Python, user dir) could
    otherwise win; pinning ``kernel_dirs`` to a private directory rules that out.

    The kernel talks over Unix sockets (``transport="ipc"``), not TCP ports: jupyter_client
    picks a TCP port by binding and releasing it, so with two test workers and Spark's JVMs
    starting at once another process could take the port before the kernel bound it (CI, stop
    55: "Address already in use", two demo tests errored at set-up). A socket file in a folder
    of this test's own cannot be taken by anyone else.
    """
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    kernels = root / "kernels"
    spec_dir = kernels / name
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"sdc_magic test ({sys.executable})",
        "language": "python",
        "env": {"SDC_MAGIC_CONFIG": "", "PYTHONHASHSEED": "0"},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    ksm = KernelSpecManager(kernel_dirs=[str(kernels)], ensure_native_kernel=False)
    return KernelManager(kernel_name=name, kernel_spec_manager=ksm, **ipc_transport(root))


def ipc_transport(root: Path) -> dict[str, str]:
    """Keyword arguments that make a KernelManager use Unix sockets in the test's own folder,
    or a short temporary one when that folder's path is long (a socket's path must stay under
    ~100 bytes)."""
    import tempfile

    if os.name != "posix":
        return {}
    folder = str(root) if len(str(root)) < 70 else tempfile.mkdtemp(prefix="sdc-k-")
    return {"transport": "ipc", "ip": os.path.join(folder, "kernel")}


def execute_notebook(sources: list[str], workdir: Path, name: str = "snippets.ipynb",
                     timeout: int = 600) -> tuple[Path, dict[str, Any]]:
    """Build a notebook from cell sources, execute it with nbclient, save it, re-read its JSON."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    km = venv_kernel_manager(workdir)
    client = NotebookClient(nb, km=km, timeout=timeout, kernel_name="python3", allow_errors=True,
                            store_widget_state=True, resources={"metadata": {"path": str(workdir)}})
    client.execute()
    path = workdir / name
    nbformat.write(nb, str(path))
    return path, json.loads(path.read_text(encoding="utf-8"))


def text_of(value: Any) -> str:
    """nbformat stores multi-line strings as lists of lines."""
    if isinstance(value, list):
        return "".join(value)
    return value if isinstance(value, str) else json.dumps(value)


# --------------------------------------------------------------------------- ground truth
def run_like_ipython(code: str, ns: dict[str, Any]) -> list[Any]:
    """Execute ``code`` as an IPython cell would, with plain pandas, and return what would be
    displayed: every ``display(x)`` argument (also from threads) and the last expression's value."""
    shown: list[Any] = []
    lock = threading.Lock()

    def display(*objs: Any, **_: Any) -> None:
        with lock:
            shown.extend(objs)

    ns["display"] = display
    tree = ast.parse(code)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = tree.body[:-1] if last is not None else tree.body
    exec(compile(ast.Module(body=body, type_ignores=[]), "<snippet>", "exec"), ns)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), "<snippet>", "eval"), ns)
        if value is not None:
            shown.append(value)
    return shown


def as_frame(obj: Any) -> pd.DataFrame:
    """The DataFrame behind a displayed pandas object (a Styler shows its data)."""
    data = getattr(obj, "data", obj)
    if isinstance(data, pd.Series):
        return data.to_frame()
    assert isinstance(data, pd.DataFrame), type(obj)
    return data


def is_pandas(obj: Any) -> bool:
    from pandas.io.formats.style import Styler

    return isinstance(obj, pd.DataFrame | pd.Series | Styler)


def pandas_parts(obj: Any) -> list[Any]:
    """The pandas objects inside a displayed container (list, tuple, dict), depth first."""
    if is_pandas(obj):
        return [obj]
    if isinstance(obj, dict):
        return [p for v in obj.values() for p in pandas_parts(v)]
    if isinstance(obj, list | tuple):
        return [p for v in obj for p in pandas_parts(v)]
    return []


def small(counts: Any, threshold: int = 5) -> Any:
    """Primary under the frequency rule: 1 .. threshold-1 units (zeros allowed)."""
    return (counts >= 1) & (counts < threshold)


def mask_frame(mask: Any) -> np.ndarray:
    m = mask.to_frame() if isinstance(mask, pd.Series) else mask
    return np.asarray(m.fillna(False).to_numpy(dtype=bool), dtype=bool) if hasattr(m, "fillna") else np.asarray(m)


# --------------------------------------------------------------------------- HTML tables
@dataclass
class HtmlTable:
    rows: list[list[str]]  # body rows, <td> texts only (row labels are <th>)
    truncated_at: int | None  # index in ``rows`` of the "..." row, if any


def parse_html_table(page: str) -> HtmlTable:
    """The data cells of the (single) pandas table inside an output's text/html."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    tables = soup.find_all("table")
    assert len(tables) == 1, f"expected one <table> in the output, found {len(tables)}"
    body = tables[0].find("tbody")
    assert body is not None, "table without <tbody>"
    rows: list[list[str]] = []
    truncated_at = None
    for tr in body.find_all("tr", recursive=False):
        tds = [td.get_text().strip() for td in tr.find_all("td", recursive=False)]
        if tds and all(t == "..." for t in tds) and truncated_at is None:
            truncated_at = len(rows)
        rows.append(tds)
    return HtmlTable(rows, truncated_at)


def displayed_rows(table: HtmlTable, n_true: int) -> list[tuple[int, int]]:
    """(html row, true row) pairs: a truncated table shows a head and a tail."""
    if table.truncated_at is None:
        assert len(table.rows) == n_true, f"table shows {len(table.rows)} rows, the true table has {n_true}"
        return [(i, i) for i in range(n_true)]
    head = table.truncated_at
    tail = len(table.rows) - head - 1
    assert head + tail <= n_true
    pairs = [(i, i) for i in range(head)]
    pairs += [(head + 1 + j, n_true - tail + j) for j in range(tail)]
    return pairs


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def same_value(shown: str, true: Any) -> bool:
    """Whether the text of a shown cell is the true value (pandas' display rounding allowed)."""
    if isinstance(true, float | np.floating) and math.isnan(float(true)):
        return shown in NA_TEXT
    if true is None or (not isinstance(true, str | bool | np.bool_) and pd.isna(true)):
        return shown in NA_TEXT
    if isinstance(true, bool | np.bool_):
        return shown == str(bool(true))
    if isinstance(true, int | float | np.integer | np.floating):
        got = _number(shown)
        if got is None:
            return False
        t = float(true)
        return abs(got - t) <= 1e-5 * max(1.0, abs(t)) + 5e-7
    return shown == str(true)


@dataclass
class TableCheck:
    displayed_primary: int
    total_primary: int
    hidden_shown: int


def check_html_cells(page: str, true_obj: Any, primary: np.ndarray, where: str) -> TableCheck:
    """Cell by cell: primary cells are the marker; every other shown cell is the true value."""
    frame = as_frame(true_obj)
    table = parse_html_table(page)
    assert primary.shape == frame.shape, f"{where}: mask {primary.shape} vs table {frame.shape}"
    values = frame.to_numpy(dtype=object)
    displayed_primary = 0
    hidden_shown = 0
    problems: list[str] = []
    for hr, tr in displayed_rows(table, len(frame)):
        cells = table.rows[hr]
        assert len(cells) == frame.shape[1], f"{where}: row {tr} shows {len(cells)} cells, expected {frame.shape[1]}"
        for j, shown in enumerate(cells):
            label = f"{where}: cell [{tr}, {j}] ({frame.index[tr]!r}, {frame.columns[j]!r})"
            if shown == HIDDEN:
                hidden_shown += 1
            if primary[tr, j]:
                displayed_primary += 1
                if shown != HIDDEN:
                    problems.append(f"{label} is primary (true value {values[tr, j]!r}) but shown as {shown!r}")
            elif shown != HIDDEN and not same_value(shown, values[tr, j]):
                problems.append(f"{label} shown as {shown!r}, true value {values[tr, j]!r}")
    assert not problems, "\n".join(problems[:20]) + (f"\n... {len(problems)} problems" if len(problems) > 20 else "")
    return TableCheck(displayed_primary, int(primary.sum()), hidden_shown)


def restore_options(names: Iterable[str]) -> Callable[[], None]:
    saved = {n: pd.get_option(n) for n in names}

    def restore() -> None:
        for n, v in saved.items():
            pd.set_option(n, v)

    return restore


def env_without_config() -> dict[str, str]:
    env = dict(os.environ)
    env["SDC_MAGIC_CONFIG"] = ""
    return env
