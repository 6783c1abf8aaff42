r"""Chapter 6's exercise: VO-RoPE attention, checked against the package's ``attention``.

The reader writes causal softmax attention ``fn(q, k, v, positions)`` with
RoPE at the placement ``qkvo`` (the default) or ``vo``: the value
:math:`v_n` turned by :math:`R_n`, each output :math:`o_m` turned back by
:math:`R_m^\top`, and for ``qkvo`` also the query :math:`q_m` by :math:`R_m`
and the key :math:`k_n` by :math:`R_n`, so that

.. math::

   o_m = R_m^\top \sum_{n \le m} a_{mn} R_n v_n = \sum_{n \le m} a_{mn} R_{n-m} v_n .

:func:`check_vo_rope` runs ``fn`` on seeded random inputs (two head
dimensions, float64 and float32; positions ``arange(T)``, the same moved by
1000, increasing positions with gaps, and one row per batch element) and
compares each output with :func:`~rope_lessons.toy.rotary_attention.attention`
at that placement, computed in float64. It also runs the shift test of the
chapter on ``fn`` itself: moving every position by 1000 must leave the output
unchanged. When ``fn`` differs, it looks for the bug among wrong attentions
built with the package's own functions, and reports the one that reproduces
``fn`` on every case:

* a rotation missing or turned the wrong way: the queries, the keys, both
  (``vo`` where ``qkvo`` was asked), the value, the output, the value and
  the output together (plain RoPE, ``qk``), the value and the output
  reversed (:math:`R_{m-n}` in place of :math:`R_{n-m}`), or every rotation
  clockwise; or queries and keys rotated where ``vo`` was asked;
* the other layout's pairs;
* the positions ignored (``arange(T)`` in their place, which only positions
  with gaps reveal: the placement is relative), or one rotation off by one
  while the others are not (the queries, or the keys the other way, which
  gives the same scores; the keys and values; the values, or the output the
  other way, which gives the same output);
* the causal mask missing or upside down;
* the scores not scaled by :math:`1/\sqrt{D}`, or scaled by :math:`1/D`;

up to two of them together; and alone, ``(B, T)`` positions mishandled.
The diagnosis ends with what the shift test found: a wrong ``fn`` may still be
relative (every rotation clockwise is), and the shift test alone cannot tell.

Conventions are those of :mod:`rope_lessons.rope`: positions are 0-based,
:math:`\theta_k = \text{base}^{-2k/d}`, pairs turn counter-clockwise.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from rope_lessons._checks import LAYOUTS, Layout, check_base, check_choice, check_layout, check_seed
from rope_lessons._grading import (
    Report,
    check_dtypes,
    dtype_name,
    raised,
    tensor_or_reason,
    unrecognised,
    wrong_shape,
)
from rope_lessons.rope.kernels import apply_rope
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import attention

__all__ = ["VoPlacement", "check_vo_rope"]

VoPlacement = Literal["qkvo", "vo"]
_VO_PLACEMENTS: tuple[VoPlacement, ...] = ("qkvo", "vo")

_BATCH, _HEADS, _SEQ = 2, 2, 8
_SHIFT = 1000
_EPS32 = torch.finfo(torch.float32).eps
_DTYPES = (torch.float64, torch.float32)
_PAIRS = {"interleaved": "pairs (2k, 2k+1)", "half": "pairs (k, k + d/2)"}
# Where each placement turns: +1 by R at the position, -1 by its transpose, 0 not at all;
# in the order q, k, v, o.
_TARGETS: dict[VoPlacement, tuple[int, int, int, int]] = {
    "qkvo": (1, 1, 1, -1),
    "vo": (0, 0, 1, -1),
}
Fn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True, eq=False)
class _Case:
    """One input of the check and what ``fn`` must return for it."""

    name: str
    kind: str  # "arange", "offset", "gaps" or "batch"
    q: torch.Tensor  # (B, H, T, D), as fn gets them
    k: torch.Tensor
    v: torch.Tensor
    positions: torch.Tensor  # (T,) or (B, T)
    reference: torch.Tensor  # (B, H, T, D) float64
    tolerance: float


@dataclass(frozen=True, eq=False)
class _Result:
    case: _Case
    output: torch.Tensor  # (B, H, T, D) float64
    error: float  # max |output - reference| / max |v|

    @property
    def passed(self) -> bool:
        return self.error <= self.case.tolerance


@dataclass(frozen=True)
class _Shift:
    """The shift test on one pair of cases: the same inputs, every position moved."""

    name: str
    change: float  # max |fn(positions + shift) - fn(positions)| / max |v|
    tolerance: float
    precise: bool  # float64 inputs: its change is the one the diagnosis quotes

    @property
    def passed(self) -> bool:
        return self.change <= self.tolerance


@dataclass(frozen=True)
class _Candidate:
    """An attention written with up to two bugs; none makes it the reference.

    ``turns`` gives, for q, k, v and o, +1 (turned by R at its position), -1 (by
    the transpose) or 0 (not turned).
    """

    turns: tuple[int, int, int, int]
    layout: Layout
    mask: str = "causal"  # or "none", "upper"
    scale: str = "sqrt"  # 1/sqrt(D); or "none" (1), "dim" (1/D)
    ignores_positions: bool = False
    shift: tuple[str, int] | None = None  # (which rotations, by how much)


# Which rotations a one-sided off-by-one moves, by index into (q, k, v, o), and how the
# diagnosis names them. The keys at n - 1 give the scores of the queries at m + 1, and the
# output turned back at m - 1 the output of the values at n + 1: one entry each.
_SHIFTED = {
    "queries": ((0,), "the queries at m"),
    "keys and values": ((1, 2), "the keys and values at n"),
    "values": ((2,), "the values at n"),
}


def check_vo_rope(
    fn: Fn,
    placement: VoPlacement = "qkvo",
    layout: Layout = "interleaved",
    base: float = 10000.0,
    *,
    dims: Sequence[int] = (8, 32),
    dtypes: Sequence[torch.dtype] = (torch.float64, torch.float32),
    seed: int = 0,
) -> Report:
    r"""Check that ``fn`` is causal attention with VO-RoPE, and name what is wrong if not.

    ``fn(q, k, v, positions)`` gets queries, keys and values of shape
    ``(B, H, T, D)`` (one dtype) and integer ``positions`` of shape ``(T,)``
    (shared by the batch) or ``(B, T)`` (one row per batch element), and returns
    the output ``(B, H, T, D)`` in the dtype of ``q``: causal softmax attention
    with scores :math:`\langle q_m, k_n\rangle / \sqrt D`, each value turned by
    :math:`R_n` and each output turned back by :math:`R_m^\top` at its query's
    position, and with ``placement="qkvo"`` the queries and keys turned by
    RoPE as well. The causal mask is by index: query ``t`` sees keys ``0..t``.

    It is run, for each head dimension in ``dims`` and dtype in ``dtypes``, on
    fresh copies of seeded random inputs at four position sets: ``arange(T)``,
    ``arange(T) + 1000``, increasing positions with gaps, and ``(B, T)`` rows
    (``arange(T) + 5`` and gaps). Each output is compared with
    :func:`~rope_lessons.toy.rotary_attention.attention` at ``placement`` in
    float64; and ``fn``'s outputs at ``arange(T)`` and ``arange(T) + 1000``
    (the same inputs) are compared with each other: the shift test, one more
    case per dimension and dtype.

    The diagnosis starts with one of these phrases (the messages of two bugs
    that one wrong attention reproduces are joined by ``"; "``), and ends with
    what the shift test found:

    * ``"correct"``: every case matched;
    * ``"queries and keys not rotated"`` (``vo`` where ``qkvo`` was asked),
      ``"queries and keys turned clockwise"``, ``"queries and keys rotated"``
      (``qkvo`` where ``vo`` was asked); ``"queries not rotated"``, ``"queries
      turned the wrong way"``, ``"queries rotated"``, and the same for the
      keys (``"keys not rotated"``, ...);
    * ``"values and output not rotated"`` (plain RoPE, or no positions at all
      with ``vo``), ``"values and output turned the wrong way round"``
      (:math:`R_{m-n}`); ``"value not rotated"``, ``"value rotated the wrong
      way"``, ``"output not turned back"``, ``"output turned the wrong way"``
      (by :math:`R_m`, not :math:`R_m^\top`);
    * ``"every rotation turns the wrong way"``: clockwise throughout (``qkvo``);
    * ``"layouts swapped"``;
    * ``"ignores the positions passed"``;
    * ``"one rotation off by one"``: the queries (or the keys: the same
      scores), the keys and values, or the values (or the output: the same
      output) at a position one away from the rest;
    * ``"no causal mask"``, ``"causal mask upside down"``;
    * ``"scores not scaled"``, ``"scores divided by D"``;
    * ``"(B, T) positions mishandled"``: right with ``(T,)`` positions only;
    * ``"fn raised"`` (``"not written yet"`` for ``NotImplementedError``),
      ``"fn did not return a tensor"``, ``"wrong output shape"``, ``"wrong
      output dtype"``;
    * ``"unrecognised difference"``: none of the above reproduces ``fn``.

    Args:
        fn: the function to check, ``(q, k, v, positions) -> output``.
        placement: ``"qkvo"`` (RoPE on q and k as well) or ``"vo"`` (VO-RoPE alone).
        layout: the layout ``fn`` claims, ``"interleaved"`` (pairs ``2k, 2k+1``)
            or ``"half"`` (pairs ``k, k + d/2``).
        base: the base ``fn`` claims, > 1.
        dims: head dimensions ``D`` to try, even and >= 4 (at ``D = 2`` the
            layouts are one).
        dtypes: dtypes of the inputs to try, float64 and/or float32.
        seed: seed of the random inputs and positions.

    Returns:
        A :class:`~rope_lessons._grading.Report`; ``max_error`` is relative to
        ``max |v|`` of the case.

    Raises:
        TypeError: if ``fn`` is not callable, or ``dims``, ``dtypes`` or ``seed``
            are of the wrong type.
        ValueError: for an unknown placement or layout, ``base <= 1``, an odd or
            small dimension, another dtype, no dimensions or dtypes, or a seed
            outside ``[0, 2**63)``.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, fn(q, k, v, positions) -> output; got {fn!r}")
    placement = check_choice(placement, "placement", _VO_PLACEMENTS)
    layout = check_layout(layout)
    base = check_base(base)
    dims = _check_dims(dims)
    dtypes = check_dtypes(dtypes, _DTYPES)
    cases = _cases(placement, layout, base, dims, dtypes, check_seed(seed))
    names = _names(cases)
    results: list[_Result] = []
    wrong_dtype: list[str] = []
    dtype_problem = ""
    with torch.no_grad():
        for case in cases:
            try:
                out: object = fn(
                    case.q.clone(), case.k.clone(), case.v.clone(), case.positions.clone()
                )
            except Exception as failure:  # the reader's code may raise anything; a stub, too
                return raised(failure, "fn", case.name, names, hint=_raised_hint(case))
            checked = _checked_output(out, case)
            if isinstance(checked, str):
                return Report(False, checked, math.inf, names, (case.name,))
            if checked.dtype != case.q.dtype:
                wrong_dtype.append(case.name)
                dtype_problem = dtype_problem or (
                    f"wrong output dtype: fn returned {checked.dtype} for {case.q.dtype} inputs "
                    f"({case.name}); return the dtype of q (cast the result to q.dtype)"
                )
            output = checked.detach().to(torch.float64)
            gap = float((output - case.reference).abs().max()) / float(case.v.abs().max())
            results.append(_Result(case, output, gap if math.isfinite(gap) else math.inf))
    shifts = _shift_tests(results)
    failed = _failed(names, results, shifts)
    max_error = max(r.error for r in results)
    if failed:
        diagnosis = (
            f"{_diagnose(results, placement, layout, base, max_error)}. {_shift_text(shifts)}"
        )
        if wrong_dtype:
            diagnosis += f"; also {dtype_problem}"
        return Report(False, diagnosis, max_error, names, failed)
    if wrong_dtype:
        problem = f"{dtype_problem} (on {len(wrong_dtype)} of {len(cases)} inputs)"
        return Report(False, problem, max_error, names, tuple(wrong_dtype))
    tried = (
        f"d = {', '.join(map(str, dims))}; {', '.join(dtype_name(d) for d in dtypes)}; "
        f"positions arange(T), moved by {_SHIFT}, with gaps, (B, T)"
    )
    diagnosis = (
        f"correct: fn matches attention(placement={placement!r}) with Rope(D, base={base:g}, "
        f"layout={layout!r}) on all {len(results)} inputs ({tried}), and passes the "
        f"{len(shifts)} shift tests: moving every position by {_SHIFT} leaves its output "
        "unchanged"
    )
    return Report(True, diagnosis, max_error, names, ())


def _check_dims(dims: object) -> tuple[int, ...]:
    if not isinstance(dims, Sequence) or isinstance(dims, str) or not dims:
        raise TypeError(f"dims must be a non-empty sequence of even ints, got {dims!r}")
    checked = []
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"each of dims must be an int, got {dim!r}")
        if dim < 4 or dim % 2:
            raise ValueError(
                f"dims must be even and >= 4 (at d = 2 the layouts are one), got {dim}"
            )
        checked.append(dim)
    return tuple(checked)


def _tolerance(positions: torch.Tensor) -> float:
    """What a right ``fn`` may miss by, relative to ``max |v|``: float32 rounding, and angles
    formed in float32 (a few float32 spacings of m·θ_k; ``16 eps m`` leaves room)."""
    return 16 * _EPS32 * (1 + float(positions.abs().max()))


def _gaps(generator: torch.Generator) -> torch.Tensor:
    """Increasing positions with gaps of 1 to 40, from a start in [0, 100): ``(T,)``."""
    start = torch.randint(0, 100, (1,), generator=generator)
    steps = torch.randint(1, 41, (_SEQ - 1,), generator=generator)
    return torch.cat((start, start + steps.cumsum(0)))


def _cases(
    placement: VoPlacement,
    layout: Layout,
    base: float,
    dims: tuple[int, ...],
    dtypes: tuple[torch.dtype, ...],
    seed: int,
) -> list[_Case]:
    """Four position sets for each head dimension and dtype; ``arange`` and ``offset`` share
    their inputs (the shift test compares fn's two outputs)."""
    generator = torch.Generator().manual_seed(seed)
    arange = torch.arange(_SEQ)
    cases = []
    for dim in dims:
        rope = Rope(dim, base, layout)
        for dtype in dtypes:
            gaps = _gaps(generator)
            rows = torch.stack((arange + 5, _gaps(generator)))
            shared = _inputs(generator, dim, dtype)
            position_sets = (
                ("arange", arange, f"arange({_SEQ}), shape (T,)", shared),
                ("offset", arange + _SHIFT, f"arange({_SEQ}) + {_SHIFT}, shape (T,)", shared),
                (
                    "gaps",
                    gaps,
                    f"{tuple(gaps.tolist())}, shape (T,)",
                    _inputs(generator, dim, dtype),
                ),
                (
                    "batch",
                    rows,
                    f"(B, T) = ({_BATCH}, {_SEQ}): rows arange({_SEQ}) + 5 and "
                    f"{tuple(rows[1].tolist())}",
                    _inputs(generator, dim, dtype),
                ),
            )
            for kind, positions, described, (q, k, v) in position_sets:
                reference = attention(
                    q.double(), k.double(), v.double(), placement=placement, rope=rope,
                    positions=positions,
                )  # fmt: skip
                cases.append(
                    _Case(
                        name=f"d={dim}, {dtype_name(dtype)}, positions {described}",
                        kind=kind,
                        q=q,
                        k=k,
                        v=v,
                        positions=positions,
                        reference=reference,
                        tolerance=_tolerance(positions),
                    )
                )
    return cases


def _inputs(
    generator: torch.Generator, dim: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random q, k, v ``(B, H, T, D)`` in ``dtype``."""
    q, k, v = (
        torch.randn(_BATCH, _HEADS, _SEQ, dim, generator=generator, dtype=torch.float64).to(dtype)
        for _ in range(3)
    )
    return q, k, v


def _shift_name(case: _Case) -> str:
    """The shift test's line for the ``arange`` case ``case``."""
    described = case.name.split(", positions")[0]
    return (
        f"{described}, shift test: output at arange({_SEQ}) + {_SHIFT} against output at "
        f"arange({_SEQ}), same inputs"
    )


def _names(cases: list[_Case]) -> tuple[str, ...]:
    """Every case, with the shift test after each ``offset`` case."""
    names = []
    arange: _Case | None = None
    for case in cases:
        names.append(case.name)
        if case.kind == "arange":
            arange = case
        if case.kind == "offset" and arange is not None:
            names.append(_shift_name(arange))
    return tuple(names)


def _shift_tests(results: list[_Result]) -> list[_Shift]:
    """fn's output at ``arange(T) + 1000`` against its output at ``arange(T)``."""
    shifts = []
    arange: _Result | None = None
    for result in results:
        case = result.case
        if case.kind == "arange":
            arange = result
        if case.kind == "offset" and arange is not None:
            change = float((result.output - arange.output).abs().max()) / float(case.v.abs().max())
            shifts.append(
                _Shift(
                    _shift_name(arange.case),
                    change if math.isfinite(change) else math.inf,
                    case.tolerance + arange.case.tolerance,
                    case.q.dtype == torch.float64,
                )
            )
    return shifts


def _failed(
    names: tuple[str, ...], results: list[_Result], shifts: list[_Shift]
) -> tuple[str, ...]:
    """The failed cases and shift tests, in the order they are listed."""
    failed = {r.case.name for r in results if not r.passed}
    failed |= {shift.name for shift in shifts if not shift.passed}
    return tuple(name for name in names if name in failed)


def _shift_text(shifts: list[_Shift]) -> str:
    """What the shift test says about ``fn``: relative or not."""
    if all(shift.passed for shift in shifts):
        return (
            f"fn passes the shift test (moving every position by {_SHIFT} leaves its output "
            "unchanged): it is relative, yet not the attention asked for"
        )
    quoted = [s for s in shifts if s.precise] or shifts
    change = max(s.change for s in quoted)
    return (
        f"fn fails the shift test: moving every position by {_SHIFT} changes its output by "
        f"up to {change:.2g} (relative to max |v|), so its output depends on absolute positions"
    )


def _raised_hint(case: _Case) -> str:
    """A likely cause of an exception raised on ``case``, or an empty string."""
    if case.kind != "batch":
        return ""
    return (
        "; positions (B, T) are one row per batch element: for (B, H, T, D) inputs read "
        "them as positions[:, None, :]"
    )


def _checked_output(out: object, case: _Case) -> torch.Tensor | str:
    """``out`` if it can be compared with the reference, else why not."""
    out = tensor_or_reason(out, "fn", case.name)
    if isinstance(out, str):
        return out
    if out.shape != case.q.shape:
        fix = "return one output per query, (B, H, T, D)"
        return wrong_shape(out, case.name, inputs="q, k, v", shape=case.q.shape, fix=fix)
    if not out.is_floating_point():
        return (
            f"wrong output dtype: fn returned {out.dtype} for {case.q.dtype} inputs "
            f"({case.name}); return real outputs of the dtype of q"
        )
    return out


def _diagnose(
    results: list[_Result], placement: VoPlacement, layout: Layout, base: float, error: float
) -> str:
    """Name the bug of an ``fn`` that failed some case."""
    candidate = _reproduction(results, placement, layout, base)
    if candidate is not None:
        return "; ".join(_bugs(candidate, placement, layout))
    failed = [r for r in results if not r.passed]
    if failed and all(r.case.kind == "batch" for r in failed):
        return (
            "(B, T) positions mishandled: fn is right with positions of shape (T,) but not "
            f"with one row per batch element ({failed[0].case.name}); for (B, H, T, D) "
            "inputs, row b gives the positions of batch element b in every head: "
            "positions[:, None, :]"
        )
    first = failed[0].case.name if failed else results[0].case.name
    return unrecognised(
        first,
        error,
        f"Print fn(q, k, v, positions) beside attention(q, k, v, placement={placement!r}, "
        f"rope=Rope(D, {base:g}, {layout!r}), positions=positions) for this case, and compare "
        "first the scores, then the weighted sum, then the output's turn",
    )


def _candidates(placement: VoPlacement, layout: Layout) -> list[_Candidate]:
    """Every wrong attention with one or two bugs, fewest bugs first."""
    target = _TARGETS[placement]
    signs = (1, 0, -1)
    ranked: list[tuple[int, int, _Candidate]] = []
    order = 0
    for turns in itertools.product(signs, signs, signs, signs):
        for pairs, mask, scale in itertools.product(
            (layout, *(other for other in LAYOUTS if other != layout)),
            ("causal", "none", "upper"),
            ("sqrt", "none", "dim"),
        ):
            candidate = _Candidate(turns, pairs, mask, scale)
            if pairs != layout and turns == (0, 0, 0, 0):
                continue  # nothing turns: the layout cannot show
            bugs = len(_bugs(candidate, placement, layout))
            if 1 <= bugs <= 2:
                ranked.append((bugs, order, candidate))
                order += 1
    singles = [
        _Candidate(target, layout, ignores_positions=True),
        *(
            _Candidate(target, layout, shift=(which, step))
            for which, (slots, _) in _SHIFTED.items()
            if all(target[slot] for slot in slots)
            for step in (1, -1)
        ),
    ]
    ranked += [(1, order + i, candidate) for i, candidate in enumerate(singles)]
    ranked.sort(key=lambda item: item[:2])
    return [candidate for _, _, candidate in ranked]


def _reproduction(
    results: list[_Result], placement: VoPlacement, layout: Layout, base: float
) -> _Candidate | None:
    """The simplest wrong attention that matches ``fn`` on every case, if one does."""
    ordered = sorted(results, key=lambda r: r.passed)  # failures first: they rule out most
    parts = _Parts(base)
    for candidate in _candidates(placement, layout):
        if all(
            float((parts.output(candidate, r.case) - r.output).abs().max())
            <= r.case.tolerance * float(r.case.v.abs().max())
            for r in ordered
        ):
            return candidate
    return None


class _Parts:
    """Candidates' outputs, in float64, from parts computed once per case: the rotations by
    :func:`~rope_lessons.rope.kernels.apply_rope`, the weights by position-free
    :func:`~rope_lessons.toy.rotary_attention.attention`."""

    def __init__(self, base: float) -> None:
        self.base = base
        self.turned: dict[tuple[object, ...], torch.Tensor] = {}
        self.weights: dict[tuple[object, ...], torch.Tensor] = {}

    def turn(
        self, candidate: _Candidate, case: _Case, slot: int, x: torch.Tensor
    ) -> tuple[tuple[object, ...], torch.Tensor]:
        """``x`` (the input at ``slot``, or the output) as the candidate turns it, and a key
        naming that turn."""
        sign = candidate.turns[slot]
        if sign == 0:
            return (slot, 0), x
        step = 0
        if candidate.shift is not None and slot in _SHIFTED[candidate.shift[0]][0]:
            step = candidate.shift[1]
        key = (slot, sign, candidate.layout, candidate.ignores_positions, step)
        if slot == 3 or (case.name, *key) not in self.turned:
            positions = torch.arange(_SEQ) if candidate.ignores_positions else case.positions
            turned = apply_rope(
                x, sign * (positions + step), base=self.base, layout=candidate.layout
            )
            if slot == 3:
                return key, turned
            self.turned[(case.name, *key)] = turned
        return key, self.turned[(case.name, *key)]

    def output(self, candidate: _Candidate, case: _Case) -> torch.Tensor:
        """The candidate's output for ``case``, ``(B, H, T, D)``."""
        q_key, q = self.turn(candidate, case, 0, case.q.double())
        k_key, k = self.turn(candidate, case, 1, case.k.double())
        _, v = self.turn(candidate, case, 2, case.v.double())
        key = (case.name, q_key, k_key, candidate.mask, candidate.scale)
        if key not in self.weights:
            dim = q.shape[-1]
            if candidate.scale == "none":
                q = q * math.sqrt(dim)  # attention divides by sqrt(D): the scores end undivided
            elif candidate.scale == "dim":
                q = q / math.sqrt(dim)
            upper = (
                torch.ones(_SEQ, _SEQ, dtype=torch.bool).triu()
                if candidate.mask == "upper"
                else None
            )  # query t sees keys t .. T-1
            _, self.weights[key] = attention(
                q, k, k, placement="nope", causal=candidate.mask == "causal", attn_mask=upper,
                return_weights=True,
            )  # fmt: skip
        return self.turn(candidate, case, 3, self.weights[key] @ v)[1]


def _bugs(candidate: _Candidate, placement: VoPlacement, layout: Layout) -> list[str]:
    """The messages of the candidate's bugs, for ``fn`` meant to be ``placement``."""
    target = _TARGETS[placement]
    turns = candidate.turns
    bugs: list[str] = []
    if placement == "qkvo" and turns == tuple(-t for t in target):
        bugs.append(
            "every rotation turns the wrong way: fn turns clockwise where RoPE turns "
            "counter-clockwise (queries and keys by R^T, the value by R_n^T, the output by "
            "R_m), so its scores see m - n and its values arrive turned by R_{m-n}, the "
            "mirror image of the attention asked for. Check the sign of sin in your "
            "rotation (rotate_half(x) is (-x2, x1))"
        )
    else:
        bugs += _query_key_bugs(turns[:2], placement)
        bugs += _value_output_bugs(turns[2:], placement)
    if candidate.layout != layout and any(turns):
        other = candidate.layout
        bugs.append(
            f"layouts swapped: fn turns the {other} layout's {_PAIRS[other]}, but "
            f"layout={layout!r} ({_PAIRS[layout]}) was claimed. If fn is meant to be "
            f"{other}, claim layout={other!r}"
        )
    if candidate.ignores_positions:
        bugs.append(
            "ignores the positions passed: fn turns the t-th token by t·θ_k whatever "
            f"positions says. arange(T) + {_SHIFT} cannot show it (the placement is relative, "
            "so moving every position changes nothing), but positions with gaps do. Build "
            "every rotation from positions"
        )
    if candidate.shift is not None:
        which, step = candidate.shift
        sign, back = ("+", "-") if step > 0 else ("-", "+")
        same = {
            "queries": f" (or, the same scores, the keys at n {back} 1)",
            "values": f" (or, the same output, the output turned back at m {back} 1)",
        }.get(which, "")
        bugs.append(
            f"one rotation off by one: fn turns {_SHIFTED[which][1]} {sign} 1{same} while the "
            "other rotations use the positions as given. Moving every position "
            "alike would change nothing (the placement is relative), but moving one rotation "
            "does. Use the same positions everywhere"
        )
    if candidate.mask == "none":
        bugs.append(
            "no causal mask: query m also reads the keys after it (n > m). Set those scores "
            "to -inf before the softmax (is_causal=True in scaled_dot_product_attention)"
        )
    elif candidate.mask == "upper":
        bugs.append(
            "causal mask upside down: query m reads the keys at and after it (triu) in place "
            "of those at and before it (tril). Mask the scores where n > m"
        )
    if candidate.scale == "none":
        bugs.append(
            "scores not scaled: fn's softmax takes <q_m, k_n> where attention takes "
            "<q_m, k_n> / sqrt(D)"
        )
    elif candidate.scale == "dim":
        bugs.append(
            "scores divided by D where attention divides them by sqrt(D): the softmax "
            "comes out too flat"
        )
    return bugs


def _query_key_bugs(turns: tuple[int, ...], placement: VoPlacement) -> list[str]:
    """Messages for the query and key rotations ``(q, k)``, against ``placement``'s."""
    q, k = turns
    if placement == "vo":
        if (q, k) == (0, 0):
            return []
        if (q, k) == (1, 1):
            return [
                "queries and keys rotated: fn is qkvo (RoPE on q and k on top of VO-RoPE) "
                "where placement 'vo' was asked: leave q and k as they are, so that the "
                "scores carry no position"
            ]
        names = (("queries", "q_m"), ("keys", "k_n"))
        return [
            f"{name} rotated: placement 'vo' leaves {symbol} as it is (the scores carry no "
            "position). Remove that rotation"
            for (name, symbol), sign in zip(names, (q, k), strict=True)
            if sign
        ]
    if (q, k) == (1, 1):
        return []
    if (q, k) == (0, 0):
        return [
            "queries and keys not rotated: fn is VO-RoPE alone (placement vo), whose scores "
            "<q_m, k_n> carry no position. Placement 'qkvo' also turns q_m by R_m and k_n by "
            "R_n before the scores, as chapter 3's RoPE does"
        ]
    if (q, k) == (-1, -1):
        return [
            "queries and keys turned clockwise, by R_m^T and R_n^T: the scores see m - n "
            "where RoPE's see n - m. Turn q_m by R_m and k_n by R_n"
        ]
    bugs = []
    if q == 0:
        bugs.append(
            "queries not rotated: the scores <q_m, R_n k_n> depend on the key's absolute "
            "position n. Turn q_m by R_m as well"
        )
    elif q == -1:
        bugs.append(
            "queries turned the wrong way, by R_m^T: the scores <R_m^T q_m, R_n k_n> see "
            "m + n, an absolute position. Turn q_m by R_m"
        )
    if k == 0:
        bugs.append(
            "keys not rotated: the scores <R_m q_m, k_n> depend on the query's absolute "
            "position m. Turn k_n by R_n as well"
        )
    elif k == -1:
        bugs.append(
            "keys turned the wrong way, by R_n^T: the scores <R_m q_m, R_n^T k_n> see "
            "m + n, an absolute position. Turn k_n by R_n"
        )
    return bugs


def _value_output_bugs(turns: tuple[int, ...], placement: VoPlacement) -> list[str]:
    """Messages for the value and output rotations ``(v, o)``; both placements turn v_n by
    R_n and o_m by R_m^T."""
    v, o = turns
    if (v, o) == (1, -1):
        return []
    if (v, o) == (0, 0):
        what = "plain RoPE (placement qk)" if placement == "qkvo" else "attention without positions"
        return [
            f"values and output not rotated: fn is {what}. Turn each value v_n by R_n "
            "before the weighted sum and each output o_m back by R_m^T after it"
        ]
    if (v, o) == (-1, 1):
        return [
            "values and output turned the wrong way round: fn turns v_n by R_n^T and o_m by "
            "R_m, so each value arrives turned by R_{m-n} in place of R_{n-m}. Turn v_n by "
            "R_n and o_m by R_m^T = R_{-m}"
        ]
    bugs = []
    if v == 0:
        bugs.append(
            "value not rotated: the output R_m^T sum_n a_mn v_n turns every value by the "
            "query's absolute position m. Turn each v_n by R_n, at its own position, before "
            "the weighted sum"
        )
    elif v == -1:
        bugs.append(
            "value rotated the wrong way, by R_n^T: each value arrives turned by R_{-(m+n)}, "
            "which depends on absolute positions. Turn v_n by R_n"
        )
    if o == 0:
        bugs.append(
            "output not turned back: fn returns sum_n a_mn R_n v_n, whose values keep their "
            "absolute positions n. Turn each output o_m by R_m^T = R_{-m}, at its query's "
            "position (apply_rope(o, -positions))"
        )
    elif o == 1:
        bugs.append(
            "output turned the wrong way, by R_m where R_m^T is meant: each value arrives "
            "turned by R_{m+n}, which depends on absolute positions. Turn o_m by "
            "R_m^T = R_{-m} (apply_rope(o, -positions))"
        )
    return bugs
