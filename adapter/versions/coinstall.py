"""Which verifiers releases fit beside SGLang in one Python environment: their openai pins.

SGLang pins openai exactly; verifiers 0.2.1 and later need a newer openai than any SGLang release
below pins, so in a trainer image that holds SGLang (Miles' image: SGLang 0.5.16) only verifiers
0.2.0 installs. The adapter speaks HTTP to SGLang and needs no sglang in its own environment, so
the limit applies only where both share one: the adapter's own dependencies name no openai.

The rows are data, each the `Requires-Dist: openai...` line of one release's wheel, read verbatim
(`pip install --no-deps --target DIR <pkg>==<v>`, then `*.dist-info/METADATA`); `uv pip compile`
of each sglang × verifiers pair agrees (0.2.0 resolves, the others fail on openai). What is
installed is read live from package metadata (`importlib.metadata`), never from these rows.
Version ranges are `packaging` specifiers, never parsed by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

Package = Literal["sglang", "verifiers"]


@dataclass(frozen=True)
class OpenAIPin:
    """One release's openai requirement, as its wheel's metadata states it."""

    package: Package
    version: str
    openai: str  # the specifier of `Requires-Dist: openai...`, verbatim
    source: str  # the wheel the row was read from

    @property
    def specifier(self) -> SpecifierSet:
        return SpecifierSet(self.openai)


def _sglang(version: str, openai: str) -> OpenAIPin:
    return OpenAIPin("sglang", version, openai, f"sglang-{version}-cp311-cp311-manylinux_2_34_x86_64.whl")


def _verifiers(version: str, openai: str) -> OpenAIPin:
    return OpenAIPin("verifiers", version, openai, f"verifiers-{version}-py3-none-any.whl")


SGLANG_PINS: tuple[OpenAIPin, ...] = (
    _sglang("0.5.15", "==2.6.1"),
    _sglang("0.5.16", "==2.6.1"),  # Miles' image
    _sglang("0.5.23", "==2.8.0"),
)
VERIFIERS_PINS: tuple[OpenAIPin, ...] = (
    _verifiers("0.2.0", ">=1.108.1"),
    _verifiers("0.2.1", ">=2.9.0"),
    _verifiers("0.3.0", ">=2.9.0"),
    _verifiers("0.3.1", ">=2.9.0"),
    _verifiers("0.4.0", "<3.0.0,>=2.54.0"),
    _verifiers("0.4.1.dev86", "<3.0.0,>=2.54.0"),  # the pre-release the gate serves
)
MILES_SGLANG = "0.5.16"  # the SGLang release in Miles' image

NO_SGLANG_NOTE = ("sglang: not installed (the adapter needs none: it speaks HTTP to SGLang, which runs "
                  "in its own environment, so any verifiers release the gate serves works here)")


def exact_pin(spec: SpecifierSet) -> Version | None:
    """The one version `spec` allows when it pins one (`==X`, `===X`; not `==X.*`), else None."""
    for one in spec:
        if one.operator in ("==", "===") and not one.version.endswith(".*"):
            try:
                return Version(one.version)
            except InvalidVersion:
                return None
    return None


def fits(a: SpecifierSet, b: SpecifierSet) -> bool | None:
    """Whether one openai release satisfies both: decided when either side pins one version (every
    SGLang release does); None when neither does (only a resolver can say)."""
    for pin in (exact_pin(a), exact_pin(b)):
        if pin is not None:
            return a.contains(pin, prereleases=True) and b.contains(pin, prereleases=True)
    return None


def allows(spec: SpecifierSet, version: str) -> bool:
    try:
        return spec.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def openai_requirement(requires: list[str] | None) -> SpecifierSet | None:
    """The openai specifier a distribution's Requires-Dist applies without extras (all such
    lines together), or None when it names no openai."""
    found: SpecifierSet | None = None
    for line in requires or ():
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() != "openai" or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        found = req.specifier if found is None else found & req.specifier
    return found


def _label(spec: SpecifierSet) -> str:
    return f"openai{spec}" if str(spec) else "any openai"


def verifiers_beside(sglang_openai: SpecifierSet | None) -> tuple[list[OpenAIPin], list[OpenAIPin]]:
    """The verifiers releases (rows) whose openai requirement an SGLang's pin leaves room for, and
    those it excludes. A release the pins cannot decide on counts as fitting (a resolver decides)."""
    fit: list[OpenAIPin] = []
    unfit: list[OpenAIPin] = []
    for row in VERIFIERS_PINS:
        verdict = True if sglang_openai is None else fits(sglang_openai, row.specifier)
        (unfit if verdict is False else fit).append(row)
    return fit, unfit


def describe_fit(sglang_openai: SpecifierSet | None) -> str:
    """`verifiers 0.2.0; not 0.2.1/0.3.0/0.3.1 (needs openai>=2.9.0), ...` for an SGLang's pin."""
    fit, unfit = verifiers_beside(sglang_openai)
    line = f"verifiers {', '.join(row.version for row in fit) or 'none'}"
    if unfit:
        groups: dict[str, list[str]] = {}
        for row in unfit:
            groups.setdefault(row.openai, []).append(row.version)
        line += "; not " + ", ".join(f"{'/'.join(vs)} (needs {_label(SpecifierSet(spec))})"
                                     for spec, vs in groups.items())
    return line


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _requires(name: str) -> list[str] | None:
    try:
        return metadata.requires(name)
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class OpenAICheck:
    """The installed openai against the pins of the installed verifiers and sglang."""

    openai: str | None
    verifiers: str | None
    verifiers_needs: SpecifierSet | None
    sglang: str | None
    sglang_needs: SpecifierSet | None

    @property
    def verifiers_ok(self) -> bool:
        """False when verifiers is installed and openai is missing or outside what it requires:
        the environment the adapter drives is broken (a pip check fails for verifiers)."""
        if self.verifiers is None:
            return True
        if self.openai is None:
            return False
        return self.verifiers_needs is None or allows(self.verifiers_needs, self.openai)

    @property
    def sglang_ok(self) -> bool:
        if self.sglang is None or self.sglang_needs is None:
            return True
        return self.openai is not None and allows(self.sglang_needs, self.openai)

    @property
    def broken_reason(self) -> str | None:
        """Why the environment the adapter runs in is broken, with the fix; None when it is not.
        A conflict with sglang's pin alone is information: the adapter never imports sglang."""
        if self.verifiers_ok:
            return None
        got = f"openai {self.openai}" if self.openai else "openai is not installed"
        need = _label(self.verifiers_needs) if self.verifiers_needs is not None else "openai"
        fix = f"pip install '{need}'"
        if self.sglang is not None:
            fix += (f" in an environment without sglang (the adapter needs none), or verifiers 0.2.0 beside "
                    f"sglang {self.sglang}")
        return f"verifiers {self.verifiers} needs {need}, {got}: {fix}"

    def lines(self) -> list[str]:
        out = [f"openai: {self.openai or 'not installed'}"]
        if self.verifiers is not None:
            need = _label(self.verifiers_needs) if self.verifiers_needs is not None else "no openai pin"
            out.append(f"verifiers {self.verifiers} needs {need}: "
                       f"{'ok' if self.verifiers_ok else 'CONFLICT with the installed openai'}")
        if self.sglang is None:
            out.append(NO_SGLANG_NOTE)
            out.append("verifiers beside SGLang in one environment (openai pins of each release's wheel):")
            out += [f"  sglang {row.version} ({_label(row.specifier)}): {describe_fit(row.specifier)}"
                    for row in SGLANG_PINS]
            return out
        if self.sglang_needs is None:
            out.append(f"sglang {self.sglang}: no openai pin")
        else:
            verdict = "ok" if self.sglang_ok else "CONFLICT with the installed openai"
            out.append(f"sglang {self.sglang} needs {_label(self.sglang_needs)}: {verdict}")
        out.append(f"beside sglang {self.sglang} in one environment: {describe_fit(self.sglang_needs)}")
        if self.verifiers is not None and self.sglang_needs is not None and self.verifiers_needs is not None \
                and fits(self.sglang_needs, self.verifiers_needs) is False:
            out.append(f"conflict: the installed verifiers {self.verifiers} ({_label(self.verifiers_needs)}) and "
                       f"sglang {self.sglang} ({_label(self.sglang_needs)}) cannot share one openai; the adapter "
                       "needs no sglang: run it in its own environment, or use verifiers 0.2.0 here")
        return out


def installed_check() -> OpenAICheck:
    verifiers, sglang = _version("verifiers"), _version("sglang")
    return OpenAICheck(
        openai=_version("openai"),
        verifiers=verifiers,
        verifiers_needs=openai_requirement(_requires("verifiers")) if verifiers else None,
        sglang=sglang,
        sglang_needs=openai_requirement(_requires("sglang")) if sglang else None,
    )


def render_table() -> str:
    """Markdown: which verifiers releases fit beside each SGLang release in one environment."""
    rows = ["| sglang | its openai pin | verifiers that fit beside it | verifiers that do not (their openai) "
            "| read from |", "|---|---|---|---|---|"]
    for row in SGLANG_PINS:
        fit, unfit = verifiers_beside(row.specifier)
        miles = " (Miles' image)" if row.version == MILES_SGLANG else ""
        rows.append(f"| {row.version}{miles} | `openai{row.openai}` | "
                    f"{', '.join(r.version for r in fit) or 'none'} | "
                    f"{', '.join(f'{r.version} (`openai{r.openai}`)' for r in unfit) or '—'} | `{row.source}` |")
    sources = ", ".join(f"`{r.source}`" for r in VERIFIERS_PINS)
    rows += ["", f"verifiers' openai requirements read from {sources}."]
    return "\n".join(rows)
