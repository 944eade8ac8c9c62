"""The ledger never stops the extension: bad lines set aside, linear loading, several kernels, no silent loss."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sdc_magic.records.ledger import Ledger, OutputRecord, digests_from_file

REPO = Path(__file__).resolve().parents[1]


def record(out_id: str, **extra: object) -> OutputRecord:
    return OutputRecord(id=out_id, status="pass", kind="table", hidden=0, cells=4, call="size",
                        digest=f"d-{out_id}", execution_count=extra.pop("execution_count", 1), **extra)  # type: ignore[arg-type]


def line(rec: OutputRecord, event: str = "output") -> bytes:
    from dataclasses import asdict

    return (json.dumps({"event": event, "record": asdict(rec)}) + "\n").encode()


@pytest.fixture(autouse=True)
def _no_notebook_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)


def test_bad_lines_are_set_aside_and_the_rest_loads(tmp_path: Path) -> None:
    bad = [
        b'{"event": "output", "record": {"foo": 1}}',
        b'{"event": "output", "record": {"id": "out-\xff\xfe", "status": "pass"}}',  # invalid UTF-8
        line(record("out-9")).rstrip(b"\n").replace(b'"id": "out-9"', b'"id": 9'),  # an integer id
        b'{"event": "output", "record": {"id": "out-3", "sta',  # truncated
        b"[1, 2, 3]",
    ]
    good = [line(record("out-1")), line(record("out-2"))]
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(good[0] + bad[0] + b"\n" + bad[1] + b"\n" + good[1] + bad[2] + b"\n" + bad[3] + b"\n"
                     + bad[4])  # the last line has no newline, as after a crash
    ledger = Ledger(tmp_path)  # must not raise
    assert [r.id for r in ledger.records] == ["out-1", "out-2"]
    assert ledger.persist
    assert len(ledger.warnings) == 1 and "5 unreadable line(s)" in ledger.warnings[0]
    assert "ledger.jsonl.corrupt" in ledger.warnings[0]
    assert ledger.take_warnings() == ledger.warnings and ledger.take_warnings() == []
    # the original bytes are kept, and the ledger itself is clean now
    assert (tmp_path / "ledger.jsonl.corrupt").read_bytes() == b"".join(b + b"\n" for b in bad)
    again = Ledger(tmp_path)
    assert again.warnings == [] and [r.id for r in again.records] == ["out-1", "out-2"]
    assert again.new_id() == "out-3"
    assert (tmp_path / "ledger.jsonl.corrupt").read_bytes() == b"".join(b + b"\n" for b in bad)


def test_numpy_counts_reload_as_numbers(tmp_path: Path) -> None:
    import numpy as np

    ledger = Ledger(tmp_path)
    ledger.add(record(ledger.new_id(), reasons={"threshold": np.int64(3)}))
    again = Ledger(tmp_path)
    assert again.warnings == [] and again.records[0].reasons == {"threshold": 3}


def test_loading_is_linear(tmp_path: Path) -> None:
    """10,000 outputs and 10,000 updates (each looked up by id): quadratic lookups took ~10 s here."""
    from dataclasses import asdict

    base = asdict(record("out-1", csv="a,b\nx,1\n", certificate={"cells": [{"value": 1}]}))
    n = 10_000
    chunks = [json.dumps({"event": "output", "record": {**base, "id": f"out-{i}"}}) for i in range(1, n + 1)]
    chunks += [json.dumps({"event": "update", "record": {**base, "id": f"out-{i}", "comments": [str(i)]}})
               for i in range(1, n + 1)]
    (tmp_path / "ledger.jsonl").write_text("\n".join(chunks) + "\n")
    start = time.perf_counter()
    ledger = Ledger(tmp_path)
    found = [ledger.get(f"out-{i}").comments for i in range(1, n + 1)]
    elapsed = time.perf_counter() - start
    assert len(ledger.records) == n and found[-1] == [str(n)]
    assert elapsed < 3.0, f"loading {n:,} records took {elapsed:.1f} s"


WRITER = """
import sys
from sdc_magic.records.ledger import Ledger, OutputRecord
ledger = Ledger(__import__('pathlib').Path(sys.argv[1]))
for i in range(100):
    out = ledger.new_id()
    ledger.add(OutputRecord(id=out, status="pass", kind="table", hidden=0, cells=4, call="size",
                            digest=f"{sys.argv[2]}-{i}", execution_count=i, csv="x" * 20000))
print(ledger.persist, ledger.warnings)
"""


def test_two_kernels_append_without_losing_records(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("JPY_SESSION_NAME", None)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.strip() == "True []"
    ledger = Ledger(tmp_path)
    assert ledger.warnings == []
    ids = [r.id for r in ledger.records]
    assert len(ids) == 200 and len(set(ids)) == 200  # unique ids, nothing lost
    assert {r.digest for r in ledger.records} == {f"{n}-{i}" for n in "ab" for i in range(100)}
    assert sorted(int(i[4:]) for i in ids) == list(range(1, 201))  # still short: out-1 … out-200
    assert len(digests_from_file(tmp_path / "ledger.jsonl")) == 200


def test_the_first_output_creates_the_folder(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "nb" / ".sdc_magic")
    assert not (tmp_path / "nb").exists()  # loading creates nothing
    ledger.add(record(ledger.new_id()))
    assert ledger.persist and ledger.warnings == []
    assert [r.id for r in Ledger(tmp_path / "nb" / ".sdc_magic").records] == ["out-1"]


def test_a_kernel_sees_the_other_kernels_ids(tmp_path: Path) -> None:
    first, second = Ledger(tmp_path), Ledger(tmp_path)
    a = first.new_id()
    b = second.new_id()
    first.add(record(a))
    c = first.new_id()
    assert len({a, b, c}) == 3


def test_folder_that_is_a_file_turns_persistence_off_with_one_warning(tmp_path: Path) -> None:
    (tmp_path / ".sdc_magic").write_text("not a folder")
    ledger = Ledger(tmp_path / ".sdc_magic")
    assert not ledger.persist
    assert len(ledger.warnings) == 1 and "is a file" in ledger.warnings[0]
    for _ in range(3):
        ledger.add(record(ledger.new_id()))
    assert [r.id for r in ledger.records] == ["out-1", "out-2", "out-3"]
    assert len(ledger.warnings) == 1


def test_write_failure_mid_session_warns_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger(tmp_path)
    ledger.add(record(ledger.new_id()))
    real_open = os.open

    def refuse(path: object, flags: int, *args: object) -> int:
        if str(path).endswith("ledger.jsonl") and flags & os.O_WRONLY:
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refuse)
    ledger.add(record(ledger.new_id()))
    ledger.add(record(ledger.new_id()))
    assert not ledger.persist and len(ledger.records) == 3
    assert len(ledger.warnings) == 1 and "Permission denied" in ledger.warnings[0]


def test_read_only_folder_loads_and_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ledger.jsonl").write_bytes(line(record("out-1")))
    real_open = os.open

    def read_only(path: object, flags: int, *args: object) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise PermissionError(30, "Read-only file system")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", read_only)
    ledger = Ledger(tmp_path)
    assert [r.id for r in ledger.records] == ["out-1"] and not ledger.persist
    assert len(ledger.warnings) == 1 and "Read-only" in ledger.warnings[0]
    ledger.add(record(ledger.new_id()))
    assert [r.id for r in ledger.records] == ["out-1", "out-2"]


def test_a_rerun_cell_supersedes_its_earlier_outputs(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.add(record(ledger.new_id(), cell_id="c1", execution_count=1))
    ledger.add(record(ledger.new_id(), cell_id="c1", execution_count=1))  # two displays of one run
    ledger.add(record(ledger.new_id(), cell_id="c2", execution_count=2))
    ledger.add(record(ledger.new_id(), cell_id="c1", execution_count=3))  # the cell is run again
    ledger.add(record(ledger.new_id(), execution_count=4))  # no cell id known: never superseded
    assert [r.superseded_by for r in ledger.records] == ["out-4", "out-4", None, None, None]
    assert [r.id for r in ledger.current()] == ["out-3", "out-4", "out-5"]
    ledger.comment("out-1", "history stays")
    restarted = Ledger(tmp_path)  # a restart: execution counts start again at 1
    assert [r.superseded_by for r in restarted.records] == ["out-4", "out-4", None, None, None]
    restarted.add(record(restarted.new_id(), cell_id="c2", execution_count=1))
    assert restarted.get("out-3").superseded_by == "out-6"
    assert restarted.get("out-1").comments == ["history stays"]
    assert list(restarted.frame()["superseded_by"].fillna("")) == ["out-4", "out-4", "out-6", "", "", ""]


LOAD = """
from IPython.testing.globalipapp import start_ipython
from IPython.utils.capture import capture_output
ip = start_ipython()
with capture_output(display=True) as cap:
    ip.run_line_magic("load_ext", "sdc_magic")
    result = ip.run_cell("import pandas as pd\\n"
                         "pd.DataFrame({'g': list('aaaaaab'), 'v': 1}).groupby('g').size()")
assert result.error_in_exec is None
from sdc_magic.jupyter.extension import session
ledger = session().ledger
statuses = [o.metadata.get('sdc_magic', {}).get('status') for o in cap.outputs]
print("LOADED", ledger.persist, [r.id for r in ledger.records], "suppressed" in statuses or "blocked" in statuses)
print("WARNED", "set aside" in cap.stdout + cap.stderr + repr([o.data for o in cap.outputs]))
"""


def test_load_ext_with_a_damaged_ledger_loads_and_protects(tmp_path: Path) -> None:
    """Issue 12 item 2: one bad ledger line used to make %load_ext raise, leaving every table raw."""
    (tmp_path / ".sdc_magic").mkdir()
    (tmp_path / ".sdc_magic" / "ledger.jsonl").write_bytes(
        line(record("out-1")) + b'{"event": "output", "record": {"foo": 1}}\n' + b"\xff\xfe\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), SDC_MAGIC_CONFIG="")
    env.pop("JPY_SESSION_NAME", None)
    env.pop("SDC_MAGIC_LEDGER_DIR", None)
    done = subprocess.run([sys.executable, "-c", LOAD], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "LOADED True ['out-1', 'out-2'] True" in done.stdout
    assert "WARNED True" in done.stdout
    assert (tmp_path / ".sdc_magic" / "ledger.jsonl.corrupt").read_bytes() == (
        b'{"event": "output", "record": {"foo": 1}}\n\xff\xfe\n')


def test_cell_id_comes_from_the_front_ends_execute_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """JupyterLab sends ``cellId`` with each execution: a re-run supersedes without any help from the session."""
    import IPython

    class Kernel:
        cell = "c-1"

        def get_parent(self, channel: str = "shell") -> dict:
            return {"header": {}, "metadata": {"cellId": self.cell}}

    class Shell:
        kernel = Kernel()

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    ledger = Ledger(tmp_path)
    ledger.add(record(ledger.new_id(), execution_count=1))
    Shell.kernel.cell = "c-2"
    ledger.add(record(ledger.new_id(), execution_count=2))
    Shell.kernel.cell = "c-1"
    ledger.add(record(ledger.new_id(), execution_count=3))
    assert [r.cell_id for r in ledger.records] == ["c-1", "c-2", "c-1"]
    assert [r.superseded_by for r in ledger.records] == ["out-3", None, None]
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)  # a console or a script: no cell ids
    ledger.add(record(ledger.new_id(), execution_count=4))
    assert ledger.records[-1].cell_id is None
