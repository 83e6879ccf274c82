"""EnvConfig TOML loading: what is refused, and that the message says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.config.env_config import CONFIG_ENV_VAR, load_env_config
from adapter.errors import EnvConfigError

V1 = '[taskset]\nid = "arith-v1"\n\n[harness]\nid = "null"\n\n[harness.runtime]\ntype = "subprocess"\n'

REFUSED = {
    # id: (file name, content, message)
    "not_toml_suffix": ("env.json", V1, "must be a .toml file"),
    "invalid_toml": ("env.toml", "[taskset\n", "not valid TOML"),
    "v0_legacy": ("env.toml", 'id = "gsm8k"\n[args]\nn = 1\n', "V0 \\(legacy\\)"),
    "no_taskset": ("env.toml", '[harness]\nid = "null"\n', "no `\\[taskset\\]`"),
    "responses_harness": ("env.toml", V1.replace('"null"', '"codex"'), "Responses dialect"),
    "responses_harness_b_shape": (
        "env.toml", '[taskset]\nid = "x"\n[agent.harness]\nid = "codex"\n', "Responses dialect"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_refused_configs(case: str, tmp_path: Path) -> None:
    name, content, message = REFUSED[case]
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(EnvConfigError, match=message):
        load_env_config(path, environ={})


@pytest.mark.parametrize("name", ["env.TOML", "env.Toml"])
def test_the_suffix_is_case_insensitive_as_miles_checks_it(name: str, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text(V1)
    assert load_env_config(path, environ={}).path == path


def test_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EnvConfigError, match="does not exist"):
        load_env_config(tmp_path / "absent.toml", environ={})


def test_unset_config_names_both_ways_to_set_it() -> None:
    with pytest.raises(EnvConfigError, match=f"--verifiers-config.*{CONFIG_ENV_VAR}"):
        load_env_config(None, environ={})


def test_config_from_the_environment_variable(tmp_path: Path) -> None:
    path = tmp_path / "env.toml"
    path.write_text(V1)
    loaded = load_env_config(None, environ={CONFIG_ENV_VAR: str(path)})
    assert loaded.path == path
    assert loaded.data["harness"]["id"] == "null"
    assert loaded.env_id == "arith-v1"


def test_explicit_path_wins_over_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "env.toml"
    path.write_text(V1)
    loaded = load_env_config(path, environ={CONFIG_ENV_VAR: str(tmp_path / "other.toml")})
    assert loaded.path == path


def test_root_must_be_a_table() -> None:
    from adapter.config.env_config import check_env_config_data

    with pytest.raises(EnvConfigError, match="root must be a TOML table"):
        check_env_config_data([{"taskset": {"id": "x"}}])


@pytest.mark.parametrize(
    ("content", "generation", "message"),
    [(V1, "B", "written for verifiers 0.2.x"),
     ('[taskset]\nid = "x"\n[agent.harness]\nid = "null"\n', "A", "written for verifiers 0.3.x/0.4.0")],
    ids=["a_config_on_b", "b_config_on_a"],
)
def test_a_config_for_the_other_generation_says_which_it_is_for(content, generation, message, tmp_path) -> None:
    from adapter.episodes.generations import SPECS

    path = tmp_path / "env.toml"
    path.write_text(content)
    with pytest.raises(EnvConfigError, match=message):
        SPECS[generation].check_config(load_env_config(path, environ={}))


@pytest.mark.parametrize("generation", ["A", "B"])
def test_a_shapeless_config_fits_either_generation(generation, tmp_path) -> None:
    from adapter.episodes.generations import SPECS

    path = tmp_path / "env.toml"
    path.write_text('[taskset]\nid = "x"\n')
    SPECS[generation].check_config(load_env_config(path, environ={}))


@pytest.mark.parametrize("generation", ["A", "B"])
def test_every_bundled_config_has_its_generations_shape(generation) -> None:
    from adapter.episodes.bundled import BUNDLED_IDS
    from adapter.episodes.generations import SPECS, shape_of

    spec = SPECS[generation]
    for taskset in BUNDLED_IDS:
        assert shape_of(load_env_config(spec.bundled_config(taskset), environ={}).data) is spec
