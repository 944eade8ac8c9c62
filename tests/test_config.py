"""Rules, presets and configuration discovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdc_magic import rules as rules_module
from sdc_magic.config import PRESETS, Rules, RulesError, apply_settings, load_rules, parse_assignments, preset


def test_every_preset_cites_its_source() -> None:
    assert set(PRESETS) == {"humanitarian", "insee", "statfi-personal", "statfi-business", "sacro", "opensafely"}
    for name, rules in PRESETS.items():
        assert rules.sources, name
        assert rules.preset == name


def test_presets_have_the_published_values() -> None:
    assert preset("humanitarian").threshold == 5
    insee = preset("insee")
    assert (insee.threshold, insee.dominance, insee.protection) == (3, (1, 85.0), 10.0)
    assert (preset("statfi-personal").threshold, preset("statfi-personal").row_threshold) == (3, 10)
    sacro = preset("sacro")
    assert (sacro.threshold, sacro.dominance, sacro.p, sacro.zeros, sacro.dof) == (10, (2, 90.0), 10.0, "suppress", 10)
    assert (preset("opensafely").threshold, preset("opensafely").round_to) == (8, 5)


def test_settings_parse_and_validate() -> None:
    base = preset("humanitarian")
    rules = apply_settings(base, parse_assignments(
        "threshold=5 dominance=1,85 p=10 protection=10 zeros=allow unit=household_id dof=10 row_threshold=10"))
    assert rules.dominance == (1, 85.0) and rules.unit == "household_id" and rules.row_threshold == 10
    assert apply_settings(base, {"zeros": "M/Pregnancy;F/Prostate"}).structural_zeros == ("M/Pregnancy", "F/Prostate")
    assert apply_settings(base, {"zeros": "M/Pregnancy"}).zeros == "suppress"


@pytest.mark.parametrize("text,key", [
    ("threshold=abc", "threshold"), ("nonsense=1", "nonsense"), ("dominance=3", "dominance"),
    ("p=150", "p"), ("zeros=maybe", "zeros"), ("threshold=0", "threshold"), ("threshold=2.5", "threshold"),
])
def test_bad_settings_name_the_key(text: str, key: str) -> None:
    with pytest.raises(RulesError, match=key):
        apply_settings(preset("humanitarian"), parse_assignments(text))


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(RulesError, match="humanitarian"):
        preset("nope")


def test_discovery_sdc_toml_then_pyproject(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SDC_MAGIC_CONFIG", raising=False)
    team = tmp_path / "team"
    (team / "notebooks").mkdir(parents=True)
    (team / "pyproject.toml").write_text('[tool.sdc_magic]\npreset = "sacro"\nthreshold = 12\n')
    rules, source = load_rules(team / "notebooks")
    assert (rules.threshold, rules.zeros, source) == (12, "suppress", team / "pyproject.toml")
    (team / "notebooks" / "sdc.toml").write_text('preset = "insee"\nunit = "firm_id"\n')
    rules, source = load_rules(team / "notebooks")
    assert (rules.threshold, rules.unit, source.name) == (3, "firm_id", "sdc.toml")
    (team / "notebooks" / "sdc.toml").write_text('threshold = "many"\n')
    with pytest.raises(RulesError, match=r"sdc\.toml: threshold"):
        load_rules(team / "notebooks")


def test_env_var_overrides_and_empty_turns_files_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sdc.toml").write_text('preset = "sacro"\n')
    cfg = tmp_path / "tre.toml"
    cfg.write_text('preset = "statfi-personal"\n')
    monkeypatch.setenv("SDC_MAGIC_CONFIG", str(cfg))
    assert load_rules(tmp_path)[0].preset == "statfi-personal"
    monkeypatch.setenv("SDC_MAGIC_CONFIG", "")
    assert load_rules(tmp_path) == (PRESETS["humanitarian"], None)


def test_rules_are_immutable_and_recordable() -> None:
    rules = Rules()
    with pytest.raises(AttributeError):
        rules.threshold = 3  # type: ignore[misc]
    record = rules.as_dict()
    assert record["threshold"] == 5 and "sources" not in record
    assert rules_module.assess  # the rules module is importable without IPython
