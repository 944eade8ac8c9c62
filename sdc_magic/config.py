"""Disclosure rules, their named presets, and where a team pins them.

The rules are one immutable value object (:class:`Rules`) so that every output can
record exactly the rules it was checked under, and so that a change of rules in the
middle of a session never alters the record of an earlier output.

Configuration is looked up in the order itables uses for its own options, so that
a whole team can pin the rules once:

1. the ``SDC_MAGIC_CONFIG`` environment variable (a path to a TOML file; an empty
   value turns file configuration off);
2. ``sdc.toml`` in the working directory or any parent;
3. ``[tool.sdc_magic]`` in a ``pyproject.toml`` in the working directory or any parent.

Every value is validated when it is set; an unknown key or a bad value (including
``inf`` and ``nan``) is an error that names the key, and a file that cannot be used is an
error that names the file and line. When the extension loads, :func:`load_config` never
raises: a configuration that cannot be used gives :data:`STRICT` (the strictest value of
every rule across the presets) and a problem to show, because loading must never leave
tables unprotected and a typo must never loosen the rules.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the package version, stamped on every record beside the rules that produced it (kept here,
#: at the bottom of the import graph, so records need not import the package facade)
__version__ = "0.1.0"

ZERO_POLICIES = ("allow", "suppress")
EXTREME_POLICIES = ("suppress", "allow")
COSTS = ("value", "cells", "units")


@dataclass(frozen=True)
class Rules:
    """The disclosure rules in force.

    Attributes:
        threshold: a cell built from fewer distinct units than this is primary
            (frequency rule). Source: seed lesson (5), INSEE (3), SACRO (10).
        zeros: ``"allow"`` publishes empty cells, ``"suppress"`` makes them primary
            (SACRO: "zeros are disclosive"), except the cells listed in
            ``structural_zeros``.
        structural_zeros: labels of cells that are empty by definition (e.g.
            ``"M/Pregnancy"``); they are always publishable.
        row_threshold: a row of a table whose units total fewer than this is hidden
            whole (Statistics Finland row-wise rule, 10). ``None`` turns it off.
        dominance: ``(n, k)``: a magnitude cell whose ``n`` largest units make more
            than ``k`` % of its total is primary. ``None`` turns it off.
        p: p % rule: a magnitude cell is primary when the second largest unit can
            estimate the largest within ``p`` % (total − x1 − x2 < p/100·x1).
        protection: the protection interval, in % of a primary cell's value, that
            secondary suppression must guarantee (INSEE 10 %).
        unit: the column identifying the statistical unit (person, household,
            enterprise). Frequencies then count distinct units, not rows, and
            magnitudes are summed per unit before dominance is judged.
        categories: columns whose distinct counts count categories (villages, months), not
            units: their ``nunique`` cells are not judged by the threshold. Without it the
            data decide, over the table's rows and the frame they came from (a column with at
            most 5 % distinct values that recur across the groups); a few people with many
            visits look like a category, so the stricter reading wins when they disagree.
        dof: std / var cells need ``n - 1 >= dof`` (SACRO 10). ``None`` turns it off.
        extremes: min / max are individual values; ``"suppress"`` makes them
            primary, ``"allow"`` declares them structural (e.g. a legal maximum).
        round_to: publish counts rounded to this base (OpenSAFELY 5). ``None``: exact.
        singletons: also defend against a single contributor who subtracts its own
            value (issue 3; on by default).
        cost: the information-loss measure secondary suppression minimises:
            ``"value"`` (tau-Argus default), ``"cells"`` or ``"units"``.
        preset: the name of the preset these rules came from, for the record.
    """

    threshold: int = 5
    zeros: str = "allow"
    structural_zeros: tuple[str, ...] = ()
    row_threshold: int | None = None
    dominance: tuple[int, float] | None = None
    p: float | None = None
    protection: float = 10.0
    unit: str | None = None
    categories: tuple[str, ...] = ()
    dof: int | None = None
    extremes: str = "suppress"
    round_to: int | None = None
    singletons: bool = True
    cost: str = "value"
    preset: str = "humanitarian"
    sources: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def top_k(self) -> int:
        """How many largest contributions per cell the rules need (dominance n, p% needs 2)."""
        n = self.dominance[0] if self.dominance else 0
        return max(2, n)

    def replace(self, **changes: Any) -> Rules:
        """A copy with some rules changed (validated)."""
        if "preset" not in changes:
            changes["preset"] = f"{self.preset} (modified)" if not self.preset.endswith("(modified)") else self.preset
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready record of the rules, for output metadata and certificates."""
        out = dataclasses.asdict(self)
        out.pop("sources")
        out["dominance"] = list(self.dominance) if self.dominance else None
        out["structural_zeros"] = list(self.structural_zeros)
        out["categories"] = list(self.categories)
        return out

    def describe(self) -> str:
        """One line naming the active rules, as printed when the extension loads."""
        parts = [f"threshold {self.threshold}" + (f" distinct {self.unit}" if self.unit else "")]
        if self.dominance:
            parts.append(f"dominance ({self.dominance[0]},{_fmt(self.dominance[1])})")
        if self.p is not None:
            parts.append(f"p% {_fmt(self.p)}")
        # (words, not the setting's value: "zeros allow" read as a typo; issue 24.6)
        parts.append("zeros shown" if self.zeros == "allow" else "zeros hidden")
        if self.row_threshold:
            parts.append(f"row threshold {self.row_threshold}")
        if self.dof is not None:
            parts.append(f"dof {self.dof}")
        if self.round_to:
            parts.append(f"rounded to {self.round_to}")
        if self.categories:
            parts.append("categories " + ", ".join(self.categories))
        parts.append(f"protection {_fmt(self.protection)}%")
        return f"preset {self.preset}: " + ", ".join(parts)


def _fmt(x: float) -> str:
    return f"{x:g}"


class RulesError(ValueError):
    """A rule was named or given a value that cannot be used; the message names the key."""


def _whole(x: Any, minimum: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= minimum


def _percent(x: Any, low: float, high: float, low_open: bool, high_open: bool) -> bool:
    """A finite number in the interval (NaN and inf fail every comparison on purpose)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return False
    if not math.isfinite(x):
        return False
    above = x > low if low_open else x >= low
    below = x < high if high_open else x <= high
    return above and below


def _validate(r: Rules) -> None:
    if not _whole(r.threshold, 1):
        raise RulesError(f"threshold must be a whole number >= 1, got {r.threshold!r}")
    if r.zeros not in ZERO_POLICIES:
        raise RulesError(f"zeros must be one of {ZERO_POLICIES}, got {r.zeros!r}")
    if r.row_threshold is not None and not _whole(r.row_threshold, 1):
        raise RulesError(f"row_threshold must be a whole number >= 1 or None, got {r.row_threshold!r}")
    if r.dominance is not None:
        ok = isinstance(r.dominance, tuple) and len(r.dominance) == 2
        if not ok or not _whole(r.dominance[0], 1) or not _percent(r.dominance[1], 0, 100, True, False):
            raise RulesError(f"dominance must be n,k with n >= 1 and 0 < k <= 100, got {r.dominance!r}")
    if r.p is not None and not _percent(r.p, 0, 100, True, False):
        raise RulesError(f"p must be a percentage in (0, 100], got {r.p!r}")
    if not _percent(r.protection, 0, 100, False, True):
        raise RulesError(f"protection must be a percentage in [0, 100), got {r.protection!r}")
    if r.dof is not None and not _whole(r.dof, 0):
        raise RulesError(f"dof must be a whole number >= 0 or None, got {r.dof!r}")
    if r.extremes not in EXTREME_POLICIES:
        raise RulesError(f"extremes must be one of {EXTREME_POLICIES}, got {r.extremes!r}")
    if r.round_to is not None and not _whole(r.round_to, 1):
        raise RulesError(f"round_to must be a whole number >= 1 or None, got {r.round_to!r}")
    if r.cost not in COSTS:
        raise RulesError(f"cost must be one of {COSTS}, got {r.cost!r}")
    if r.unit is not None and not isinstance(r.unit, str):
        raise RulesError(f"unit must be a column name, got {r.unit!r}")
    if not isinstance(r.categories, tuple) or not all(isinstance(c, str) and c for c in r.categories):
        raise RulesError(f"categories must be column names (e.g. categories=village,month), got {r.categories!r}")
    if r.unit is not None and r.unit in r.categories:
        raise RulesError(f"categories cannot name the unit column {r.unit!r}: its distinct values are units")


PRESETS: dict[str, Rules] = {
    # Source: "Nineteen cells of one" (seed lesson): "A threshold of five is the common
    # floor in this sector"; its own code publishes empty cells (zeros allowed).
    "humanitarian": Rules(
        threshold=5, zeros="allow", preset="humanitarian",
        sources=("Nineteen cells of one (seed lesson): threshold 5, secondary suppression",),
    ),
    # Source: INSEE course "Méthodes suppressives pour les données tabulées": frequency
    # rule n = 3 for business data, dominance (1, 85), protection interval 10 %.
    "insee": Rules(
        threshold=3, dominance=(1, 85.0), protection=10.0, zeros="allow", preset="insee",
        sources=("INSEE, Suppressive methods for tabulated data: n = 3, NK(1,85), 10 % protection",),
    ),
    # Source: Statistics Finland, SDC guidelines for tabulated research data, §4.2:
    # "row-specific ... at least ten statistical units and in cell-specific ... at least three".
    "statfi-personal": Rules(
        threshold=3, row_threshold=10, zeros="allow", preset="statfi-personal",
        sources=("Statistics Finland tabulated-data guidelines §4.2: cell 3, row 10",),
    ),
    # Source: Statistics Finland guidelines §5: threshold of at least three always, plus
    # dominance or p% where approximate disclosure matters (recent data).
    "statfi-business": Rules(
        threshold=3, dominance=(1, 85.0), p=10.0, zeros="allow", preset="statfi-business",
        sources=("Statistics Finland tabulated-data guidelines §5: threshold 3 plus dominance / p%",),
    ),
    # Source: SACRO / ACRO default risk appetite (acro/default.yaml): safe_threshold 10,
    # safe_nk (2, 0.90), safe_pratio_p 0.10, zeros_are_disclosive, safe_dof_threshold 10.
    "sacro": Rules(
        threshold=10, dominance=(2, 90.0), p=10.0, zeros="suppress", dof=10, preset="sacro",
        sources=("SACRO / ACRO default.yaml: threshold 10, NK(2,90), p 10%, zeros disclosive, dof 10",),
    ),
    # Source: OpenSAFELY output-checking rules: counts of 7 or fewer are redacted, all
    # other counts are rounded to the nearest 5.
    "opensafely": Rules(
        threshold=8, zeros="allow", round_to=5, preset="opensafely",
        sources=("OpenSAFELY output checking: redact counts <= 7, round the others to 5",),
    ),
}

DEFAULT_PRESET = "humanitarian"


def preset(name: str) -> Rules:
    """The rules of a named preset; an unknown name is an error listing the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise RulesError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}") from None


# ---------------------------------------------------------------- parsing key=value
_FIELDS = {f.name for f in dataclasses.fields(Rules)} - {"sources", "preset"}
_ALIASES = {"k": "dominance", "nk": "dominance", "p_percent": "p", "unit_id": "unit"}


def _parse_none(value: str) -> bool:
    return value.strip().lower() in ("none", "off", "no", "false", "")


def _finite(key: str, value: Any, what: str) -> float:
    """``value`` as a finite float, or an error naming ``key``.

    ``inf``, ``1e400`` (which overflows to inf), ``nan`` and booleans are refused here,
    because later comparisons with them are silently false (a NaN threshold would flag
    nothing) and ``int(inf)`` raises an error that names no rule.
    """
    if isinstance(value, bool):
        raise RulesError(f"{key} must be {what}, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise RulesError(f"{key} must be {what}, got {value!r}") from None
    if not math.isfinite(number):
        raise RulesError(f"{key} must be {what}, got {value!r} (not a finite number)")
    return number


def parse_value(key: str, value: Any) -> Any:
    """Turn one configured value (a string from a magic, or a TOML value) into a rule value."""
    if key in ("threshold", "row_threshold", "dof", "round_to"):
        if value is None or (isinstance(value, str) and _parse_none(value)):
            if key == "threshold":
                raise RulesError("threshold cannot be switched off")
            return None
        number = _finite(key, value, "a whole number")
        if number != int(number):
            raise RulesError(f"{key} must be a whole number, got {value!r}")
        return int(number)
    if key in ("p", "protection"):
        if value is None or (isinstance(value, str) and _parse_none(value)):
            if key == "protection":
                raise RulesError("protection cannot be switched off; use protection=0")
            return None
        return _finite(key, str(value).rstrip("%") if isinstance(value, str) else value, "a percentage")
    if key == "dominance":
        if value is None or (isinstance(value, str) and _parse_none(value)):
            return None
        parts = value if isinstance(value, list | tuple) else str(value).replace(";", ",").split(",")
        if len(parts) != 2:
            raise RulesError(f"dominance must be given as n,k (e.g. dominance=1,85), got {value!r}")
        n = _finite("dominance", parts[0], "given as n,k (e.g. dominance=1,85)")
        k_raw = parts[1]
        k = _finite("dominance", k_raw.rstrip("%") if isinstance(k_raw, str) else k_raw,
                    "given as n,k (e.g. dominance=1,85)")
        if n != int(n):
            raise RulesError(f"dominance n must be a whole number, got {value!r}")
        return (int(n), k)
    if key == "structural_zeros":
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(";") if v.strip())
        return tuple(str(v) for v in value)
    if key == "categories":
        if value is None or (isinstance(value, str) and _parse_none(value)):
            return ()
        if isinstance(value, str):
            return tuple(v.strip() for v in value.replace(";", ",").split(",") if v.strip())
        return tuple(str(v) for v in value)
    if key == "zeros":
        # zeros=allow | suppress | a list of structural zeros "A/x;B/y" (suppress the others)
        return str(value).strip()
    if key == "singletons":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "on", "yes", "1"):
            return True
        if text in ("false", "off", "no", "0"):
            return False
        raise RulesError(f"singletons must be on or off, got {value!r}")
    if key == "unit":
        if value is None or (isinstance(value, str) and _parse_none(value)):
            return None
        return str(value)
    return value


def apply_settings(base: Rules, settings: Mapping[str, Any]) -> Rules:
    """Rules with ``settings`` applied on top of ``base``; ``preset=`` is applied first."""
    settings = dict(settings)
    rules = base
    if "preset" in settings:
        rules = preset(str(settings.pop("preset")))
    changes: dict[str, Any] = {}
    for raw_key, raw_value in settings.items():
        key = _ALIASES.get(raw_key, raw_key)
        if key not in _FIELDS:
            raise RulesError(f"unknown rule {raw_key!r}; known rules: {', '.join(sorted(_FIELDS))}")
        value = parse_value(key, raw_value)
        if key == "zeros" and value not in ZERO_POLICIES:
            # a list of structural zeros ("M/Pregnancy;F/Prostate"): suppress every other empty cell
            if "/" not in str(value):
                raise RulesError(
                    f"zeros must be allow, suppress or a list of structural zeros such as "
                    f"'M/Pregnancy;F/Prostate' (use structural_zeros= for one-way tables), got {value!r}")
            changes["structural_zeros"] = parse_value("structural_zeros", value)
            value = "suppress"
        changes[key] = value
    if not changes:
        return rules
    return rules.replace(**changes)


def parse_assignments(text: str) -> dict[str, str]:
    """Parse ``threshold=5 dominance=1,85 unit=household_id`` into a dict (order kept)."""
    out: dict[str, str] = {}
    for token in text.split():
        if "=" not in token:
            raise RulesError(f"expected key=value, got {token!r} (e.g. threshold=5)")
        key, value = token.split("=", 1)
        if not key:
            raise RulesError(f"expected key=value, got {token!r}")
        out[key.strip()] = value.strip()
    return out


# ---------------------------------------------------------------- discovery
class ConfigError(RulesError):
    """A configuration file that cannot be used; the message names the file (and line)."""

    def __init__(self, message: str, path: Path | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


def _read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; any failure is a :class:`ConfigError` naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found", path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({type(exc).__name__}: {exc})", path) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        line = int(found.group(1)) if found else None
        raise ConfigError(f"{path}: not valid TOML ({exc})", path, line) from None


def _section(path: Path, data: dict[str, Any], pyproject: bool) -> dict[str, Any] | None:
    """The sdc_magic settings in a parsed file (``[tool.sdc_magic]`` or the top level)."""
    tool = data.get("tool", {})
    section = tool.get("sdc_magic") if isinstance(tool, dict) else None
    if section is None:
        return None if pyproject else dict(data)
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [tool.sdc_magic] must be a table of settings, got {section!r}", path)
    return dict(section)


def find_config_file(start: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The first project configuration found from ``start`` upward, with its settings.

    Raises :class:`ConfigError` (naming the file and, for TOML syntax, the line) when the
    file named by ``SDC_MAGIC_CONFIG`` is missing or any file found cannot be parsed.
    """
    env = os.environ.get("SDC_MAGIC_CONFIG")
    if env is not None:
        if not env.strip():
            return None
        path = Path(env)
        if not path.is_file():
            raise ConfigError(f"SDC_MAGIC_CONFIG names {path}, which is not a file", path)
        settings = _section(path, _read_toml(path), pyproject=False)
        return path, settings or {}
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        sdc = folder / "sdc.toml"
        if sdc.is_file():
            return sdc, _section(sdc, _read_toml(sdc), pyproject=False) or {}
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            section = _section(pyproject, _read_toml(pyproject), pyproject=True)
            if section is not None:
                return pyproject, section
    return None


def load_rules(start: Path | None = None) -> tuple[Rules, Path | None]:
    """The rules pinned by the project, or the default preset; and where they came from.

    A bad file raises :class:`ConfigError` naming it; :func:`load_config` is the variant
    that never raises (used when the extension loads).
    """
    found = find_config_file(start)
    if found is None:
        return PRESETS[DEFAULT_PRESET], None
    path, settings = found
    settings = dict(settings)
    _memory_setting(path, settings.pop("memory_mb", None))
    return _apply_at(path, settings)


#: Rules used when the project's configuration cannot be read: the strictest value of
#: every rule across the presets, so that a broken file can only hide more, never less.
#: Dominance (2, 85) flags every cell that NK(1,85) or NK(2,90) would flag.
STRICT = Rules(
    threshold=10, zeros="suppress", row_threshold=10, dominance=(2, 85.0), p=10.0, protection=10.0,
    dof=10, extremes="suppress", singletons=True, preset="strict (configuration error)",
    sources=("strictest value of each rule across the presets (configuration could not be used)",),
)


@dataclass(frozen=True)
class LoadedConfig:
    """What the extension loads: the rules, where they came from, and what was wrong."""

    rules: Rules
    path: Path | None
    problems: tuple[str, ...] = ()
    memory_mb: float | None = None


def load_config(start: Path | None = None) -> LoadedConfig:
    """The project's rules, never raising: a bad configuration gives :data:`STRICT`.

    Loading must never leave tables unprotected, and a typo must never loosen the rules,
    so any error falls back to the strictest rules (keeping a valid ``unit`` and a higher
    ``threshold`` from the file, which can only make checking stricter) and reports the
    file and line in ``problems``.
    """
    path: Path | None = None
    settings: dict[str, Any] = {}
    try:
        found = find_config_file(start)
        if found is None:
            return LoadedConfig(PRESETS[DEFAULT_PRESET], None)
        path, settings = found
        settings = dict(settings)
        memory = _memory_setting(path, settings.pop("memory_mb", None))
        rules, _ = _apply_at(path, settings)
        return LoadedConfig(rules, path, (), memory)
    except ConfigError as exc:
        return LoadedConfig(_strict_with(settings), exc.path or path, (str(exc),))
    except Exception as exc:  # any failure must still load the strictest rules
        where = str(path) if path else "configuration"
        return LoadedConfig(_strict_with(settings), path, (f"{where}: {type(exc).__name__}: {exc}",))


def _apply_at(path: Path, settings: Mapping[str, Any]) -> tuple[Rules, Path]:
    try:
        return apply_settings(PRESETS[DEFAULT_PRESET], settings), path
    except RulesError as exc:
        key = _key_in(str(exc), settings)
        line = _line_of(path, key) if key else None
        where = f"{path}, line {line}" if line else str(path)
        raise ConfigError(f"{where}: {exc}", path, line) from None


def _memory_setting(path: Path, value: Any) -> float | None:
    if value is None:
        return None
    number = _finite("memory_mb", value, "a number of megabytes")
    if number <= 0:
        raise ConfigError(f"{path}: memory_mb must be > 0, got {value!r}", path, _line_of(path, "memory_mb"))
    return number


def _strict_with(settings: Mapping[str, Any]) -> Rules:
    """:data:`STRICT`, with the file's unit and a higher threshold when those are valid."""
    rules = STRICT
    unit = settings.get("unit", settings.get("unit_id"))
    if isinstance(unit, str) and unit.strip():
        rules = dataclasses.replace(rules, unit=unit.strip())
    try:
        threshold = parse_value("threshold", settings["threshold"]) if "threshold" in settings else None
        if isinstance(threshold, int) and threshold > rules.threshold:
            rules = dataclasses.replace(rules, threshold=threshold)
    except (RulesError, ValueError):
        pass
    return rules


def _key_in(message: str, settings: Mapping[str, Any]) -> str | None:
    """The configured key an error message is about (its first word, or a quoted name)."""
    for key in settings:
        name = _ALIASES.get(key, key)
        if message.startswith((f"{name} ", f"unknown {name} ")) or f"{key!r}" in message:
            return str(key)
    return None


def _line_of(path: Path, key: str) -> int | None:
    """The 1-based line of the file where ``key`` is set (for the message)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith(key) and stripped[len(key):].lstrip().startswith("="):
            return number
    return None


def known_keys() -> Iterable[str]:
    """The rule names accepted by ``%sdc rules`` and configuration files."""
    return sorted(_FIELDS)
