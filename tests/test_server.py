"""The server side of the lab extension: /sdc-magic/ routes, registration, installation.

The routes are tested against a real Jupyter server started in a subprocess with this
environment's installed configuration (the wheel's etc/jupyter/jupyter_server_config.d
enables the extension), so no pytest plugin with global autouse fixtures is needed.
The browser tests reuse :func:`start_jupyter`.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import sdc_magic
from sdc_magic.outputs.bundle import digest
from sdc_magic.records.redact import redact_notebook

REPO = Path(__file__).resolve().parents[1]
SECRET = "C0001-SECRET-4242421"
TOKEN = "sdc-test-token"


# --------------------------------------------------------------------------- a server
@dataclass
class Reply:
    code: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Jupyter:
    """A Jupyter server (or JupyterLab) running in a subprocess on 127.0.0.1."""

    url: str
    root: Path
    log: Path
    process: subprocess.Popen[bytes]
    token: str = TOKEN
    env: dict[str, str] = field(default_factory=dict)

    def fetch(self, path: str, method: str = "GET", body: Any = None, auth: bool = True) -> Reply:
        data = None if body is None else (body if isinstance(body, bytes | str) else json.dumps(body))
        if isinstance(data, str):
            data = data.encode()
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = f"token {self.token}"
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return Reply(response.status, dict(response.headers), response.read())
        except urllib.error.HTTPError as err:
            return Reply(err.code, dict(err.headers), err.read())

    def api(self, path: str, method: str = "GET", body: Any = None) -> Any:
        reply = self.fetch(path, method, body)
        assert 200 <= reply.code < 300, (path, reply.code, reply.body[:500])
        return reply.json() if reply.body else None

    def log_tail(self, n: int = 60) -> str:
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_jupyter(base: Path, root: Path, module: str = "jupyter_server", config: str = "",
                  env: dict[str, str] | None = None, timeout: float = 90) -> Jupyter:
    """Start ``python -m MODULE`` (jupyter_server or jupyterlab) as root-capable, with a token."""
    config_file = base / "jupyter_test_config.py"
    config_file.write_text(
        "c.LabApp.news_url = None\n"
        "c.LabApp.check_for_updates_class = 'jupyterlab.NeverCheckForUpdate'\n" + config,
        encoding="utf-8")
    (base / "config").mkdir(exist_ok=True)
    full_env = dict(os.environ,
                    JUPYTER_CONFIG_DIR=str(base / "config"),  # not the user's ~/.jupyter
                    JUPYTER_RUNTIME_DIR=str(base / "runtime"),
                    PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                    **(env or {}))
    port = free_port()
    log = base / f"{module}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", module, "--no-browser", f"--config={config_file}",
             "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
             f"--IdentityProvider.token={TOKEN}", "--ServerApp.allow_root=True",
             f"--ServerApp.root_dir={root}"],
            stdout=out, stderr=subprocess.STDOUT, env=full_env, cwd=root)
    server = Jupyter(f"http://127.0.0.1:{port}", root, log, process, env=full_env)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            pytest.fail(f"{module} exited with {process.returncode}:\n{server.log_tail()}")
        try:
            if server.fetch("/api/status").code == 200:
                return server
        except OSError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            pytest.fail(f"{module} did not start in {timeout} s:\n{server.log_tail()}")
        time.sleep(0.3)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jupyter]:
    base = tmp_path_factory.mktemp("server")
    root = base / "root"
    root.mkdir()
    settings = base / "app-settings"
    settings.mkdir()
    (settings / "overrides.json").write_text(
        json.dumps({"sdc-magic:plugin": {"guardEnabled": True, "guardLocked": True}}), encoding="utf-8")
    config = (f"c.LabApp.app_settings_dir = {str(settings)!r}\n"
              f"c.LabApp.user_settings_dir = {str(base / 'user-settings')!r}\n"
              f"c.LabApp.workspaces_dir = {str(base / 'workspaces')!r}\n")
    jupyter = start_jupyter(base, root, "jupyter_server", config)
    try:
        yield jupyter
    finally:
        jupyter.stop()


def cleared_output(html: str, plain: str, status: str = "pass", **record: Any) -> dict[str, Any]:
    meta = {"schema": 1, "id": "out-1", "status": status, "kind": "table", "hidden": 0,
            "reasons": [], "notes": [], "digest": digest(html, plain), **record}
    return {"output_type": "display_data", "data": {"text/html": html, "text/plain": plain},
            "metadata": {"sdc_magic": meta}}


def notebook() -> dict[str, Any]:
    """Every kind of output the guard must tell apart."""
    passed = cleared_output("<table><td>28</td></table>", "28")
    forged = cleared_output("<table><td>7</td></table>", "7")
    forged["data"]["text/plain"] = f"{SECRET} edited after checking"
    row_level = cleared_output(f"<table><td>{SECRET}</td></table>", SECRET, status="blocked", kind="row-level")
    extra_mime = cleared_output("<b>1</b>", "1")
    extra_mime["data"]["image/png"] = "iVBORw0KGgo="
    return {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"widgets": {"application/vnd.jupyter.widget-state+json": {"state": {SECRET: {}}}}},
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": "# title", "id": "m1"},
            {"cell_type": "code", "metadata": {}, "source": "x", "id": "c1", "execution_count": 1,
             "outputs": [passed, {"output_type": "stream", "name": "stdout", "text": SECRET + "\n"}]},
            {"cell_type": "code", "metadata": {}, "source": "y", "id": "c2", "execution_count": 2,
             "outputs": [row_level, forged, extra_mime,
                         {"output_type": "error", "ename": "ValueError", "evalue": SECRET, "traceback": []},
                         {"output_type": "display_data", "data": {"text/plain": SECRET}, "metadata": {}}]},
        ],
    }


EXPECTED_REASONS = [
    {"cell": 1, "output": 0, "reason": None},
    {"cell": 1, "output": 1, "reason": "stream output"},
    {"cell": 2, "output": 0, "reason": "status blocked"},
    {"cell": 2, "output": 1, "reason": "digest does not match the content"},
    {"cell": 2, "output": 2, "reason": "unchecked mime types image/png"},
    {"cell": 2, "output": 3, "reason": "error output"},
    {"cell": 2, "output": 4, "reason": "no sdc_magic record"},
]


def test_version_route(server: Jupyter) -> None:
    reply = server.fetch("/sdc-magic/version")
    assert reply.code == 200
    assert reply.json() == {"name": "sdc_magic", "version": sdc_magic.__version__, "schema": 1}


def test_redact_posted_notebook(server: Jupyter) -> None:
    nb = notebook()
    reply = server.api("/sdc-magic/redact", "POST", {"notebook": nb, "path": "dir/a.ipynb"})
    assert reply["schema"] == 1 and reply["path"] == "dir/a.ipynb"
    assert reply["outputs"] == EXPECTED_REASONS
    expected = copy.deepcopy(nb)
    report = redact_notebook(expected)  # the same function, so the same result
    assert reply["notebook"] == json.loads(json.dumps(expected))
    assert reply["report"] == {"kept": report.kept, "removed": report.removed,
                               "reasons": report.reasons, "widget_state_dropped": True}
    assert (reply["report"]["kept"], reply["report"]["removed"]) == (1, 6)
    assert SECRET not in json.dumps(reply["notebook"])
    kept, original = reply["notebook"]["cells"][1]["outputs"][0], nb["cells"][1]["outputs"][0]
    # what the digest covers is kept as it was; the record keeps its short fields (issue 23.8)
    assert kept["data"] == {k: v for k, v in original["data"].items() if k != "application/vnd.jupyter.widget-view+json"}
    record, was = kept["metadata"]["sdc_magic"], original["metadata"]["sdc_magic"]
    assert {k: was[k] for k in record} == record and {"status", "digest"} <= set(record)


def test_redact_accepts_a_bare_notebook(server: Jupyter) -> None:
    assert server.api("/sdc-magic/redact", "POST", notebook())["report"]["removed"] == 6


def test_redact_saved_notebook_and_download(server: Jupyter) -> None:
    (server.root / "sub").mkdir()
    (server.root / "sub" / "analysis.ipynb").write_text(json.dumps(notebook()), encoding="utf-8")
    reply = server.api("/sdc-magic/redact?path=sub/analysis.ipynb")
    assert reply["outputs"] == EXPECTED_REASONS and reply["path"] == "sub/analysis.ipynb"
    assert SECRET not in json.dumps(reply["notebook"])

    download = server.fetch("/sdc-magic/redact?path=sub%2Fanalysis.ipynb&download=1")
    assert download.code == 200
    assert download.headers["Content-Disposition"] == 'attachment; filename="analysis.redacted.ipynb"'
    downloaded = download.json()
    assert downloaded == reply["notebook"]
    import nbformat

    nbformat.validate(nbformat.from_dict(downloaded))
    # the file on disk is untouched: the route makes a copy
    assert SECRET in (server.root / "sub" / "analysis.ipynb").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("query", "code"),
    [("", 400), ("?path=data.csv", 400), ("?path=missing.ipynb", 404)],
)
def test_redact_get_errors(server: Jupyter, query: str, code: int) -> None:
    assert server.fetch(f"/sdc-magic/redact{query}").code == code


@pytest.mark.parametrize("body", ["[1, 2]", '{"notebook": {"cells": "no"}}', '{"cells": 3}', "not json"])
def test_redact_post_rejects_non_notebooks(server: Jupyter, body: str) -> None:
    assert server.fetch("/sdc-magic/redact", "POST", body).code == 400


@pytest.mark.parametrize("body", [
    {"cells": [1, "two"]},  # cells that are not objects
    {"notebook": {"cells": [{"cell_type": "code", "outputs": ["raw text"]}]}},  # outputs that are not objects
    {"cells": [{"cell_type": "code", "outputs": "abc"}]},  # outputs not a list
    {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "metadata": [1]}]}]},
    {"cells": [{"cell_type": "code", "outputs": [{"output_type": "display_data", "data": "x"}]}]},
    {"cells": [], "metadata": ["widgets"]},
])
def test_redact_post_rejects_malformed_cells_and_outputs(server: Jupyter, body: Any) -> None:
    reply = server.fetch("/sdc-magic/redact", "POST", body)
    assert reply.code == 400, reply.body[:300]


def test_redact_post_rejects_invalid_utf8(server: Jupyter) -> None:
    body = b'{"cells": [], "x": "\xff\xfe"}'
    assert server.fetch("/sdc-magic/redact", "POST", body).code == 400


def test_redact_get_of_a_malformed_saved_notebook(server: Jupyter) -> None:
    (server.root / "bad_utf8.ipynb").write_bytes(b'{"cells": [], "metadata": {"x": "\xff"}, "nbformat": 4}')
    assert server.fetch("/sdc-magic/redact?path=bad_utf8.ipynb").code == 400
    (server.root / "bad_cells.ipynb").write_text(json.dumps({"cells": [1], "metadata": {}, "nbformat": 4,
                                                             "nbformat_minor": 5}))
    assert server.fetch("/sdc-magic/redact?path=bad_cells.ipynb").code == 400


def test_download_name_with_a_quote(server: Jupyter) -> None:
    name = 'we"ird; name é.ipynb'
    (server.root / name).write_text(json.dumps(notebook()), encoding="utf-8")
    from urllib.parse import quote

    reply = server.fetch(f"/sdc-magic/redact?path={quote(name)}&download=1")
    assert reply.code == 200
    header = reply.headers["Content-Disposition"]
    assert header == ("attachment; filename=\"we_ird; name _.redacted.ipynb\"; "
                      "filename*=UTF-8''we%22ird%3B%20name%20%C3%A9.redacted.ipynb")
    from urllib.parse import unquote

    exact = re.search(r"filename\*=UTF-8''([^;\s]+)$", header)
    assert exact and unquote(exact.group(1)) == 'we"ird; name é.redacted.ipynb'  # what browsers save (RFC 6266)
    assert SECRET not in reply.body.decode()


def test_routes_need_authentication(server: Jupyter) -> None:
    for path in ("/sdc-magic/version", "/sdc-magic/redact?path=a.ipynb"):
        assert server.fetch(path, auth=False).code == 403, path
    assert server.fetch("/sdc-magic/redact", "POST", notebook(), auth=False).code == 403


def test_schema_is_served_and_admin_overrides_lock_the_guard(server: Jupyter) -> None:
    """overrides.json changes the schema defaults, which the lab extension reads to lock the guard."""
    settings = server.api("/lab/api/settings/sdc-magic:plugin")
    props = settings["schema"]["properties"]
    assert props["guardLocked"]["default"] is True
    assert props["guardEnabled"]["default"] is True
    assert props["exportDir"]["default"] == ""  # empty: the kernel's folder per notebook


def test_extension_points_do_not_import_the_server() -> None:
    code = (
        "import sys, sdc_magic\n"
        "assert sdc_magic._jupyter_server_extension_points() == [{'module': 'sdc_magic'}]\n"
        "assert sdc_magic._jupyter_labextension_paths() == [{'src': 'labextension', 'dest': 'sdc-magic'}]\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tornado', 'jupyter_server'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_versions_agree() -> None:
    package = json.loads((REPO / "labextension" / "package.json").read_text(encoding="utf-8"))
    version_ts = (REPO / "labextension" / "src" / "version.ts").read_text(encoding="utf-8")
    ts_version = re.search(r"VERSION = '([^']+)'", version_ts)
    assert ts_version is not None
    assert package["version"] == ts_version.group(1) == sdc_magic.__version__


def test_server_config_enables_the_extension() -> None:
    config = json.loads((REPO / "jupyter-config" / "server-config" / "sdc_magic.json").read_text(encoding="utf-8"))
    assert config == {"ServerApp": {"jpserver_extensions": {"sdc_magic": True}}}


def _jupyter(*args: str) -> str:
    exe = Path(sys.executable).parent / "jupyter"
    env = dict(os.environ, PATH=f"{exe.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


def test_installed_lab_extension_is_enabled() -> None:
    if shutil.which("jupyter-labextension", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("jupyterlab is not installed in this environment (it is in the test extras)")
    out = _jupyter("labextension", "list")
    assert re.search(r"sdc-magic v\S+ enabled\s+OK", out), out


def test_installed_server_extension_is_enabled() -> None:
    out = _jupyter("server", "extension", "list")
    assert re.search(r"sdc_magic enabled", out), out
    assert re.search(r"sdc_magic \S+ OK", out), out


def test_routes_apply_the_ledger_check_the_administrator_set(tmp_path: Path) -> None:
    """With SDC_MAGIC_REDACT_LEDGER=auto the guard's copy is redacted as the pre-save hook would."""
    from sdc_magic.records.ledger import Ledger, OutputRecord

    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    nb = notebook()
    real = nb["cells"][1]["outputs"][0]
    ledger = Ledger(root / "sub" / ".sdc_magic")
    ledger.add(OutputRecord(id=ledger.new_id(), status="pass", kind="table", hidden=0, cells=1, call="size",
                            digest=real["metadata"]["sdc_magic"]["digest"], execution_count=1))
    forged = cleared_output(f"<table><td>{SECRET}</td></table>", SECRET)  # self-made clearance
    nb["cells"][1]["outputs"].append(forged)
    (root / "sub" / "analysis.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    jupyter = start_jupyter(tmp_path, root, "jupyter_server", env={"SDC_MAGIC_REDACT_LEDGER": "auto"})
    try:
        reply = jupyter.api("/sdc-magic/redact?path=sub/analysis.ipynb")
        reasons = [o["reason"] for o in reply["outputs"] if o["cell"] == 1]
        assert reasons == [None, "stream output", "not in the session ledger"]
        assert SECRET not in json.dumps(reply["notebook"])
        posted = jupyter.api("/sdc-magic/redact", "POST", {"notebook": nb, "path": "sub/analysis.ipynb"})
        assert [o["reason"] for o in posted["outputs"] if o["cell"] == 1][2] == "not in the session ledger"
        elsewhere = jupyter.api("/sdc-magic/redact", "POST", {"notebook": nb, "path": "../outside.ipynb"})
        assert elsewhere["report"]["kept"] == 0  # no ledger known: nothing is cleared
    finally:
        jupyter.stop()
