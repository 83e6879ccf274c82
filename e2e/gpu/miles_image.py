"""The Miles variant's first check: this interpreter is Miles' image, as the plan assumes.

Run with the image's own Python (the base the venv is built on), before anything is installed:

    python -m e2e.gpu.miles_image --miles-root /root/miles --megatron-path /root/Megatron-LM \\
        --sglang-version 0.5.16 --model-type qwen3-0.6B --model-args "--swiglu ..."
    python -m e2e.gpu.miles_image --min-gpus 2          # the GPU step: CUDA devices torch can see

It checks what the Miles variant's later steps use, and lists every problem at once (exit 1):
torch, ray, pip, sglang and miles import; sglang is the version the plan names (Miles'
`docker/Dockerfile` pins it); the importable Miles reads `MILES_USE_LEGACY_ROLLOUT_V1` (Miles
main from #2522; `miles-rl==0.0.2` does not); `train.py` and `tools/convert_hf_to_torch_dist.py`
are under the Miles root and Megatron-LM is where `--megatron-path` says; and the model
arguments the plan passes to Megatron are the ones Miles' own `scripts/models/<type>.py`
declares (`model_args_utils.load_model_args`), so a Miles with another architecture table
fails here, not after the checkpoint conversion.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

MODULES = ("torch", "ray", "pip", "sglang", "miles")


def image_problems(*, miles_root: str, megatron_path: str, sglang_version: str, model_type: str | None = None,
                   model_args: str | None = None) -> list[str]:
    found: list[str] = []
    loaded = {}
    for name in MODULES:
        try:
            loaded[name] = importlib.import_module(name)
        except ImportError as exc:
            found.append(f"{name} does not import with {sys.executable} ({exc}): run the Miles variant in Miles' "
                         "image, or pass --base-python with the image's interpreter")
    sglang = loaded.get("sglang")
    if sglang is not None and getattr(sglang, "__version__", None) != sglang_version:
        found.append(f"sglang is {getattr(sglang, '__version__', None)!r} ({sglang.__file__}), the plan expects "
                     f"{sglang_version} (Miles' image)")
    if "miles" in loaded:
        try:
            environ = importlib.import_module("miles.utils.environ")
        except ImportError as exc:
            found.append(f"miles.utils.environ does not import ({exc})")
        else:
            if not hasattr(environ, "use_legacy_rollout_v1"):
                found.append(f"the importable miles ({loaded['miles'].__file__}) does not read "
                             "MILES_USE_LEGACY_ROLLOUT_V1 (Miles main from #2522 does; miles-rl 0.0.2 does not)")
    for path in (Path(miles_root) / "train.py", Path(miles_root) / "tools" / "convert_hf_to_torch_dist.py"):
        if not path.is_file():
            found.append(f"{path} is missing: --miles-root must be Miles' checkout (the image has /root/miles)")
    if not (Path(megatron_path) / "megatron").is_dir():
        found.append(f"{megatron_path}/megatron is missing: --megatron-path must be Megatron-LM's checkout")
    if model_type and model_args is not None and "miles" in loaded:
        try:
            utils = importlib.import_module("miles.utils.external_utils.model_args_utils")
            declared = " ".join(utils.load_model_args(model_type).split())
        except (ImportError, AttributeError, AssertionError) as exc:
            found.append(f"Miles' model arguments for {model_type!r} cannot be read ({type(exc).__name__}: {exc})")
        else:
            if declared != " ".join(model_args.split()):
                found.append(f"Miles declares other model arguments for {model_type!r} than the plan passes:\n"
                             f"  Miles: {declared}\n  plan:  {' '.join(model_args.split())}")
    return found


def gpu_problem(min_gpus: int) -> str | None:
    import torch

    count = torch.cuda.device_count()
    if count < min_gpus:
        return (f"torch sees {count} CUDA device(s); the Miles variant needs {min_gpus} (Miles' E2E: colocated "
                "training and one SGLang engine per GPU); pass --miles-gpus to change it")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.gpu.miles_image", description=__doc__.split("\n\n")[0])
    parser.add_argument("--miles-root", default=None)
    parser.add_argument("--megatron-path", default=None)
    parser.add_argument("--sglang-version", default=None)
    parser.add_argument("--model-type", default=None)
    parser.add_argument("--model-args", default=None)
    parser.add_argument("--min-gpus", type=int, default=None)
    args = parser.parse_args(argv)
    if args.min_gpus is not None:
        problem = gpu_problem(args.min_gpus)
        if problem:
            print(f"e2e.gpu.miles_image: {problem}", file=sys.stderr)
            return 1
        print(f"{args.min_gpus}+ CUDA devices visible")
        return 0
    if not (args.miles_root and args.megatron_path and args.sglang_version):
        parser.error("--miles-root, --megatron-path and --sglang-version are required (or --min-gpus)")
    problems = image_problems(miles_root=args.miles_root, megatron_path=args.megatron_path,
                              sglang_version=args.sglang_version, model_type=args.model_type,
                              model_args=args.model_args)
    for problem in problems:
        print(f"e2e.gpu.miles_image: {problem}", file=sys.stderr)
    if problems:
        return 1
    for name in MODULES:
        module = sys.modules[name]
        print(f"{name} {getattr(module, '__version__', '')}: {module.__file__}")
    matched = f"; Miles' model arguments for {args.model_type} match the plan's" if args.model_args is not None else ""
    print(f"Miles main at {args.miles_root}, Megatron-LM at {args.megatron_path}{matched}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
