"""Releases beside verifiers that break it: which verifiers, which releases of which package, why, the fix.

A row is a fact measured on published releases, never a guess: the gate (`adapter.versions.gate`)
refuses a co-install a row names before any episode runs, and the canary installs the newest
releases these bounds allow (`bounds_for`), so the next break shows on the day it is published.
Versions are `packaging` specifiers, never parsed by hand.

The harness program runs in a uv environment held to this environment's versions
(`adapter.episodes.harness_pins`), so a package installed here is the one the harness gets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


@dataclass(frozen=True)
class KnownBreak:
    verifiers: str  # the verifiers releases it breaks (a specifier)
    package: str
    broken: str  # that package's releases that break them (a specifier)
    works: str  # the specifier that avoids them: the fix installs `package` + this
    why: str  # what fails, as measured

    def applies(self, verifiers: str, installed: str | None) -> bool:
        return installed is not None and _within(self.verifiers, verifiers) and _within(self.broken, installed)

    @property
    def fix(self) -> str:
        return f'pip install "{self.package}{self.works}"'

    def reason(self, verifiers: str, installed: str) -> str:
        return f"{self.package} {installed} breaks verifiers {verifiers}: {self.why}: {self.fix}"


def _within(spec: str, version: str) -> bool:
    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


KNOWN_BREAKS: tuple[KnownBreak, ...] = (
    KnownBreak(
        ">=0.3.0,<0.4.0", "httpx2", ">=2.17.0", "<2.17",
        "its harness programs (null, bash, browser_use) give openai 3.x's AsyncOpenAI an httpx.Timeout, "
        "which httpx2 2.17.0 rejects (TypeError: Invalid timeout ... got <class 'httpx.Timeout'>), so every "
        "episode fails; the harness environment holds this environment's httpx2 (verifiers 0.4.0 pins openai<3 "
        "and needs no httpx2)",
    ),
)
PACKAGES: tuple[str, ...] = tuple(sorted({row.package for row in KNOWN_BREAKS}))


def broken_by(verifiers: str, beside: Mapping[str, str | None]) -> tuple[KnownBreak, str] | None:
    """The first row that the installed `beside` versions (package → version) hit, with that version."""
    for row in KNOWN_BREAKS:
        installed = beside.get(row.package)
        if installed is not None and row.applies(verifiers, installed):
            return row, installed
    return None


def bounds_for(verifiers: str) -> tuple[str, ...]:
    """The requirements that keep an install of `verifiers` clear of every known break
    (`("httpx2<2.17",)` for 0.3.x): what the canary adds to a cell so it judges the newest rest."""
    return tuple(f"{row.package}{row.works}" for row in KNOWN_BREAKS if _within(row.verifiers, verifiers))


def lines() -> list[str]:
    """`vf-sglang versions`' report of the rows."""
    return [f"known break: verifiers{row.verifiers} with {row.package}{row.broken} is refused; fix: {row.fix} "
            f"({row.why})" for row in KNOWN_BREAKS]
