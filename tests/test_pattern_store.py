"""Patterns kept on disk (issue 21: "re-displays and re-runs cost nothing"): a re-run audits the
pattern of the earlier run instead of searching, with the same outcome to the digit, and trusts
nothing it reads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import Rules
from sdc_magic.protect import patterns, protect
from sdc_magic.protect.api import clear_cache


def _counts(seed: int = 8, shape: tuple[int, ...] = (12, 9, 3)) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = rng.negative_binomial(2, 0.25, size=shape)
    idx = np.indices(shape).reshape(len(shape), -1)
    df = pd.DataFrame({f"d{j}": idx[j] for j in range(len(shape))})
    df["n"] = n.ravel()
    return df[df.n > 0].reset_index(drop=True)


#: a table the heuristic protects (64 secondaries): the search is most of the work
KWARGS = dict(dims=["d0", "d1", "d2"], value="n", rules=Rules(threshold=5))


def _outcome(result) -> tuple:
    cells = result.cells
    return (result.audit_ok, cells["status"].tolist(), cells["lower"].round(9).fillna(-1).tolist(),
            cells["upper"].round(9).fillna(-1).tolist(), result.method)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    folder = tmp_path / "patterns"
    patterns.use_store(folder)
    return folder


def test_a_rerun_audits_the_stored_pattern_with_the_same_outcome_and_far_less_work(store: Path) -> None:
    df = _counts()
    first = protect(df, **KWARGS)
    assert (first.cells["status"] == "secondary").any(), "the table needs secondaries for this test"
    assert len(list(store.glob("*.json"))) == 1
    clear_cache()  # a new kernel: nothing in memory
    again = protect(df, **KWARGS)
    assert _outcome(again) == _outcome(first)
    # (a third before the clean-up made certificates from pairs of lost ones: the search itself got
    # about three times cheaper, 12,513 iterations here, while the audit of a recalled pattern,
    # which found its certificates afresh, did not: 4,293; with the count table's certificates
    # stored beside the pattern, the audit checks them and solves only the intervals' LPs)
    assert again.work < first.work / 5, (again.work, first.work)


def test_without_a_store_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    protect(_counts(), **KWARGS)
    assert not any(tmp_path.rglob("*.json"))


def test_the_stored_file_holds_hidden_positions_and_no_value(store: Path) -> None:
    df = _counts()
    first = protect(df, **KWARGS)
    (path,) = store.glob("*.json")
    raw = json.loads(path.read_text())
    assert set(raw) == {"schema", "key", "n_cells", "hidden", "method_name", "audit_ok", "budget_spent",
                        "unprotectable", "deviations"}
    hidden = first.cells["status"].isin(["primary", "secondary"]).to_numpy()
    # the positions of hidden cells in the model's order, nothing about their values
    assert len(raw["hidden"]) >= hidden.sum()
    assert all(isinstance(i, int) for i in raw["hidden"])
    # a count table's certificates: deviations of hidden cells only (see patterns' docstring)
    assert raw["deviations"] and all(set(cells) <= set(raw["hidden"]) for cells, _ in raw["deviations"])


def test_a_magnitude_table_stores_no_certificate(store: Path) -> None:
    rng = np.random.default_rng(3)
    df = _counts()
    df["turnover"] = rng.lognormal(8, 1.5, len(df)).round(2)
    df["units"] = df["n"]
    protect(df, dims=["d0", "d1", "d2"], value="turnover", units="units", rules=Rules(threshold=5))
    (path,) = store.glob("*.json")
    assert json.loads(path.read_text())["deviations"] == []


@pytest.mark.parametrize("damage", ["values doubled", "a published cell moved", "relations broken", "garbage"])
def test_damaged_certificates_are_dropped_and_found_again(store: Path, damage: str) -> None:
    df = _counts()
    first = protect(df, **KWARGS)
    (path,) = store.glob("*.json")
    raw = json.loads(path.read_text())
    published = sorted(set(range(raw["n_cells"])) - set(raw["hidden"]))
    for entry in raw["deviations"]:
        cells, moves = entry
        if damage == "values doubled":
            entry[1] = [2 * m for m in moves]
        elif damage == "a published cell moved":
            entry[0] = sorted(cells[:-1] + [published[0]]) if published[0] not in cells else cells
        elif damage == "relations broken":
            entry[1] = [m if i else m + 1 for i, m in enumerate(moves)]
        else:
            entry[0], entry[1] = [-5, 10**9], [float("nan")]
    path.write_text(json.dumps(raw))
    clear_cache()
    assert _outcome(protect(df, **KWARGS)) == _outcome(first)


def test_a_tampered_pattern_that_does_not_protect_is_discarded_and_the_search_runs(store: Path) -> None:
    df = _counts()
    first = protect(df, **KWARGS)
    (path,) = store.glob("*.json")
    raw = json.loads(path.read_text())
    primaries = np.flatnonzero((first.cells["status"] == "primary").to_numpy())
    # only the primaries hidden (positions: the cells frame follows the model's order)
    raw["hidden"] = primaries.tolist()
    path.write_text(json.dumps(raw))
    clear_cache()
    again = protect(df, **KWARGS)
    assert _outcome(again) == _outcome(first)
    assert json.loads(path.read_text())["hidden"] != primaries.tolist()  # the true pattern is stored again


def test_a_pattern_hiding_too_few_primaries_or_of_another_shape_is_not_used(store: Path) -> None:
    df = _counts()
    first = protect(df, **KWARGS)
    (path,) = store.glob("*.json")
    for damage in ({"hidden": []}, {"n_cells": 3}, {"hidden": [10**9]}, {"schema": 99}):
        raw = json.loads(path.read_text())
        raw.update(damage)
        path.write_text(json.dumps(raw))
        clear_cache()
        assert _outcome(protect(df, **KWARGS)) == _outcome(first), damage
    path.write_text("{not json")
    clear_cache()
    assert _outcome(protect(df, **KWARGS)) == _outcome(first)


def test_a_pattern_of_other_code_or_other_rules_is_not_used(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    df = _counts()
    protect(df, **KWARGS)
    monkeypatch.setattr(patterns, "_code", "another version")
    clear_cache()
    protect(df, **KWARGS)
    protect(df, **{**KWARGS, "rules": Rules(threshold=4)})
    assert len(list(store.glob("*.json"))) == 3


def test_an_unwritable_store_changes_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    patterns.use_store(blocker / "patterns")
    df = _counts()
    first = protect(df, **KWARGS)
    patterns.use_store(None)
    clear_cache()
    assert _outcome(protect(df, **KWARGS)) == _outcome(first)


def test_the_oldest_patterns_go_beyond_the_limit(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patterns, "MAX_PATTERNS", 2)
    for threshold in (3, 4, 5, 6):
        protect(_counts(), **{**KWARGS, "rules": Rules(threshold=threshold)})
    assert len(list(store.glob("*.json"))) == 2


def test_a_notebook_rerun_in_a_new_kernel_recalls_the_pattern_beside_the_ledger(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sdc_magic.datasets import make_referrals
    from sdc_magic.jupyter.session import Session
    from sdc_magic.outputs.render import protected_frame
    from sdc_magic.records.ledger import Ledger

    monkeypatch.chdir(tmp_path)
    referrals = make_referrals()
    shown = []
    for kernel in range(2):  # two kernels: a fresh session, nothing in memory
        clear_cache()
        if kernel == 1:  # the second kernel must not search (a search would fail the display)
            from sdc_magic.protect import api

            monkeypatch.setattr(api, "_find_pattern", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
        sess = Session()
        sess.ledger = Ledger(persist=True)
        sess.capture.install()
        try:
            table = referrals.groupby(["admin2", "case_category", "sex"]).size()
            out = sess.publish(table)
        finally:
            sess.capture.uninstall()
        shown.append((out.metadata["sdc_magic"]["status"], protected_frame(out.checked).to_csv()))
    assert shown[0] == shown[1]
    assert shown[0][0] == "suppressed"  # a table with secondaries: a search ran, then a recall
    assert list((tmp_path / ".sdc_magic" / "patterns").glob("*.json"))
