"""Long (one row per event) <-> wide (one row per person) reshaping for event-history data.

Why: k-anonymity is defined per person, but HDSS data has one row per event. The
article (step 3) reshapes long -> wide (sex, birth year, death year, number of events,
first/last education, first/last occupation), applies k-anonymity there, and reshapes
back. Time-varying states are reduced to each person's first and last state (the
article's choice for the nosy-neighbour scenario: intermediate changes are dropped).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["broadcast_person_columns", "first_last_states", "person_table"]


def _ordered(events: pd.DataFrame, person: str, date: str | None) -> pd.DataFrame:
    """Events sorted by person then date (ties and missing dates: original row order)."""
    pos = pd.Series(np.arange(len(events)), index=events.index, name="__pos")
    frame = events.assign(__pos=pos.to_numpy())
    by = [person] + ([date] if date is not None else []) + ["__pos"]
    return frame.sort_values(by, kind="stable", na_position="last")


def first_last_states(events: pd.DataFrame, person: str = "person_id", state_cols: Sequence[str] = (),
                      date: str | None = "date", wide: bool = False) -> pd.DataFrame:
    """Reduce time-varying states to each person's first and last observed (non-missing) state.

    ``wide=False`` (default): a copy of ``events`` where each state column ``c`` is
    replaced by ``c_first`` and ``c_last``, constant within a person (the state
    becomes static; intermediate changes and their dates are gone).
    ``wide=True``: one row per person, indexed by ``person``, with those columns.
    The input is not modified.
    """
    ordered = _ordered(events, person, date)
    grouped = ordered.groupby(person, sort=False)[list(state_cols)]
    firsts = grouped.first()  # first non-missing value per person
    lasts = grouped.last()
    wide_frame = pd.DataFrame(index=firsts.index)
    for c in state_cols:
        wide_frame[f"{c}_first"] = firsts[c]
        wide_frame[f"{c}_last"] = lasts[c]
    if wide:
        return wide_frame
    out = events.drop(columns=list(state_cols))
    return broadcast_person_columns(out, wide_frame, person=person)


def broadcast_person_columns(events: pd.DataFrame, people: pd.DataFrame, person: str = "person_id",
                             columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Copy of ``events`` with person-level ``columns`` of ``people`` put on every event row.

    ``people`` is indexed by person (or has a ``person`` column). Columns already in
    ``events`` are overwritten: this is how values suppressed in the wide, per-person
    table are carried back to the long file ("reshape back").
    """
    table = people.set_index(person) if person in people.columns else people
    cols = list(table.columns if columns is None else columns)
    out = events.copy()
    idx = table.index.get_indexer(events[person])
    if (idx < 0).any():
        raise KeyError("some people of the events frame are not in the person table")
    for c in cols:
        out[c] = table[c].iloc[idx].to_numpy()
        if isinstance(table[c].dtype, pd.api.extensions.ExtensionDtype) or table[c].dtype == object:
            out[c] = out[c].astype(table[c].dtype)
    return out


def person_table(events: pd.DataFrame, person: str = "person_id", date: str = "date", kind: str = "event",
                 sex: str | None = "sex", birth: str | None = "birth_date",
                 states: Sequence[str] = ("education", "occupation"), death_kind: str = "death",
                 event_kinds: Sequence[str] = ("death", "in_migration", "out_migration")) -> pd.DataFrame:
    """One row per person: the article's k-anonymity keys and the dates used by the risk measure.

    Columns: ``sex``, ``birth_year``, ``death_year`` (``<NA>`` if alive), ``n_events``,
    ``{state}_first`` / ``{state}_last`` per state, ``date_birth`` (the birth date
    column, so every person has one) and ``date_{kind}`` (first such event) per kind in
    ``event_kinds``. A state given already reduced (``{state}_first``/``{state}_last``
    columns present, e.g. after suppression) is taken as it is.
    """
    ordered = _ordered(events, person, date)
    grouped = ordered.groupby(person, sort=True)
    out = pd.DataFrame(index=grouped.size().index)
    if sex is not None:
        out[sex] = grouped[sex].first()
    if birth is not None:
        bdate = pd.to_datetime(grouped[birth].first())
        out["birth_year"] = bdate.dt.year.astype("Int64")
    kinds = ordered[kind]
    deaths = ordered.loc[kinds == death_kind].groupby(person)[date].first()
    out["death_year"] = pd.to_datetime(deaths).dt.year.astype("Int64").reindex(out.index)
    out["n_events"] = grouped.size().astype(np.int64)
    for s in states:
        if s in ordered.columns:
            out[f"{s}_first"] = grouped[s].first()
            out[f"{s}_last"] = grouped[s].last()
        else:
            # already reduced: constant within a person, missing where suppressed
            out[f"{s}_first"] = grouped[f"{s}_first"].nth(0).set_axis(out.index)
            out[f"{s}_last"] = grouped[f"{s}_last"].nth(0).set_axis(out.index)
    if birth is not None:
        out["date_birth"] = pd.to_datetime(grouped[birth].first())
    for k in event_kinds:
        firsts = ordered.loc[kinds == k].groupby(person)[date].first()
        out[f"date_{k}"] = pd.to_datetime(firsts).reindex(out.index)
    out.index.name = person
    return out.reset_index()
