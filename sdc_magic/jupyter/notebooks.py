"""Execute notebooks headless and summarise what sdc_magic decided for each output.

Used by ``make demo`` (through ``sdc-magic run``) and by the tests: a notebook is run
with nbclient in a kernel of *this* Python (so the extension under test is the one
loaded), saved, and every output is listed with its status and hidden-cell count.
Outputs without an ``sdc_magic`` record (prints, errors, images) are listed as
``uncleared``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat


@dataclass
class OutputSummary:
    """One output of an executed notebook."""

    cell: int
    output_type: str
    status: str
    hidden: int
    cells: int
    kind: str
    meta: dict[str, Any]
    data: dict[str, Any]


def kernel_spec_dir() -> Path:
    """A kernelspec folder whose ``python3`` kernel is this interpreter."""
    root = Path(tempfile.mkdtemp(prefix="sdc-kernels-"))
    spec = root / "kernels" / "sdc-python"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "sdc_magic (this Python)",
        "language": "python",
    }))
    return root


def _kernel_manager(specs: Path, sockets: str) -> Any:
    """A kernel manager talking to the kernel over Unix sockets where there are any.

    With TCP, jupyter_client picks a free port by binding and releasing it; another process
    starting at the same moment (a second ``make demo`` notebook, a test worker, Spark's JVM)
    can take it before the kernel binds it, and the run fails with "Address already in use". A
    socket file in a private temporary folder cannot be taken. Windows keeps TCP.
    """
    import os

    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    kernels = KernelSpecManager(kernel_dirs=[str(specs / "kernels")], ensure_native_kernel=False)
    if os.name != "posix":
        return KernelManager(kernel_name="sdc-python", kernel_spec_manager=kernels)
    return KernelManager(kernel_name="sdc-python", kernel_spec_manager=kernels, transport="ipc",
                         ip=os.path.join(sockets, "kernel"))


def execute(path: Path | str, out: Path | str | None = None, timeout: int = 600,
            cwd: Path | str | None = None) -> nbformat.NotebookNode:
    """Run a notebook top to bottom in a kernel of this Python; save it to ``out``."""
    import os

    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    specs = kernel_spec_dir()
    sockets = tempfile.mkdtemp(prefix="sdc-k-")
    client = NotebookClient(
        nb, km=_kernel_manager(specs, sockets), timeout=timeout, kernel_name="sdc-python", allow_errors=True,
        store_widget_state=True, resources={"metadata": {"path": str(cwd or path.parent)}},
    )
    names = ("JUPYTER_PATH", "PYDEVD_DISABLE_FILE_VALIDATION", "SDC_MAGIC_LEDGER_DIR", "JPY_SESSION_NAME")
    saved = {k: os.environ.get(k) for k in names}
    os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (str(specs), saved["JUPYTER_PATH"]) if p)
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    # a fresh ledger per headless run, so re-running a notebook starts a new record
    ledger_dir = Path(tempfile.mkdtemp(prefix="sdc-ledger-"))
    os.environ["SDC_MAGIC_LEDGER_DIR"] = str(ledger_dir)
    os.environ["JPY_SESSION_NAME"] = str(path)
    try:
        client.execute()
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
        shutil.rmtree(specs, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, out)
    return nb


def summarise(nb: nbformat.NotebookNode) -> list[OutputSummary]:
    """Every output of every code cell with what sdc_magic decided (``uncleared`` if nothing)."""
    rows: list[OutputSummary] = []
    code_index = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        code_index += 1
        for output in cell.get("outputs", []):
            meta = dict(output.get("metadata", {}).get("sdc_magic", {}) or {})
            rows.append(OutputSummary(
                cell=code_index, output_type=output.get("output_type", ""),
                status=meta.get("status", "uncleared"), hidden=int(meta.get("hidden", 0) or 0),
                cells=int(meta.get("cells", 0) or 0), kind=meta.get("kind", output.get("output_type", "")),
                meta=meta, data=dict(output.get("data", {}))))
    return rows


def format_summary(name: str, rows: list[OutputSummary]) -> str:
    """A one-screen text summary of a notebook's outputs."""
    lines = [f"{name}", f"  {'cell':>4}  {'output':<14} {'status':<11} {'kind':<11} {'hidden':>6} {'cells':>6}"]
    for r in rows:
        if r.output_type == "stream" and r.status == "uncleared":
            lines.append(f"  {r.cell:>4}  {'stream':<14} {'(text)':<11}")
            continue
        lines.append(f"  {r.cell:>4}  {r.output_type:<14} {r.status:<11} {r.kind:<11} {r.hidden:>6} {r.cells:>6}")
    return "\n".join(lines)
