"""Miles as it is about to be: its open pull requests' own files, importable as a `miles` package.

`fixtures/miles_next/` holds, verbatim, the files of Miles `main` at 31f1ca961 that define the
rollout contract (`miles/utils/types.py`, `miles/rollout/base_types.py`,
`miles/rollout/inference_rollout/compatibility.py`, `miles/utils/async_utils.py`) and, per open
pull request, the files its head commit changes among them or adds (`pr<N>-<commit>/…`; the
folder names the PR and its head commit; Miles' Apache-2.0 licence beside them). `write_tree(root,
flavour)` lays out `main` with one PR's files over it (that PR merged into `main`, as far as these
files go) and makes it importable as `miles`.

Two modules the vendored files import are not part of the contract and would pull in Ray,
datasets and the tokenizer stack; the tree gets small replacements, named here so no test
mistakes them for Miles:
    miles/rollout/data_source.py   `DataSource`: only an annotation of `RolloutFnConstructorInput`
    miles/utils/misc.py            `load_function(path)`: import `module.attr`, as Miles' does
                                   (without its function registry)
`miles/utils/types.py` imports torch and numpy, so the trees need the `demo` group (torch).
"""

from __future__ import annotations

import shutil
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "miles_next"
MAIN = "main-31f1ca961"

# flavour → (Miles PR, what it changes for a rollout function); "main" is the base every PR is laid over
FLAVOURS: dict[str, str] = {
    MAIN: "Miles main at the commit docs/miles.md pins: list[str] weight versions, no BaseRolloutFn",
    "pr1845-d2624723d": "#1845: BaseRolloutFn; load_rollout_function refuses a class that does not subclass it",
    "pr1891-65ce548b7": "#1891 (+#1892): weight_versions as list[WeightVersionsPerCall], spans validated",
    "pr2662-e710e8ecd": "#2662: guard_rollout_log_probs in convert_samples_to_train_data",
    "pr2595-301be9633": "#2595: rollout_sampling_mask_ids/offsets on Sample (CSR), validated when set",
    "pr2637-d4f4fb176": "#2637: trainer_model_id on RolloutFnTrainInput and Sample",
    "pr2694-1c7c31519": "#2694: RolloutFnTrainOutput.postprocess = RolloutPostprocessOptions(pad_to_dp)",
}

_DATA_SOURCE = '''"""Not Miles' file (conformance.miles_next): the annotation base_types needs."""


class DataSource:
    pass
'''

_MISC = '''"""Not Miles' file (conformance.miles_next): Miles' load_function without its registry."""

import importlib


def load_function(path, *, sync_required=False):
    if not path:
        return None
    module_path, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module_path), attr)
'''


def _copy_over(source: Path, root: Path) -> None:
    for path in sorted(source.rglob("*.py")):
        target = root / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def write_tree(root: Path, flavour: str) -> Path:
    """`root/miles`: `main`'s vendored files, `flavour`'s over them, package markers, the two
    replacements. Put `root` on `sys.path` to import it."""
    if flavour not in FLAVOURS:
        raise KeyError(f"unknown Miles flavour {flavour!r}: one of {sorted(FLAVOURS)}")
    _copy_over(FIXTURES / MAIN, root)
    if flavour != MAIN:
        _copy_over(FIXTURES / flavour, root)
    (root / "miles" / "rollout" / "data_source.py").write_text(_DATA_SOURCE)
    (root / "miles" / "utils" / "misc.py").write_text(_MISC)
    for package in {path.parent for path in (root / "miles").rglob("*.py")}:
        (package / "__init__.py").touch()
    return root / "miles"
