r"""Check a reader's RoPE function against the reference, and name the bug when it differs.

:func:`check_rope` runs a function ``fn(x, positions)`` that claims to be RoPE in
a layout (``x`` of shape ``(B, H, T, D)``, ``positions`` ``(T,)`` or ``(B, T)``)
on random inputs: positions ``arange(T)``, offset by 17, one row per batch
element, and up to 8191; two head dimensions; float64, float32 and bfloat16
features. It compares every output with :func:`~rope_lessons.rope.kernels.apply_rope`
in float64. When they differ, it looks for the bug among the usual ones, each
one a wrong implementation written with the package's own functions, and
reports the one that reproduces ``fn`` on every case:

* the other layout (``rotate_half`` where pairs ``(2k, 2k+1)`` were meant, or
  the reverse; the same function as weights ported between the layouts
  without permuting the rows of ``W_q`` and ``W_k``);
* the cos and sin tables expanded from ``d/2`` to ``d`` columns the other
  layout's way (``cat((a, a))`` against ``repeat_interleave(2)``);
* the rotation clockwise, by :math:`-m\theta_k`;
* other frequencies: the exponents ``-k/d``, ``-2k/(d-2)`` or ``-2(k+1)/d``
  in place of ``-2k/d``; the ladder doubled (RoPE applied twice), reversed,
  inverted (``base^(+2k/d)``) or flat (exponents 0 from integer division);
  another base (estimated from the angles), or any other vector (measured);
* only the leading half (or quarter) of the head turned, as partial rotary;
* positions shifted by one, or ignored (``arange(T)`` in their place);
* cos and sin swapped; the sign of sin wrong in one member of each pair
  (``rotate_half`` as ``(-x2, -x1)`` or ``(x2, x1)``), which is no rotation;
* positions wrapped or clamped at a cos/sin cache's length (512 to 4096);
* the output scaled by a constant;

and alone, those bugs that no exact twin reproduces: ``(B, T)`` positions
mishandled while ``(T,)`` ones are right, and angles formed in half precision
(right at small positions, off more and more at large ones).

Conventions are those of :mod:`rope_lessons.rope`: positions are 0-based,
:math:`\theta_k = \text{base}^{-2k/d}`, pairs turn counter-clockwise.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from rope_lessons._checks import (
    LAYOUTS,
    Layout,
    check_base,
    check_even_dim,
    check_layout,
    check_seed,
)
from rope_lessons._grading import (
    Report,
    check_dtypes,
    dtype_name,
    raised,
    tensor_or_reason,
    wrong_shape,
)
from rope_lessons.rope.kernels import apply_rope, read_pairs, write_pairs
from rope_lessons.rope.ladder import (
    MisreadLadder,
    base_from_slowest,
    frequencies,
    misread_ladders,
    rotation_angles,
)

__all__ = ["check_rope"]

_BATCH, _HEADS, _SEQ = 2, 3, 8
_OFFSET = 17
_FAR = (0, 1, 2, 1001, 2049, 4097, 6007, 8191)  # odd: neither float16 nor bfloat16 holds them
_EPS32 = torch.finfo(torch.float32).eps
_HALF_DTYPES = (torch.float16, torch.bfloat16)
_DTYPES = (torch.float64, torch.float32, *_HALF_DTYPES)
_PAIRS = {"interleaved": "pairs (2k, 2k+1)", "half": "pairs (k, k + d/2)"}
_ARTICLE = {"interleaved": "an", "half": "a"}
_STYLE = {"interleaved": "Meta's complex form", "half": "Hugging Face's rotate_half"}
_EXPANSION = {"interleaved": "repeat_interleave(2, -1)", "half": "torch.cat((a, a), -1)"}
# How a wrong fn may combine x, its pair partner and the tables, besides x cos + rot(x) sin
# with rot(x) = (-y, x) in each pair (x, y):
_FORMS = {
    "cos_sin_swapped": "x sin + rot(x) cos",
    "sin_sign_second": "rot(x) = (-y, -x)",
    "sin_sign_first": "rot(x) = (y, x)",
}
_CACHE_LENGTHS = (512, 1024, 2048, 4096)  # cos/sin caches a position may wrap or clamp at


@dataclass(frozen=True, eq=False)
class _Case:
    """One input of the check and what ``fn`` must return for it.

    ``positions`` are what ``fn`` gets, ``(T,)`` or ``(B, T)``; ``broadcast`` the
    same, broadcastable to ``(B, H, T)`` (``(B, 1, T)`` for batch rows).
    """

    name: str
    kind: str  # "arange", "offset", "batch" or "far"
    x: torch.Tensor  # (B, H, T, d)
    positions: torch.Tensor
    broadcast: torch.Tensor
    reference: torch.Tensor  # (B, H, T, d) float64: apply_rope of x in float64
    tolerance: float


@dataclass(frozen=True, eq=False)
class _Result:
    case: _Case
    output: torch.Tensor  # (B, H, T, d) float64
    error: float  # max |output - reference| / max |x|

    @property
    def passed(self) -> bool:
        return self.error <= self.case.tolerance


@dataclass(frozen=True, eq=False)
class _Frequencies:
    """A hypothesis about the frequencies of ``fn``: ``(d/2,)`` per head dimension ``d``."""

    theta: dict[int, torch.Tensor]
    bug: str | None  # None for RoPE's own ladder


@dataclass(frozen=True, eq=False)
class _Candidate:
    """A RoPE written with up to six bugs; none makes it the reference."""

    frequencies: _Frequencies
    pairs: Layout  # the layout whose pairs it turns
    table: Layout  # the layout whose way it expands the d/2 angles to d columns
    sign: int  # +1 counter-clockwise, -1 clockwise
    shift: int  # position m turned by m + shift
    ignores_positions: bool  # arange(T) in place of the positions
    form: str = "rotation"  # or one of _FORMS: how cos, sin and the pair partner combine
    position_map: tuple[str, int] | None = None  # ("wrap" | "clamp", length of the cache)
    scale: float = 1.0  # the output multiplied by it


def check_rope(
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    layout: Layout = "interleaved",
    base: float = 10000.0,
    *,
    dims: Sequence[int] = (8, 64),
    dtypes: Sequence[torch.dtype] = (torch.float64, torch.float32, torch.bfloat16),
    seed: int = 0,
) -> Report:
    r"""Check that ``fn`` is RoPE in ``layout`` with ``base``, and name what is wrong if not.

    ``fn(x, positions)`` gets features ``x`` of shape ``(B, H, T, D)`` and integer
    ``positions`` of shape ``(T,)`` (shared by the batch) or ``(B, T)`` (one row
    per batch element), and returns the rotated ``x``: same shape, same dtype.
    It is run on four position sets (``arange(T)``, ``arange(T) + 17``, ``(B, T)``
    rows, positions up to 8191) for each head dimension in ``dims`` and dtype
    in ``dtypes``, on fresh copies of seeded random inputs, and compared with
    :func:`~rope_lessons.rope.kernels.apply_rope` computed in float64. The tolerance
    allows the rounding of ``x``'s dtype and angles formed in float32, as
    Hugging Face forms them.

    The diagnosis starts with one of these phrases (the messages of several bugs
    that one wrong implementation reproduces are joined by ``"; "``):

    * ``"correct"``: every case matched;
    * ``"layouts swapped"``: ``fn`` turns the other layout's pairs, which is
      also what weights ported between the layouts without
      :func:`~rope_lessons.toy.layouts.head_permutation` on the rows of ``W_q`` and
      ``W_k`` amount to; the message gives both remedies;
    * ``"cos/sin duplicated in the wrong order"``: the ``d/2`` angles expanded
      to ``d`` columns by ``cat`` where ``repeat_interleave`` is needed, or the
      reverse;
    * ``"rotation in the wrong direction"``: clockwise, by :math:`-m\theta_k`;
    * ``"wrong exponent"``, ``"wrong base"`` (with the base the angles fit),
      ``"wrong frequencies"`` (with those measured);
    * ``"rotated twice"``, ``"frequency ladder reversed"``, ``"frequencies
      inverted"``, ``"every pair turns at 1 radian per position"`` (integer
      division in the exponents);
    * ``"only the leading half of the head turns"`` (or quarter): partial rotary
      where full RoPE was claimed;
    * ``"positions off by one"``: position ``m`` turned by ``m + 1`` or ``m - 1``;
    * ``"ignores the positions passed"``: ``arange(T)`` used in their place;
    * ``"cos and sin swapped"``; ``"sin's sign wrong in one member of each pair"``;
    * ``"positions wrapped at L"`` or ``"positions clamped at L - 1"``: a cos/sin
      cache of ``L`` rows (512 to 4096) indexed modulo its length or clamped;
    * ``"output scaled by c"``;
    * ``"(B, T) positions mishandled"``: right with ``(T,)`` positions only;
    * ``"angles computed in half precision"``: right at small positions, off
      more and more at large ones, within what float16 or bfloat16 rounding of
      the positions, frequencies or angles allows;
    * ``"fn raised"``, ``"fn did not return a tensor"``, ``"wrong output
      shape"``, ``"wrong output dtype"``;
    * ``"unrecognised difference"``: none of the above reproduces ``fn``.

    Args:
        fn: the function to check, ``(x, positions) -> rotated x``.
        layout: the layout ``fn`` claims, ``"interleaved"`` (pairs ``2k, 2k+1``)
            or ``"half"`` (pairs ``k, k + d/2``).
        base: the base ``fn`` claims, > 1.
        dims: head dimensions ``D`` to try, even and >= 4 (with ``D = 2`` the
            base cannot be seen).
        dtypes: dtypes of ``x`` to try, among float64, float32, bfloat16 and float16.
        seed: seed of the random features and batch positions.

    Returns:
        A :class:`~rope_lessons._grading.Report`; ``max_error`` is relative to
        ``max |x|`` of the case.

    Raises:
        TypeError: if ``fn`` is not callable, or ``dims``, ``dtypes`` or ``seed``
            are of the wrong type.
        ValueError: for an unknown layout, ``base <= 1``, an odd or small
            dimension, no dimensions or dtypes, or a seed outside ``[0, 2**63)``.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, fn(x, positions) -> rotated x; got {fn!r}")
    layout = check_layout(layout)
    base = check_base(base)
    dims = _check_dims(dims)
    dtypes = check_dtypes(dtypes, _DTYPES)
    cases = _cases(layout, base, dims, dtypes, check_seed(seed))
    names = tuple(case.name for case in cases)
    results: list[_Result] = []
    dtype_problem = None
    wrong_dtype: list[str] = []
    with torch.no_grad():
        for case in cases:
            try:
                out: object = fn(case.x.clone(), case.positions.clone())
            except Exception as failure:  # the reader's code may raise anything; a stub, too
                return raised(failure, "fn", case.name, names, hint=_raised_hint(case))
            checked = _checked_output(out, case)
            if isinstance(checked, str):
                return Report(False, checked, math.inf, names, (case.name,))
            if checked.dtype != case.x.dtype:
                wrong_dtype.append(case.name)
            if checked.dtype != case.x.dtype and dtype_problem is None:
                dtype_problem = (
                    f"wrong output dtype: fn returned {checked.dtype} for {case.x.dtype} x "
                    f"({case.name}); return the dtype of x (cast cos and sin, or the "
                    "result, to x.dtype)"
                )
            output = checked.detach().to(torch.float64)
            scale = float(case.x.abs().max())
            error = float((output - case.reference).abs().max()) / scale
            results.append(_Result(case, output, error if math.isfinite(error) else math.inf))
    failed = tuple(r.case.name for r in results if not r.passed)
    max_error = max(r.error for r in results)
    if failed:
        diagnosis = _diagnose(results, layout, base)
        if dtype_problem is not None:
            diagnosis += f"; also {dtype_problem}"
        return Report(False, diagnosis, max_error, names, failed)
    if dtype_problem is not None:
        problem = f"{dtype_problem} (on {len(wrong_dtype)} of {len(cases)} cases)"
        return Report(False, problem, max_error, names, tuple(wrong_dtype))
    tried = (
        f"d = {', '.join(map(str, dims))}; {', '.join(dtype_name(d) for d in dtypes)}; "
        f"positions (T,), offset by {_OFFSET}, (B, T), up to {_FAR[-1]}"
    )
    diagnosis = (
        f"correct: fn matches apply_rope(layout={layout!r}, base={base:g}) "
        f"on all {len(cases)} cases ({tried})"
    )
    return Report(True, diagnosis, max_error, names, ())


def _check_dims(dims: object) -> tuple[int, ...]:
    if not isinstance(dims, Sequence) or isinstance(dims, str) or not dims:
        raise TypeError(f"dims must be a non-empty sequence of even ints, got {dims!r}")
    checked = tuple(check_even_dim(d, "each of dims") for d in dims)
    if min(checked) < 4:
        raise ValueError(f"dims must be >= 4 (with d = 2 the base cannot be seen), got {dims}")
    return checked


def _tolerance(dtype: torch.dtype, positions: torch.Tensor) -> float:
    r"""What a right ``fn`` may miss by, relative to ``max |x|``: the rounding of ``x``'s dtype
    (float32's at least) and angles formed in float32, off by a few float32 spacings of
    :math:`m\theta_k` (about ``3 eps m`` at most; ``16 eps m`` leaves room)."""
    rounding = 4 * torch.finfo(dtype).eps if dtype in _HALF_DTYPES else 16 * _EPS32
    return rounding + 16 * _EPS32 * float(positions.abs().max())


def _cases(
    layout: Layout, base: float, dims: tuple[int, ...], dtypes: tuple[torch.dtype, ...], seed: int
) -> list[_Case]:
    """Four position sets for each head dimension and dtype, on fresh random features."""
    generator = torch.Generator().manual_seed(seed)
    arange = torch.arange(_SEQ)
    rows = torch.stack((arange + 3, torch.randint(0, 500, (_SEQ,), generator=generator)))
    position_sets = (
        ("arange", arange, arange, f"arange({_SEQ}), shape (T,)"),
        ("offset", arange + _OFFSET, arange + _OFFSET, f"arange({_SEQ}) + {_OFFSET}, shape (T,)"),
        (
            "batch",
            rows,
            rows[:, None, :],
            f"(B, T) = ({_BATCH}, {_SEQ}): rows arange({_SEQ}) + 3 and random in [0, 500)",
        ),
        ("far", torch.tensor(_FAR), torch.tensor(_FAR), f"{_FAR}, shape (T,)"),
    )
    cases = []
    for dim in dims:
        for dtype in dtypes:
            for kind, positions, broadcast, described in position_sets:
                features = torch.randn(
                    _BATCH, _HEADS, _SEQ, dim, generator=generator, dtype=torch.float64
                )
                x = features.to(dtype)
                reference = apply_rope(x.double(), positions, base=base, layout=layout)
                cases.append(
                    _Case(
                        name=f"d={dim}, {dtype_name(dtype)}, positions {described}",
                        kind=kind,
                        x=x,
                        positions=positions,
                        broadcast=broadcast,
                        reference=reference,
                        tolerance=_tolerance(dtype, positions),
                    )
                )
    return cases


def _raised_hint(case: _Case) -> str:
    """A likely cause of an exception raised on ``case``, or an empty string."""
    if case.kind != "batch":
        return ""
    return (
        "; positions (B, T) are one row per batch element: for x (B, H, T, D) read them "
        "as positions[:, None, :]"
    )


def _checked_output(out: object, case: _Case) -> torch.Tensor | str:
    """``out`` if it can be compared with the reference, else why not."""
    out = tensor_or_reason(out, "fn", case.name)
    if isinstance(out, str):
        return out
    if out.shape != case.x.shape:
        fix = "return the rotated x, (B, H, T, D)"
        return wrong_shape(out, case.name, inputs="x", shape=case.x.shape, fix=fix)
    if not out.is_floating_point():
        return (
            f"wrong output dtype: fn returned {out.dtype} for {case.x.dtype} x ({case.name}); "
            "return real features of the dtype of x"
        )
    return out


def _diagnose(results: list[_Result], layout: Layout, base: float) -> str:
    """Name the bug of an ``fn`` that failed some case."""
    candidate = _reproduction(results, layout, base)
    if candidate is not None:
        return "; ".join(_bugs(candidate, layout))
    failed = [r for r in results if not r.passed]
    if all(r.case.kind == "batch" for r in failed):
        return (
            "(B, T) positions mishandled: fn is right with positions of shape (T,) but not "
            f"with one row per batch element ({failed[0].case.name}); for x (B, H, T, D), "
            "row b turns batch element b in every head: positions[:, None, :]"
        )
    precision = _half_precision(results, layout, base)
    if precision is not None:
        return precision
    worst = max(results, key=lambda r: r.error)
    return (
        f"unrecognised difference: fn differs from apply_rope(layout={layout!r}, "
        f"base={base:g}) on {len(failed)} of {len(results)} cases, by up to {worst.error:.2g} "
        f"of max |x| ({worst.case.name}; first failing: {failed[0].case.name}), and no "
        "known bug reproduces it (layouts, cos/sin expansion or swap, direction, sin's "
        "sign, exponent, base or frequencies, partial rotation, positions shifted, "
        "ignored, wrapped, clamped or (B, T), scaling, half-precision angles)"
    )


def _reproduction(results: list[_Result], layout: Layout, base: float) -> _Candidate | None:
    """The simplest wrong RoPE that matches ``fn`` on every case, if one does: fewest
    bugs first, then the order of :func:`_frequency_hypotheses`."""
    hypotheses = _frequency_hypotheses(results, layout, base)
    others = tuple(other for other in LAYOUTS if other != layout)
    ranked = []
    for rank, hypothesis in enumerate(hypotheses):
        for pairs, table, sign, shift, ignores in itertools.product(
            (layout, *others), LAYOUTS, (1, -1), (0, 1, -1), (False, True)
        ):
            candidate = _Candidate(hypothesis, pairs, table, sign, shift, ignores)
            bugs = len(_bugs(candidate, layout))
            if bugs:  # the candidate without bugs is the reference, which fn failed
                ranked.append((bugs, rank, candidate))
    ladder = hypotheses[0]
    extras = [
        *(_Candidate(ladder, layout, layout, 1, 0, False, form=form) for form in _FORMS),
        *(
            _Candidate(ladder, layout, layout, 1, 0, False, position_map=(kind, length))
            for kind in ("wrap", "clamp")
            for length in _CACHE_LENGTHS
        ),
        *(
            _Candidate(ladder, layout, layout, 1, 0, False, scale=scale)
            for scale in _measured_scale(results)
        ),
    ]
    ranked += [(1, len(hypotheses) + i, candidate) for i, candidate in enumerate(extras)]
    ranked.sort(key=lambda item: item[:2])
    ordered = sorted(results, key=lambda r: r.passed)  # failures first: they rule out most
    for _, _, candidate in ranked:
        if all(
            float((_candidate_output(candidate, r.case) - r.output).abs().max())
            <= r.case.tolerance * float(r.case.x.abs().max())
            for r in ordered
        ):
            return candidate
    return None


def _candidate_output(candidate: _Candidate, case: _Case) -> torch.Tensor:
    """``x cos + rotate(x) sin`` as the candidate writes it, in float64: ``(B, H, T, d)``."""
    full = case.x.to(torch.float64)
    theta = candidate.frequencies.theta[full.shape[-1]]
    rotating = 2 * theta.numel()  # fewer than d when only the leading features turn
    x = full[..., :rotating]
    positions = torch.arange(_SEQ) if candidate.ignores_positions else case.broadcast
    if candidate.position_map is not None:
        kind, length = candidate.position_map
        positions = positions % length if kind == "wrap" else positions.clamp(max=length - 1)
    angles = rotation_angles(
        candidate.sign * (positions + candidate.shift), rotating, theta=theta
    )  # (..., T, r/2)
    if candidate.table == "half":
        table = torch.cat((angles, angles), -1)
    else:
        table = angles.repeat_interleave(2, -1)  # (..., T, r)
    pairs = read_pairs(x, candidate.pairs)  # (B, H, T, r/2): x_a + i x_b
    if candidate.form == "sin_sign_second":  # (-x_b, -x_a)
        partner = write_pairs(-pairs.conj() * 1j, candidate.pairs)
    elif candidate.form == "sin_sign_first":  # (x_b, x_a)
        partner = write_pairs(pairs.conj() * 1j, candidate.pairs)
    else:
        partner = write_pairs(pairs * 1j, candidate.pairs)  # (-x_b, x_a) in every pair
    cos, sin = table.cos(), table.sin()
    if candidate.form == "cos_sin_swapped":
        cos, sin = sin, cos
    turned = candidate.scale * (x * cos + partner * sin)
    return torch.cat((turned, full[..., rotating:]), -1)


def _bugs(candidate: _Candidate, layout: Layout) -> list[str]:
    """The messages of the candidate's bugs, for a function claimed to be in ``layout``."""
    bugs = []
    pairs = candidate.pairs
    if pairs != layout:
        bugs.append(
            f"layouts swapped: fn turns the {pairs} layout's {_PAIRS[pairs]}, as "
            f"{_STYLE[pairs]}, but layout={layout!r} ({_PAIRS[layout]}, as {_STYLE[layout]}) "
            f"was claimed. If fn is meant to be {pairs}, claim layout={pairs!r}. If your "
            f"weights come from {_ARTICLE[layout]} {layout}-layout checkpoint, the permutation "
            "is missing: porting them to fn needs the rows of W_q and W_k permuted in every "
            "head by rope_lessons.toy.layouts.head_permutation(n_heads, head_dim, "
            f"to={pairs!r})"
        )
    if candidate.table != pairs:
        bugs.append(
            f"cos/sin duplicated in the wrong order: the d/2 angles are expanded to d "
            f"columns with {_EXPANSION[candidate.table]}, but the {pairs} layout's "
            f"{_PAIRS[pairs]} need {_EXPANSION[pairs]}, so that both members "
            "of pair k turn by the angle of pair k"
        )
    if candidate.sign < 0:
        bugs.append(
            "rotation in the wrong direction: fn turns pairs clockwise, by -m·θ_k, "
            "(x, y) -> (x cos + y sin, -x sin + y cos), where RoPE turns them counter-clockwise, "
            "(x cos - y sin, x sin + y cos): check the sign of sin "
            "(rotate_half(x) is (-x2, x1))"
        )
    if candidate.frequencies.bug is not None:
        bugs.append(candidate.frequencies.bug)
    if candidate.shift:
        turned = f"m {'+' if candidate.shift > 0 else '-'} 1"
        bugs.append(
            f"positions off by one: fn turns position m by ({turned})·θ_k, but positions are "
            "0-based: position 0 must be left as it is"
        )
    if candidate.ignores_positions:
        bugs.append(
            "ignores the positions passed: fn turns the t-th vector of the sequence by "
            f"t·θ_k whatever positions says (wrong for arange(T) + {_OFFSET} and for (B, T) "
            "rows): build the angles from positions"
        )
    if candidate.form == "cos_sin_swapped":
        bugs.append(
            "cos and sin swapped: fn computes x·sin + rotate(x)·cos where RoPE is "
            "x·cos + rotate(x)·sin (position 0 must leave x as it is, and it does not): "
            "check which table is which where cos and sin are unpacked or cached"
        )
    elif candidate.form in ("sin_sign_second", "sin_sign_first"):
        second = candidate.form == "sin_sign_second"
        wrote = "(x cos - y sin, y cos - x sin)" if second else "(x cos + y sin, y cos + x sin)"
        partner = "(-x2, -x1)" if second else "(x2, x1)"
        bugs.append(
            "sin's sign wrong in one member of each pair: fn turns a pair (x, y) into "
            f"{wrote} where RoPE gives (x cos - y sin, y cos + x sin); that is no rotation "
            f"(it changes lengths). The pair partner must be (-x2, x1), not {partner}: "
            "rotate_half(x) is cat((-x2, x1)), and -sin goes with the first member only"
        )
    if candidate.position_map is not None:
        kind, length = candidate.position_map
        what = (
            f"wrapped at {length}: fn turns position m by (m mod {length})·θ_k, as a cos/sin "
            f"cache of {length} rows indexed modulo its length does"
            if kind == "wrap"
            else f"clamped at {length - 1}: fn turns every position past {length - 1} by "
            f"{length - 1}·θ_k, as a cos/sin cache of {length} rows indexed with clamping does"
        )
        bugs.append(
            f"positions {what}: right up to position {length - 1}, wrong beyond; build the "
            "tables for the largest position + 1 (or recompute them when a longer sequence "
            "arrives)"
        )
    if candidate.scale != 1.0:
        bugs.append(
            f"output scaled by {candidate.scale:.4g}: fn turns every pair by the right angle "
            "but multiplies the result by that factor (an attention factor, 1/sqrt(d) or a "
            "norm folded into the rotation?); RoPE keeps lengths: leave scaling to attention"
        )
    return bugs


def _measured_scale(results: list[_Result]) -> list[float]:
    """The factor by which ``fn``'s outputs are longer than the reference's, read off the
    most precise ``arange(T)`` case, when it differs from 1 (an empty list otherwise)."""
    best = max(
        (r for r in results if r.case.kind == "arange"),
        key=lambda r: torch.finfo(r.case.x.dtype).bits,
    )
    scale = float(best.output.norm() / best.case.reference.norm())
    return [scale] if math.isfinite(scale) and abs(scale - 1) > 1e-3 else []


def _frequency_hypotheses(
    results: list[_Result], layout: Layout, base: float
) -> list[_Frequencies]:
    """RoPE's ladder, then the usual wrong exponents, then the base and the frequencies
    read off ``fn``'s angles (for each layout's pairs), without repeats."""
    dims = sorted({r.case.x.shape[-1] for r in results})

    slips = {d: misread_ladders(d, base) for d in dims}

    def ladder(slip: MisreadLadder) -> dict[int, torch.Tensor]:
        return {d: slips[d][slip] for d in dims}

    hypotheses = [
        _Frequencies({d: frequencies(d, base) for d in dims}, None),
        _Frequencies(
            ladder("half_exponent"),
            "wrong exponent: θ_k = base^(-k/d) (exponents arange(d // 2) / d) where RoPE's "
            "is base^(-2k/d) (exponents arange(0, d, 2) / d)",
        ),
        _Frequencies(
            ladder("linspace"),
            "wrong exponent: θ_k = base^(-2k/(d-2)) (exponents linspace(0, 1, d // 2)) where "
            "RoPE's is base^(-2k/d): the slowest pair must turn at base^(-(d-2)/d), not 1/base",
        ),
        _Frequencies(
            ladder("from_one"),
            "wrong exponent: θ_k = base^(-2(k+1)/d) (k counted from 1) where RoPE's is "
            "base^(-2k/d): pair 0 must turn by 1 radian per position",
        ),
        _Frequencies(
            ladder("doubled"),
            "rotated twice: fn turns pair k by 2m·θ_k, RoPE applied twice (R_m R_m = R_2m): "
            "in the attention and again outside it, or to a tensor that was rotated "
            "already; apply it once",
        ),
        _Frequencies(
            ladder("reversed"),
            "frequency ladder reversed: pair 0 turns slowest, at base^(-(d-2)/d), and the "
            "last pair fastest, at 1 radian per position; RoPE's pair k turns at "
            "base^(-2k/d), pair 0 fastest (did a flip or a descending arange creep in?)",
        ),
        _Frequencies(
            ladder("inverted"),
            "frequencies inverted: θ_k = base^(+2k/d) where RoPE's is base^(-2k/d) = "
            "1 / base^(2k/d): inv_freq is one over base ** (arange(0, d, 2) / d)",
        ),
        _Frequencies(
            ladder("flat"),
            "every pair turns at 1 radian per position: the exponents 2k/d came out 0, as "
            "integer division gives (arange(0, d, 2) // d, or an int tensor divided in "
            "integer arithmetic); divide in floating point",
        ),
        *_partial_hypotheses(dims, base),
    ]
    measured = [_measured_frequencies(results, pairs) for pairs in LAYOUTS]
    for omega in measured:
        widest = max(omega)  # the largest d measures the base most finely
        fitted = base_from_slowest(float(omega[widest][-1]), widest)
        if fitted is not None and abs(math.log(fitted / base)) > 1e-4:
            hypotheses.append(
                _Frequencies(
                    {d: frequencies(d, fitted) for d in dims},
                    f"wrong base: the angles fit base {fitted:.6g}, not base={base:g}: build "
                    "the frequencies with the model's base (rope_theta)",
                )
            )
    first = dims[0]
    expected = ", ".join(f"{v:.4g}" for v in frequencies(first, base).tolist())
    for omega in measured:
        if all(bool(torch.isfinite(theta).all()) for theta in omega.values()):
            shown = ", ".join(f"{v:.4g}" for v in omega[first].tolist())
            hypotheses.append(
                _Frequencies(
                    omega,
                    f"wrong frequencies: for d = {first} fn turns the pairs by m·({shown}) "
                    f"where base^(-2k/d) gives m·({expected})",
                )
            )
    distinct: list[_Frequencies] = []
    for hypothesis in hypotheses:
        if not any(_same(hypothesis, seen) for seen in distinct):
            distinct.append(hypothesis)
    return distinct


def _partial_hypotheses(dims: list[int], base: float) -> list[_Frequencies]:
    """Only the leading features turning: half of them on a ladder for d/2 (as partial
    rotary recomputes it) or on RoPE's first d/4 frequencies, or a quarter on a ladder for
    d/4; each gives the frequencies ``(r/2,)`` of the ``r`` leading features (see
    :func:`_candidate_output`)."""
    if not all(d % 8 == 0 for d in dims):
        return []
    shares: list[tuple[str, str, int, dict[int, torch.Tensor]]] = [
        ("half", "on a ladder for d/2", 2, {d: frequencies(d // 2, base) for d in dims}),
        (
            "half",
            "with RoPE's first d/4 frequencies",
            2,
            {d: frequencies(d, base)[: d // 4] for d in dims},
        ),
        ("quarter", "on a ladder for d/4", 4, {d: frequencies(d // 4, base) for d in dims}),
    ]
    return [
        _Frequencies(
            theta,
            f"only the leading {share} of the head turns: fn rotates the first d/{part} "
            f"features, {how}, and passes the others through: partial rotary (GPT-NeoX's "
            "rotary_pct, HF's partial_rotary_factor) where full RoPE was claimed; rotate all "
            "d features, or, if the model is partial rotary, build "
            f"Rope(d, base, rotary_dim=d // {part})",
        )
        for share, how, part, theta in shares
    ]


def _same(a: _Frequencies, b: _Frequencies) -> bool:
    return all(
        a.theta[d].shape == b.theta[d].shape
        and torch.allclose(a.theta[d], b.theta[d], rtol=1e-9, atol=0.0)
        for d in a.theta
    )


def _measured_frequencies(results: list[_Result], pairs: Layout) -> dict[int, torch.Tensor]:
    r"""Per head dimension, the angle by which ``fn`` turns each pair of ``pairs`` from
    position 0 to 1 (absolute value, ``(d/2,)``), read off the ``arange(T)`` case of the
    most precise dtype: :math:`\arg(z'_1 \bar z_1 \overline{z'_0 \bar z_0})` summed over
    batch and heads."""
    measured = {}
    ranked = sorted(results, key=lambda r: -torch.finfo(r.case.x.dtype).bits)
    for result in ranked:
        dim = result.case.x.shape[-1]
        if result.case.kind != "arange" or dim in measured:
            continue
        x = result.case.x.to(torch.float64)
        turned = (read_pairs(result.output, pairs) * read_pairs(x, pairs).conj()).sum((0, 1))
        measured[dim] = (turned[1] * turned[0].conj()).angle().abs()  # (d/2,)
    return measured


def _half_precision(results: list[_Result], layout: Layout, base: float) -> str | None:
    r"""The half-precision diagnosis, if ``fn`` turns every pair by nearly the right angle
    at small positions (within 0.1 rad up to 16) and by angles off more and more at large
    ones (at least 0.25 rad, four times the small-position error, from 1000 on), each
    within what bfloat16 rounding allows: :math:`4 \cdot 2^{-8} |m| \theta_k + 0.05`.

    Angles are read on pairs with :math:`|z| \ge 0.25`, where the rounding of a low
    precision output cannot move them much.
    """
    small, large, worst_position = 0.0, 0.0, 0
    for result in results:
        case = result.case
        dim = case.x.shape[-1]
        x = case.x.to(torch.float64)
        reference, turned = read_pairs(case.reference, layout), read_pairs(result.output, layout)
        ratio = turned / reference  # (B, H, T, d/2)
        keep = read_pairs(x, layout).abs() >= 0.25
        positions = case.broadcast.expand(case.x.shape[:-1]).unsqueeze(-1).abs()
        angles = positions * frequencies(dim, base)  # |m| θ_k, (B, H, T, d/2)
        error = ratio.angle().abs()
        within = error <= 4 * 2.0**-8 * angles + 0.05
        if not bool((within | ~keep).all()) or bool(((ratio.abs() - 1).abs() > 0.05)[keep].any()):
            return None
        positions = positions.expand(error.shape)
        near = keep & (positions <= 16)
        if bool(near.any()):
            small = max(small, float(error[near].max()))
        far = keep & (positions >= 1000)
        if bool(far.any()) and float(error[far].max()) > large:
            large = float(error[far].max())
            worst_position = int(positions[far][error[far].argmax()])
    if small > 0.1 or large < max(0.25, 4 * small):
        return None
    failed = {r.case.x.dtype for r in results if not r.passed}
    only = (
        f" (only with {' and '.join(dtype_name(d) for d in failed)} x: the angles are "
        "formed in the dtype of x)"
        if failed <= set(_HALF_DTYPES)
        else ""
    )
    return (
        "angles computed in half precision: the error grows with the position, from at "
        f"most {small:.2g} rad up to position 16 to {large:.2g} rad at position "
        f"{worst_position}{only}, as when the positions, "
        "the frequencies or their products m·θ_k are held in float16 or bfloat16; form "
        "the angles in float32 or float64 and round only cos and sin to the dtype of x"
    )
