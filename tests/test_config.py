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
    with pytest.raises(RulesError, match=r"sdc\.toml, line 1: threshold"):
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


# ------------------------------------------------------------------ issue 12 items 2 and 10
@pytest.mark.parametrize("text,key", [
    ("threshold=inf", "threshold"), ("threshold=1e400", "threshold"), ("threshold=nan", "threshold"),
    ("dominance=nan,85", "dominance"), ("dominance=1,nan", "dominance"), ("dominance=inf,85", "dominance"),
    ("p=nan", "p"), ("p=inf", "p"), ("protection=nan", "protection"), ("protection=1e400", "protection"),
    ("row_threshold=nan", "row_threshold"), ("dof=inf", "dof"), ("round_to=nan", "round_to"),
])
def test_non_finite_values_are_errors_naming_the_key(text: str, key: str) -> None:
    with pytest.raises(RulesError, match=rf"^{key} "):
        apply_settings(preset("humanitarian"), parse_assignments(text))


@pytest.mark.parametrize("settings,key", [
    ({"threshold": float("inf")}, "threshold"), ({"threshold": float("nan")}, "threshold"),
    ({"threshold": True}, "threshold"), ({"p": float("nan")}, "p"), ({"dominance": [float("nan"), 85]}, "dominance"),
])
def test_non_finite_python_values_are_errors_naming_the_key(settings: dict, key: str) -> None:
    with pytest.raises(RulesError, match=rf"^{key} "):
        apply_settings(preset("humanitarian"), settings)


def test_rules_refuse_nan_directly() -> None:
    for bad in ({"protection": float("nan")}, {"p": float("inf")}, {"dominance": (1, float("nan"))}):
        with pytest.raises(RulesError, match=next(iter(bad))):
            Rules(**bad)


def test_toml_syntax_error_names_the_file_and_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SDC_MAGIC_CONFIG", raising=False)
    (tmp_path / "sdc.toml").write_text('preset = "sacro"\nthreshold = = 5\n')
    with pytest.raises(RulesError, match=r"sdc\.toml.*line 2"):
        load_rules(tmp_path)


def test_missing_env_config_is_an_error_naming_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SDC_MAGIC_CONFIG", str(tmp_path / "gone.toml"))
    with pytest.raises(RulesError, match=r"gone\.toml"):
        load_rules(tmp_path)


def test_load_config_falls_back_to_the_strictest_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sdc_magic.config import STRICT, load_config

    monkeypatch.delenv("SDC_MAGIC_CONFIG", raising=False)
    (tmp_path / "sdc.toml").write_text('preset = "insee"\nthreshold = = 5\n')
    loaded = load_config(tmp_path)
    assert loaded.rules == STRICT
    assert len(loaded.problems) == 1 and "sdc.toml" in loaded.problems[0] and "line 2" in loaded.problems[0]
    # strictest of every preset: nothing any preset would hide is published under STRICT
    for rules in PRESETS.values():
        assert STRICT.threshold >= rules.threshold
        assert STRICT.protection >= rules.protection
        assert STRICT.zeros == "suppress" and STRICT.extremes == "suppress"
        if rules.dominance:
            n, k = rules.dominance
            assert STRICT.dominance[0] >= n and STRICT.dominance[1] <= k
        if rules.p is not None:
            assert STRICT.p >= rules.p
        if rules.row_threshold:
            assert STRICT.row_threshold >= rules.row_threshold


def test_load_config_keeps_a_valid_unit_and_a_higher_threshold(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from sdc_magic.config import STRICT, load_config

    monkeypatch.delenv("SDC_MAGIC_CONFIG", raising=False)
    (tmp_path / "sdc.toml").write_text('unit = "household_id"\nthreshold = 20\np = "lots"\n')
    loaded = load_config(tmp_path)
    assert (loaded.rules.unit, loaded.rules.threshold, loaded.rules.zeros) == ("household_id", 20, "suppress")
    assert loaded.rules.dominance == STRICT.dominance
    assert "line 3" in loaded.problems[0] and loaded.problems[0].count("p must") == 1


@pytest.mark.parametrize("content", [
    "[tool.sdc_magic]\nthreshold = inf\n", "[tool.sdc_magic]\nthreshold = nan\n",
    "[tool.sdc_magic]\ndominance = [nan, 85]\n", "[tool]\nsdc_magic = 5\n", "[tool.sdc_magic]\nnonsense = 1\n",
    "[tool.sdc_magic]\npreset = \"nope\"\n",
])
def test_bad_pyproject_section_loads_strict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str) -> None:
    from sdc_magic.config import STRICT, load_config

    monkeypatch.delenv("SDC_MAGIC_CONFIG", raising=False)
    (tmp_path / "pyproject.toml").write_text(content)
    loaded = load_config(tmp_path)
    assert loaded.rules == STRICT
    assert loaded.problems and "pyproject.toml" in loaded.problems[0]


def test_load_config_missing_env_file_and_good_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sdc_magic.config import STRICT, load_config

    monkeypatch.setenv("SDC_MAGIC_CONFIG", str(tmp_path / "missing.toml"))
    loaded = load_config(tmp_path)
    assert loaded.rules == STRICT and "missing.toml" in loaded.problems[0]
    (tmp_path / "missing.toml").write_text('preset = "sacro"\nmemory_mb = 64\n')
    loaded = load_config(tmp_path)
    assert (loaded.rules, loaded.problems, loaded.memory_mb) == (PRESETS["sacro"], (), 64.0)
    monkeypatch.setenv("SDC_MAGIC_CONFIG", "")
    assert load_config(tmp_path).rules == PRESETS["humanitarian"]


@pytest.mark.parametrize("line,key", [("threshold=inf", "threshold"), ("threshold=1e400", "threshold"),
                                      ("dominance=nan,85", "dominance"), ("p=nan", "p")])
def test_sdc_rules_magic_names_the_key_of_a_non_finite_value(sdc, line: str, key: str) -> None:
    from sdc_magic.jupyter.extension import session

    before = session().rules
    with pytest.raises(RulesError, match=rf"%sdc rules: {key} "):
        sdc.magic(f"sdc rules {line}")
    assert session().rules == before  # nothing changed
