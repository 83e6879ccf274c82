"""The version gate: installed verifiers/renderers → a Verifiers API generation, or a refusal.

Generation "A" is verifiers 0.2.x; "B" is 0.3.x and 0.4.0.
Every refusal names the exact reason and the fix. Versions are read from package metadata
(`importlib.metadata`), so the gate costs no heavy import. The table it decides is
`docs/compatibility.md` (written from this gate by `vf-sglang compat --write`).
"""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import re
from dataclasses import dataclass
from typing import Literal

from adapter.errors import UnsupportedVersionError

Generation = Literal["A", "B"]

# Default-lane pins (pyproject.toml): what `pip install vf-sglang` installs.
PINNED = {"verifiers": "0.2.0", "renderers": "0.1.10"}
SUPPORTED_GENERATIONS: frozenset[Generation] = frozenset({"A", "B"})
# Generation B's renderers floor per verifiers release (each release's own renderers requirement).
MIN_RENDERERS_B: dict[tuple[int, ...], tuple[int, int, int]] = {
    (0, 3, 0): (0, 1, 9), (0, 3, 1): (0, 1, 10), (0, 4, 0): (0, 1, 12),
}


def _release(version: str) -> tuple[int, ...]:
    """`0.1.10.dev3` → (0, 1, 10): the numeric release segment, for ordering."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


@dataclass(frozen=True)
class VersionDecision:
    verifiers: str | None
    renderers: str | None
    generation: Generation | None
    reason: str | None = None

    @property
    def supported(self) -> bool:
        return self.reason is None

    def describe(self) -> str:
        head = f"verifiers {self.verifiers or 'missing'}, renderers {self.renderers or 'missing'}"
        if self.supported:
            return f"{head}: generation {self.generation}"
        return f"{head}: refused: {self.reason}"


def decide(
    verifiers: str | None, renderers: str | None, *, has_transformers: bool = True
) -> VersionDecision:
    """The gate as a pure function of the installed versions."""

    def refuse(reason: str, generation: Generation | None = None) -> VersionDecision:
        return VersionDecision(verifiers, renderers, generation, reason)

    pin = f"pip install verifiers=={PINNED['verifiers']} renderers=={PINNED['renderers']}"
    if verifiers is None:
        return refuse(f"verifiers is not installed: {pin}")
    if renderers is None:
        return refuse(f"renderers is not installed: {pin}")
    vf, rd = _release(verifiers), _release(renderers)
    if vf < (0, 2, 0):
        return refuse(f"verifiers {verifiers} predates the V1 API (0.2.0): {pin}")
    if vf[:2] == (0, 2):
        generation: Generation = "A"
        if rd < (0, 1, 8):
            return refuse(f"renderers {renderers} is older than 0.1.8, the first that verifiers "
                          f"0.2.x works with: {pin}", generation)
        if rd >= (0, 1, 11):
            return refuse(f"renderers {renderers} breaks verifiers {verifiers} (0.1.11+ removed "
                          f"create_renderer_pool): pip install 'renderers>=0.1.8,<0.1.11'",
                          generation)
    elif vf[:2] in ((0, 3), (0, 4)) and vf <= (0, 4, 0):
        generation = "B"
        floor = MIN_RENDERERS_B.get(vf[:3], (0, 1, 9))
        if rd < floor:
            need = ".".join(map(str, floor))
            return refuse(f"verifiers {verifiers} needs renderers >= {need} (got {renderers}): "
                          f"pip install 'renderers>={need}'", generation)
    else:
        return refuse(f"verifiers {verifiers} is newer than the newest release this adapter "
                      f"knows (0.4.0): {pin}")
    if not has_transformers:
        return refuse(f"renderers {renderers} is installed without transformers, which it needs "
                      "to load tokenizers: pip install transformers", generation)
    if generation not in SUPPORTED_GENERATIONS:
        return refuse(f"verifiers {verifiers} (API generation {generation}) is not supported by "
                      f"this release yet: {pin}", generation)
    return VersionDecision(verifiers, renderers, generation)


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def installed_decision() -> VersionDecision:
    return decide(
        _installed("verifiers"),
        _installed("renderers"),
        has_transformers=importlib.util.find_spec("transformers") is not None,
    )


def require_supported() -> Generation:
    """The generation to use, or `UnsupportedVersionError` with the reason and the fix."""
    decision = installed_decision()
    if not decision.supported or decision.generation is None:
        raise UnsupportedVersionError(decision.describe())
    return decision.generation
