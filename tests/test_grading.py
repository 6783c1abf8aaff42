"""The report every checker returns: what it prints, and how a stub or a raise reads."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons._checks import check_seed
from rope_lessons._grading import (
    Report,
    check_dtypes,
    dtype_name,
    raised,
    relative_error_text,
    tensor_or_reason,
    unrecognised,
    wrong_shape,
)

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


def test_a_hint_follows_the_case_of_a_bug_but_not_of_a_stub() -> None:
    hint = "; read positions as positions[:, None, :]"
    bug = raised(RuntimeError("size mismatch"), "fn", CASES[1], CASES, hint=hint)
    assert bug.diagnosis == f"fn raised RuntimeError: size mismatch ({CASES[1]}){hint}"
    stub = raised(NotImplementedError(), "fn", CASES[1], CASES, hint=hint)
    assert stub.diagnosis == raised(NotImplementedError(), "fn", CASES[1], CASES).diagnosis


def test_a_tensor_passes_and_anything_else_is_named() -> None:
    out = torch.zeros(2)
    assert tensor_or_reason(out, "fn", CASES[0]) is out
    assert tensor_or_reason([0.0, 1.0], "fn", CASES[0]) == (
        f"fn did not return a tensor: it returned list ({CASES[0]})"
    )


def test_dtypes_are_checked_against_those_allowed_and_named_as_cases_print_them() -> None:
    allowed = (torch.float64, torch.float32)
    assert check_dtypes([torch.float32], allowed) == (torch.float32,)
    with pytest.raises(ValueError, match="must be among"):
        check_dtypes((torch.float16,), allowed)
    for wrong in ((), "float32", torch.float32):
        with pytest.raises(TypeError, match="non-empty sequence"):
            check_dtypes(wrong, allowed)
    assert dtype_name(torch.bfloat16) == "bfloat16"


def test_a_wrong_shape_is_quoted_beside_the_inputs_shape_with_the_fix() -> None:
    out = torch.zeros(2, 3)
    message = wrong_shape(out, CASES[0], inputs="x", shape=torch.Size([3, 2]), fix="transpose")
    expected = f"fn returned (2, 3) for x of shape (3, 2) ({CASES[0]}); transpose"
    assert message == f"wrong output shape: {expected}"


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


def test_a_checkers_seed_is_an_int_in_what_torch_manual_seed_takes() -> None:
    """check_seed, which every seeded checker calls: ints in [0, 2**63), by name otherwise."""
    assert check_seed(0) == 0 and check_seed(2**63 - 1) == 2**63 - 1
    for wrong_type in (True, 0.5, "0", None):
        with pytest.raises(TypeError, match="seed must be an int"):
            check_seed(wrong_type)
    for out_of_range in (-1, 2**63):
        with pytest.raises(ValueError, match="seed must be >= 0 and below 2"):
            check_seed(out_of_range)
