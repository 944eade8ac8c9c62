"""Protection levels: how far the attacker's interval must reach on each side of a primary.

Conventions (all levels are symmetric unless stated; ``m = rules.protection / 100``):

* **Every primary of value v**: the interval of possibles must cover
  ``[(1 − m)·v, (1 + m)·v]`` (INSEE course "Méthodes suppressives", *intervalle de
  protection*, m = 10 %; tau-Argus ``FREQ(n, r)`` / ``MAN(r)`` safety range).
* **Frequency tables** (the value *is* the count of units) and a cell primary by the
  threshold rule (``0 < v < threshold``): additionally the upper level is at least
  ``threshold − v``, so the attacker's upper bound reaches the threshold and the
  published intervals never prove that the count is below it.  This is our rule: it
  is the one-sided requirement of the Eurostat SDC Handbook's discussion of
  frequency tables (an intruder must not be able to establish that a cell is
  "small"); the INSEE worked example (threshold 3, intervals [0;4] and [1;5]) meets it.
* **Dominance (n, k)** primaries, tau-Argus ``Table.cpp::SetProtectionLevelCell``:
  ``100·(x1+…+xn)/k − T``.  **p %** primaries (q = 100): ``p/100·x1 − (T − x1 − x2)``.
  Each is taken together with the m % level (the larger wins).
* **Zero-valued primaries** (``zeros="suppress"``): lower level 0, upper level the
  minimal width (tau-Argus ZeroSafetyRange idea): the interval must not prove 0.
* **Minimal width**: at least ``10**−decimals`` of the value column (1 for counts;
  tau-Argus ``MinLPL``), so no primary is ever pinned exactly.
* ``tau=True`` gives tau-Argus's levels instead, for like-for-like comparisons
  (``protect(..., levels="tau")``, ``SetProtectionLevelCell``): no threshold reach,
  and a dominance / p % primary gets its rule's level alone when that is positive,
  the r % safety range otherwise (``FREQ(n, r)``: r % of the value only).
* A lower level is capped at ``v − lower bound`` (the attacker knows cells are ≥ 0:
  asking the interval to go below 0 is asking the impossible; reaching 0 is the most
  any pattern can give).
"""

from __future__ import annotations

import numpy as np

from ..config import Rules


def decimals_of(values: np.ndarray, cap: int = 6) -> int:
    """Number of decimals the values are given with (0 for whole numbers, at most ``cap``)."""
    v = np.abs(np.asarray(values, dtype=float))
    v = v[np.isfinite(v)]
    for dec in range(cap + 1):
        scaled = v * 10**dec
        if np.allclose(scaled, np.round(scaled), rtol=0, atol=1e-6 * max(1.0, 10**dec)):
            return dec
    return cap


#: significant decimals of the values relative to the largest one (see :func:`resolution_of`)
RELATIVE_DECIMALS = 10


def resolution_of(values: np.ndarray) -> float:
    """The smallest step the values are given in (at most 1), found the same way at any scale.

    Why not ``10 ** -decimals_of(values)``: absolute decimals capped at 6 made a table of
    values 10^-9–10^-5 get levels of 10^-6 (larger than its cells: blocked) while the same
    table × 10^3 … × 10^12 was protected (issue 21). Here the values are divided by the
    power of ten of the largest one, the decimals counted on that (at most
    :data:`RELATIVE_DECIMALS` significant ones) and the step scaled back; whole numbers keep
    a step of 1, as before, whatever their size.
    """
    v = np.abs(np.asarray(values, dtype=float))
    v = v[np.isfinite(v) & (v > 0)]
    if not len(v):
        return 1.0
    scale = 10.0 ** np.floor(np.log10(float(v.max())))
    return float(min(scale * 10.0 ** (-decimals_of(v / scale, cap=RELATIVE_DECIMALS)), 1.0))


def protection_levels(
    values: np.ndarray,
    *,
    rules: Rules | None = None,
    frequency: bool = True,
    reasons: list[list[str]] | None = None,
    top: np.ndarray | None = None,
    lower_bounds: np.ndarray | None = None,
    min_width: float | None = None,
    tau: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper protection levels for cells of the given values.

    Args:
        values: the cell values (primaries; other cells may be passed, their levels are
            simply the m % levels).
        rules: the rules in force (``protection``, ``threshold``, ``dominance``, ``p``).
        frequency: True when the value is the count of units (frequency table).
        reasons: per cell, the rule codes that made it primary (``"threshold"``,
            ``"dominance"``, ``"p_percent"``, ``"zero"``, ...); rule-specific levels are
            only applied for the rules that fired.
        top: (cells, k) largest contributions, descending, for dominance / p % levels.
        lower_bounds: a-priori lower bounds (default 0) used to cap the lower level.
        min_width: smallest level (default :func:`resolution_of` the values, 1 for counts).
        tau: tau-Argus's levels (see above) instead of ours.

    Returns:
        ``(lpl, upl)``: the interval must reach ``v − lpl`` and ``v + upl``.
    """
    rules = rules or Rules()
    v = np.asarray(values, dtype=float)
    n = len(v)
    m = rules.protection / 100.0
    if min_width is None:
        min_width = 1.0 if frequency else resolution_of(v)
    base = m * np.abs(v)
    lpl = base.copy()
    upl = base.copy()
    reasons = reasons if reasons is not None else [[] for _ in range(n)]
    tops = None if top is None else np.nan_to_num(np.abs(np.asarray(top, dtype=float)), nan=0.0)
    rule_level = np.zeros(n)
    for i in range(n):
        why = set(reasons[i])
        if not tau and frequency and "threshold" in why and 0 < v[i] < rules.threshold:
            upl[i] = max(upl[i], rules.threshold - v[i])
        if tops is not None and abs(v[i]) > 0:
            T = abs(v[i])
            if "dominance" in why and rules.dominance is not None:
                nn, k = rules.dominance
                need = 100.0 * tops[i, :nn].sum() / k - T
                if tau and need > 0 and rule_level[i] == 0:
                    lpl[i] = upl[i] = 0.0  # tau: the rule's level replaces the safety range
                if need > 0:
                    rule_level[i] = max(rule_level[i], need)
                lpl[i] = max(lpl[i], need)
                upl[i] = max(upl[i], need)
            if "p_percent" in why and rules.p is not None and tops.shape[1] >= 2:
                need = rules.p / 100.0 * tops[i, 0] - (T - tops[i, 0] - tops[i, 1])
                if tau and need > 0 and rule_level[i] == 0:
                    lpl[i] = upl[i] = 0.0
                if need > 0:
                    rule_level[i] = max(rule_level[i], need)
                lpl[i] = max(lpl[i], need)
                upl[i] = max(upl[i], need)
        if v[i] == 0:
            lpl[i] = 0.0
            upl[i] = max(upl[i], min_width)
        else:
            lpl[i] = max(lpl[i], min_width)
            upl[i] = max(upl[i], min_width)
    lb = np.zeros(n) if lower_bounds is None else np.asarray(lower_bounds, dtype=float)
    room = v - lb
    lpl = np.where(np.isfinite(room), np.minimum(lpl, np.maximum(room, 0.0)), lpl)
    return lpl, upl
