"""The report every checker of the course returns, and how a checker calls a reader's code.

A checker (:func:`~rope_lessons.rope.check.check_rope` and those in
:mod:`rope_lessons.practice`) runs a function the reader wrote on cases it
builds, compares each result with a reference, and, when they differ, names the
bug in the reader's terms. It returns a :class:`Report`; printing the report
gives the verdict, the diagnosis, the number of cases tried and failed, the
first failing case and the size of the error.

A diagnosis starts with its verdict: ``"correct"``, ``"not written yet"`` (the
function still raises ``NotImplementedError``, as an exercise's stub does),
``"<name> raised"``, the name of a bug, or ``"unrecognised difference"``, and
then says what was seen and how to fix it.

What several checkers share is written here once: the messages they give alike
(:func:`raised`, :func:`tensor_or_reason`, :func:`wrong_shape`, :func:`unrecognised`)
and their ``dtypes`` argument (:func:`check_dtypes`, :func:`dtype_name`).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = [
    "Report",
    "check_dtypes",
    "dtype_name",
    "raised",
    "relative_error_text",
    "tensor_or_reason",
    "unrecognised",
    "wrong_shape",
]

_WIDTH = 88


@dataclass(frozen=True)
class Report:
    """What a checker found.

    Attributes:
        ok: whether the reader's function matched the reference on every case.
        diagnosis: one message, starting with its verdict (``"correct"``, ``"not
            written yet"``, ``"<name> raised"``, a bug's name or ``"unrecognised
            difference"``), then the details and the fix.
        max_error: the largest error over the cases, in the unit the checker
            documents (relative to the inputs' size for tensors); ``inf`` when
            the function raised or returned something that cannot be compared.
        cases: every case the checker tried, one line each.
        failed: the cases on which the function differed from the reference (or
            raised), in the order tried.
    """

    ok: bool
    diagnosis: str
    max_error: float
    cases: tuple[str, ...]
    failed: tuple[str, ...]

    @property
    def first_failure(self) -> str | None:
        """The first case that failed, or ``None`` when every case passed."""
        return self.failed[0] if self.failed else None

    def __str__(self) -> str:
        """The report as a notebook prints it: no rounding-level digits, so it reads the
        same on every machine."""
        lines = [f"ok: {self.ok}"]
        lines += textwrap.wrap(
            self.diagnosis,
            _WIDTH,
            initial_indent="  ",
            subsequent_indent="    ",
            break_on_hyphens=False,  # "VO-RoPE", "-2k/d" stay whole
        )
        lines.append(f"cases: {len(self.cases)} tried, {len(self.failed)} failed")
        if self.first_failure is not None:
            lines.append(f"first failing case: {self.first_failure}")
        if not self.ok and math.isfinite(self.max_error):
            lines.append(f"largest error: {relative_error_text(self.max_error)}")
        return "\n".join(lines)


def check_dtypes(dtypes: object, allowed: Sequence[torch.dtype]) -> tuple[torch.dtype, ...]:
    """A checker's ``dtypes`` argument, checked: a non-empty sequence of dtypes from ``allowed``.

    Raises:
        TypeError: if ``dtypes`` is not a non-empty sequence.
        ValueError: for a dtype not in ``allowed``.
    """
    if not isinstance(dtypes, Sequence) or isinstance(dtypes, str) or not dtypes:
        raise TypeError(f"dtypes must be a non-empty sequence of torch dtypes, got {dtypes!r}")
    for dtype in dtypes:
        if dtype not in allowed:
            raise ValueError(f"dtypes must be among {[str(d) for d in allowed]}, got {dtype!r}")
    return tuple(dtypes)


def dtype_name(dtype: torch.dtype) -> str:
    """A dtype as case names print it: ``"float32"`` for ``torch.float32``."""
    return str(dtype).removeprefix("torch.")


def raised(
    error: Exception, name: str, case: str, cases: Sequence[str], *, hint: str = ""
) -> Report:
    """The report for a function ``name`` that raised ``error`` on ``case``.

    ``NotImplementedError`` is an exercise's stub not yet written; anything else is
    a bug, reported with its type and message, then ``hint`` (a likely cause, the
    checker's own, starting with ``"; "``; empty when it has none).
    """
    if isinstance(error, NotImplementedError):
        diagnosis = (
            f"not written yet: {name} raised NotImplementedError ({case}); write its body "
            "in place of the raise, run that cell, then run the check again"
        )
    else:
        diagnosis = f"{name} raised {type(error).__name__}: {error} ({case}){hint}"
    return Report(False, diagnosis, math.inf, tuple(cases), (case,))


def tensor_or_reason(out: object, name: str, case: str) -> torch.Tensor | str:
    """``out`` if the function ``name`` returned a tensor on ``case``, else the diagnosis
    that says what it returned instead."""
    if isinstance(out, torch.Tensor):
        return out
    return f"{name} did not return a tensor: it returned {type(out).__name__} ({case})"


def relative_error_text(error: float) -> str:
    """``error`` to two significant digits, as diagnoses quote it: ``800``, not ``8e+02``."""
    return f"{float(f'{error:.2g}'):g}"


def wrong_shape(
    out: torch.Tensor, case: str, *, inputs: str, shape: Sequence[int], fix: str, name: str = "fn"
) -> str:
    """The diagnosis of an output ``out`` of the wrong shape, returned by ``name`` on ``case``.

    Args:
        out: what the function returned.
        case: the case it returned it on.
        inputs: what it was given, e.g. ``"x"``.
        shape: the shape of ``inputs``.
        fix: what to return instead, e.g. ``"return the rotated x, (B, H, T, D)"``.
        name: the function's name.
    """
    return (
        f"wrong output shape: {name} returned {tuple(out.shape)} for {inputs} of shape "
        f"{tuple(shape)} ({case}); {fix}"
    )


def unrecognised(case: str, error: float, what: str) -> str:
    """The diagnosis of a difference no known bug explains: where, how large, what to compare.

    Args:
        case: the first failing case.
        error: the largest error, in the checker's unit.
        what: what the reader should compare next, e.g. ``"print fn(x, positions)
            beside the reference for this case"``.
    """
    return (
        f"unrecognised difference: largest error {relative_error_text(error)}, first on "
        f"{case}; none of the known bugs reproduces it. {what}"
    )
