"""What ``verify`` re-derives instead of trusting: the named preset's rules, and the units behind
published means.

Why (red team 53b, findings 03 and 04): ``verify`` applied "the certificate's own rules", so a
certificate and ``config.json`` rewritten to ``threshold: 1`` under ``preset: "humanitarian"``
verified with C's counts of 2 and 1 published; and a mean table's hidden cells could be
published because nothing re-checked a mean.

* :func:`preset_problems`: rules that name a preset are that preset's rules (the strict rules
  loaded after a configuration error are at least as strict as :data:`~sdc_magic.config.STRICT`);
  rules changed in the session say so (``"humanitarian (modified)"``) and must still be rules
  the kernel accepts; any other name is unknown.
* :func:`looser_rules`: the rules in which one set is looser than another (``verify`` fails an
  output checked under rules looser than the session's rules in ``config.json``).
* :func:`mean_units`: a published mean whose protection table states its sum has
  ``sum / mean`` units: the frequency rule applies to that number.

Without a signature an export rewritten to say ``(modified)`` rules, or a mean table stripped
of its protection tables, still cannot be told from a true one (docs/known-gaps.md).
"""

from __future__ import annotations

import math
from typing import Any

from ..config import PRESETS, STRICT, Rules, RulesError
from .consistency import table_matches

MODIFIED = " (modified)"


def _rules_from(rules: dict[str, Any]) -> Rules:
    """The :class:`Rules` a certificate's rules stand for (``RulesError`` if the kernel would refuse them)."""
    values = dict(rules)
    values["structural_zeros"] = tuple(values.get("structural_zeros") or ())
    values["categories"] = tuple(values.get("categories") or ())
    if isinstance(values.get("dominance"), list):
        values["dominance"] = tuple(values["dominance"])
    try:
        return Rules(**values)
    except TypeError as exc:
        raise RulesError(str(exc)) from None


def preset_problems(rules: Any) -> list[str]:
    """The rules against the preset they name (empty: they are what their name says)."""
    if not isinstance(rules, dict):
        return ["rules: not an object"]
    name = rules.get("preset")
    if not isinstance(name, str):
        return ["rules: no preset name"]
    try:
        stated = _rules_from(rules)
    except RulesError as exc:
        return [f"rules: not rules the kernel accepts ({exc})"]
    base = name[: -len(MODIFIED)] if name.endswith(MODIFIED) else name
    if base == STRICT.preset:
        looser = looser_rules(stated, STRICT)
        return [f"rules: looser than the strict rules they name ({', '.join(looser)})"] if looser else []
    if base not in PRESETS:
        return [f"rules: preset {name!r} is not a preset of sdc_magic ({', '.join(PRESETS)})"]
    if name.endswith(MODIFIED):
        return []  # changed in the session (%sdc rules): what they are is stated, and shown to the checker
    named = PRESETS[name].as_dict()
    # (``categories``: the columns whose distinct counts the check read, or the user declared, as
    # categories; a statement about the data, not a setting of the preset: shown as stated)
    differ = sorted(k for k in named if k not in ("preset", "categories") and _normal(rules.get(k)) != _normal(named[k]))
    if differ:
        return [f"rules: they say preset {name!r} but differ from its rules in "
                + ", ".join(f"{k} ({rules.get(k)!r}, the preset: {named[k]!r})" for k in differ)]
    return []


def _normal(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def looser_rules(rules: Rules | dict[str, Any], than: Rules | dict[str, Any]) -> list[str]:
    """The rules in which ``rules`` hide less than ``than`` (empty: as strict or stricter in each)."""
    try:
        a = rules if isinstance(rules, Rules) else _rules_from(rules)
        b = than if isinstance(than, Rules) else _rules_from(than)
    except RulesError:
        return ["(rules the kernel would not accept)"]
    out = []
    if a.threshold < b.threshold:
        out.append(f"threshold {a.threshold} < {b.threshold}")
    if b.row_threshold and (a.row_threshold or 0) < b.row_threshold:
        out.append(f"row_threshold {a.row_threshold} < {b.row_threshold}")
    if b.dominance and (not a.dominance or a.dominance[0] < b.dominance[0] or a.dominance[1] > b.dominance[1]):
        out.append(f"dominance {a.dominance} looser than {b.dominance}")
    if b.p is not None and (a.p is None or a.p < b.p):
        out.append(f"p {a.p} < {b.p}")
    if b.dof is not None and (a.dof is None or a.dof < b.dof):
        out.append(f"dof {a.dof} < {b.dof}")
    if a.protection < b.protection:
        out.append(f"protection {a.protection:g} < {b.protection:g}")
    if b.zeros != "allow" and a.zeros == "allow":
        out.append("zeros shown")
    if b.extremes == "suppress" and a.extremes != "suppress":
        out.append("extremes allowed")
    if b.singletons and not a.singletons:
        out.append("singleton attack off")
    return out


def mean_units(cert: dict[str, Any]) -> list[str]:
    """Published means whose own protection table gives fewer units than the threshold.

    A table of means is protected through its sums (the table's ``stat`` says ``mean``, its
    safe cells carry the sums); a published cell with both figures has ``sum / mean`` rows.
    """
    rules = cert.get("rules") or {}
    threshold = rules.get("threshold")
    if not isinstance(threshold, int | float) or isinstance(threshold, bool):
        return []
    problems = []
    for table in cert.get("tables") or []:
        if not isinstance(table, dict) or list(table.get("stat") or []) != ["mean"]:
            continue
        for cell, item, hidden in table_matches(cert, table):
            total, mean = cell.get("value"), item.get("value")
            if hidden or cell.get("status") != "safe" or not _number(total) or not _number(mean) or mean == 0:
                continue
            units = total / mean
            if units > 0 and math.isclose(units, round(units), abs_tol=1e-6) and round(units) < threshold:
                problems.append(f"published mean {item.get('row')} / {item.get('column')} is of {round(units)} "
                                f"unit(s) (its sum / its mean), below the threshold {threshold} of its rules")
    return problems


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
