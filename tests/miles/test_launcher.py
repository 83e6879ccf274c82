"""The Miles launcher: one merged environment decides the entry point and is what workers get."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapter.cli.entry import main
from adapter.errors import ConfigurationError
from adapter.miles.flavor import LEGACY_FLAG, REFACTOR_FLAG
from adapter.miles.launcher import ADAPTER_ROOT, CLASS_PATH, JOB_CONFIG_VAR, LEGACY_PATH, parse_env_vars
from adapter.miles.launcher import miles_command as launcher_miles_command


def miles_command(**kwargs):
    """The launcher for Miles main unless a test names another (no Miles is importable here)."""
    return launcher_miles_command(**{"miles_version": "main", **kwargs})


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "env.toml"
    path.write_text('[taskset]\nid = "arith-v1"\n[harness]\nid = "null"\n')
    return str(path)


def workers_env(argv: list[str]) -> dict[str, str]:
    (runtime,) = [a for a in argv if a.startswith("--runtime-env-json=")]
    return json.loads(runtime.split("=", 1)[1])["env_vars"]


# (ambient flag, explicit flag) → the entry point; None = unset
SELECTION = [
    (None, None, CLASS_PATH),
    ("1", None, LEGACY_PATH),
    ("0", None, CLASS_PATH),
    (None, "1", LEGACY_PATH),
    ("1", "0", CLASS_PATH),  # explicit wins over ambient
    ("0", "1", LEGACY_PATH),
    (" 1", None, LEGACY_PATH),  # int(" 1") == 1, as Miles reads it
]


@pytest.mark.parametrize(("ambient_flag", "explicit_flag", "entry"), SELECTION)
def test_selection_and_workers_environment_always_agree(config, ambient_flag, explicit_flag, entry) -> None:
    ambient = {} if ambient_flag is None else {LEGACY_FLAG: ambient_flag}
    explicit = {} if explicit_flag is None else {LEGACY_FLAG: explicit_flag}
    launch = miles_command(config=config, hf_checkpoint="/ckpt/q", ambient=ambient, extra_env_vars=explicit)
    assert launch.rollout_function_path == entry
    assert workers_env(launch.argv) == launch.env == launch.workers_env
    expected_flag = explicit_flag if explicit_flag is not None else (ambient_flag if ambient_flag is not None else "0")
    assert launch.env[LEGACY_FLAG] == expected_flag


def test_workers_can_import_the_adapter_and_the_env_sources(config, tmp_path) -> None:
    sources = tmp_path / "tasksets"
    sources.mkdir()
    launch = miles_command(config=config, hf_checkpoint="/ckpt/q", env_source_dirs=[str(sources)],
                           ambient={"PYTHONPATH": "/ambient"}, extra_env_vars={"PYTHONPATH": "/explicit"})
    assert launch.env["PYTHONPATH"].split(":") == ["/explicit", "/ambient", ADAPTER_ROOT, str(sources)]
    assert (Path(ADAPTER_ROOT) / "adapter" / "__init__.py").is_file()
    assert launch.env["VERIFIERS_CONFIG"] == str(Path(config).resolve())


def test_the_taskset_replaces_the_prompt_dataset(config) -> None:
    argv = miles_command(config=config, hf_checkpoint="/ckpt/q", ambient={}).argv
    assert "--disable-rollout-global-dataset" in argv


def test_eval_gets_the_placeholder_eval_prompt_data_only_when_eval_is_on(config) -> None:
    on = miles_command(config=config, hf_checkpoint="/c", ambient={}, miles_args=["--eval-interval", "5"]).argv
    off = miles_command(config=config, hf_checkpoint="/c", ambient={}).argv
    assert "--eval-prompt-data" in on and "--eval-prompt-data" not in off


@pytest.mark.parametrize(
    ("text", "parsed"),
    [('{"A": "1", "B": 2}', {"A": "1", "B": "2"}), ("A=1,B=x=y", {"A": "1", "B": "x=y"}), ("", {})],
)
def test_extra_env_vars_formats(text, parsed) -> None:
    assert parse_env_vars(text) == parsed


def test_malformed_extra_env_vars_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="KEY=VALUE"):
        parse_env_vars("A")


def test_cli_prints_the_command(config, capsys, monkeypatch) -> None:
    monkeypatch.delenv(LEGACY_FLAG, raising=False)
    assert main(["miles-command", "--config", config, "--hf-checkpoint", "/ckpt/q", "--miles-version", "main",
                 "--extra-env-vars", f"{LEGACY_FLAG}=1", "--", "--rollout-batch-size", "4"]) == 0
    out = capsys.readouterr().out
    assert LEGACY_PATH in out and "--rollout-batch-size 4" in out and f"{LEGACY_FLAG}=1" in out


def test_cli_refuses_a_missing_config(capsys) -> None:
    assert main(["miles-command", "--config", "/nope.toml", "--hf-checkpoint", "/c"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_bundled_config_brings_its_tasksets_dir_and_says_so(capsys) -> None:
    from adapter.cli.entry import main
    from adapter.episodes.generations import SPECS

    for spec in SPECS.values():
        launch = miles_command(config=str(spec.bundled_config("arith-v1")), hf_checkpoint="/c", ambient={})
        assert launch.added_sources == (str(spec.bundled_tasksets().resolve()),)
        assert str(spec.bundled_tasksets().resolve()) in launch.env["PYTHONPATH"].split(":")
    repo = Path(__file__).resolve().parents[2]
    assert main(["miles-command", "--config", str(repo / "fixtures/envs/arith-v1.toml"), "--hf-checkpoint", "/c",
                 "--miles-version", "main"]) == 0
    captured = capsys.readouterr()
    tasksets = str(SPECS["A"].bundled_tasksets().resolve())
    assert f"added the bundled tasksets directory {tasksets}" in captured.err
    assert tasksets in captured.out


def test_a_users_own_config_adds_nothing(config) -> None:
    assert miles_command(config=config, hf_checkpoint="/c", ambient={}).added_sources == ()


HOSTILE_VALUES = ["$(touch pwned)", "`touch pwned`", "a'b\"c", "x; touch pwned", "line\nbreak", "*", "~", "$HOME",
                  "", " spaced ", "\\"]


@pytest.mark.parametrize(
    "key", ["touch X; B", "A B", "$(touch X)", "1A", "A-B", "", "Ä"],
    ids=["semicolon", "space", "subst", "leading_digit", "dash", "empty", "non_ascii"],
)
@pytest.mark.parametrize("form", ["json", "pairs", "mapping"])
def test_a_key_that_is_not_a_variable_name_is_refused(config, key, form) -> None:
    with pytest.raises(ConfigurationError, match=r"not an environment variable name|not KEY=VALUE"):
        if form == "json":
            parse_env_vars(json.dumps({key: "v"}))
        elif form == "pairs":
            parse_env_vars(f"{key}=v")
        else:
            miles_command(config=config, hf_checkpoint="/c", ambient={}, extra_env_vars={key: "v"})


def test_the_printed_line_runs_exactly_the_command_with_hostile_values(config, tmp_path) -> None:
    import shlex
    import subprocess

    explicit = {f"V{i}": value for i, value in enumerate(HOSTILE_VALUES)}
    launch = miles_command(config=config, hf_checkpoint="/ckpt/$(touch pwned)", ambient={},
                           extra_env_vars=explicit, miles_args=["--x", "`touch pwned`;"])
    line = launch.shell()
    assert subprocess.run(["bash", "-n", "-c", line], check=False).returncode == 0
    words = shlex.split(line)
    assert words[len(launch.env):] == launch.argv
    names = " ".join(sorted(launch.env))
    # `ray` becomes a function printing each variable's value, then its arguments, NUL-separated.
    script = f"ray() {{ for k in {names}; do printf '%s\\0' \"${{!k}}\"; done; printf '%s\\0' \"$@\"; }}\n{line}"
    out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, check=True).stdout
    printed = out.decode().split("\0")[:-1]
    assert printed == [launch.env[k] for k in sorted(launch.env)] + launch.argv[1:]
    assert not (tmp_path / "pwned").exists()


def test_the_printed_pythonpath_never_makes_the_adapter_importable_as_miles(config, tmp_path) -> None:
    """A Python started with the printed environment imports Miles or nothing as `miles`, and
    imports the adapter's binding under its own name (`adapter.miles`), as every Ray worker must."""
    import subprocess
    import sys

    launch = miles_command(config=config, hf_checkpoint="/c", ambient={})
    probe = ("import importlib.util, json; spec = importlib.util.find_spec('miles'); "
             "import adapter.miles.binding as b; "
             "print(json.dumps([None if spec is None else spec.origin, b.__file__]))")
    env = {"PATH": "/usr/bin:/bin", **launch.workers_env}
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True).stdout
    miles_origin, binding = json.loads(out)
    assert miles_origin is None or not miles_origin.startswith(str(Path(ADAPTER_ROOT) / "adapter")), miles_origin
    assert binding == str(Path(ADAPTER_ROOT) / "adapter" / "miles" / "binding.py")


# miles-rl 0.0.2: (ambient, explicit) selector variables → the entry point and the variable exported
SELECTION_002 = [
    ({}, {}, CLASS_PATH, "1"),  # the class ABI, opted into
    ({LEGACY_FLAG: "1"}, {}, LEGACY_PATH, "0"),  # the adapter's one knob, translated
    ({}, {LEGACY_FLAG: "0"}, CLASS_PATH, "1"),
    ({REFACTOR_FLAG: "0"}, {}, LEGACY_PATH, "0"),  # 0.0.2's own variable is honoured
    ({REFACTOR_FLAG: "0"}, {REFACTOR_FLAG: "1"}, CLASS_PATH, "1"),  # explicit wins
]


@pytest.mark.parametrize(("ambient", "explicit", "entry", "refactor"), SELECTION_002)
def test_miles_rl_002_gets_its_own_opt_in_variable(config, ambient, explicit, entry, refactor) -> None:
    launch = miles_command(config=config, hf_checkpoint="/c", ambient=ambient, extra_env_vars=explicit,
                           miles_version="0.0.2")
    assert launch.rollout_function_path == entry
    assert launch.workers_env[REFACTOR_FLAG] == refactor
    assert workers_env(launch.argv) == launch.workers_env


@pytest.mark.parametrize("value", ["true", "yes", "", "on", "1.0"])
@pytest.mark.parametrize("flavor", ["main", "0.0.2"])
def test_a_selector_value_miles_cannot_read_is_refused_naming_it(config, value, flavor) -> None:
    expected = rf"{LEGACY_FLAG}={value!r}.*int\(\).*{LEGACY_FLAG}=0 or {LEGACY_FLAG}=1"
    with pytest.raises(ConfigurationError, match=expected):
        miles_command(config=config, hf_checkpoint="/c", ambient={LEGACY_FLAG: value}, miles_version=flavor)


def test_contradicting_selectors_on_002_and_the_refactor_variable_on_main_are_refused(config) -> None:
    with pytest.raises(ConfigurationError, match="disagree"):
        miles_command(config=config, hf_checkpoint="/c", ambient={LEGACY_FLAG: "1", REFACTOR_FLAG: "1"},
                      miles_version="0.0.2")
    with pytest.raises(ConfigurationError, match="no longer reads it"):
        miles_command(config=config, hf_checkpoint="/c", ambient={REFACTOR_FLAG: "1"}, miles_version="main")


def test_without_an_importable_miles_the_version_must_be_named(config, capsys) -> None:
    with pytest.raises(ConfigurationError, match="--miles-version main"):
        launcher_miles_command(config=config, hf_checkpoint="/c", ambient={})
    assert main(["miles-command", "--config", config, "--hf-checkpoint", "/c"]) == 2
    assert "--miles-version" in capsys.readouterr().err


def test_a_cluster_address_runs_the_driver_directly_with_the_workers_environment(config) -> None:
    launch = miles_command(config=config, hf_checkpoint="/c", ambient={}, ray_address="127.0.0.1:6379",
                           train_script="/src/miles/train.py", python="/venv/bin/python")
    assert launch.argv[:2] == ["/venv/bin/python", "/src/miles/train.py"]
    assert launch.env["RAY_ADDRESS"] == "127.0.0.1:6379"
    runtime = json.loads(launch.env[JOB_CONFIG_VAR])["runtime_env"]["env_vars"]
    assert runtime == launch.workers_env and JOB_CONFIG_VAR not in runtime
    assert {k: v for k, v in launch.env.items() if k not in ("RAY_ADDRESS", JOB_CONFIG_VAR)} == runtime


@pytest.mark.parametrize(
    ("user_args", "added"),
    [([], True), (["--router-retry-max-retries", "2"], False), (["--router-disable-retries"], False),
     (["--router-policy", "round_robin"], True)],
)
def test_miles_router_retries_are_disabled_unless_the_user_set_them(config, user_args, added) -> None:
    argv = miles_command(config=config, hf_checkpoint="/c", ambient={}, miles_args=user_args).argv
    assert (argv.count("--router-disable-retries") == 1) == (added or "--router-disable-retries" in user_args)
    ours = argv[argv.index("--hf-checkpoint") + 2:len(argv) - len(user_args)]
    assert ours == (["--router-disable-retries"] if added else [])
