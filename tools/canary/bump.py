"""`python -m tools.canary bump PACKAGE [VERSION]`: move one pin where it lives, relock, regenerate
docs/compatibility.md, and print the lanes the bump must pass (`rules.RULES`).

pyproject pins (an exact `name==X` in pyproject.toml) are rewritten, then `uv lock
--upgrade-package`; lock-only packages get `uv lock --upgrade-package name==V`; smg's pin is
tox.ini's. Then every copy of the pin the rule lists (docs, commands, lanes' own requirements) is
rewritten, and the lanes' compiled requirements it names are recompiled. A new SGLang release
needs its CPU recipe first (`python -m e2e.sglang_cpu lock --version V`, which may need new
`sgl_kernel` stand-ins): this command says so and changes nothing.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from adapter.cli.compat import DOC_NAME, render_doc, with_newest_section
from e2e.sglang_cpu.uvcmd import uv_env, uv_executable
from tools.canary.releases import newest
from tools.canary.rules import BY_NAME, REPO, Rule, current_pin

__all__ = ["BY_NAME", "main", "pin_pattern", "rewrite_copies", "write_newest_section"]


def write_newest_section(section: str, repo: Path = REPO) -> Path:
    """docs/compatibility.md with the canary's section replaced (the rest regenerated from the gate)."""
    doc = repo / DOC_NAME
    text = render_doc(existing=doc.read_text() if doc.is_file() else None)
    doc.write_text(with_newest_section(text, section))
    return doc


def _replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if text.count(old) != 1:
        raise SystemExit(f"bump: expected one `{old}` in {path}, found {text.count(old)}: edit it by hand")
    path.write_text(text.replace(old, new))


def pin_pattern(package: str, version: str) -> re.Pattern[str]:
    """`package==version` as a whole pin (not a prefix of `package==version.1` nor of `xpackage`)."""
    return re.compile(rf"(?<![\w.-]){re.escape(package)}=={re.escape(version)}(?!\w|\.\w)")


def rewrite_copies(rule: Rule, old: str, new: str, repo: Path = REPO) -> list[str]:
    """Every copy the rule lists, its `package==old` pins moved to `new`; a listed copy holding
    none stops the bump (the copy moved: its rule must say where)."""
    pattern = pin_pattern(rule.package, old)
    for relative in rule.copies:
        path = repo / relative
        text = path.read_text()
        if not pattern.search(text):
            raise SystemExit(f"bump: {relative} holds no `{rule.package}=={old}`: "
                             "update its copies in tools/canary/rules.py")
        path.write_text(pattern.sub(f"{rule.package}=={new}", text))
    return list(rule.copies)


def main(args: argparse.Namespace, repo: Path = REPO) -> int:
    rule = BY_NAME[args.package]
    version = args.version or newest(args.package)
    old = current_pin(args.package, repo)
    if version == old:
        print(f"bump: {args.package} is already {version}")
        return 0
    if not re.fullmatch(r"[0-9][0-9A-Za-z.+-]*", version):
        raise SystemExit(f"bump: {version!r} is not a version")
    uv = uv_executable()
    if rule.pinned == "sglang-cpu":
        print(f"bump: sglang {version} needs its CPU recipe first: "
              f"`python -m e2e.sglang_cpu lock --version {version}`, "
              f"then VF_SGLANG_CPU_VERSION in tox.ini and SGLANG_CHECKED_VERSIONS in adapter/wire/translate.py; "
              f"lanes: {', '.join(rule.lanes)}")
        return 2
    if rule.pinned == "tox":
        _replace_once(repo / "tox.ini", f"{args.package}=={old}", f"{args.package}=={version}")
    else:
        if rule.pinned == "pyproject":
            _replace_once(repo / "pyproject.toml", f'"{args.package}=={old}"', f'"{args.package}=={version}"')
        target = args.package if rule.pinned == "pyproject" else f"{args.package}=={version}"
        subprocess.run([uv, "lock", "--upgrade-package", target], cwd=repo, env=uv_env(), check=True, timeout=600)
    for relative in rewrite_copies(rule, old, version, repo):
        print(f"bump: {relative}: {args.package}=={version}")
    for command in rule.relock:
        print(f"bump: {command}")
        subprocess.run([sys.executable, "-m", *command.split()[2:]], cwd=repo, check=True, timeout=1800)
    subprocess.run([sys.executable, "-m", "adapter.cli", "compat", "--write", "--out", str(repo / DOC_NAME)],
                   cwd=repo, check=True, timeout=300)
    print(f"bump: {args.package} {old} -> {version}; regenerated {DOC_NAME}")
    print("bump: now run: " + "; ".join(f"uvx --with tox-uv tox -e {lane}" for lane in rule.lanes))
    return 0
