"""Sequential, order-preserving noise on each person's event dates (the HDSS article's method 1).

Why sequential: independent noise of ~50-120 days on every date would reorder events
that are close (born 15 May, out-migrates 5 June, in-migrates 6 July...), produce
impossible histories and break every event-history analysis. The article adds noise
event by event along each person's history so that (1) the order of events is kept,
(2) the spans between events stay about the same, (3) exact record linkage on dates
fails, and (4) the number of events per person is unchanged.

The rule implemented here, for one person's events sorted by date (ties: original row
order), with ``s`` the noisy dates and ``t`` the original ones:

* Events on the same original date form one *step* and receive the same noise, so
  they stay tied and their order (date, then original row order) is unchanged.
* Step i may move within ``(s[i-1], t[i+1])``: strictly after the previous noisy date
  and strictly before the next original date (which keeps the interval for the next
  step non-empty: it always contains that step's own original date). The first step
  has no lower neighbour, the last no upper one.
* Uniform levels ``|noise| in [lo, hi]``: with ``room`` on each side
  (``min(hi, gap)``), if both sides have room >= lo the sign is random and the
  magnitude uniform in ``[lo, min(room_down, room_up)]`` (symmetric, so spans are
  unbiased: the article takes "max noise = min of the neighbouring gaps"); if only one
  side has room >= lo that side is used, with magnitude in ``[lo, room]`` (the article's
  first event "is shifted down without restriction"); if neither does, the events are
  closer than the minimum noise and the noise is *reduced*: uniform over the whole
  feasible interval ``[-room_down, room_up]``, flagged as ``reduced``.
* Normal level ``N(0, sigma^2)``: drawn from the normal truncated to the feasible
  interval (inverse-CDF sampling) and rounded to whole days; ``reduced`` flags steps
  whose feasible interval cuts inside ``±3 sigma``.
* The birth-date column gets the noise of the person's birth event. A person without
  a birth event (born before the surveillance started) gets a pseudo event at the
  birth date, noised as the first step of the history, so the birth date stays before
  the first event and one single shift is applied to the birth date on all their rows.

Vectorised: the only Python loop runs over the step rank (1st, 2nd, ... step of every
person at once), never over people.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri

__all__ = ["NOISE_LEVELS", "NoiseLevel", "NoiseResult", "add_date_noise", "date_noise", "sequential_noise"]

_BIG = np.int64(1 << 40)  # "no neighbour" bound, far beyond any noise


@dataclass(frozen=True)
class NoiseLevel:
    """A noise level: uniform ``|noise|`` in ``[lo, hi]`` days, or normal with ``sigma`` days."""

    name: str
    kind: str  # "uniform" | "normal"
    lo: int = 0
    hi: int = 0
    sigma: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.kind == "uniform":
            out.update(lo_days=self.lo, hi_days=self.hi)
        else:
            out.update(sigma_days=self.sigma)
        return out


#: The four levels of the article (noise levels 1-4), by name and by number.
NOISE_LEVELS: dict[str | int, NoiseLevel] = {}
for _number, _level in enumerate([
    NoiseLevel("low", "uniform", 46, 62),
    NoiseLevel("medium", "uniform", 76, 93),
    NoiseLevel("high", "uniform", 106, 124),
    NoiseLevel("normal", "normal", sigma=50.0),
], start=1):
    NOISE_LEVELS[_level.name] = _level
    NOISE_LEVELS[_number] = _level


def _level(level: str | int | NoiseLevel) -> NoiseLevel:
    if isinstance(level, NoiseLevel):
        lv = level
    else:
        try:
            lv = NOISE_LEVELS[level]
        except KeyError:
            raise ValueError(f"unknown noise level {level!r}; use one of low, medium, high, normal or 1-4") from None
    if lv.kind == "uniform" and not (0 <= lv.lo <= lv.hi):
        raise ValueError("a uniform level needs 0 <= lo <= hi")
    if lv.kind == "normal" and not lv.sigma > 0:
        raise ValueError("a normal level needs sigma > 0")
    if lv.kind not in ("uniform", "normal"):
        raise ValueError("kind must be 'uniform' or 'normal'")
    return lv


def _rng(rng: np.random.Generator | None, seed: int | None) -> tuple[np.random.Generator, int | None]:
    if rng is not None:
        return rng, seed
    if seed is None:
        seed = secrets.randbits(128)  # fresh, high-entropy: not guessable from the output
    return np.random.default_rng(seed), seed


def _draw(level: NoiseLevel, down: np.ndarray, up: np.ndarray,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Noise for steps allowed to move ``down`` days earlier and ``up`` days later (both >= 0)."""
    m = len(down)
    if level.kind == "normal":
        sigma = level.sigma
        lo_p = ndtr((-down.astype(np.float64) - 0.5) / sigma)
        hi_p = ndtr((up.astype(np.float64) + 0.5) / sigma)
        u = lo_p + rng.random(m) * (hi_p - lo_p)
        eps = np.rint(sigma * ndtri(np.clip(u, 1e-300, 1 - 1e-16)))
        eps = np.clip(eps, -down, up).astype(np.int64)
        reduced = (down < 3 * sigma) | (up < 3 * sigma)
        return eps, reduced
    lo, hi = level.lo, level.hi
    room_dn = np.minimum(down, hi)
    room_up = np.minimum(up, hi)
    ok_dn, ok_up = room_dn >= lo, room_up >= lo
    coin = rng.random(m) < 0.5
    u = rng.random(m)
    both = ok_dn & ok_up
    go_up = np.where(both, coin, ok_up)
    cap = np.where(both, np.minimum(room_dn, room_up), np.where(go_up, room_up, room_dn))
    mag = lo + np.floor(u * (cap - lo + 1)).astype(np.int64)
    eps = np.where(go_up, mag, -mag)
    reduced = ~(ok_dn | ok_up)
    # reduced: uniform over the whole feasible interval [-room_dn, room_up]
    width = room_dn + room_up + 1
    eps_red = -room_dn + np.floor(u * width).astype(np.int64)
    eps = np.where(reduced, eps_red, eps)
    return eps.astype(np.int64), reduced


def sequential_noise(person: np.ndarray, day: np.ndarray, level: str | int | NoiseLevel = "medium",
                     rng: np.random.Generator | None = None,
                     seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Noise (whole days) for events given as parallel arrays of person codes and day numbers.

    Returns ``(noise, reduced)`` aligned with the input. Events of a person on the same
    day get the same noise. Input order does not matter. This is the numeric core of
    :func:`date_noise`; it is public so that the rule can be tested on raw arrays.
    """
    lv = _level(level)
    gen, _ = _rng(rng, seed)
    person = np.asarray(person)
    day = np.asarray(day, dtype=np.int64)
    n = len(day)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    order = np.lexsort((np.arange(n), day, person))
    p_s, d_s = person[order], day[order]
    new_step = np.ones(n, dtype=bool)
    new_step[1:] = (p_s[1:] != p_s[:-1]) | (d_s[1:] != d_s[:-1])
    step_of = np.cumsum(new_step) - 1
    s_person, s_day = p_s[new_step], d_s[new_step]
    n_steps = len(s_day)
    first = np.ones(n_steps, dtype=bool)
    first[1:] = s_person[1:] != s_person[:-1]
    starts = np.flatnonzero(first)
    sizes = np.diff(np.append(starts, n_steps))
    noisy = np.empty(n_steps, dtype=np.int64)
    red = np.zeros(n_steps, dtype=bool)
    prev = np.zeros(len(starts), dtype=np.int64)
    for r in range(int(sizes.max())):
        alive = np.flatnonzero(sizes > r)
        idx = starts[alive] + r
        t = s_day[idx]
        down = (t - prev[alive] - 1) if r > 0 else np.full(len(idx), _BIG)
        has_next = sizes[alive] > r + 1
        nxt = np.where(has_next, s_day[np.minimum(idx + 1, n_steps - 1)], t + _BIG + 1)
        up = nxt - t - 1
        eps, reduced = _draw(lv, down, up, gen)
        noisy[idx] = t + eps
        red[idx] = reduced
        prev[alive] = noisy[idx]
    noise = np.empty(n, dtype=np.int64)
    reduced_out = np.empty(n, dtype=bool)
    noise[order] = (noisy - s_day)[step_of]
    reduced_out[order] = red[step_of]
    return noise, reduced_out


@dataclass(frozen=True, repr=False)
class NoiseResult:
    """Output of :func:`date_noise`: the noisy events and what was done to them."""

    events: pd.DataFrame
    noise_days: pd.Series  # per event row (NaN where the date was missing)
    reduced: pd.Series  # per event row: noise reduced because neighbours were too close
    birth_noise_days: pd.Series  # per person
    level: NoiseLevel
    seed: int | None = field(default=None)

    def summary(self) -> dict[str, Any]:
        noise = self.noise_days.dropna().abs()
        return {
            "level": self.level.as_dict(),
            "events": len(self.events),
            "people": int(self.birth_noise_days.shape[0]),
            "reduced_share": round(float(self.reduced.mean()), 6) if len(self.reduced) else 0.0,
            "mean_abs_noise_days": round(float(noise.mean()), 2) if len(noise) else 0.0,
            "seed_recorded": self.seed is not None,
        }

    def __repr__(self) -> str:
        s = self.summary()
        return f"NoiseResult(level={s['level']['name']}, events={s['events']}, reduced_share={s['reduced_share']})"


def _to_days(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Whole days since 1970-01-01 and a validity mask, for a datetime-like column."""
    dt = pd.to_datetime(values)
    valid = dt.notna().to_numpy()
    days = np.zeros(len(dt), dtype=np.int64)
    days[valid] = dt[valid].to_numpy().astype("datetime64[D]").astype(np.int64)
    return days, valid


def date_noise(events: pd.DataFrame, person: str = "person_id", date: str = "date", kind: str = "event",
               level: str | int | NoiseLevel = "medium", birth: str | None = "birth_date",
               birth_kind: str = "birth", rng: np.random.Generator | None = None,
               seed: int | None = None) -> NoiseResult:
    """Add sequential per-person noise to ``date`` (and ``birth``); see the module docstring.

    Never modifies ``events``: returns a new frame (same rows, same order, same dtypes)
    inside a :class:`NoiseResult`. Pass ``seed`` (or ``rng``) to reproduce a run; with
    neither, a fresh 128-bit seed is drawn. Keep the seed secret: whoever has it and the
    code can regenerate the noise draws.
    """
    lv = _level(level)
    gen, seed = _rng(rng, seed)
    n = len(events)
    pcodes, people = pd.factorize(events[person].reset_index(drop=True), use_na_sentinel=True)
    if (pcodes < 0).any():
        raise ValueError(f"missing values in the person column {person!r}")
    days, valid = _to_days(events[date])
    ev_person, ev_day = pcodes[valid], days[valid]
    ev_rows = np.flatnonzero(valid)
    is_birth_event = (events[kind].to_numpy() == birth_kind) & valid if kind in events.columns else np.zeros(n, bool)

    pseudo_person = np.zeros(0, dtype=np.int64)
    pseudo_day = np.zeros(0, dtype=np.int64)
    bdays = bvalid = None
    if birth is not None:
        bdays, bvalid = _to_days(events[birth])
        has_birth_event = np.zeros(len(people), dtype=bool)
        has_birth_event[pcodes[is_birth_event]] = True
        first_row = np.full(len(people), -1, dtype=np.int64)
        first_row[pcodes[::-1]] = np.arange(n - 1, -1, -1)
        need = np.flatnonzero(~has_birth_event & bvalid[first_row])
        pseudo_person = need.astype(np.int64)
        pseudo_day = bdays[first_row[need]]

    all_person = np.concatenate([ev_person, pseudo_person])
    all_day = np.concatenate([ev_day, pseudo_day])
    noise, reduced = sequential_noise(all_person, all_day, lv, rng=gen)
    row_noise = np.full(n, np.nan)
    row_noise[ev_rows] = noise[:len(ev_rows)]
    row_reduced = np.zeros(n, dtype=bool)
    row_reduced[ev_rows] = reduced[:len(ev_rows)]

    out = events.copy()
    shift = pd.to_timedelta(pd.Series(row_noise, index=events.index), unit="D")
    out[date] = (pd.to_datetime(events[date]) + shift).astype(events[date].dtype) \
        if pd.api.types.is_datetime64_any_dtype(events[date].dtype) else pd.to_datetime(events[date]) + shift

    person_noise = np.full(len(people), np.nan)
    if birth is not None:
        assert bdays is not None and bvalid is not None
        # birth event noise first (the first birth row of a person), then pseudo events
        b_rows = np.flatnonzero(is_birth_event)[::-1]
        person_noise[pcodes[b_rows]] = row_noise[b_rows]
        person_noise[pseudo_person] = noise[len(ev_rows):]
        bshift = pd.to_timedelta(pd.Series(person_noise[pcodes], index=events.index), unit="D")
        noisy_birth = pd.to_datetime(events[birth]) + bshift
        out[birth] = noisy_birth.astype(events[birth].dtype) \
            if pd.api.types.is_datetime64_any_dtype(events[birth].dtype) else noisy_birth
    return NoiseResult(
        events=out,
        noise_days=pd.Series(row_noise, index=events.index, name="noise_days"),
        reduced=pd.Series(row_reduced, index=events.index, name="reduced"),
        birth_noise_days=pd.Series(person_noise, index=pd.Index(people, name=person), name="birth_noise_days"),
        level=lv, seed=seed,
    )


def add_date_noise(events: pd.DataFrame, person: str = "person_id", date: str = "date", kind: str = "event",
                   level: str | int | NoiseLevel = "medium", birth: str | None = "birth_date",
                   birth_kind: str = "birth", rng: np.random.Generator | None = None,
                   seed: int | None = None) -> pd.DataFrame:
    """The noisy events frame of :func:`date_noise` (use that function for the details)."""
    return date_noise(events, person=person, date=date, kind=kind, level=level, birth=birth,
                      birth_kind=birth_kind, rng=rng, seed=seed).events
