"""The version gate: installed verifiers/renderers → a Verifiers API generation, or a refusal.

Generation "A" is verifiers 0.2.x; "B" is 0.3.x and 0.4.0.
A release beside verifiers that is known to break it (`adapter.versions.breaks`: httpx2 >= 2.17.0
beside 0.3.x) is refused too, naming the install that avoids it.
Every refusal names the exact reason and the fix, and the fix of a verifiers/renderers pair is always
a pair the version matrix proves (`PROVEN`: one tox.ini `contract-vf*` cell each), of the refused
release's own generation.
A verifiers newer than the newest known release is refused unless `ALLOW_UNTESTED_ENV` is set:
then it runs as the newest known generation, untested, with a warning. Versions are read from
package metadata (`importlib.metadata`), so the gate costs no heavy import. The table it decides
is `docs/compatibility.md` (written from this gate by `vf-sglang compat --write`).
"""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from packaging.version import InvalidVersion, Version

from adapter.errors import UnsupportedVersionError
from adapter.versions import breaks

Generation = Literal["A", "B"]

logger = logging.getLogger(__name__)

# Default-lane pins (pyproject.toml): what `pip install vf-sglang` installs.
PINNED = {"verifiers": "0.2.0", "renderers": "0.1.10"}
# The (verifiers, renderers) pairs the version matrix proves, oldest first: each is installed
# exactly by one tox.ini `contract-vf*` cell and is a "pass" row of docs/compatibility.md
# (tests/versions/test_refusals.py checks both). Every refusal's fix is one of these.
PROVEN: tuple[tuple[str, str], ...] = (
    ("0.2.0", "0.1.8"), ("0.2.0", "0.1.10"), ("0.2.1", "0.1.10"),
    ("0.3.0", "0.1.12"), ("0.3.1", "0.1.12"), ("0.4.0", "0.1.12"),
)
# The pre-release pairs a matrix cell proves (its tox.ini cell installs exactly that pair): served
# as generation B, named as pre-releases. Any other pre-release of either package is refused, as an
# untested final is (the opt-in runs it untested, with a warning).
PROVEN_PRERELEASES: dict[tuple[str, str], str] = {
    ("0.4.1.dev86", "0.1.13.dev17"): "contract-vf041dev",
}
# The verifiers releases whose cells prove the pre-forked harness runtime's samples identical to
# Verifiers' own (every cell runs tests/contract/test_harness_runtimes.py): the releases above.
PREFORK_PROVEN: tuple[str, ...] = tuple(dict.fromkeys([v for v, _ in PROVEN] + [v for v, _ in PROVEN_PRERELEASES]))
# Generation B's renderers floor per verifiers release (each release's own renderers requirement).
MIN_RENDERERS_B: dict[tuple[int, ...], tuple[int, int, int]] = {
    (0, 3, 0): (0, 1, 9), (0, 3, 1): (0, 1, 10), (0, 4, 0): (0, 1, 12),
}
# The opt-in that runs a verifiers newer than NEWEST_KNOWN (same major) as the newest known
# generation, untested. Read in one place: `installed_decision()`.
ALLOW_UNTESTED_ENV = "VF_SGLANG_ALLOW_UNTESTED_VERIFIERS"
_TRUE = frozenset({"1", "true", "yes", "on"})


def _release(version: str) -> tuple[int, ...]:
    """`0.1.10.dev3` → (0, 1, 10): the numeric release segment, for ordering."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


NEWEST_KNOWN = max((verifiers for verifiers, _ in PROVEN), key=_release)  # the newest release known (and proven)
NEWEST_GENERATION: Generation = "B"  # NEWEST_KNOWN's generation: what an untested newer release runs as


def is_prerelease(version: str) -> bool:
    """A PEP 440 pre- or dev-release (`0.4.1.dev86`, `0.1.13rc1`); `.post` releases are finals."""
    try:
        return Version(version).is_prerelease
    except InvalidVersion:
        return False


def _generation_of(release: tuple[int, ...]) -> Generation | None:
    """The API generation of a known verifiers line (None: pre-V1 or newer than NEWEST_KNOWN)."""
    if release[:2] == (0, 2):
        return "A"
    if release[:2] in ((0, 3), (0, 4)) and release <= _release(NEWEST_KNOWN):
        return "B"
    return None


def fix_for(verifiers: str | None) -> str:
    """The install command a refusal gives: the newest proven pair of the installed verifiers
    release when the matrix proves one, else the newest proven pair of its generation (a release
    newer than any known: the newest generation's, never an older one's), else (no verifiers, or
    one older than V1) the locked default."""
    generation: Generation | None = None
    if verifiers is not None:
        release = _release(verifiers)
        generation = _generation_of(release)
        if generation is None and release > _release(NEWEST_KNOWN):
            generation = NEWEST_GENERATION
        same = [pair for pair in PROVEN if _release(pair[0]) == release[:3]]
        if same:
            return _pip(*max(same, key=lambda pair: _release(pair[1])))
    if generation is not None:
        return _pip(*max((pair for pair in PROVEN if _generation_of(_release(pair[0])) == generation),
                         key=lambda pair: (_release(pair[0]), _release(pair[1]))))
    return _pip(PINNED["verifiers"], PINNED["renderers"])


def _pip(verifiers: str, renderers: str) -> str:
    return f"pip install verifiers=={verifiers} renderers=={renderers}"


@dataclass(frozen=True)
class VersionDecision:
    verifiers: str | None
    renderers: str | None
    generation: Generation | None
    reason: str | None = None
    # set when the pair runs untested (a newer verifiers under ALLOW_UNTESTED_ENV): the risk
    warning: str | None = None
    # the matrix cell that proves this pre-release pair (PROVEN_PRERELEASES), when it is one
    prerelease_cell: str | None = None

    @property
    def supported(self) -> bool:
        return self.reason is None

    def describe(self) -> str:
        head = f"verifiers {self.verifiers or 'missing'}, renderers {self.renderers or 'missing'}"
        if self.supported:
            untested = f"; warning: {self.warning}" if self.warning else ""
            return f"{head}: generation {self.generation}{self.prerelease_note}{untested}"
        return f"{head}: refused: {self.reason}"

    @property
    def prerelease_note(self) -> str:
        return (f" (pre-releases: the pair matrix cell {self.prerelease_cell} proves)"
                if self.prerelease_cell else "")


def _is(names: list[str]) -> str:
    return "is" if len(names) == 1 else "are each"


def _runs(names: list[str]) -> str:
    return "runs" if len(names) == 1 else "run"


_NO_TRANSFORMERS = ("renderers {renderers} is installed without transformers, which it needs to load tokenizers: "
                    "pip install transformers")


def decide(
    verifiers: str | None, renderers: str | None, *, has_transformers: bool = True,
    allow_untested: bool = False, beside: Mapping[str, str | None] | None = None,
) -> VersionDecision:
    """The gate as a pure function of the installed versions (and the untested opt-in). `beside`:
    the installed versions of the packages a known break names (`adapter.versions.breaks`)."""

    def refuse(reason: str, generation: Generation | None = None) -> VersionDecision:
        return VersionDecision(verifiers, renderers, generation, reason)

    if verifiers is None:
        return refuse(f"verifiers is not installed: {fix_for(None)}")
    if renderers is None:
        return refuse(f"renderers is not installed: {fix_for(verifiers)}")
    proven_pre = PROVEN_PRERELEASES.get((verifiers, renderers))
    if proven_pre is not None:
        return VersionDecision(verifiers, renderers, "B", prerelease_cell=proven_pre) if has_transformers else \
            refuse(_NO_TRANSFORMERS.format(renderers=renderers), "B")
    pre = [f"{name} {version}" for name, version in (("verifiers", verifiers), ("renderers", renderers))
           if is_prerelease(version)]
    pre_warning: str | None = None
    if pre:
        proven = ", ".join(f"verifiers=={v} renderers=={r}" for v, r in PROVEN_PRERELEASES)
        if not allow_untested:
            return refuse(f"{' and '.join(pre)} {_is(pre)} an unproven pre-release (the proven pre-release pairs: "
                          f"{proven or 'none'}): {fix_for(verifiers)} (or set {ALLOW_UNTESTED_ENV}=1 to run it "
                          "untested)")
        pre_warning = (f"{' and '.join(pre)} {_is(pre)} an unproven pre-release and {_runs(pre)} untested because "
                       f"{ALLOW_UNTESTED_ENV} is set (proven pre-release pairs: {proven or 'none'})")
    vf, rd = _release(verifiers), _release(renderers)
    warning: str | None = pre_warning
    generation = _generation_of(vf)
    if vf < (0, 2, 0):
        return refuse(f"verifiers {verifiers} predates the V1 API (0.2.0): {fix_for(None)}")
    if generation == "A":
        if rd < (0, 1, 8):
            return refuse(f"renderers {renderers} is older than 0.1.8, the first that verifiers "
                          f"0.2.x works with: {fix_for(verifiers)}", generation)
        if rd >= (0, 1, 11):
            return refuse(f"renderers {renderers} breaks verifiers {verifiers} (0.1.11+ removed "
                          f"create_renderer_pool; verifiers 0.2.x needs renderers>=0.1.8,<0.1.11): "
                          f"{fix_for(verifiers)}", generation)
    else:
        if generation is None:  # newer than NEWEST_KNOWN
            newest = _release(NEWEST_KNOWN)
            tested = fix_for(verifiers)
            if vf[:1] != newest[:1]:
                return refuse(f"verifiers {verifiers} is a new major release, newer than the newest this "
                              f"adapter knows ({NEWEST_KNOWN}); {ALLOW_UNTESTED_ENV} does not cover a new "
                              f"major: {tested}")
            if not allow_untested:
                return refuse(f"verifiers {verifiers} is newer than the newest release this adapter knows "
                              f"({NEWEST_KNOWN}): {tested} (or set {ALLOW_UNTESTED_ENV}=1 to run it untested "
                              f"as generation {NEWEST_GENERATION})")
            generation = NEWEST_GENERATION
            warning = (f"{pre_warning}; " if pre_warning else "") + (
                       f"verifiers {verifiers} is untested: it is newer than the newest release this adapter "
                       f"knows ({NEWEST_KNOWN}) and runs as generation {generation} because {ALLOW_UNTESTED_ENV} "
                       f"is set; an API change in it may fail episodes or yield wrong samples (tested: {tested})")
            floor, who = MIN_RENDERERS_B[newest], f"verifiers {verifiers} runs untested as {NEWEST_KNOWN}, which"
        else:
            floor, who = MIN_RENDERERS_B.get(vf[:3], (0, 1, 9)), f"verifiers {verifiers}"
        if rd < floor:
            need = ".".join(map(str, floor))
            return refuse(f"{who} needs renderers >= {need} (got {renderers}): {fix_for(verifiers)}", generation)
    hit = breaks.broken_by(verifiers, beside or {})
    if hit is not None:
        row, installed = hit
        return refuse(row.reason(verifiers, installed), generation)
    if not has_transformers:
        return refuse(_NO_TRANSFORMERS.format(renderers=renderers), generation)
    # Every generation the gate can name here is served: "A" above, "B" (a known 0.3.x/0.4.0, or a
    # newer same-major release under the opt-in; anything else was refused on the way).
    return VersionDecision(verifiers, renderers, generation, warning=warning)


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def allow_untested() -> bool:
    """Whether ALLOW_UNTESTED_ENV is set (1/true/yes/on): the one place the gate reads it."""
    return os.environ.get(ALLOW_UNTESTED_ENV, "").strip().lower() in _TRUE


def installed_decision() -> VersionDecision:
    return decide(
        _installed("verifiers"),
        _installed("renderers"),
        has_transformers=importlib.util.find_spec("transformers") is not None,
        allow_untested=allow_untested(),
        beside={name: _installed(name) for name in breaks.PACKAGES},
    )


_WARNED: set[str] = set()  # the untested pairs' warnings this process has logged


def warn_untested(warning: str) -> None:
    """Log an untested pair's warning: once per process per warning (by its text, so by the
    installed versions), however often the gate is asked."""
    if warning not in _WARNED:
        _WARNED.add(warning)
        logger.warning("%s", warning)


def require_supported() -> Generation:
    """The generation to use, or `UnsupportedVersionError` with the reason and the fix."""
    decision = installed_decision()
    if not decision.supported or decision.generation is None:
        raise UnsupportedVersionError(decision.describe())
    if decision.warning:
        warn_untested(decision.warning)
    return decision.generation
