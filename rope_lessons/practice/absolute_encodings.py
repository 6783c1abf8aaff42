r"""Chapter 2's exercise: the sinusoidal position code of Vaswani et al.

The reader writes ``fn(n_positions, dim)``: the table whose row ``p`` is the code of
position ``p`` (0-based), :math:`PE(p)_{2k} = \sin(p\,\omega_k)` and
:math:`PE(p)_{2k+1} = \cos(p\,\omega_k)` with :math:`\omega_k = \text{base}^{-2k/d}`,
sine at even and cosine at odd columns, as
:func:`rope_lessons.rope.encodings.sinusoidal` builds it. :func:`check_sinusoidal`
compares the two on four tables: position 0 alone, 16 positions with ``d = 8``, 64
with ``d = 64`` and 2048 with ``d = 16``. When they differ it looks for the bug among
the usual ones, each a wrong table built with the package's ``sinusoidal`` and
:func:`~rope_lessons.rope.ladder.frequencies`, and reports the one that reproduces
``fn`` on every table:

* sine and cosine swapped (cosine at the even columns);
* all the sines first and all the cosines after (concatenated halves) in place of
  interleaved columns;
* positions counted from 1;
* other frequencies: the exponents ``k/d``, ``4k/d`` (the column index ``2k`` taken
  for Vaswani's ``i``), ``2k/(d-2)`` or ``2(k+1)/d`` in place of ``2k/d``; the
  ladder reversed, inverted (``base^(+2k/d)``) or flat (exponents 0 from integer
  division); another base (estimated from the angles), or any other frequencies
  (measured).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from rope_lessons._checks import check_base
from rope_lessons._grading import Report, raised, tensor_or_reason, unrecognised
from rope_lessons.rope.encodings import sinusoidal
from rope_lessons.rope.ladder import (
    MisreadLadder,
    base_from_slowest,
    frequencies,
    misread_ladders,
)

__all__ = ["check_sinusoidal"]

SinusoidalFn = Callable[[int, int], torch.Tensor]

_SIZES = ((1, 8), (16, 8), (64, 64), (2048, 16))  # (n_positions, dim) of each table
_EPS32 = torch.finfo(torch.float32).eps
Order = Literal["sin_first", "cos_first"]
Columns = Literal["interleaved", "concatenated"]
_ORDERS: tuple[Order, ...] = ("sin_first", "cos_first")
_COLUMNS: tuple[Columns, ...] = ("interleaved", "concatenated")


@dataclass(frozen=True, eq=False)
class _Case:
    name: str
    n_positions: int
    dim: int
    reference: torch.Tensor  # (n, d) float64
    tolerance: float  # absolute: the codes lie in [-1, 1]


@dataclass(frozen=True, eq=False)
class _Result:
    case: _Case
    output: torch.Tensor  # (n, d) float64
    error: float  # max |output - reference|

    @property
    def passed(self) -> bool:
        return self.error <= self.case.tolerance


@dataclass(frozen=True, eq=False)
class _Frequencies:
    """A hypothesis about the frequencies of ``fn``: ``(d/2,)`` per dimension ``d``."""

    omega: dict[int, torch.Tensor]
    bug: str | None  # None for the ladder base^(-2k/d)


@dataclass(frozen=True, eq=False)
class _Candidate:
    """A sinusoidal table written with up to four bugs."""

    frequencies: _Frequencies
    order: Order
    columns: Columns
    shift: int  # row p encodes position p + shift


def check_sinusoidal(fn: SinusoidalFn, base: float = 10000.0) -> Report:
    r"""Check that ``fn`` builds the sinusoidal code with ``base``, and name what is wrong.

    ``fn(n_positions, dim)`` gets two ints (``dim`` even) and returns a floating
    tensor of shape ``(n_positions, dim)`` (float32 or float64) whose row ``p`` is
    the code of position ``p``, counted from 0: :math:`\sin(p\,\omega_k)` in column
    ``2k`` and :math:`\cos(p\,\omega_k)` in column ``2k + 1``, with
    :math:`\omega_k = \text{base}^{-2k/d}`. It is called positionally, ``fn(n,
    d)``, for ``(n, d)`` = (1, 8), (16, 8), (64, 64) and (2048, 16), and compared
    with :func:`~rope_lessons.rope.encodings.sinusoidal` computed in float64. The
    tolerance allows angles formed in float32 (``16 eps (1 + p)`` at position ``p``).

    The diagnosis starts with one of these phrases (the messages of several bugs
    that one wrong table reproduces are joined by ``"; "``):

    * ``"correct"``: every table matched;
    * ``"sin and cos swapped"``; ``"sines and cosines concatenated"``;
    * ``"positions counted from 1"``;
    * ``"wrong exponent"`` (``k/d``, ``4k/d``, ``2k/(d-2)`` or ``2(k+1)/d``),
      ``"frequency ladder reversed"``, ``"frequencies inverted"``, ``"every pair
      turns at 1 radian per position"``, ``"wrong base"`` (with the base the
      angles fit), ``"wrong frequencies"`` (with those measured);
    * ``"fn raised"``, ``"fn did not return a tensor"``, ``"wrong output shape"``,
      ``"wrong output dtype"``;
    * ``"unrecognised difference"``: none of the above reproduces ``fn``;
    * ``"not written yet"``: ``fn`` raised ``NotImplementedError``.

    Args:
        fn: the function to check, ``(n_positions, dim) -> (n_positions, dim)`` table.
        base: the base ``fn`` claims, > 1 (10000 in Vaswani et al.).

    Returns:
        A :class:`~rope_lessons._grading.Report`; ``max_error`` is the largest
        absolute difference of one entry.

    Raises:
        TypeError: if ``fn`` is not callable or ``base`` not a number.
        ValueError: if ``base <= 1``.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, fn(n_positions, dim) -> table; got {fn!r}")
    base = check_base(base)
    cases = [_case(n, d, base) for n, d in _SIZES]
    names = tuple(case.name for case in cases)
    results: list[_Result] = []
    with torch.no_grad():
        for case in cases:
            try:
                out: object = fn(case.n_positions, case.dim)
            except Exception as error:  # the reader's code may raise anything; a stub, too
                return raised(error, "fn", case.name, names)
            checked = _checked_output(out, case)
            if isinstance(checked, str):
                return Report(False, checked, math.inf, names, (case.name,))
            output = checked.detach().to(torch.float64)
            largest = float((output - case.reference).abs().max())
            results.append(_Result(case, output, largest if math.isfinite(largest) else math.inf))
    failed = tuple(r.case.name for r in results if not r.passed)
    max_error = max(r.error for r in results)
    if failed:
        return Report(False, _diagnose(results, base), max_error, names, failed)
    diagnosis = (
        f"correct: fn matches sinusoidal(n_positions, dim, base={base:g}) on all "
        f"{len(cases)} tables (position 0 alone, d = 8, 64 and 16, positions up to "
        f"{max(n for n, _ in _SIZES) - 1}): sin(p·ω_k) in column 2k, cos(p·ω_k) in "
        "column 2k + 1, ω_k = base^(-2k/d)"
    )
    return Report(True, diagnosis, max_error, names, ())


def _case(n_positions: int, dim: int, base: float) -> _Case:
    described = "position 0 alone" if n_positions == 1 else f"positions 0 .. {n_positions - 1}"
    return _Case(
        name=f"fn({n_positions}, {dim}): {described}, d = {dim}",
        n_positions=n_positions,
        dim=dim,
        reference=sinusoidal(n_positions, dim, base, dtype=torch.float64),
        tolerance=16 * _EPS32 * n_positions,
    )


def _checked_output(out: object, case: _Case) -> torch.Tensor | str:
    """``out`` if it can be compared with the reference, else why not."""
    out = tensor_or_reason(out, "fn", case.name)
    if isinstance(out, str):
        return out
    expected = (case.n_positions, case.dim)
    if tuple(out.shape) != expected:
        hint = (
            "; the table is transposed"
            if tuple(out.shape) == expected[::-1]
            else "; drop any batch axis"
            if out.numel() == case.n_positions * case.dim
            else ""
        )
        return (
            f"wrong output shape: fn returned {tuple(out.shape)} ({case.name}); return one "
            f"row per position, (n_positions, dim) = {expected}{hint}"
        )
    if not out.is_floating_point():
        return (
            f"wrong output dtype: fn returned {out.dtype} ({case.name}); return a floating "
            "table (float32, as sinusoidal does, or float64)"
        )
    return out


def _diagnose(results: list[_Result], base: float) -> str:
    """Name the bug of an ``fn`` that failed some table."""
    candidate = _reproduction(results, base)
    if candidate is not None:
        return "; ".join(_bugs(candidate, base))
    failed = [r for r in results if not r.passed]
    worst = max(results, key=lambda r: r.error)
    return unrecognised(
        failed[0].case.name,
        worst.error,
        "Print fn's first rows beside sinusoidal(n_positions, dim) for that table: row 0 "
        "must be 0, 1, 0, 1, ... and row 1 sin(ω_k), cos(ω_k)",
    )


def _reproduction(results: list[_Result], base: float) -> _Candidate | None:
    """The simplest wrong table that matches ``fn`` on every case, if one does: fewest
    bugs first, then the order of :func:`_frequency_hypotheses`."""
    ranked = []
    for rank, hypothesis in enumerate(_frequency_hypotheses(results, base)):
        for order, columns, shift in itertools.product(_ORDERS, _COLUMNS, (0, 1)):
            candidate = _Candidate(hypothesis, order, columns, shift)
            bugs = len(_bugs(candidate, base))
            if bugs:
                ranked.append((bugs, rank, candidate))
    ranked.sort(key=lambda item: item[:2])
    ordered = sorted(results, key=lambda r: r.passed)  # failures first: they rule out most
    tables: dict[tuple[int, int], torch.Tensor] = {}
    for _, _, candidate in ranked:
        if all(_matches(candidate, r, tables) for r in ordered):
            return candidate
    return None


def _matches(
    candidate: _Candidate, result: _Result, tables: dict[tuple[int, int], torch.Tensor]
) -> bool:
    case = result.case
    key = (id(candidate.frequencies), id(case))
    if key not in tables:  # one more row than the case, for positions from 1
        tables[key] = _table(case.n_positions + 1, candidate.frequencies.omega[case.dim])
    table = tables[key][candidate.shift : candidate.shift + case.n_positions]  # (n, d)
    if candidate.order == "cos_first":
        table = table.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)
    if candidate.columns == "concatenated":
        table = torch.cat((table[:, 0::2], table[:, 1::2]), -1)
    return float((table - result.output).abs().max()) <= case.tolerance


def _table(n_positions: int, omega: torch.Tensor) -> torch.Tensor:
    """The package's table for any frequencies ``omega`` (d/2,): one pair at a time, as
    ``sinusoidal(n, 2)`` (pair 0 turns at 1 radian per position) slowed by ``1/ω``."""
    pairs = [
        sinusoidal(n_positions, 2, stretch=1.0 / max(w, 1e-300), dtype=torch.float64)
        for w in omega.tolist()
    ]
    return torch.cat(pairs, -1)


def _bugs(candidate: _Candidate, base: float) -> list[str]:
    """The messages of the candidate's bugs."""
    bugs = []
    if candidate.order == "cos_first":
        bugs.append(
            "sin and cos swapped: fn puts cos(p·ω_k) where sin(p·ω_k) belongs and the "
            "reverse. Vaswani's code, like sinusoidal, has the sine first: sin at even "
            "columns 2k, cos at odd columns 2k + 1 (row 0 is then 0, 1, 0, 1, ...)"
        )
    if candidate.columns == "concatenated":
        bugs.append(
            "sines and cosines concatenated: fn writes all the sines first (columns 0 .. "
            "d/2 - 1) and then all the cosines, where the package interleaves them: sin in "
            "column 2k, cos in 2k + 1 (torch.stack((sin, cos), -1).flatten(-2)). The two "
            "tables are a permutation of columns apart, and equally good codes, but not "
            "the same table"
        )
    if candidate.shift:
        bugs.append(
            "positions counted from 1: fn's row p encodes position p + 1, but positions are "
            "0-based, so row 0 must be the code of position 0 (every sine 0, every cosine 1): "
            "use torch.arange(n_positions)"
        )
    if candidate.frequencies.bug is not None:
        bugs.append(candidate.frequencies.bug)
    return bugs


def _frequency_hypotheses(results: list[_Result], base: float) -> list[_Frequencies]:
    """The ladder base^(-2k/d), then the usual wrong ones, then the base and the
    frequencies read off ``fn``'s table (for each order and column layout)."""
    dims = sorted({r.case.dim for r in results})

    slips = {d: misread_ladders(d, base) for d in dims}

    def ladder(slip: MisreadLadder) -> dict[int, torch.Tensor]:
        return {d: slips[d][slip] for d in dims}

    hypotheses = [
        _Frequencies({d: frequencies(d, base) for d in dims}, None),
        _Frequencies(
            ladder("half_exponent"),
            "wrong exponent: ω_k = base^(-k/d) (exponents arange(d // 2) / d) where the "
            "code's is base^(-2k/d) (exponents arange(0, d, 2) / d)",
        ),
        _Frequencies(
            ladder("quadruple_exponent"),
            "wrong exponent: ω_k = base^(-4k/d): in Vaswani's base^(2i/d), i counts the "
            "pairs (i = k), but fn took the column index 2k for i. Use arange(0, d, 2) / d "
            "as the exponents, or 2 * arange(d // 2) / d",
        ),
        _Frequencies(
            ladder("linspace"),
            "wrong exponent: ω_k = base^(-2k/(d-2)) (exponents linspace(0, 1, d // 2)) "
            "where the code's is base^(-2k/d): the slowest pair must turn at "
            "base^(-(d-2)/d), not 1/base",
        ),
        _Frequencies(
            ladder("from_one"),
            "wrong exponent: ω_k = base^(-2(k+1)/d) (k counted from 1) where the code's is "
            "base^(-2k/d): pair 0 must turn by 1 radian per position",
        ),
        _Frequencies(
            ladder("reversed"),
            "frequency ladder reversed: pair 0 turns slowest and the last pair fastest, where "
            "pair k must turn at base^(-2k/d), pair 0 at 1 radian per position",
        ),
        _Frequencies(
            ladder("inverted"),
            "frequencies inverted: ω_k = base^(+2k/d) where the code's is base^(-2k/d): "
            "divide the positions by base^(2k/d), do not multiply them",
        ),
        _Frequencies(
            ladder("flat"),
            "every pair turns at 1 radian per position: the exponents 2k/d came out 0, as "
            "integer division gives (arange(0, d, 2) // d). Divide in floating point",
        ),
    ]
    measured = [
        omega
        for order, columns in itertools.product(_ORDERS, _COLUMNS)
        if (omega := _measured_frequencies(results, order, columns)) is not None
    ]
    for omega in measured:
        widest = max(omega)  # the largest d measures the base most finely
        fitted = base_from_slowest(float(omega[widest][-1]), widest)
        if fitted is not None and abs(math.log(fitted / base)) > 1e-4:
            hypotheses.append(
                _Frequencies(
                    {d: frequencies(d, fitted) for d in dims},
                    f"wrong base: the angles fit base {fitted:.6g}, not base={base:g}: "
                    f"build the frequencies with base {base:g} (Vaswani et al. use 10000)",
                )
            )
    first = dims[0]
    expected = ", ".join(f"{v:.4g}" for v in frequencies(first, base).tolist())
    for omega in measured:
        shown = ", ".join(f"{v:.4g}" for v in omega[first].tolist())
        hypotheses.append(
            _Frequencies(
                omega,
                f"wrong frequencies: for d = {first} fn's pairs turn by ({shown}) radians per "
                f"position where base^(-2k/d) gives ({expected})",
            )
        )
    distinct: list[_Frequencies] = []
    for hypothesis in hypotheses:
        if not any(_same(hypothesis, seen) for seen in distinct):
            distinct.append(hypothesis)
    return distinct


def _same(a: _Frequencies, b: _Frequencies) -> bool:
    return all(torch.allclose(a.omega[d], b.omega[d], rtol=1e-9, atol=0.0) for d in a.omega)


def _measured_frequencies(
    results: list[_Result], order: Order, columns: Columns
) -> dict[int, torch.Tensor] | None:
    """Per dimension, the angle by which each pair of ``fn``'s table turns from row 0 to
    row 1, reading the pairs as ``order`` and ``columns`` say; None unless every
    dimension has a table of two rows or more and the angles are in ``[0, pi)``."""
    measured: dict[int, torch.Tensor] = {}
    for result in results:
        dim, table = result.case.dim, result.output
        if table.shape[0] < 2 or dim in measured:
            continue
        if columns == "concatenated":
            first, second = table[:2, : dim // 2], table[:2, dim // 2 :]
        else:
            first, second = table[:2, 0::2], table[:2, 1::2]
        sin, cos = (first, second) if order == "sin_first" else (second, first)
        angles = torch.atan2(sin, cos)  # (2, d/2)
        measured[dim] = torch.remainder(angles[1] - angles[0], 2 * math.pi)
    dims = {r.case.dim for r in results}
    if set(measured) != dims:
        return None
    if not all(bool((w.isfinite() & (w < math.pi)).all()) for w in measured.values()):
        return None
    return measured
