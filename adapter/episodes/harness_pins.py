"""The harness program held to the host's versions: what this environment has proven, the harness gets.

A subprocess harness runs a PEP 723 program (the null harness: deps `openai`, `mcp`, ...) in a uv
script environment that Verifiers prepares with `uv sync --script P --no-config`. Left alone, uv
resolves that program on its own: the newest releases on a fresh machine, whatever an old
environment holds on a warm one. So a fresh machine and a warm cache ran different programs, and
a release the host never ran reached the harness first (httpx2 2.17.0 rejects the `httpx.Timeout`
that verifiers 0.3.x's harness programs hand openai 3.x: every episode failed, on fresh machines
only). uv reads no `UV_CONSTRAINT` for `sync --script` and `--no-config` drops uv.toml; the one
input Verifiers' own preparation reads is the program itself.

`held(source, pins)` adds `[tool.uv] constraint-dependencies` (one `name==version` per package
installed here) to the program's PEP 723 block, marked so that `unheld` takes it out again. A
constraint only binds a package the program's resolution contains: the harness gets exactly the
host's version of every package both share, and the program's own requirements are unchanged:
where the program itself asks for a version the host does not have (`compatible`), it keeps it.
The content changes with the pins, and Verifiers keys a script's path (so uv its environment) by
the content's digest: a host with other versions gets another environment, never a stale one.

A harness env (or this process' environment) that sets UV_EXCLUDE_NEWER has chosen its own
resolution (a date: the same environment on every machine, too); host pins there could ask for a
release newer than that date, so the program is left as it is (`pins_for`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

logger = logging.getLogger(__name__)

MARK = "# vf-sglang: the host's versions"  # a TOML comment on the lines `held` adds
# The module attribute each release keeps its harness program in (0.2.x/0.3.x; 0.4.0's null harness).
PROGRAM_ATTRIBUTES = ("PROGRAM_SOURCE", "CHAT_PROGRAM_SOURCE")
DATE_PIN = "UV_EXCLUDE_NEWER"
PEP723_BLOCK = re.compile(r"(?m)^# /// script$\s(?P<content>(^#(| .*)$\s)+)^# ///$")


def host_pins() -> tuple[str, ...]:
    """`name==version` for every distribution installed in this interpreter, sorted by name (the
    first on sys.path wins, as an import would)."""
    seen: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and dist.version:
            seen.setdefault(canonicalize_name(name), dist.version)
    return tuple(f"{name}=={version}" for name, version in sorted(seen.items()))


def pins_for(harness_env: Mapping[str, str], environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The host pins a harness gets: none when its env or this process' environment sets
    UV_EXCLUDE_NEWER (the date decides its resolution)."""
    env = os.environ if environ is None else environ
    if harness_env.get(DATE_PIN) or env.get(DATE_PIN):
        return ()
    return host_pins()


def program_requirements(source: str) -> list[Requirement]:
    """The `dependencies` of a program's PEP 723 block (none when it has no block)."""
    match = PEP723_BLOCK.search(source)
    if match is None:
        return []
    content = "".join(line[2:] if line.startswith("# ") else line[1:]
                      for line in match.group("content").splitlines(keepends=True))
    return [Requirement(dep) for dep in tomllib.loads(content).get("dependencies", [])]


def compatible(pins: Sequence[str], source: str,
               requires: Callable[[str], list[str] | None] | None = None) -> tuple[str, ...]:
    """The pins the program's own requirements allow. A package the program asks for at a version
    the host does not have (verifiers 0.4.1.dev86's null harness: `mcp==2.3.0` beside the host's
    2.2.0) follows the program, as its release wants, and so do the packages the host's release of
    it pins exactly (mcp 2.2.0's `mcp-types==2.2.0`: they move in lockstep). `requires(name)` is the
    host's `Requires-Dist` of a package (default: this environment's metadata)."""
    requires = requires or _installed_requires
    versions = dict(pin.split("==", 1) for pin in pins)
    wanted = {canonicalize_name(req.name): req.specifier for req in program_requirements(source)}
    freed = {name for name, spec in wanted.items()
             if name in versions and not spec.contains(versions[name], prereleases=True)}
    for name in sorted(freed):
        freed |= {canonicalize_name(req.name) for req in map(Requirement, requires(name) or ())
                  if any(one.operator in ("==", "===") for one in req.specifier)}
    return tuple(pin for pin in pins if canonicalize_name(pin.split("==", 1)[0]) not in freed)


def _installed_requires(name: str) -> list[str] | None:
    try:
        return metadata.requires(name)
    except metadata.PackageNotFoundError:
        return None


def unheld(source: str) -> str:
    """The program as its release ships it: the lines `held` added, taken out."""
    return "".join(line for line in source.splitlines(keepends=True) if not line.rstrip().endswith(MARK))


def held(source: str, pins: Sequence[str]) -> str:
    """`source` with `[tool.uv] constraint-dependencies = pins` in its PEP 723 block (replacing
    what an earlier `held` added); `source` unchanged when `pins` is empty. ValueError when the
    block already has a `[tool.uv]` table of its own (no Verifiers harness program has one)."""
    lines = unheld(source).splitlines(keepends=True)
    if not pins:
        return "".join(lines)
    try:
        start = lines.index("# /// script\n")
        end = lines.index("# ///\n", start + 1)
    except ValueError:
        raise ValueError("the harness program has no PEP 723 block (`# /// script` ... `# ///`)") from None
    if any(line.strip() == "# [tool.uv]" for line in lines[start:end]):
        raise ValueError("the harness program's PEP 723 block has its own [tool.uv] table")
    added = [f"# [tool.uv]  {MARK}\n", f"# constraint-dependencies = [  {MARK}\n",
             *(f"#   {json.dumps(pin)},  {MARK}\n" for pin in pins), f"# ]  {MARK}\n"]
    return "".join([*lines[:end], *added, *lines[end:]])


def program_attribute(harness_cls: type) -> tuple[object, str] | None:
    """The harness module and the attribute its program lives in, or None (a harness that builds
    its program otherwise is left as Verifiers runs it)."""
    module = sys.modules.get(harness_cls.__module__)
    for name in PROGRAM_ATTRIBUTES:
        source = getattr(module, name, None)
        if isinstance(source, str) and PEP723_BLOCK.search(source):
            return module, name
    return None


# (module, attribute) → [the program Verifiers' module had, how many holds are live]
_HELD: dict[tuple[str, str], list[Any]] = {}


def hold(harness_cls: type, harness_env: Mapping[str, str]) -> str | None:
    """Hold the harness class' program to the host's versions where Verifiers reads it and return
    the program it will run, or None when the class has no PEP 723 program. This rewrites an
    attribute of Verifiers' module, for the whole process (Verifiers looks it up at each
    preparation): `release(harness_cls)` undoes it once every hold of it is released (a run's
    environment releases its holds when its rollout function closes: `EpisodeBackend.release`)."""
    found = program_attribute(harness_cls)
    if found is None:
        return None
    module, name = found
    source: str = getattr(module, name)
    try:
        program = held(source, compatible(pins_for(harness_env), unheld(source)))
    except ValueError as exc:  # a program with its own uv settings keeps them
        logger.warning("%s.%s is not held to this environment's versions: %s", harness_cls.__module__, name, exc)
        return source
    record = _HELD.setdefault((harness_cls.__module__, name), [source, 0])
    record[1] += 1
    setattr(module, name, program)
    return program


def release(harness_cls: type) -> None:
    """Undo one `hold` of the class' program: the last one puts Verifiers' own program back."""
    found = program_attribute(harness_cls)
    if found is None:
        return
    module, name = found
    record = _HELD.get((harness_cls.__module__, name))
    if record is None:
        return
    record[1] -= 1
    if record[1] <= 0:
        del _HELD[(harness_cls.__module__, name)]
        setattr(module, name, record[0])
