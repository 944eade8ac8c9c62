"""Jupyter server routes of sdc_magic, used by the lab extension.

``GET  /sdc-magic/version``            {"name", "version", "schema"}: the panel warns when the lab
                                       extension and this server side differ.
``POST /sdc-magic/redact``             body ``{"notebook": {...}, "path": "name.ipynb"}`` (or the
                                       notebook itself): the redacted notebook, the report and
                                       each output's ``clearance()`` answer.
``GET  /sdc-magic/redact?path=P``      the same for the saved notebook P (through the contents
                                       manager); ``&download=1`` sends the redacted copy as a file.

The redaction is :func:`sdc_magic.records.redact.redact_notebook`, the same function as the CLI,
the pre-save hook and the nbconvert preprocessor, so the browser never carries a
raw-to-redacted transform of its own.

This module imports tornado and jupyter_server; ``sdc_magic/__init__.py`` imports it only
inside ``_load_jupyter_server_extension``, so a kernel never loads them.
"""

from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import quote

import tornado.web
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import ensure_async, url_path_join

from ..config import __version__
from ..records.redact import CLEARED, clearance, redact_notebook

NAMESPACE = "sdc-magic"
SCHEMA = 1
AUTH_RESOURCE = "contents"  # reading and redacting notebooks is a contents operation

try:  # jupyter_server >= 2: fine-grained authorization on top of authentication
    from jupyter_server.auth.decorator import authorized
except ImportError:  # pragma: no cover
    def authorized(method: Any) -> Any:
        return method


def server_checks(os_path: str | None) -> dict[str, Any]:
    """The stronger checks an administrator turned on for the pre-save hook apply here too.

    ``SDC_MAGIC_REDACT_LEDGER`` (``auto``: the ledger beside the notebook, or a path) and
    ``SDC_MAGIC_REQUIRE_HMAC=1``, so the copy the guard downloads is redacted exactly as a
    saved notebook would be.
    """
    import os

    from ..records.redact import hook_known

    ledger = os.environ.get("SDC_MAGIC_REDACT_LEDGER") or None
    return {"known_digests": hook_known(ledger, os_path),
            "require_hmac": os.environ.get("SDC_MAGIC_REQUIRE_HMAC", "").lower() in ("1", "true", "yes")}


def output_clearance(nb: dict[str, Any], checks: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``clearance()`` of every output of ``nb``: [{cell, output, reason}] (reason None: released)."""
    checks = checks or {}
    rows = []
    for ci, cell in enumerate(nb.get("cells", [])):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        for oi, output in enumerate(cell.get("outputs", []) or []):
            why = clearance(output, CLEARED, checks.get("known_digests"), bool(checks.get("require_hmac"))) \
                if isinstance(output, dict) else "malformed output"
            rows.append({"cell": ci, "output": oi, "reason": why})
    return rows


def check_notebook(nb: Any) -> None:
    """A 400 (not a 500 from deep inside the redactor) for anything that is not notebook-shaped."""
    def bad(why: str) -> tornado.web.HTTPError:
        return tornado.web.HTTPError(400, f"expected a notebook: {why}")

    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise bad("an object with a 'cells' list")
    if not isinstance(nb.get("metadata", {}), dict):
        raise bad("'metadata' is not an object")
    for i, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict):
            raise bad(f"cell {i} is not an object")
        outputs = cell.get("outputs", [])
        if not isinstance(outputs, list):
            raise bad(f"the outputs of cell {i} are not a list")
        for j, output in enumerate(outputs):
            if not isinstance(output, dict):
                raise bad(f"output {j} of cell {i} is not an object")
            for key in ("data", "metadata"):
                if not isinstance(output.get(key, {}), dict):
                    raise bad(f"'{key}' of output {j} of cell {i} is not an object")


def redaction_reply(nb: dict[str, Any], path: str | None, os_path: str | None = None) -> dict[str, Any]:
    """The JSON answer of the redact route for notebook ``nb`` (not modified)."""
    check_notebook(nb)
    checks = server_checks(os_path)
    outputs = output_clearance(nb, checks)
    redacted = copy.deepcopy(nb)
    report = redact_notebook(redacted, CLEARED, **checks)
    return {
        "schema": SCHEMA,
        "path": path,
        "notebook": redacted,
        "report": {
            "kept": report.kept,
            "removed": report.removed,
            "reasons": dict(report.reasons),
            "widget_state_dropped": report.widget_state_dropped,
        },
        "outputs": outputs,
    }


def content_disposition(name: str) -> str:
    """``attachment`` with a safe file name (RFC 6266): a quoted ASCII fallback, and the exact
    name as ``filename*`` (RFC 5987) when it has quotes, backslashes, controls or non-ASCII."""
    fallback = "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\' else "_" for ch in name)
    if fallback == name:
        return f'attachment; filename="{name}"'
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def redacted_name(path: str | None) -> str:
    base = (path or "notebook.ipynb").rsplit("/", 1)[-1]
    stem = base[:-6] if base.lower().endswith(".ipynb") else base
    return f"{stem}.redacted.ipynb"


class VersionHandler(APIHandler):
    """``GET /sdc-magic/version``."""

    @tornado.web.authenticated
    def get(self) -> None:
        self.finish(json.dumps({"name": "sdc_magic", "version": __version__, "schema": SCHEMA}))


class RedactHandler(APIHandler):
    """``POST /sdc-magic/redact`` (notebook in the body) and ``GET /sdc-magic/redact?path=``."""

    auth_resource = AUTH_RESOURCE

    def _os_path(self, path: str | None) -> str | None:
        """Where the notebook is on disk (for the ledger beside it), if the contents manager says."""
        if not path:
            return None
        try:
            return self.contents_manager._get_os_path(path.strip("/"))
        except Exception:  # not a file-backed contents manager, or a path outside the root
            return None

    @tornado.web.authenticated
    @authorized
    async def post(self) -> None:
        try:  # jupyter_server's get_json_body answers 500 to a body that is not UTF-8
            body = json.loads(self.request.body.decode("utf-8")) if self.request.body.strip() else None
        except (UnicodeDecodeError, ValueError):
            raise tornado.web.HTTPError(400, "expected a JSON object (UTF-8)") from None
        if not isinstance(body, dict):
            raise tornado.web.HTTPError(400, "expected a JSON object")
        nb = body.get("notebook", body)
        path = body.get("path") if isinstance(body.get("path"), str) else None
        self.finish(json.dumps(redaction_reply(nb, path, self._os_path(path))))

    @tornado.web.authenticated
    @authorized
    async def get(self) -> None:
        path = self.get_query_argument("path", "").strip("/")
        if not path:
            raise tornado.web.HTTPError(400, "missing ?path=")
        if not path.lower().endswith(".ipynb"):
            raise tornado.web.HTTPError(400, f"not a notebook: {path}")
        cm = self.contents_manager
        try:
            model = await ensure_async(cm.get(path, content=True, type="notebook"))
        except tornado.web.HTTPError:
            raise
        except Exception as exc:  # unreadable JSON, invalid UTF-8, ...
            raise tornado.web.HTTPError(400, f"cannot read {path} ({type(exc).__name__})") from None
        nb = json.loads(json.dumps(model["content"]))  # NotebookNode -> plain JSON
        reply = redaction_reply(nb, path, self._os_path(path))
        if self.get_query_argument("download", "0") in ("1", "true", "yes"):
            self.set_header("Content-Type", "application/x-ipynb+json")
            self.set_header("Content-Disposition", content_disposition(redacted_name(path)))
            self.finish(json.dumps(reply["notebook"], indent=1, ensure_ascii=False))
            return
        self.finish(json.dumps(reply))


def setup_handlers(web_app: Any) -> list[str]:
    """Add the routes to the server's tornado application; return the URL patterns."""
    base_url = web_app.settings.get("base_url", "/")
    routes = [
        (url_path_join(base_url, NAMESPACE, "version"), VersionHandler),
        (url_path_join(base_url, NAMESPACE, "redact"), RedactHandler),
    ]
    web_app.add_handlers(".*$", routes)
    return [pattern for pattern, _ in routes]


def load(server_app: Any) -> None:
    """Called by ``sdc_magic._load_jupyter_server_extension``."""
    patterns = setup_handlers(server_app.web_app)
    server_app.log.info("sdc_magic %s server extension: %s", __version__, ", ".join(patterns))
