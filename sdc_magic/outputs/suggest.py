"""Better answers first: coarser groupings, merged categories, rates and a written reply.

Suppression is the last resort (seed lesson, "What to do instead of publishing the
cell"; INSEE course, "recoding"). For a displayed table with hidden cells, this module
computes — on the analyst's own microdata — the tables they could publish instead, each
already run through the rules and the protection engine, each with the pandas code that
produces it, written against the analyst's own variable name.

* **Drop dimensions**: every coarser grouping, finest first; the finest ones that publish
  with nothing hidden are offered.
* **Merge categories**: for ordered dimensions (ordered categoricals, numbers, bands such
  as ``0-11``/``12-17``, dates) the fewest merges of *adjacent* categories that leave no
  primary cell, found by dynamic programming over the order; for nominal dimensions the
  smallest categories are folded into an ``Other`` group that itself passes. Where the
  dimension was cut from a numeric column still in the frame (``age`` → ``age_band``),
  new cut points are proposed.
* **Report a rate**: for a two-valued outcome, the rate over a grouping whose
  denominators, numerators and complements all pass the rules.
* **Answer the question**: a short markdown reply in the spirit of the lesson's refusal.

A merged table is a new set of partial sums of the original cells; it is audited
together with the original table (an attacker holds both) before it is offered.

The search is bounded in work, not time (issue 21): at most ``candidates`` regroupings and
recodings (each one groupby of the same data and its primary rules) and ``rate_groupings``
rate tables, tried in a fixed order (drop a dimension, merge adjacent categories, new cut
points, then rates), so the same table gets the same suggestions on any machine under any
load. It says when it stopped early; ``more()`` continues it with a further budget.
"""

from __future__ import annotations

import itertools
import keyword
import math
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..checking.check import Checked
from ..config import Rules

#: regroupings and recodings tried when a table is first shown: every drop-a-dimension and
#: merge candidate of a four-way table (14 + 4) and its cut points (4) fit
DEFAULT_CANDIDATES = 24
#: rate tables (outcome × grouping) tried when a table is first shown (each is two groupbys and,
#: with linking, a check: ~0.1 s on the referrals; "More options" tries more)
DEFAULT_RATE_GROUPINGS = 8
#: what one "More options" click adds to both budgets
MORE_CANDIDATES = 48
BAND = re.compile(r"^\s*(<|>|<=|>=|under |over )?\s*(\d+(?:\.\d+)?)\s*(?:(?:-|–|to)\s*(\d+(?:\.\d+)?))?\s*(\+)?\s*$")


@dataclass
class Suggestion:
    """One better answer: what it is, the code that makes it, and its checked result."""

    kind: str  # "drop" | "merge" | "cut" | "other" | "rate"
    title: str
    code: str
    hidden: int
    cells: int
    checked: Checked | None = None
    detail: str = ""
    recoding: dict[str, list[str]] | None = None
    score: float = 0.0
    #: the check of the table whose figures ``detail`` states (a rate's sums, counts and means)
    stated: Checked | None = None
    #: whether what it shows was recorded for linking (None: not tried yet, see
    #: ``Session.record_suggestions``)
    recorded: bool | None = None

    @property
    def publishes_cleanly(self) -> bool:
        return self.hidden == 0 and (self.checked is None or self.checked.status == "pass")


@dataclass
class Suggestions:
    """The better answers found so far for one table."""

    items: list[Suggestion] = field(default_factory=list)
    explored: list[Suggestion] = field(default_factory=list)  # every candidate, clean or not
    exhausted: bool = True
    seconds: float = 0.0
    answer: str = ""
    _pending: Iterator[Callable[[], Suggestion | None]] | None = None


# ------------------------------------------------------------------ helpers
def _ordered_labels(labels: list[Any], dtype: Any = None) -> list[Any] | None:
    """The labels in their natural order, or None if the dimension is nominal."""
    if isinstance(dtype, pd.CategoricalDtype):
        return list(dtype.categories) if dtype.ordered else None
    if all(isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool) for x in labels):
        return sorted(labels)
    if all(isinstance(x, pd.Timestamp | pd.Period) for x in labels):
        return sorted(labels)
    keys = []
    for x in labels:
        m = BAND.match(str(x))
        if not m:
            return None
        prefix, low, _high, plus = m.groups()
        value = float(low)
        if prefix and prefix.strip() in ("<", "<=", "under"):
            value -= 0.5
        if (prefix and prefix.strip() in (">", ">=", "over")) or plus:
            value += 0.5
        keys.append(value)
    if len(set(keys)) != len(keys):
        return None
    return [x for _, x in sorted(zip(keys, labels, strict=True), key=lambda kv: kv[0])]


def _bounds(label: Any) -> tuple[float, float] | None:
    """Numeric range of a band label: "<25" → (-inf, 25), "25-30" → (25, 30), "60+" → (60, inf)."""
    m = BAND.match(str(label))
    if not m:
        return None
    prefix, low, high, plus = m.groups()
    p = (prefix or "").strip()
    if p in ("<", "<=", "under"):
        return (-np.inf, float(low))
    if p in (">", ">=", "over") or plus:
        return (float(low), np.inf)
    return (float(low), float(high) if high else float(low))


def _band_name(group: list[Any]) -> str:
    """Name of merged adjacent bands: "<25" + "25-30" → "<30"; "0-11" + "12-17" → "0-17"."""
    if len(group) == 1:
        return str(group[0])
    lo, hi = _bounds(group[0]), _bounds(group[-1])
    if lo is None or hi is None:
        return f"{group[0]}…{group[-1]}"
    if np.isinf(lo[0]):
        return f"<{_num(hi[1])}" if not np.isinf(hi[1]) else "all"
    if np.isinf(hi[1]):
        return f"{_num(lo[0])}+"
    return f"{_num(lo[0])}-{_num(hi[1])}"


def _valid_counts(counts: np.ndarray, rules: Rules) -> bool:
    """No cell of a merged group is primary by frequency (zeros per the rules)."""
    small = (counts > 0) & (counts < rules.threshold)
    if rules.zeros == "suppress":
        small |= counts == 0
    return not bool(small.any())


def merge_adjacent(counts: np.ndarray, rules: Rules) -> list[list[int]] | None:
    """Fewest merges of adjacent categories so that every merged cell passes.

    ``counts`` is (categories, other cells). Dynamic programming over the order:
    ``best[j]`` = the largest number of groups covering categories ``0..j-1``.
    Returns the groups (lists of category positions), or None if even one group fails.
    """
    m = counts.shape[0]
    prefix = np.vstack([np.zeros((1, counts.shape[1])), np.cumsum(counts, axis=0)])
    best = np.full(m + 1, -1)
    back = np.zeros(m + 1, dtype=int)
    best[0] = 0
    for j in range(1, m + 1):
        for i in range(j - 1, -1, -1):
            if best[i] < 0:
                continue
            if _valid_counts(prefix[j] - prefix[i], rules) and best[i] + 1 > best[j]:
                best[j] = best[i] + 1
                back[j] = i
    if best[m] < 0:
        return None
    groups = []
    j = m
    while j > 0:
        i = back[j]
        groups.append(list(range(i, j)))
        j = i
    return groups[::-1]


def fold_smallest(counts: np.ndarray, order: list[int], rules: Rules) -> list[int] | None:
    """Fold the smallest categories into one "Other" group until everything passes."""
    totals = counts.sum(axis=1)
    by_size = sorted(order, key=lambda i: (totals[i], i))
    folded: list[int] = []
    for i in by_size:
        kept = [k for k in order if k not in folded]
        other = counts[folded].sum(axis=0) if folded else None
        if all(_valid_counts(counts[k], rules) for k in kept) and (other is None or _valid_counts(other, rules)):
            return folded
        folded.append(i)
        if len(folded) == len(order):
            break
    return None


# ------------------------------------------------------------------ generated code
# Suggestion code is run by the analyst ("Use this"), and column names and labels come
# from the data: every one of them is written as a Python literal (``repr`` of a str,
# int, float, bool or None), never as an identifier or keyword argument, so no name in
# the data can change what the code does (``assign(**{"age band": ...})``).

#: Names generated code may refer to besides the analyst's frame.
CODE_NAMES = frozenset({"pd", "float", "object", "str", "recoded"})


class NoLiteral(ValueError):
    """A label that has no safe Python literal (e.g. a Timestamp): the suggestion is skipped."""


def literal(x: Any) -> str:
    """Python source that evaluates to ``x`` without evaluating anything from the data."""
    if isinstance(x, np.generic):
        x = x.item()
    if x is None or isinstance(x, bool | str | int):
        return repr(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "float('nan')"
        if math.isinf(x):
            return "float('inf')" if x > 0 else "-float('inf')"
        return repr(x)
    if isinstance(x, list | tuple):
        inner = ", ".join(literal(v) for v in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner}{',' if len(x) == 1 else ''})"
    raise NoLiteral(f"no literal for a {type(x).__name__} label")


def dict_literal(mapping: dict[Any, Any]) -> str:
    """A dict display whose keys and values are all literals (see :func:`literal`)."""
    return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in mapping.items()) + "}"


def frame_name(name: Any) -> str:
    """The analyst's variable name if it is a plain identifier the code can use, else ``df``."""
    if isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name) and name not in CODE_NAMES:
        return name
    return "df"


# ------------------------------------------------------------------ the search
class Suggester:
    """Search for better answers to one captured table (see module docstring)."""

    def __init__(self, frame: pd.DataFrame, keys: list[str], var: Any, stat: str, rules: Rules,
                 check: Callable[[Any], Checked], name: str = "df", capturing: Callable[[], Any] | None = None):
        self.frame = frame
        self.keys = [k for k in keys if k in frame.columns]
        self.var = var
        self.stat = stat
        self.rules = rules
        self.check = check
        self.name = frame_name(name)
        self.capturing = capturing
        self.rates_complete = True

    # -- code and tables
    def _agg_code(self, frame_expr: str, keys: list[str]) -> str:
        by = keys[0] if len(keys) == 1 else list(keys)
        base = f"{frame_expr}.groupby({literal(by)}, observed=True)"
        if self.stat in ("size", "count", "proportion", "percent", "nunique") or self.var is None:
            code = f"{base}.size()"
        elif self.stat.isidentifier() and not keyword.iskeyword(self.stat):
            code = f"{base}[{literal(self.var)}].{self.stat}()"
        else:
            code = f"{base}[{literal(self.var)}].agg({literal(self.stat)})"
        return code + (".unstack()" if len(keys) >= 2 else "")

    def _run(self, frame: pd.DataFrame, keys: list[str]) -> Any:
        grouped = frame.groupby(keys[0] if len(keys) == 1 else keys, observed=True)
        if self.stat in ("size", "count", "proportion", "percent", "nunique") or self.var is None:
            table = grouped.size()
        else:
            table = getattr(grouped[self.var], self.stat)()
        return table.unstack() if len(keys) >= 2 else table

    def _evaluate(self, kind: str, title: str, code: str, frame: pd.DataFrame, keys: list[str], **extra: Any
                  ) -> Suggestion:
        """Compute the candidate table and screen it with the primary rules.

        A candidate with no primary cell needs no secondary suppression: it publishes as
        it is. For the others the count of primary cells is a lower bound of what would be
        hidden; the (slower) protection engine is not run for them.
        """
        if self.capturing is not None:
            with self.capturing():
                table = self._run(frame, keys)
                checked = self.check(table, protect=False)
        else:
            table = self._run(frame, keys)
            checked = self.check(table, protect=False)
        return Suggestion(kind=kind, title=title, code=code, hidden=checked.hidden_count,
                          cells=int(checked.hidden.size), checked=checked, **extra)

    # -- candidates
    def candidates(self) -> Iterator[Callable[[], Suggestion | None]]:
        keys = self.keys
        for size in range(len(keys) - 1, 0, -1):
            for subset in itertools.combinations(keys, size):
                yield lambda subset=list(subset): self._drop(subset)
        for key in keys:
            yield lambda key=key: self._merge(key)
        for key in keys:
            yield lambda key=key: self._cut(key)

    def _drop(self, subset: list[str]) -> Suggestion:
        dropped = [k for k in self.keys if k not in subset]
        title = " × ".join(subset) + f" (without {', '.join(dropped)})"
        return self._evaluate("drop", title, self._agg_code(self.name, subset), self.frame, subset,
                              detail=f"drops {', '.join(dropped)}")

    def _category_counts(self, key: str) -> tuple[list[Any], np.ndarray]:
        others = [k for k in self.keys if k != key]
        grouped = self.frame.groupby([key, *others], observed=True, dropna=True).size()
        table = grouped.unstack(others) if others else grouped.to_frame()
        table = table.fillna(0)
        return list(table.index), table.to_numpy(dtype=float)

    def _merge(self, key: str) -> Suggestion | None:
        labels, counts = self._category_counts(key)
        if len(labels) < 2:
            return None
        ordered = _ordered_labels(labels, self.frame[key].dtype)
        if ordered is not None:
            pos = [labels.index(x) for x in ordered]
            groups = merge_adjacent(counts[pos], self.rules)
            if groups is None or len(groups) == len(labels) or len(groups) < 2:
                return None
            mapping = {}
            recoding: dict[str, list[str]] = {}
            for g in groups:
                members = [ordered[i] for i in g]
                new = _band_name(members)
                recoding[new] = [str(m) for m in members]
                for mbr in members:
                    if len(members) > 1:
                        mapping[mbr] = new
            kind, what = "merge", f"merge adjacent {key} categories"
        else:
            order = list(range(len(labels)))
            folded = fold_smallest(counts, order, self.rules)
            if not folded or len(folded) < 2 or len(folded) == len(labels):
                return None
            mapping = {labels[i]: "Other" for i in folded}
            recoding = {"Other": [str(labels[i]) for i in folded]}
            kind, what = "other", f"fold the smallest {key} categories into Other"
        try:
            mapping_code, as_type = dict_literal(mapping), "object"
        except NoLiteral:  # e.g. dates as labels: recode their text (as astype(str) writes it) instead
            column = self.frame[key]
            text = dict(zip(column.tolist(), column.astype(str).tolist(), strict=True))
            mapping = {text[k]: v for k, v in mapping.items() if k in text}
            mapping_code, as_type = dict_literal(mapping), "str"
        recoded_column = self.frame[key].astype(as_type).replace(mapping)
        order_code = ""
        if kind == "merge" and as_type == "object":  # adjacent bands stay in their order (not alphabetical) in the new table
            new_order = list(dict.fromkeys(mapping.get(x, x) for x in ordered))
            try:
                order_code = f".astype(pd.CategoricalDtype({literal(new_order)}, ordered=True))"
                recoded_column = recoded_column.astype(pd.CategoricalDtype(new_order, ordered=True))
            except (NoLiteral, ValueError, TypeError):
                order_code = ""
                recoded_column = self.frame[key].astype(as_type).replace(mapping)
        recoded = self.frame.assign(**{key: recoded_column})
        code = (f"recoded = {self.name}.assign(**{{{literal(key)}: {self.name}[{literal(key)}]"
                f".astype({as_type}).replace({mapping_code}){order_code}}})\n"
                + self._agg_code("recoded", self.keys))
        title = f"{what}: " + "; ".join(f"{new} = {' + '.join(old)}" for new, old in recoding.items() if len(old) > 1)
        return self._evaluate(kind, title, code, recoded, self.keys, recoding=recoding)

    def _numeric_source(self, key: str) -> str | None:
        """A numeric column the banded dimension was cut from (every band a disjoint range)."""
        bands = self.frame[key]
        for col in self.frame.columns:
            if col == key or col in self.keys:
                continue
            series = self.frame[col]
            if not pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
                continue
            ranges = series.groupby(bands, observed=True).agg(["min", "max"]).dropna()
            if len(ranges) < 2 or ranges.index.nunique() != bands.nunique(dropna=True):
                continue
            ranges = ranges.sort_values("min")
            if (ranges["min"].to_numpy()[1:] > ranges["max"].to_numpy()[:-1]).all():
                return str(col)
        return None

    def _cut(self, key: str) -> Suggestion | None:
        """New cut points on the numeric column a band was cut from.

        An analyst picks few, wide bands with round edges, not the finest partition that
        passes (single years of age would pass one by one and give 50 bands): candidate
        edges are multiples of a round step (1, 2 or 5 × 10^k, about 20 steps over the
        range), the finest passing partition over them is found by dynamic programming,
        then its smallest adjacent bands are merged until there are no more bands than the
        dimension has now.
        """
        source = self._numeric_source(key)
        if source is None:
            return None
        others = [k for k in self.keys if k != key]
        values = self.frame[source]
        finite = values.to_numpy(dtype=float, na_value=np.nan)
        finite = finite[np.isfinite(finite)]
        if len(finite) == 0:
            return None
        step = _round_step(float(finite.min()), float(finite.max()))
        start = np.floor(values / step) * step
        grouped = self.frame.groupby([start, *[self.frame[o] for o in others]], observed=True).size()
        table = (grouped.unstack(others) if others else grouped.to_frame()).fillna(0).sort_index()
        groups = merge_adjacent(table.to_numpy(dtype=float), self.rules)
        if groups is None or len(groups) < 2:
            return None
        wanted = max(2, int(self.frame[key].nunique(dropna=True)))
        totals = table.to_numpy(dtype=float).sum(axis=1)
        while len(groups) > wanted:  # merge the smallest band into its smaller neighbour
            sizes = [totals[g].sum() for g in groups]
            i = int(np.argmin(sizes))
            j = i - 1 if i == len(groups) - 1 or (i > 0 and sizes[i - 1] <= sizes[i + 1]) else i + 1
            a, b = sorted((i, j))
            groups[a:b + 1] = [groups[a] + groups[b]]
        points = [table.index[g[0]] for g in groups[1:]]
        points = [int(p) if float(p).is_integer() else float(p) for p in points]
        edges = [-np.inf, *points, np.inf]
        names = []
        for lo, hi in itertools.pairwise(edges):
            if np.isinf(lo):
                names.append(f"<{_num(hi)}")
            elif np.isinf(hi):
                names.append(f"{_num(lo)}+")
            else:
                names.append(f"{_num(lo)}-{_num(hi)}")
        cut = pd.cut(values, bins=edges, right=False, labels=names)
        recoded = self.frame.assign(**{key: cut})
        points_text = ", ".join(_num(p) for p in points)
        bins = literal([float(p) if not isinstance(p, int | np.integer) else int(p) for p in edges])
        code = (f"recoded = {self.name}.assign(**{{{literal(key)}: pd.cut({self.name}[{literal(source)}], "
                f"bins={bins}, right=False, labels={literal(names)})}})\n"
                + self._agg_code("recoded", self.keys))
        return self._evaluate("cut", f"new {key} cut points on {source}: {points_text}", code, recoded, self.keys,
                              recoding={n: [n] for n in names})

    # -- rates
    def rates(self, limit: int = 3, groupings_budget: int | None = None) -> list[Suggestion]:
        """Rates of two-valued outcomes on denominators that pass the rules, largest gaps first.

        Tries at most ``groupings_budget`` (outcome, grouping) tables, in a fixed order,
        and stops there with what it has found (``rates_complete`` False).
        """
        frame = self.frame
        flags = [c for c in frame.columns if pd.api.types.is_bool_dtype(frame[c].dtype)]
        if self.var is not None and self.var in flags:
            flags = [self.var]  # a mean of a flag: its own rate, nothing else
        # by the table's own keys; by another flag only for an outcome of a process with its
        # natural denominator (completion among consenting cases, by disability: the seed
        # lesson's answer). A plain attribute by a column the table is not about (the same
        # disability rate "by completed" for every count table) answers nobody's question.
        keys = [k for k in self.keys if frame[k].nunique(dropna=True) <= 12]
        other_flags = [c for c in frame.columns if pd.api.types.is_bool_dtype(frame[c].dtype) and c not in keys]
        found: list[Suggestion] = []
        tried = 0
        for outcome in flags:
            y = frame[outcome].to_numpy(dtype=bool)
            # the natural denominator: the broadest flag the outcome implies (e.g. consent
            # for completion), so the rate reads "among consenting cases"
            implied = [f for f in flags if f != outcome and not bool(frame[f].all())
                       and not (y & ~frame[f].to_numpy(dtype=bool)).any()]
            population = max(implied, key=lambda f: (int(frame[f].sum()), f)) if implied else None
            sub = frame[frame[population]] if population else frame
            groupings = keys + (other_flags if population else [])
            for group in groupings:
                if group in (outcome, population):
                    continue
                if groupings_budget is not None and tried >= groupings_budget:
                    self.rates_complete = False
                    break
                tried += 1
                num = sub.groupby(group, observed=True)[outcome].sum()
                den = sub.groupby(group, observed=True).size()
                if len(den) < 2:
                    continue
                parts = np.concatenate([num.to_numpy(float), den.to_numpy(float), (den - num).to_numpy(float)])
                if (parts < self.rules.threshold).any():
                    continue  # a small (or empty) numerator, denominator or complement
                stated = self._rate_check(sub, group, outcome)
                if stated is not None and stated.hidden_count:
                    continue  # its counts would undo what earlier outputs hid (differencing)
                rate = num / den
                gap = float(rate.max() - rate.min())
                try:
                    frame_expr = f"{self.name}[{self.name}[{literal(population)}]]" if population else self.name
                    code = (f"{frame_expr}.groupby({literal(group)})[{literal(outcome)}]"
                            ".agg(['sum', 'count', 'mean'])")
                except NoLiteral:
                    continue
                among = f" among {population}" if population else ""
                words = "; ".join(f"{_pct(rate[g])} of {int(den[g]):,} with {group} = {g}" for g in den.index)
                # outcomes with a natural denominator (a process: completion among consenting)
                # rank before plain attributes; then the largest gap between groups
                found.append(Suggestion(kind="rate", title=f"rate of {outcome}{among} by {group}", code=code,
                                        hidden=0, cells=len(den) * 3, detail=words,
                                        score=gap + (1.0 if population else 0.0), stated=stated))
        found.sort(key=lambda s: (-s.score, s.title))
        return found[:limit]

    def _rate_check(self, sub: pd.DataFrame, group: str, outcome: str) -> Checked | None:
        """The rate's table checked with the session's linking (primary rules: a rate is offered
        only when nothing of it is hidden); None without capture. The session records it when the
        rate is shown (its figures are published)."""
        if self.capturing is None:
            return None
        with self.capturing():
            table = sub.groupby(group, observed=True)[outcome].agg(["sum", "count", "mean"])
            return self.check(table, protect=False)

    # -- driver
    def run(self, candidates: int = DEFAULT_CANDIDATES, rate_groupings: int = DEFAULT_RATE_GROUPINGS) -> Suggestions:
        """Try at most ``candidates`` regroupings and recodings, then ``rate_groupings`` rate tables.

        The two budgets are separate, so an expensive regrouping never starves the rates
        (and the other way round). ``seconds`` reports the time taken; nothing reads it.
        """
        out = Suggestions()
        out._pending = iter(self.candidates())
        started = time.perf_counter()
        self._continue(out, candidates)
        self.rates_complete = True
        out.items.extend(self.rates(groupings_budget=rate_groupings))
        out.exhausted = out.exhausted and self.rates_complete
        out.seconds = time.perf_counter() - started
        return out

    def _continue(self, out: Suggestions, candidates: int) -> None:
        started = time.perf_counter()
        assert out._pending is not None
        out.exhausted = False
        for tried, make in enumerate(out._pending, start=1):
            try:
                item = make()
            except NoLiteral:  # a label with no safe literal: no code can be offered for it
                item = None
            if item is not None:
                out.explored.append(item)
            if tried >= candidates:
                break
        else:
            out.exhausted = True
        out.seconds += time.perf_counter() - started
        self._select(out)

    def more(self, out: Suggestions, candidates: int = MORE_CANDIDATES) -> Suggestions:
        """Continue a search that stopped at its budget, with ``candidates`` more of each kind."""
        if not out.exhausted:
            rates = [s for s in out.items if s.kind == "rate"]
            self._continue(out, candidates)
            if not self.rates_complete:
                self.rates_complete = True
                rates = self.rates(groupings_budget=DEFAULT_RATE_GROUPINGS + candidates)
            out.items = [s for s in out.items if s.kind != "rate"] + rates
            out.exhausted = out.exhausted and self.rates_complete
        return out

    def _select(self, out: Suggestions) -> None:
        rates = [s for s in out.items if s.kind == "rate"]
        clean = [s for s in out.explored if s.publishes_cleanly]
        drops = [s for s in clean if s.kind == "drop"]
        # the finest clean groupings: no clean grouping strictly finer than them
        kept = []
        for s in drops:
            dims = set(s.title.split(" (")[0].split(" × "))
            finer = [t for t in drops if t is not s and dims < set(t.title.split(" (")[0].split(" × "))]
            if not finer:
                kept.append(s)
        recodes = [s for s in clean if s.kind != "drop"]
        out.items = recodes + kept + rates


def _round_step(lo: float, hi: float, steps: int = 20) -> float:
    """A round bin width (1, 2 or 5 × 10^k) giving about ``steps`` bins over [lo, hi]."""
    span = max(hi - lo, 1e-12)
    raw = span / steps
    power = 10.0 ** np.floor(np.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * power >= raw:
            step = m * power
            break
    return max(step, 1.0) if float(lo).is_integer() and float(hi).is_integer() else step


def _num(x: Any) -> str:
    return f"{float(x):g}"


def _pct(x: float) -> str:
    return f"{100 * float(x):.1f} %"


def answer(table_name: str, checked: Checked, items: list[Suggestion]) -> str:
    """A short, editable reply (markdown) in the spirit of the lesson's refusal."""
    hidden = checked.hidden_count
    why = checked.reason_summary()
    reasons = []
    if "threshold" in why and checked.rules is not None:
        reasons.append(f"{why['threshold']} cells hold fewer than {checked.rules.threshold} people")
    if "dominance" in why or "p_percent" in why:
        reasons.append("some cells are dominated by one or two contributors")
    if "extreme" in why:
        reasons.append("minimum and maximum values are single people's values")
    if "secondary" in why:
        reasons.append(f"{why['secondary']} further cells would let those be recovered by subtraction")
    lines = [
        f"**Request:** {table_name}",
        "",
        "**Response:** not releasable as requested.",
        "",
        f"At this level of detail {hidden} of {checked.hidden.size} cells cannot be published: "
        + ("; ".join(reasons) if reasons else "they would identify individuals") + ". "
        "A count that small identifies people to anyone who works in the area.",
        "",
        "What I can provide instead:",
    ]
    for s in items[:3]:
        lines.append(f"- {s.title}" + (f" ({s.detail})" if s.detail and s.kind == "rate" else ", nothing hidden"))
    if not items:
        lines.append("- the same figures at a coarser level of detail")
    lines += ["", "What decision does this feed? If you tell me, I can answer that question directly — "
              "it is often one number on a large denominator."]
    return "\n".join(lines)
