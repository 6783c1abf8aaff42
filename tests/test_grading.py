"""The report every checker returns: what it prints, and how a stub or a raise reads."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from rope_lessons._grading import Report, raised, relative_error_text, unrecognised

CASES = ("d=8, float64", "d=64, float32", "d=64, bfloat16")


def test_a_passing_report_prints_no_error_and_no_failing_case() -> None:
    report = Report(True, "correct: fn matches", 3.1e-17, CASES, ())
    assert report.first_failure is None
    assert str(report) == "ok: True\n  correct: fn matches\ncases: 3 tried, 0 failed"


def test_a_failing_report_names_its_first_failing_case_and_the_error() -> None:
    report = Report(False, "rotation in the wrong direction: ...", 1.96, CASES, CASES[1:])
    assert report.first_failure == "d=64, float32"
    lines = str(report).splitlines()
    assert lines[0] == "ok: False"
    assert "cases: 3 tried, 2 failed" in lines
    assert "first failing case: d=64, float32" in lines
    assert lines[-1] == "largest error: 2"


def test_long_diagnoses_wrap_without_breaking_words_at_hyphens() -> None:
    diagnosis = "value rotated the wrong way: " + "VO-RoPE turns the value by R_n " * 8
    lines = str(Report(False, diagnosis, math.inf, CASES, CASES[:1])).splitlines()
    assert all(len(line) <= 88 for line in lines)
    assert not any(line.rstrip().endswith("VO-") for line in lines)
    assert not any(line.startswith("largest error") for line in lines)  # inf is not printed


def test_a_stub_reads_not_written_yet_and_a_bug_that_raises_reads_raised() -> None:
    stub = raised(NotImplementedError("write it"), "my_rope", CASES[0], CASES)
    assert not stub.ok and stub.diagnosis.startswith("not written yet: my_rope raised")
    assert stub.failed == (CASES[0],) and stub.cases == CASES and stub.max_error == math.inf
    bug = raised(IndexError("index 8 is out of bounds"), "fn", CASES[2], CASES)
    assert bug.diagnosis == f"fn raised IndexError: index 8 is out of bounds ({CASES[2]})"


def test_an_unrecognised_difference_gives_the_case_and_the_size_of_the_error() -> None:
    message = unrecognised(CASES[1], 0.1234, "Print fn's output beside the reference.")
    assert message.startswith("unrecognised difference: largest error 0.12, first on d=64")
    assert message.endswith("Print fn's output beside the reference.")


@given(st.floats(min_value=1e-12, max_value=1e12))
def test_errors_are_quoted_to_two_significant_digits(error: float) -> None:
    quoted = relative_error_text(error)
    assert "e+" not in quoted or float(quoted) >= 1e6  # 800, not 8e+02
    assert math.isclose(float(quoted), error, rel_tol=0.051)  # two digits: within 5 %
    assert len(quoted.replace(".", "").lstrip("0").split("e")[0].rstrip("0")) <= 2
