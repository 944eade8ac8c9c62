"""Primary disclosure rules: pure, vectorised functions over per-cell evidence.

Nothing here knows about pandas displays or IPython: the input is a :class:`CellFacts`
(one entry per published cell: which statistic, how many units, the magnitude total and
the largest contributions per unit) and the output is an :class:`Assessment` (which
cells are primary, which need a human, and why, in plain words).

Which rule applies to which statistic (seed lesson, INSEE, Statistics Finland, SACRO):

===============  ==========================================================
statistic        rules
===============  ==========================================================
count, size,     frequency threshold on units; zeros policy. Percentages and
percent          proportions derived from counts follow their count.
nunique          a distinct count of units (an identifier, the declared unit
                 column) is a count: the threshold applies to the distinct
                 count shown *and* to the cell's units; a distinct count of
                 categories (``sex``: 2) is judged by the cell's units only
sum, mean        frequency + (n,k) dominance + p% rule on magnitudes; whatever the
                 preset, a total made by one or two non-zero units is primary
sum, mean of an  a count in disguise (the sum counts people, the mean is a
indicator (0/1)  proportion): the units *with* and *without* the attribute
                 must both reach the threshold; zeros policy on either
median           frequency
quantile@q       frequency; a quantile so far out that less than one unit
                 lies beyond it (n·min(q, 1−q) < 1) is an extreme
quantile 0 / 1,  an individual unit's value: primary unless ``extremes="allow"``
min, max, first, declares them structural
last, mode
std, var, sem    frequency + degrees of freedom ``n - 1 >= dof`` + dominance
                 and p% on the variable (a spread next to a count and a mean
                 gives a dominant contribution back)
total less one   always primary: a function of the analyst's own that adds up all
unit             but one value of its group (found by moving one value at a time,
                 ``capture/custom_stats.py``); beside the group's total it is that
                 unit's value. An own function found to follow only the largest
                 (smallest, middle) value is judged as ``max`` (``min``, ``median``)
custom           frequency + status ``review`` (we cannot know what it reveals)
===============  ==========================================================

Negative contributions: dominance and p% are judged on absolute values and the cell
is flagged for review (INSEE, Eurostat handbook practice).

Reasons never state a hidden cell's exact count or share (that would publish what the
suppression hides): they say "fewer than 5 units", "one unit makes more than 85 % of
the total". This is a deliberate deviation from wording such as "3 people".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .config import Rules

COUNT_STATS = frozenset({"count", "size", "nunique", "percent", "proportion", "frequency"})
MAGNITUDE_STATS = frozenset({"sum", "mean"})
POSITION_STATS = frozenset({"median", "quantile"})
EXTREME_STATS = frozenset({"min", "max", "first", "last", "mode"})
#: A statistic of the analyst's own that adds up all its group's values but one (found by
#: ``capture.custom_stats``): beside the group's total it is that unit's value, always primary.
LEAVES_ONE_OUT_STATS = frozenset({"total less one unit"})
SPREAD_STATS = frozenset({"std", "var", "sem"})
KNOWN_STATS = COUNT_STATS | MAGNITUDE_STATS | POSITION_STATS | EXTREME_STATS | SPREAD_STATS | LEAVES_ONE_OUT_STATS


def quantile_level(stat: str) -> float | None:
    """The level q of a ``quantile@q`` statistic (None for anything else)."""
    if stat.startswith("quantile@"):
        try:
            return float(stat[len("quantile@"):])
        except ValueError:
            return None
    return None


def stat_kind(stat: str) -> str:
    """The family a statistic belongs to (``count``, ``magnitude``, ``position``, ...)."""
    if stat.startswith("quantile@"):
        return "position"
    if stat in COUNT_STATS:
        return "count"
    if stat in MAGNITUDE_STATS:
        return "magnitude"
    if stat in POSITION_STATS:
        return "position"
    if stat in EXTREME_STATS:
        return "extreme"
    if stat in SPREAD_STATS:
        return "spread"
    if stat in LEAVES_ONE_OUT_STATS:
        return "leave-one-out"
    return "custom"


@dataclass
class CellFacts:
    """What is known about each published cell (all arrays have one entry per cell).

    Attributes:
        stat: the statistic of each cell (``"count"``, ``"mean"``, ...).
        units: number of distinct contributing units.
        total: sum of the cell's magnitudes (NaN for pure counts).
        top: ``(cells, k)`` largest absolute contributions per unit, descending,
            NaN-padded; ``k`` >= what the rules need (see ``Rules.top_k``).
        negative: whether any contribution is negative.
        total_abs: sum of absolute contributions (dominance uses it with negatives).
        structural: cells declared structurally empty or public.
        ones: for sums and means of an indicator (0/1) variable, the units having the
            attribute (NaN elsewhere).
        value: the published value of each cell (distinct counts are checked on it).
        counts_units: per cell, whether a distinct count counts units (people,
            households: the shown number is then checked against the threshold) rather
            than categories; None: every distinct count counts units.
    """

    stat: np.ndarray
    units: np.ndarray
    total: np.ndarray | None = None
    top: np.ndarray | None = None
    negative: np.ndarray | None = None
    total_abs: np.ndarray | None = None
    structural: np.ndarray | None = None
    ones: np.ndarray | None = None
    value: np.ndarray | None = None
    counts_units: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.units)


@dataclass
class Reason:
    """Why one cell is primary or needs review, in plain words plus a machine code."""

    rule: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "message": self.message}


@dataclass
class Assessment:
    """Primary cells and review flags for a set of cells, with reasons for flagged ones."""

    primary: np.ndarray
    review: np.ndarray
    reasons: dict[int, list[Reason]] = field(default_factory=dict)

    def add(self, mask: np.ndarray, rule: str, message_for: object, *, primary: bool = True) -> None:
        """Flag ``mask`` cells with ``rule``; ``message_for(i)`` words the reason for cell i."""
        idx = np.flatnonzero(mask)
        if primary:
            self.primary[idx] = True
        else:
            self.review[idx] = True
        # one Reason object per distinct message (most rules word every cell alike)
        shared: dict[str, Reason] = {}
        reasons = self.reasons
        for i in idx.tolist():
            text = message_for(i)  # type: ignore[operator]
            reason = shared.get(text)
            if reason is None:
                reason = shared[text] = Reason(rule, text)
            if i in reasons:
                reasons[i].append(reason)
            else:
                reasons[i] = [reason]


def _unit_word(rules: Rules) -> str:
    return f"distinct {rules.unit} values" if rules.unit else "records"


def assess(facts: CellFacts, rules: Rules) -> Assessment:
    """Apply every primary rule to every cell.

    Returns an :class:`Assessment`; ``primary[i]`` means cell ``i`` must not be published.
    """
    n = len(facts)
    out = Assessment(primary=np.zeros(n, dtype=bool), review=np.zeros(n, dtype=bool))
    if n == 0:
        return out
    stat = np.asarray(facts.stat, dtype=object)
    units = np.asarray(facts.units, dtype=float)
    kinds = np.array([stat_kind(str(s)) for s in stat], dtype=object) if n < 64 else _kinds_fast(stat)
    structural = (
        np.asarray(facts.structural, dtype=bool) if facts.structural is not None else np.zeros(n, dtype=bool)
    )
    word = _unit_word(rules)

    # Frequency rule on distinct units (every kind of statistic).
    empty = units <= 0
    small = (units > 0) & (units < rules.threshold) & ~structural
    out.add(small, "threshold", lambda i: f"fewer than {rules.threshold} {word} (threshold {rules.threshold})")
    if rules.zeros == "suppress":
        zero = empty & ~structural
        out.add(zero, "zero", lambda i: "empty cell: zeros are treated as disclosive under these rules")

    # A distinct count is itself a count of units (people, households, ...).
    if facts.value is not None:
        shown = np.asarray(facts.value, dtype=float)
        distinct = (stat == "nunique") & np.isfinite(shown) & ~structural & ~small
        if facts.counts_units is not None:
            distinct &= np.asarray(facts.counts_units, dtype=bool)
        few = distinct & (shown > 0) & (shown < rules.threshold)
        out.add(few, "threshold", lambda i: f"a distinct count below {rules.threshold} (threshold {rules.threshold})")

    # Sums and means of an indicator are counts of the units with and without the attribute.
    indicator = np.zeros(n, dtype=bool)
    if facts.ones is not None:
        ones = np.asarray(facts.ones, dtype=float)
        indicator = np.isfinite(ones) & ~empty
        lack = units - np.where(indicator, ones, 0.0)
        with_few = indicator & (ones > 0) & (ones < rules.threshold) & ~structural & ~small
        out.add(with_few, "threshold",
                lambda i: f"fewer than {rules.threshold} {word} have this attribute (its sum or mean is a count)")
        lack_few = indicator & (lack > 0) & (lack < rules.threshold) & ~structural & ~small & ~with_few
        out.add(lack_few, "threshold",
                lambda i: f"fewer than {rules.threshold} {word} lack this attribute (its sum or mean is a count)")
        if rules.zeros == "suppress":
            none_or_all = indicator & ((ones == 0) | (lack == 0)) & ~structural & ~small
            out.add(none_or_all, "zero", lambda i: "all or none of this cell have the attribute: zeros are "
                    "treated as disclosive under these rules")

    # Quantiles so far out that less than one unit lies beyond them are individual values.
    position_extreme = np.zeros(n, dtype=bool)
    if (kinds == "position").any():
        levels = np.array([quantile_level(str(s)) if k == "position" else None for s, k in zip(stat, kinds,
                                                                                               strict=True)])
        for i in np.flatnonzero(kinds == "position"):
            q = levels[i]
            if q is not None and units[i] > 0 and units[i] * min(q, 1.0 - q) < 1.0:
                position_extreme[i] = True

    # Individual values.
    if rules.extremes == "suppress":
        out.add(position_extreme & ~structural, "extreme",
                lambda i: f"the {stat[i].replace('quantile@', 'quantile ')} lies beyond all but one unit: "
                "it is one unit's own value")
        extreme = (kinds == "extreme") & ~empty & ~structural
        out.add(
            extreme,
            "extreme",
            lambda i: f"a {stat[i]} is one unit's own value (declare it structural with extremes=allow)",
        )

    # Degrees of freedom for spread statistics.
    if rules.dof is not None:
        low_dof = (kinds == "spread") & ~empty & (units - 1 < rules.dof)
        out.add(low_dof, "dof", lambda i: f"fewer than {rules.dof} degrees of freedom (dof rule {rules.dof})")

    # A total less one unit: the group's total (published or not: it is a margin an attacker
    # may know) minus this cell is one unit's value, whatever the other rules say.
    out.add((kinds == "leave-one-out") & ~empty, "extreme",
            lambda i: "this statistic adds up every value of its group but one: beside the group's total it "
            "is that unit's own value")

    # Custom statistics: frequency, and a human must look. A custom result that is a whole
    # number between 1 and threshold − 1 may be a count (``agg(lambda s: s.sum())`` of a
    # flag): it is hidden like one, since we cannot know what it counts.
    custom = kinds == "custom"
    if facts.value is not None and custom.any():
        shown = np.asarray(facts.value, dtype=float)
        maybe_count = custom & np.isfinite(shown) & (shown == np.round(shown)) & (shown > 0) \
            & (shown < rules.threshold) & ~structural & ~small
        out.add(maybe_count, "threshold",
                lambda i: f"a whole number below {rules.threshold} from an unknown statistic may be a count")
    out.add(custom, "custom", lambda i: f"statistic {stat[i]!r} is not known to the rules: check by hand",
            primary=False)

    # Magnitude rules on largest contributions: sums and means, and spread statistics of the
    # same variable (dominance and p% judge the variable, whatever statistic is shown).
    magnitude = ((kinds == "magnitude") | (kinds == "spread")) & ~empty & ~indicator
    if facts.total is not None:
        known = np.isfinite(np.asarray(facts.total, dtype=float))
        # fail closed: a sum or mean shown without the facts of its contributions cannot be judged
        # by the magnitude rules (an unnamed Series' sums were checked as counts and showed one
        # man's income, ``pass``): a human must look, never a silent pass
        shown = np.isfinite(np.asarray(facts.value, dtype=float)) if facts.value is not None else np.ones(n, bool)
        out.add(magnitude & ~known & shown & ~structural, "custom",
                lambda i: f"the contributions behind this {stat[i]} are unknown to the rules: check by hand",
                primary=False)
        magnitude &= known
    if magnitude.any() and facts.top is not None and facts.total is not None:
        _magnitude_rules(facts, rules, magnitude, out)
    return out


def _kinds_fast(stat: np.ndarray) -> np.ndarray:
    uniq, inverse = np.unique(stat.astype(str), return_inverse=True)
    return np.array([stat_kind(s) for s in uniq], dtype=object)[inverse]


def _magnitude_rules(facts: CellFacts, rules: Rules, magnitude: np.ndarray, out: Assessment) -> None:
    top = np.nan_to_num(np.abs(np.asarray(facts.top, dtype=float)), nan=0.0)
    total = np.asarray(facts.total, dtype=float)
    negative = (
        np.asarray(facts.negative, dtype=bool) if facts.negative is not None else np.zeros(len(total), bool)
    )
    total_abs = (
        np.asarray(facts.total_abs, dtype=float) if facts.total_abs is not None else np.abs(total)
    )
    denom = np.where(negative, total_abs, np.abs(total))

    neg = magnitude & negative
    out.add(neg, "negative", lambda i: "negative contributions: dominance judged on absolute values",
            primary=False)

    with np.errstate(invalid="ignore", divide="ignore"):
        # whatever the preset: a total made by one or two units with a non-zero value is theirs
        # (one: its value; two: each subtracts its own to learn the other's), below the threshold
        # as for units. The frequency rule counts every unit, including those contributing 0
        # (red team, humanitarian preset:
        # income * (age > 100) summed by sex gave persons 5's and 6's incomes at 'pass').
        x1, x2 = top[:, 0], top[:, 1] if top.shape[1] > 1 else np.zeros(len(top))
        third = top[:, 2] if top.shape[1] > 2 else np.zeros(len(top))
        contributors = np.where(x2 > 0, 2, 1)
        few = magnitude & (x1 > 0) & (denom > 0) & (x1 + x2 >= denom * (1 - 1e-9)) & (third == 0) \
            & (contributors < rules.threshold)
        out.add(few, "contributors",
                lambda i: "one or two units make the whole total: each could read (or subtract its own to "
                          "read) the other's value")
        if rules.dominance is not None:
            n, k = rules.dominance
            if top.shape[1] < n:
                raise ValueError(f"evidence keeps {top.shape[1]} largest contributions, dominance needs {n}")
            share = top[:, :n].sum(axis=1) / denom
            dominated = magnitude & (denom > 0) & (share > k / 100.0)
            who = "one unit makes" if n == 1 else f"the {n} largest units make"
            out.add(dominated, "dominance", lambda i: f"{who} more than {k:g} % of the total (dominance rule {n},{k:g})")
        if rules.p is not None:
            if top.shape[1] < 2:
                raise ValueError("evidence keeps fewer than 2 largest contributions; the p% rule needs 2")
            x1, x2 = top[:, 0], top[:, 1]
            remainder = denom - x1 - x2
            p_fail = magnitude & (x1 > 0) & (remainder < rules.p / 100.0 * x1)
            out.add(
                p_fail,
                "p_percent",
                lambda i: f"the second largest unit could estimate the largest within {rules.p:g} % (p% rule)",
            )
