"""Eager polars tables of magnitudes: the user's call as written, the facts from a lazy query.

Polars 2 streams a lazy query and runs an eager ``group_by`` in memory; since stop 55 the
user's eager ``agg`` runs exactly as written and the facts come from a lazy query of their own
(``polars/evidence.streams_lazy_queries``). What must hold: the user gets the same frame as
without the extension, and the facts describe the groups the user's frame has — a ``having``
filters the user's groups, so its facts ride along in the user's call (red team, stop 55: the
separate query gave facts of groups the table does not show).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_engines_redteam import PEOPLE

pl = pytest.importorskip("polars")


def _calls() -> dict[str, Any]:
    income = pl.col("income")
    return {
        "sum": lambda f: f.group_by("district").agg(income.sum()),
        "ordered mean": lambda f: f.group_by("district", "sex", maintain_order=True).agg(income.mean()),
        "named sums": lambda f: f.group_by("sex", maintain_order=True).agg(total=income.sum(), n=pl.len()),
        "having": lambda f: f.group_by("district", maintain_order=True).having(pl.len() > 5).agg(income.sum()),
        "having on the sum": lambda f: f.group_by("district", "sex", maintain_order=True)
        .having(income.sum() > 250).agg(income.sum()),
    }


@pytest.mark.parametrize("call", sorted(_calls()))
def test_the_user_gets_the_same_frame(humanitarian_sessions: Any, call: str) -> None:
    frame = pl.from_pandas(PEOPLE)
    make = _calls()[call]
    plain = make(frame)
    sess = humanitarian_sessions()
    checked = make(frame)
    sess.publish(checked)
    sort = [c for c in plain.columns if plain.schema[c] == pl.String]
    assert checked.schema == plain.schema
    assert checked.sort(sort).equals(plain.sort(sort))
    if "ordered" in call or "having" in call or "named" in call:
        assert checked.equals(plain)  # (maintain_order: the same rows in the same order)
    assert frame.equals(pl.from_pandas(PEOPLE))  # the user's frame untouched


@pytest.mark.parametrize("call", ["having", "having on the sum"])
def test_the_facts_are_of_the_groups_the_user_sees(sess: Any, monkeypatch: Any, call: str) -> None:
    from sdc_magic.capture import contract

    seen: list[set[tuple]] = []
    original = contract.group_evidence_from_facts

    def spy(facts: Any, keys: list[str], *args: Any, **kwargs: Any) -> Any:
        seen.append(set(map(tuple, facts[keys].itertuples(index=False, name=None))))
        return original(facts, keys, *args, **kwargs)

    monkeypatch.setattr(contract, "group_evidence_from_facts", spy)
    table = _calls()[call](pl.from_pandas(PEOPLE))
    shown = set(table.drop([c for c in table.columns if table.schema[c] != pl.String]).iter_rows())
    sess.publish(table)
    assert seen and seen[0] == shown, (seen, shown)
