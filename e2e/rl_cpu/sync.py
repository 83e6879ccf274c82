"""Weight sync with SGLang over its HTTP API: load a checkpoint directory under a version name.

    load_weights(url, model_dir, version)   POST /update_weights_from_disk, then GET /model_info
                                             must name `version` (else WeightSyncError)

SGLang starts on "default"; the loop loads the served directory again as "0" before step 0, so
version k is always the weights after k optimizer steps and every sample of step k must report
`weight_versions` entries `str(k)` (one per turn). Loopback only: never through a proxy.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from e2e.rl_cpu.errors import WeightSyncError

TIMEOUT_S = 300.0  # a busy 2-core machine: loading is ~0.1 s when idle


def served_version(url: str, client: httpx.Client) -> str | None:
    answer = client.get(f"{url}/model_info")
    answer.raise_for_status()
    version = answer.json().get("weight_version")
    return None if version is None else str(version)


def load_weights(url: str, model_dir: Path, version: str) -> None:
    """SGLang serves `model_dir` as weight version `version` from its next request on."""
    body = {"model_path": str(model_dir), "weight_version": version}
    with httpx.Client(timeout=TIMEOUT_S, trust_env=False) as client:
        answer = client.post(f"{url}/update_weights_from_disk", json=body)
        if answer.status_code != 200 or not answer.json().get("success", False):
            raise WeightSyncError(f"SGLang at {url} refused to load {model_dir} as version {version!r}: "
                                  f"HTTP {answer.status_code} {answer.text[:500]}; check the server log and that "
                                  "the checkpoint has the served model's tensor names")
        reported = served_version(url, client)
    if reported != version:
        raise WeightSyncError(f"SGLang at {url} loaded {model_dir} but /model_info reports weight_version "
                              f"{reported!r}, not {version!r}: the server ignores weight_version (too old an sglang?)")
