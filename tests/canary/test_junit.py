"""The canary names a failure by the first failing check of the JUnit report."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.canary.junit import read

REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.contract.test_contract" name="test_ok" time="0.1"/>
{bad}
<testcase classname="tests.contract.test_contract" name="test_later" time="0.1">
<failure message="later">x</failure></testcase>
</testsuite></testsuites>"""


@pytest.mark.parametrize(("bad", "first"), [
    ('<testcase classname="tests.contract.test_contract" name="test_parse[a]" time="0.1">'
     '<failure message="AttributeError: no parse&#10;more">tb</failure></testcase>',
     "tests/contract/test_contract.py::test_parse[a]: AttributeError: no parse"),
    ('<testcase classname="tests.contract.test_contract.TestX" name="test_y" time="0.1">'
     '<error message="boom">tb</error></testcase>',
     "tests/contract/test_contract.py::TestX::test_y: boom"),
    ('<testcase classname="" name="tests.conformance.test_sglang_schema" time="0"><error message="collection failure">'
     'tb</error></testcase>', "tests/conformance/test_sglang_schema.py: collection failure"),
])
def test_the_first_failure_is_named_by_its_node_id_and_message(tmp_path: Path, bad: str, first: str) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(REPORT.format(bad=bad))
    outcome = read(report)
    assert (outcome.tests, outcome.failed, outcome.first_failure, outcome.passed) == (3, 2, first, False)


def test_a_run_that_wrote_no_report_or_no_test_is_a_failure(tmp_path: Path) -> None:
    assert not read(tmp_path / "missing.xml").passed
    empty = tmp_path / "empty.xml"
    empty.write_text('<testsuites><testsuite name="pytest"/></testsuites>')
    assert read(empty).first_failure == "pytest collected no test"
