"""The compatibility table: verifiers × renderers (× openai where it matters) → what the
version gate decides, and which matrix cell (tox env) proves it on every dependency bump.

`vf-sglang compat` prints it; `vf-sglang compat --write [--out PATH]` writes the document to
PATH, default `docs/compatibility.md` under the working directory (never into the installed
package). A test fails when the committed table disagrees with the gate.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from adapter.versions import coinstall
from adapter.versions.gate import ALLOW_UNTESTED_ENV, NEWEST_KNOWN, decide, installed_decision

DOC_NAME = Path("docs") / "compatibility.md"  # relative to the working directory (or --out)
BEGIN, END = "<!-- compat-table:begin -->", "<!-- compat-table:end -->"
# which verifiers fit beside each SGLang release in one environment (adapter/versions/coinstall.py)
BESIDE_BEGIN, BESIDE_END = "<!-- beside-sglang:begin -->", "<!-- beside-sglang:end -->"
# the canary's section (`python -m tools.canary run --write`): carried over unchanged by `compat --write`
NEWEST_BEGIN, NEWEST_END = "<!-- newest-published:begin -->", "<!-- newest-published:end -->"
NEWEST_HEADING = "## Newest published (the canary)"
NEWEST_PENDING = "Not run yet: `uvx --with tox-uv tox -e canary` writes this section."


@dataclass(frozen=True)
class Cell:
    verifiers: str
    renderers: str
    openai: str = ""  # a pin that matters (sglang's), else empty
    tox_env: str = ""  # the matrix cell that runs the contract checks and an episode group
    note: str = ""
    untested: bool = False  # decided with the opt-in (ALLOW_UNTESTED_ENV) set
    httpx2: str = ""  # an httpx2 installed beside it that matters (adapter/versions/breaks.py), else empty


CELLS: tuple[Cell, ...] = (
    Cell("0.2.0", "0.1.8", tox_env="contract-vf020-r018"),
    Cell("0.2.0", "0.1.10", tox_env="contract-vf020", note="locked default"),
    Cell("0.2.0", "0.1.10", "2.6.1", "contract-vf020-sglang-openai", "openai pinned as sglang 0.5.15 pins it"),
    Cell("0.2.0", "0.1.11"),
    Cell("0.2.1", "0.1.10", tox_env="contract-vf021"),
    Cell("0.2.1", "0.1.12", note="what pip picks for verifiers 0.2.1 by default"),
    Cell("0.3.0", "0.1.12", tox_env="contract-vf030"),
    Cell("0.3.1", "0.1.12", tox_env="contract-vf031", note="the cell's pins hold httpx2 2.16.2"),
    Cell("0.3.1", "0.1.12", httpx2="2.17.0", note="what a fresh `pip install verifiers==0.3.1` picks"),
    Cell("0.3.1", "0.1.9"),
    Cell("0.4.0", "0.1.12", tox_env="contract-vf040"),
    Cell("0.4.0", "0.1.10"),
    Cell("0.4.1.dev86", "0.1.13.dev17", tox_env="contract-vf041dev", note="pre-releases: the pair a cell proves"),
    Cell("0.4.0", "0.1.13.dev17", note="an unproven pre-release"),
    Cell("0.1.9", "0.1.10", note="pre-V1"),
    Cell("0.4.1", "0.1.12", note="newer than this release knows"),
    Cell("0.4.1", "0.1.12", note=f"`{ALLOW_UNTESTED_ENV}=1`", untested=True),
    Cell("0.5.0", "0.1.12", note=f"`{ALLOW_UNTESTED_ENV}=1`", untested=True),
    Cell("0.2.0", "0.1.11", note=f"`{ALLOW_UNTESTED_ENV}=1` never un-refuses a known break", untested=True),
)


def render_table() -> str:
    rows = ["| verifiers | renderers | openai | httpx2 | result | generation | matrix cell | note |",
            "|---|---|---|---|---|---|---|---|"]
    for cell in CELLS:
        decision = decide(cell.verifiers, cell.renderers, allow_untested=cell.untested,
                          beside={"httpx2": cell.httpx2 or None})
        if not decision.supported:
            result = f"refused: {decision.reason}"
        else:
            result = f"runs with a warning: {decision.warning}" if decision.warning else "pass"
        rows.append(f"| {cell.verifiers} | {cell.renderers} | {cell.openai or '—'} | {cell.httpx2 or '—'} | {result} | "
                    f"{decision.generation or '—'} | {f'`{cell.tox_env}`' if cell.tox_env else '—'} | "
                    f"{cell.note or ''} |")
    return "\n".join(rows)


def newest_section(text: str | None) -> str:
    """The canary's section of an existing document (its body between the markers), if it has one."""
    if text is None or NEWEST_BEGIN not in text or NEWEST_END not in text:
        return NEWEST_PENDING
    return committed_table(text, NEWEST_BEGIN, NEWEST_END)


def with_newest_section(text: str, section: str) -> str:
    """`text` (a rendered document) with the canary's section replaced by `section`."""
    head, rest = text.split(NEWEST_BEGIN, 1)
    return f"{head}{NEWEST_BEGIN}\n{section.strip()}\n{NEWEST_END}{rest.split(NEWEST_END, 1)[1]}"


def render_doc(today: datetime.date | None = None, existing: str | None = None) -> str:
    """The whole document; the canary's section is carried over from `existing` (the file as it was)."""
    installed = installed_decision()
    date = (today or datetime.date.today()).isoformat()
    return "\n".join([
        "# Compatibility", "",
        f"Generated by `vf-sglang compat --write` on {date}, from the version gate "
        f"(`adapter/versions/gate.py`), with verifiers {installed.verifiers} and renderers "
        f"{installed.renderers} installed. \"pass\" rows are proven by their matrix cell: "
        "`uvx --with tox-uv tox -e <cell>` installs that pair from PyPI and runs tests/contract "
        "(wire contract against the installed renderers, one real episode group, group rewards). "
        "Every refusal's fix is one of those rows, of the refused release's own generation. A verifiers "
        f"newer than {NEWEST_KNOWN} is refused unless `{ALLOW_UNTESTED_ENV}=1` is set: then it runs as "
        "the newest known generation, untested, with a warning naming the release; the opt-in never "
        "accepts a pair the gate knows to be broken.", "",
        BEGIN, render_table(), END, "",
        "## Beside SGLang in one environment", "",
        "The adapter speaks HTTP to SGLang and needs no sglang in its own environment: there every row "
        "above holds. Where one environment holds both (a trainer image such as Miles', SGLang "
        f"{coinstall.MILES_SGLANG}), SGLang's exact openai pin decides which verifiers install beside it "
        "(from `adapter/versions/coinstall.py`; `vf-sglang versions` checks the installed ones).", "",
        BESIDE_BEGIN, coinstall.render_table(), BESIDE_END, "",
        NEWEST_HEADING, "",
        NEWEST_BEGIN, newest_section(existing), NEWEST_END, "",
    ])


def committed_table(text: str, begin: str = BEGIN, end: str = END) -> str:
    return text.split(begin, 1)[1].split(end, 1)[0].strip()
