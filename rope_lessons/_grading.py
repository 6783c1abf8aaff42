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
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Report", "raised", "relative_error_text", "unrecognised"]

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


def raised(error: Exception, name: str, case: str, cases: Sequence[str]) -> Report:
    """The report for a function ``name`` that raised ``error`` on ``case``.

    ``NotImplementedError`` is an exercise's stub not yet written; anything else is
    a bug, reported with its type and message.
    """
    if isinstance(error, NotImplementedError):
        diagnosis = (
            f"not written yet: {name} raised NotImplementedError ({case}); write its body "
            "in place of the raise, run that cell, then run the check again"
        )
    else:
        diagnosis = f"{name} raised {type(error).__name__}: {error} ({case})"
    return Report(False, diagnosis, math.inf, tuple(cases), (case,))


def relative_error_text(error: float) -> str:
    """``error`` to two significant digits, as diagnoses quote it: ``800``, not ``8e+02``."""
    return f"{float(f'{error:.2g}'):g}"


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
