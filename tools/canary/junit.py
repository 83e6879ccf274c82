"""The first failing check of a pytest run, read from its JUnit XML report (`--junitxml`)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Outcome:
    tests: int
    failed: int  # failures + errors (a collection error is a failure of the run)
    first_failure: str | None  # "path::test: first line of the message"

    @property
    def passed(self) -> bool:
        return self.failed == 0 and self.tests > 0


def _node_id(classname: str, name: str) -> str:
    """pytest writes `tests.contract.test_contract` (+ `.Class`) as classname; a module that failed
    to collect has no classname and the dotted module as its name."""
    if not classname:
        return name.replace(".", "/") + ".py"
    parts = classname.split(".")
    module = [p for p in parts if not p[:1].isupper()]
    classes = [p for p in parts if p[:1].isupper()]
    path = "/".join(module) + ".py" if module else classname
    return "::".join([path, *classes, name]) if name else path


def read(report: Path) -> Outcome:
    """The outcome of the run that wrote `report`; a missing or empty report is a failed run."""
    if not report.is_file():
        return Outcome(0, 1, f"no JUnit report at {report}: pytest did not run")
    root = ET.parse(report).getroot()
    cases = list(root.iter("testcase"))
    first: str | None = None
    failed = 0
    for case in cases:
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is None:
            continue
        failed += 1
        if first is None:
            message = (bad.get("message") or bad.text or "").strip().splitlines()
            node = _node_id(case.get("classname", ""), case.get("name", ""))
            first = f"{node}: {message[0]}" if message else node
    if not cases:
        return Outcome(0, 1, "pytest collected no test")
    return Outcome(len(cases), failed, first)
