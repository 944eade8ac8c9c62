"""Values edited between two tables of a variable's sums: what the latest cleared table showed.

Why: ``df2 = df.copy(); df2.loc[df2.district == "C", "income"] = 0``, then the sums of income
by sex of ``df`` and of ``df2`` (either order): the same people, the same groups, and the men's
two sums differ by C's one man's income (red team: both ``pass``). Doubling every income but
one tells that one person's income the same way (``2·T1 − T2``), and so does doubling every
income and setting his to 0. Linking sees the same rows in both tables, so the populations
alone cannot tell; the values can.

The model. For every variable whose sums or means a cleared table (``pass`` or ``suppressed``)
showed, the universe keeps, per row, the value the latest such table showed in a cell it did
not hide (:class:`Published`: its hash, and in memory the number itself). A later table's
values are compared with them: the rows follow one common transform (none; a rounding; an
affine map such as a unit change, inflation or a shift, found from the data,
:func:`_common_transform`), and the rows that do not follow it are *edited*: whoever knows the
edit (the analyst made it; a recipient may guess) takes the two tables' sums apart over the
edited rows and the rest. So the later table's population leaves out the smaller of the two
parts (:func:`rows_left_out`); the earlier populations still hold them, so differencing sees
that part as the difference of two populations and hides the cells it decides when it is
small, whatever the edit was (0, missing, doubled, a cap, a typo fixed). Comparing with the
latest table, each edit is a difference of two consecutive populations, so two edits over
three tables are two differences (a test).

What is *not* taken as shown, so that the values shown before stay the reference: a table that
is ``review`` or ``blocked`` (nothing cleared), and the rows of the cells a table hid (red team:
the edited table suppressed, then the same table again compared with the edited values alone
and cleared, 531.80 − 513.75 = C's man; the same through a table that hid his district).
Why values *shown* and not the values linking saw first: a cleaning session before the first
income table edits nothing a table showed (comparing with the first values seen made 12 of a
red team's tables stricter for nothing). Why a common transform: a rounding tells nobody's value
(only fractional parts), a recode of every value tells nothing of a few, but the rows that do
not follow it do (every income doubled, his set to 0; a recode shown between two tables is no
way around it, the recode is found again). A missing value filled in with one constant
(imputation by 0 or the median) tells nothing; filled in with values of their own (the raw data
again) it tells them; a value set to missing drops out of the sums and is edited.

After a restart only the hashes are kept (no value of the data is written): rows are then
edited when their hash changed, unless every row changed (taken for a recode).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .identity import MISSING, fresh_hash

#: the hash kept for a value published as missing (``MISSING``: no value published)
NULL_VALUE = np.uint64(0x5BD1E9955BD1E995)
#: rows a common transform is chosen on (evenly spaced; the chosen one is then applied to all)
SAMPLE = 2000
#: decimals of the roundings tried (negative: tens, hundreds, thousands)
ROUNDINGS = range(-3, 7)


@dataclass
class Published:
    """Per universe row, the value the latest cleared table of the variable's sums or means
    showed: its hash (``MISSING``: none; ``NULL_VALUE``: a missing value) and, within this
    kernel, the number itself (NaN: none or missing; None after a restart or for non-numbers)."""

    hashes: np.ndarray
    numbers: np.ndarray | None = None

    def grown(self, n: int) -> Published:
        """The same for a universe of ``n`` rows (rows appended: nothing published of them)."""
        k = n - len(self.hashes)
        if k <= 0:
            return self
        numbers = None if self.numbers is None else np.concatenate([self.numbers, np.full(k, np.nan)])
        return Published(np.concatenate([self.hashes, np.full(k, MISSING, dtype=np.uint64)]), numbers)


@dataclass(frozen=True)
class Values:
    """What a table of one variable's sums or means publishes of it: universe rows, their value
    hashes (``NULL_VALUE`` for missing values) and numbers (None: not numbers)."""

    var: str
    rows: np.ndarray
    hashes: np.ndarray
    numbers: np.ndarray | None


def key(var: Hashable) -> str:
    """The name a variable's published values are kept under (as saved for a restart)."""
    return str(var)


def values_of(frame: pd.DataFrame, var: Hashable, rows: np.ndarray, ids: np.ndarray) -> Values | None:
    """The values of ``var`` that a table of its sums publishes (its rows placed in the
    universe, ``rows``; in a group of the table, ``ids`` ≥ 0); None when there are none."""
    found = (rows >= 0) & (ids >= 0)
    if not found.any():
        return None
    column = frame[var]
    missing = pd.isna(column).to_numpy(dtype=bool)
    hashes = fresh_hash(frame, var)
    if missing.any():
        hashes = np.where(missing, NULL_VALUE, hashes)
    numbers = None
    if pd.api.types.is_numeric_dtype(column.dtype):
        # (already numbers: read as they are, not through to_numeric: 19 ms on a million rows;
        # copied, since they are kept with the output and the user's column may change in place)
        numbers = np.array(column.to_numpy(dtype=np.float64, na_value=np.nan), copy=True)
    if found.all():  # (every row: no copies, a million rows' arrays are costly to touch first)
        return Values(key(var), rows, hashes, numbers)
    return Values(key(var), rows[found], hashes[found], None if numbers is None else numbers[found])


def edited_values(published: dict[str, Published], frame: pd.DataFrame, variables: list[Hashable],
                  ids: np.ndarray, rows: np.ndarray) -> tuple[tuple[Values, ...], np.ndarray, tuple[str, ...]]:
    """(what a table of sums or means publishes of each of ``variables``, the table's group of each
    row of ``frame`` (``ids``) without the rows whose values tell an edit, the variables whose
    values changed in a way that cannot be compared: ``review``). ``rows``: each row's universe row.

    Why (red team, 2026-12-05): the same people with a few incomes edited between two tables of
    their sums (set to 0 in C, top-coded, doubled but one), in either order: the two tables told
    the edited rows' sum by subtraction, both ``pass``. Left out of the later population, those
    rows are the difference of two populations, which differencing hides when it is small."""
    found: list[Values] = []
    unreadable: list[str] = []
    if not variables:  # (a table of counts: no value published, nothing to compare)
        return (), ids, ()
    left = np.zeros(len(frame), dtype=bool)
    placed = np.flatnonzero((rows >= 0) & (ids >= 0))
    for var in variables:
        values = values_of(frame, var, rows, ids)
        if values is None:
            continue
        found.append(values)
        told = compare(published, values)
        if values.var not in published:
            copied = _breaks_a_copy(published, values)
            if copied is not None:
                told = Comparison(left_out=copied)
        if told.left_out is not None:
            left[placed[told.left_out]] = True
        if told.review:
            unreadable.append(values.var)
    return tuple(found), (np.where(left, -1, ids) if left.any() else ids), tuple(unreadable)


#: A variable with no values shown before is compared with the others' (:func:`_breaks_a_copy`) when
#: at least this many rows hold a non-zero value on either side ...
MIN_COPY_ROWS = 20
#: ... and the rows breaking the transform most follow are at most this share of them, or this many
#: (the four rows a mask may write anything over, ``rows.MASKED_FEW_ROWS``: 4 of 73 rows off was a
#: copy no test took, red team stop 49).
COPY_MAX_SHARE = 0.10
COPY_FEW_ROWS = 4


def _breaks_a_copy(published: dict[str, Published], values: Values) -> np.ndarray | None:
    """The rows of a new variable that break the transform relating it, on nearly every other row,
    to a variable shown before (a mask over ``values.rows``); None when it is no such copy.

    Why (red team rt51/05): ``earn = income`` doubled except his, or ``income + 1`` with his 0,
    summed by sex beside the income sums: ``2·T1 − T2`` is his income, both ``pass``; the values
    shown were kept per name, and "earn" had none. A copy is confirmed on the rows where either
    value is non-zero (two variables zero on most rows agree there by chance) and only when at most
    :data:`COPY_MAX_SHARE` of them (or :data:`COPY_FEW_ROWS`) break it: amounts paid beside amounts due differing on three
    rows tell those rows' arrears by subtraction too, and are left out the same way. Within a
    kernel only (the numbers are not saved)."""
    if values.numbers is None:
        return None
    best: np.ndarray | None = None
    for off in _copy_breaks(published, values.rows, values.numbers):
        if not off.any() or (best is not None and off.sum() >= best.sum()):
            continue
        best = off
    return best


def follows_published(published: dict[str, Published], rows: np.ndarray, numbers: np.ndarray) -> bool:
    """Whether ``numbers`` (one per universe row ``rows``) follow the values shown of some variable
    through one common transform on all but a few rows (as :func:`_breaks_a_copy` takes a copy:
    at most :data:`COPY_MAX_SHARE` of the rows non-zero on either side, or :data:`COPY_FEW_ROWS`),
    over at least :data:`MIN_COPY_ROWS` distinct values: this places rows (their labels are taken
    for people), and a flag, a weight of 1 or a code follows another data set's by chance.
    Within a kernel only (the numbers are not saved)."""
    if len(pd.unique(numbers[np.isfinite(numbers)])) < MIN_COPY_ROWS:
        return False
    return any(True for _ in _copy_breaks(published, rows, numbers))


def _copy_breaks(published: dict[str, Published], rows: np.ndarray, numbers: np.ndarray) -> Iterator[np.ndarray]:
    """Per variable shown before that ``numbers`` copy through one transform, the rows breaking it
    (a mask over ``rows``, possibly empty); variables it does not copy are skipped."""
    for pub in published.values():
        if pub.numbers is None:
            continue
        old, new = pub.numbers[rows], numbers
        telling = np.flatnonzero(np.isfinite(old) & np.isfinite(new) & ((old != 0) | (new != 0)))
        if len(telling) < MIN_COPY_ROWS:
            continue
        follows, _ = _common_transform(old[telling], new[telling])
        off = telling[~follows]
        if len(off) > max(COPY_FEW_ROWS, COPY_MAX_SHARE * len(telling)):
            continue
        mask = np.zeros(len(rows), dtype=bool)
        mask[off] = True
        yield mask


@dataclass(frozen=True)
class Comparison:
    """What a table's values tell against those shown before (:func:`compare`)."""

    left_out: np.ndarray | None = None  # a mask over ``Values.rows``: the edited rows, left out
    review: bool = False  # changed in a way linking cannot compare: the table is ``review``
    keeps_reference: bool = False  # the values shown before stay the reference (a lossy transform)


def compare(published: dict[str, Published], values: Values) -> Comparison:
    """The table's values against those the latest cleared table of the variable showed.

    Rows that do not follow the transform most rows follow are left out (at most half of the
    rows with a value shown). Most rows following none (another variable under the name, or a
    perturbation of every value, red team: known noise on every income and his set to 0), or,
    after a restart (hashes only), most rows changed, is ``review``: it cannot be told from an
    edit. A rounding keeps the finer values shown before as the reference."""
    pub = published.get(values.var)
    if pub is None:
        return Comparison()
    before = pub.hashes[values.rows]
    known = before != MISSING
    changed = known & (before != values.hashes)
    if not changed.any():
        return Comparison()
    n_known = int(known.sum())
    if pub.numbers is None or values.numbers is None:
        # hashes only (after a restart): a few rows changed are an edit; most rows changed cannot
        # be told from a recode or a rounding with an edit among it (red team)
        if 2 * int(changed.sum()) > n_known:
            return Comparison(review=True, keeps_reference=True)
        return Comparison(left_out=changed)
    edited, lossy = _told(pub.numbers[values.rows], values.numbers, known, before == NULL_VALUE,
                          values.hashes == NULL_VALUE)
    n_edited = int(edited.sum())
    if 2 * n_edited > n_known:
        return Comparison(review=True, keeps_reference=True)
    return Comparison(left_out=edited if n_edited else None, keeps_reference=lossy)


def _told(old: np.ndarray, new: np.ndarray, known: np.ndarray, was_missing: np.ndarray,
          is_missing: np.ndarray) -> tuple[np.ndarray, bool]:
    """(the rows whose change since a table showed them tells their values, whether the common
    transform loses information: a rounding). See the module docstring."""
    edited = known & is_missing & ~was_missing  # (the value dropped out of the sums)
    filled = np.flatnonzero(known & was_missing & ~is_missing)
    if len(filled):
        # filled in: the rows sharing the commonest value (two or more) are an imputation; the
        # others hold values of their own (red team: 15 men given one constant, his own income back)
        values, counts = np.unique(new[filled], return_counts=True)
        imputed = values[np.argmax(counts)] if counts.max() >= 2 else np.nan
        edited[filled[new[filled] != imputed]] = True
    lossy = False
    both = np.flatnonzero(known & ~was_missing & ~is_missing)
    if len(both):
        follows, lossy = _common_transform(old[both], new[both])
        edited[both[~follows]] = True
    return edited, lossy


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Equal up to the last bits of a double (``x * 1.1 / 1.1`` is no edit)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return (a == b) | (np.abs(a - b) <= 1e-9 * np.maximum(np.abs(a), np.abs(b)))


def _common_transform(old: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, bool]:
    """(which rows follow the transform most of them follow, whether it rounds): none, a rounding
    (``ROUNDINGS``), an affine map through two changed rows (a unit change, inflation, a shift), or
    a scale then a rounding to the decimals the new values have (a currency converted and rounded).
    Chosen on an evenly spaced sample of :data:`SAMPLE` rows (deterministic), ties to the earlier
    candidate."""
    same = _close(new, old)
    if same.all():
        return same, False
    sample = np.unique(np.linspace(0, len(old) - 1, num=min(len(old), SAMPLE)).astype(np.int64))
    o, n = old[sample], new[sample]
    moved = np.flatnonzero(~_close(n, o))
    candidates: list[tuple[str, float, float]] = [("round", float(d), 0.0) for d in ROUNDINGS]
    if len(moved):
        picks = sorted({int(moved[0]), int(moved[len(moved) // 2]), int(moved[-1])})
        for i in picks:
            if o[i] != 0:
                candidates.append(("affine", n[i] / o[i], 0.0))  # a scale
            candidates.append(("affine", 1.0, n[i] - o[i]))  # a shift
            for j in picks:
                if j > i and o[j] != o[i]:
                    a = (n[j] - n[i]) / (o[j] - o[i])
                    candidates.append(("affine", a, n[i] - a * o[i]))
        scaled = moved[np.abs(o[moved]) > 0]
        decimals = _decimals(n)
        if len(scaled) and decimals is not None:
            # least squares through 0 (the roundings' errors average out; a median of ratios was
            # off by 1e-4 and left rows out of the band below), over the rows near the median
            # ratio (rows the copy masked to 0 pulled the fit off every row, stop 50)
            rough = float(np.median(n[scaled] / o[scaled]))
            near = scaled[np.abs(n[scaled] - rough * o[scaled]) <= 1e-3 * np.abs(n[scaled]) + 10.0 ** -decimals]
            fit = near if len(near) else scaled
            ratio = float(np.sum(n[fit] * o[fit]) / np.sum(o[fit] * o[fit]))
            candidates.append(("scale_round", ratio, float(decimals)))
    best, best_count = None, int(_close(n, o).sum())
    for candidate in candidates:
        count = int(_follows(o, n, candidate).sum())
        if count > best_count:
            best, best_count = candidate, count
    if best is None:
        return same, False
    return _follows(old, new, best), best[0] != "affine"


def _decimals(values: np.ndarray) -> int | None:
    """The fewest decimals (0 to 6) all finite ``values`` are written with, or None."""
    finite = values[np.isfinite(values)]
    for d in range(0, 7):
        if np.all(_close(np.round(finite, d), finite)):
            return d
    return None


def _follows(old: np.ndarray, new: np.ndarray, candidate: tuple[str, float, float]) -> np.ndarray:
    kind, p, q = candidate
    with np.errstate(invalid="ignore", over="ignore"):
        if kind == "round":
            return _close(new, np.round(old, int(p)))
        if kind == "scale_round":  # within half a unit of the last decimal kept (and a tenth for the scale's error)
            return np.abs(new - p * old) <= 0.55 * 10.0 ** -q + 1e-12 * np.abs(new)
        return _close(new, p * old + q)


def record(published: dict[str, Published], n_rows: int, values: Values, shown: np.ndarray) -> None:
    """Remember what a cleared table showed of its variable: the values of its rows in cells it
    did not hide (``shown``, a mask over ``values.rows``; ``n_rows``: the universe's rows). New
    arrays, never changed in place: the linking memory may be saved from another thread
    (:meth:`.linker.Linker.save`) while the next table is recorded."""
    if not shown.any() or compare(published, values).keeps_reference:
        return
    pub = published.get(values.var)
    rows = values.rows
    if pub is None and len(rows) == n_rows and (n_rows < 2 or bool((rows[1:] > rows[:-1]).all())):
        # every universe row, in order (the first table of a frame's variable): its arrays as they
        # are, the numbers copied (they may be a view of the user's frame, which an edit in place
        # would change under us: its test, test_an_edit_in_place_of_the_same_frame); the rows of
        # hidden cells as never shown, in one pass (filling and scattering a million rows' arrays
        # took 14 ms of a first display whose table hides a cell)
        every = bool(shown.all())
        hashes = np.asarray(values.hashes, dtype=np.uint64) if every else np.where(shown, values.hashes, MISSING)
        numbers = None if values.numbers is None else \
            np.array(values.numbers, dtype=np.float64, copy=True) if every else \
            np.where(shown, values.numbers, np.nan).astype(np.float64, copy=False)
        published[values.var] = Published(np.asarray(hashes, dtype=np.uint64), numbers)
        return
    before = np.full(n_rows, MISSING, dtype=np.uint64) if pub is None else pub.grown(n_rows).hashes.copy()
    numbers = np.full(n_rows, np.nan) if pub is None else pub.grown(n_rows).numbers
    rows = values.rows[shown]
    if numbers is None and values.numbers is not None:
        # hashes only (an earlier kernel's): the numbers come back once a table shows every row with
        # a hash kept (Restart & Run All's first table), so a recode after it is told from an edit
        covered = np.zeros(n_rows, dtype=bool)
        covered[rows] = True
        if not (before != MISSING)[~covered].any():
            numbers = np.full(n_rows, np.nan)
    before[rows] = values.hashes[shown]
    if numbers is not None and values.numbers is not None:
        numbers = numbers.copy()
        numbers[rows] = values.numbers[shown]
    else:
        numbers = None  # (a table of non-numbers, or a restart: hashes only from now)
    published[values.var] = Published(before, numbers)


def merge(published: dict[str, Published], n_rows: int, theirs: dict[str, Published],
          to_rows: np.ndarray) -> None:
    """Take in another universe's published values (its row i is our row ``to_rows[i]``) where
    ours has none: two universes merged (:func:`.universes.merge_overlapping`)."""
    for var, other in theirs.items():
        mine = published.get(var)
        before = np.full(n_rows, MISSING, dtype=np.uint64) if mine is None else mine.grown(n_rows).hashes.copy()
        numbers = np.full(n_rows, np.nan) if mine is None else mine.grown(n_rows).numbers
        take = (before[to_rows] == MISSING) & (other.hashes != MISSING)
        before[to_rows[take]] = other.hashes[take]
        if numbers is not None and other.numbers is not None:
            numbers = numbers.copy()
            numbers[to_rows[take]] = other.numbers[take]
        else:
            numbers = None
        published[var] = Published(before, numbers)
