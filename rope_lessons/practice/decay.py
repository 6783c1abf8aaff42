r"""Graded exercises of chapter 4: RoFormer's decay bound from partial sums.

Chapter 4 (``book/04_decay.md``) writes the rotary score of a query and a key at
distance ``r`` as :math:`g(r) = \operatorname{Re}\sum_k h_k e^{ir\theta_k}`, with
:math:`h_k = z_k(\mathbf q)\,\overline{z_k(\mathbf k)}` and pairs
:math:`z_k = x_{2k} + i\,x_{2k+1}`, and bounds it by summation by parts (Abel).
With the partial sums :math:`S_0 = 0`, :math:`S_j(r) = \sum_{k<j} e^{ir\theta_k}`
and :math:`h_{d/2} = 0`,

.. math:: |g(r)| \le \Bigl(\max_k |h_{k+1} - h_k|\Bigr) \sum_{j=1}^{d/2} |S_j(r)|,

and RoFormer plots the distance factor relative to the number of pairs,
:math:`B(r) = \frac{1}{d/2}\sum_{j=1}^{d/2} |S_j(r)|`.

Two exercises, each with its checker:

* :func:`check_relative_bound`: the reader writes ``fn(distances, d, base)``
  returning :math:`B(r)`; the reference is
  :func:`~rope_lessons.chapters.decay_bounds.roformer_bound`;
* :func:`check_abel_bound`: the reader writes ``fn(q, k, distances)`` returning
  the whole right-hand side; the reference is
  :func:`~rope_lessons.chapters.decay_bounds.abel_bound`.

When ``fn`` differs, the checker builds the usual wrong versions and names the
one that reproduces ``fn`` on every case: the partial sums off by one (``S_0``
to :math:`S_{d/2-1}`, without :math:`S_{d/2}`), real parts, squares or
the steps' own moduli in place of :math:`|S_j|`, the modulus taken after the
sum, the mean over ``d`` or ``d/2 ± 1`` terms or no mean at all, distances off by
one, wrong frequencies (exponents, order of the walk, base ignored); for the
whole bound also :math:`h_k` without the conjugate or taken real, pairs of the
half layout, :math:`h_{d/2} = 0` forgotten or put before :math:`h_0`, sizes
:math:`|h_k|` in place of steps, the sum or the Euclidean norm of the steps in
place of their largest, the mean :math:`B(r)` in place of the sum, and a
:math:`1/\sqrt d` factor; up to two of them at once. A function right to
float32 precision only is named as such. The sign of ``r`` cannot be seen:
:math:`|S_j(-r)| = |S_j(r)|`, and conjugating every :math:`h_k` keeps the
steps' sizes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

import torch

from rope_lessons._checks import Layout, check_seed
from rope_lessons._grading import Report, raised, tensor_or_reason, unrecognised
from rope_lessons.chapters.decay_bounds import abel_bound, roformer_bound
from rope_lessons.rope.kernels import read_pairs
from rope_lessons.rope.ladder import frequencies

__all__ = ["check_abel_bound", "check_relative_bound"]

_EPS32 = torch.finfo(torch.float32).eps
_RTOL = 1e-8  # a float64 fn written any other way agrees with the reference to ~1e-12
_FAR = 10**5  # the chapter's largest distance

# --- the distance factor: which partial sums, how measured, how normalised -----------------


def _ladder(name: str, d: int, base: float) -> torch.Tensor:
    """The frequencies ``(d/2,)`` float64 of a hypothesis about ``fn``'s ladder."""
    k = torch.arange(d // 2, dtype=torch.float64)
    if name == "rope":
        return frequencies(d, base)
    if name == "half_exponent":
        return base ** (-k / d)
    if name == "linspace":
        return base ** -torch.linspace(0.0, 1.0, d // 2, dtype=torch.float64)
    if name == "from_one":
        return base ** (-2.0 * (k + 1) / d)
    if name == "reversed":
        return frequencies(d, base).flip(0)
    if name == "inverted":
        return base ** (2.0 * k / d)
    if name == "flat":
        return torch.ones(d // 2, dtype=torch.float64)
    return frequencies(d, 10000.0)  # "base_ignored"


_LADDERS = {
    "rope": "",
    "half_exponent": (
        "wrong exponent: θ_k = base^(-k/d) (exponents arange(d // 2) / d) where the chapter's "
        "is base^(-2k/d) (exponents arange(0, d, 2) / d)"
    ),
    "linspace": (
        "wrong exponent: θ_k = base^(-2k/(d-2)) (exponents linspace(0, 1, d // 2)) where the "
        "chapter's is base^(-2k/d): the slowest pair turns at base^(-(d-2)/d), not 1/base"
    ),
    "from_one": (
        "wrong exponent: θ_k = base^(-2(k+1)/d) (pairs counted from 1) where the chapter's is "
        "base^(-2k/d): pair 0 turns at 1 radian per position"
    ),
    "reversed": (
        "walk taken slowest pair first: the partial sums add the steps e^(irθ_k) from the "
        "last pair to the first; S_j sums the pairs k < j, pair 0 (the fastest) first, so "
        "do not flip the ladder or sort it ascending"
    ),
    "inverted": (
        "frequencies inverted: θ_k = base^(+2k/d) where the chapter's is base^(-2k/d) = "
        "1 / base^(2k/d)"
    ),
    "flat": (
        "every pair turns at 1 radian per position: the exponents 2k/d came out 0, as "
        "integer division gives (2 * k // d); divide in floating point"
    ),
    "base_ignored": (
        "base ignored: the frequencies use base 10000 whatever base is passed; build them "
        "from the base argument"
    ),
}
_TERMS = {
    "1..K": "",
    "0..K-1": (
        "partial sums off by one: fn adds |S_0| .. |S_{d/2-1}| (or |S_1| .. |S_{d/2-1}|, the "
        "same since S_0 = 0) where the bound adds |S_1| .. |S_{d/2}|: S_{d/2}, the whole "
        "walk, is missing. S_j sums the pairs k < j, so j runs from 1 to d/2 inclusive, and "
        "torch.cumsum over the pairs gives S_1 .. S_{d/2} as they are"
    ),
}
_SIZES = {
    "modulus": "",
    "real": (
        "real parts in place of moduli: fn adds Re S_j(r) where the bound adds |S_j(r)|, the "
        "lengths of the complex partial sums (the triangle inequality bounds by lengths)"
    ),
    "abs_real": (
        "|Re S_j| in place of |S_j|: fn keeps the cosines only; the modulus of a partial "
        "sum is hypot(sum of cos, sum of sin), or abs() of the complex sum"
    ),
    "squared": (
        "squared moduli: fn adds |S_j(r)|^2 where the bound adds |S_j(r)|; take abs() of "
        "the complex sum, or the square root of cos-sum^2 + sin-sum^2"
    ),
    "steps": (
        "moduli of the steps, not of the partial sums: |e^(irθ_k)| = 1 for every pair, so "
        "fn does not depend on r; add the steps first (cumsum over the pairs), then take "
        "each partial sum's modulus"
    ),
    "outside": (
        "modulus taken after the sum over j: fn gives |Σ_j S_j(r)| where the bound needs "
        "Σ_j |S_j(r)|; take the modulus of each partial sum, then add"
    ),
}


@dataclass(frozen=True)
class _Walk:
    """A hypothesis about how ``fn`` forms the distance factor from the partial sums."""

    ladder: str = "rope"  # a key of _LADDERS
    terms: str = "1..K"  # a key of _TERMS: which partial sums S_j are added
    size: str = "modulus"  # a key of _SIZES: what is added for each S_j
    divisor: str = "K"  # "K" (d/2), "1", "d" or "K+1": what the sum is divided by
    shift: int = 0  # r evaluated at r + shift


def _walk_value(walk: _Walk, distances: torch.Tensor, d: int, base: float) -> torch.Tensor:
    """The walk's distance factor at ``distances`` ``(R,)``: float64 ``(R,)``."""
    theta = _ladder(walk.ladder, d, base)
    angles = (distances + walk.shift).to(torch.float64).unsqueeze(-1) * theta  # (R, K)
    steps = torch.polar(torch.ones_like(angles), angles)
    sums = steps.cumsum(-1)  # S_1 .. S_K, (R, K)
    if walk.terms == "0..K-1":
        sums = torch.cat((torch.zeros_like(sums[..., :1]), sums[..., :-1]), -1)
    if walk.size == "outside":
        total = sums.sum(-1).abs()
    else:
        sizes = {
            "modulus": sums.abs(),
            "real": sums.real,
            "abs_real": sums.real.abs(),
            "squared": sums.abs().square(),
            "steps": steps.abs(),
        }[walk.size]
        total = sizes.sum(-1)
    divisor = {"K": d // 2, "1": 1, "d": d, "K+1": d // 2 + 1, "K-1": d // 2 - 1}[walk.divisor]
    return total / divisor


def _walk_bugs(walk: _Walk, reference: _Walk) -> list[str]:
    """The messages of the walk's bugs, against the checker's ``reference`` walk."""
    bugs = []
    for field in ("ladder", "terms", "size"):
        value = getattr(walk, field)
        if value != getattr(reference, field):
            bugs.append({"ladder": _LADDERS, "terms": _TERMS, "size": _SIZES}[field][value])
    if walk.divisor != reference.divisor:
        bugs.append(_DIVISORS[reference.divisor][walk.divisor])
    if walk.shift:
        sign = "+" if walk.shift > 0 else "-"
        bugs.append(
            f"distances off by one: fn evaluates the bound at r {sign} 1; at r = 0 nothing "
            "turns and every |S_j| = j"
        )
    return bugs


_DIVISORS = {
    "K": {  # B(r), the relative bound
        "1": (
            "not divided by d/2: fn returns Σ_j |S_j(r)|, the distance factor of the whole "
            "bound; B(r) is its mean over the d/2 partial sums (B(0) = (d/2 + 1)/2)"
        ),
        "d": (
            "divided by d instead of d/2: B(r) is the mean over the d/2 partial sums, one "
            "per pair, so B(0) = (d/2 + 1)/2; fn gives half of it"
        ),
        "K+1": (
            "averaged over d/2 + 1 terms: fn divides by d/2 + 1, as if S_0 were one of the "
            "terms; B(r) divides the sum over j = 1 .. d/2 by d/2"
        ),
        "K-1": (
            "averaged over d/2 - 1 terms: fn divides by d/2 - 1; B(r) divides the sum over "
            "j = 1 .. d/2, d/2 terms, by d/2"
        ),
    },
    "1": {  # the whole bound: the sum itself
        "K": (
            "mean in place of the sum: fn multiplies by B(r), the mean of the |S_j(r)|; the "
            "bound needs the sum Σ_j |S_j(r)| = (d/2)·B(r)"
        ),
    },
}

# --- the content factor of the whole bound --------------------------------------------------

_CONTENT = {
    "pairs": {
        "interleaved": "",
        "half": (
            "pairs of the half layout: fn reads pair k as (x[k], x[k + d/2]); the chapter's "
            "pairs are interleaved, z_k = x[2k] + i x[2k+1] (x[..., 0::2] and x[..., 1::2])"
        ),
    },
    "product": {
        "conj": "",
        "plain": (
            "conjugate missing: fn uses h_k = z_k(q) z_k(k) where the score needs "
            "h_k = z_k(q) conj(z_k(k)) (q·k = Re Σ_k z_k(q) conj(z_k(k)))"
        ),
        "real": (
            "h_k taken real: fn uses each pair's dot product q[2k] k[2k] + q[2k+1] k[2k+1] = "
            "Re h_k; h_k = z_k(q) conj(z_k(k)) is complex, and its imaginary part turns "
            "into the score as r grows"
        ),
    },
    "steps": {
        "append": "",
        "forgotten": (
            "h_{d/2} = 0 forgotten: fn takes the steps h_{k+1} - h_k for k < d/2 - 1 only; "
            "Abel's summation sets h_{d/2} = 0, so the last step |h_{d/2} - h_{d/2-1}| = "
            "|h_{d/2-1}| counts too (torch.diff(h, append=zeros))"
        ),
        "prepended": (
            "zero put before h_0: fn takes the steps of (0, h_0, .., h_{d/2-1}); Abel's "
            "summation puts the zero after the last pair, h_{d/2} = 0 (append, not prepend)"
        ),
        "sizes": (
            "sizes in place of steps: fn takes max_k |h_k| where the bound takes "
            "max_k |h_{k+1} - h_k|, the differences of consecutive terms, with h_{d/2} = 0"
        ),
    },
    "norm": {
        "max": "",
        "sum": (
            "wrong norm of the steps: fn adds Σ_k |h_{k+1} - h_k| where the bound takes the "
            "largest, max_k |h_{k+1} - h_k|"
        ),
        "l2": (
            "wrong norm of the steps: fn takes sqrt(Σ_k |h_{k+1} - h_k|^2) where the bound "
            "takes the largest, max_k |h_{k+1} - h_k|"
        ),
    },
    "scale": {
        "1": "",
        "sqrt_d": (
            "divided by sqrt(d): the bound is on the unscaled score q·R_{-r} k; attention's "
            "1/sqrt(d) belongs to the softmax, not to this bound"
        ),
    },
}


@dataclass(frozen=True)
class _Content:
    """A hypothesis about how ``fn`` forms the content factor from ``q`` and ``k``."""

    pairs: Layout = "interleaved"
    product: str = "conj"
    steps: str = "append"
    norm: str = "max"
    scale: str = "1"


def _content_value(content: _Content, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The content factor ``(..., 1)`` float64 for ``q``, ``k`` ``(..., d)``."""
    zq, zk = read_pairs(q.double(), content.pairs), read_pairs(k.double(), content.pairs)
    h = {"conj": zq * zk.conj(), "plain": zq * zk, "real": (zq * zk.conj()).real + 0j}[
        content.product
    ]
    zero = torch.zeros_like(h[..., :1])
    if content.steps == "append":
        steps = torch.diff(h, dim=-1, append=zero).abs()
    elif content.steps == "forgotten":
        steps = torch.diff(h, dim=-1).abs() if h.shape[-1] > 1 else zero.abs()
    elif content.steps == "prepended":
        steps = torch.diff(h, dim=-1, prepend=zero).abs()
    else:
        steps = h.abs()
    if content.norm == "max":
        value = steps.amax(-1, keepdim=True)
    elif content.norm == "sum":
        value = steps.sum(-1, keepdim=True)
    else:
        value = steps.square().sum(-1, keepdim=True).sqrt()
    return value / math.sqrt(q.shape[-1]) if content.scale == "sqrt_d" else value


def _content_bugs(content: _Content) -> list[str]:
    return [
        _CONTENT[field.name][getattr(content, field.name)]
        for field in fields(content)
        if _CONTENT[field.name][getattr(content, field.name)]
    ]


_Hypothesis = TypeVar("_Hypothesis", _Walk, _Content)


def _variants(default: _Hypothesis, axes: dict[str, Sequence[Any]]) -> list[_Hypothesis]:
    """``default`` with each axis in turn set to each of its other values: one bug each."""
    return [
        replace(default, **{name: value})
        for name, values in axes.items()
        for value in values
        if value != getattr(default, name)
    ]


# --- cases, results and the shared comparison -----------------------------------------------


@dataclass(frozen=True, eq=False)
class _Case:
    """One input of a check: what ``fn`` gets, and what it must return (float64)."""

    name: str
    args: tuple[torch.Tensor | int | float, ...]
    reference: torch.Tensor
    d: int
    base: float
    distances: torch.Tensor  # (R,) int64
    q: torch.Tensor | None = None  # the abel cases' q and k, as given
    k: torch.Tensor | None = None


@dataclass(frozen=True, eq=False)
class _Result:
    case: _Case
    output: torch.Tensor  # float64, the reference's shape
    error: float  # max |output - reference| / |reference|

    @property
    def passed(self) -> bool:
        return self.error <= _RTOL


def _fresh(arg: torch.Tensor | int | float) -> torch.Tensor | int | float:
    return arg.clone() if isinstance(arg, torch.Tensor) else arg


def _relative_error(output: torch.Tensor, reference: torch.Tensor) -> float:
    error = float(((output - reference).abs() / reference.abs()).max())
    return error if math.isfinite(error) else math.inf


def _run(
    fn: Callable[..., object],
    cases: list[_Case],
    shape_problem: Callable[[torch.Tensor, _Case], str | None],
) -> list[_Result] | Report:
    """Run ``fn`` on every case: the results, or the report of the first that cannot be
    compared (raised, not a tensor, complex, wrong shape or dtype)."""
    names = tuple(case.name for case in cases)
    results = []
    with torch.no_grad():
        for case in cases:
            try:
                out = fn(*(_fresh(arg) for arg in case.args))
            except Exception as error:  # the reader's code may raise anything; a stub, too
                return raised(error, "fn", case.name, names, hint=_raised_hint(error, case))
            checked = _checked_output(out, case, shape_problem)
            if isinstance(checked, str):
                return Report(False, checked, math.inf, names, (case.name,))
            output = checked.detach().to(torch.float64)
            results.append(_Result(case, output, _relative_error(output, case.reference)))
    return results


def _raised_hint(error: Exception, case: _Case) -> str:
    """Likely causes of ``error`` raised on ``case``, or an empty string."""
    hint = ""
    if "Long" in str(error) or "int64" in str(error):
        hint += (
            "; the distances are int64: convert them with distances.double() "
            "before they meet float64 frequencies"
        )
    if case.q is not None and case.q.dtype != torch.float64:
        hint += (
            "; q and k may be float32 or broadcast against each other "
            "((2, 1, d) with (1, 3, d)): widen them with .double() and keep "
            "their leading dimensions"
        )
    return hint


def _checked_output(
    out: object, case: _Case, shape_problem: Callable[[torch.Tensor, _Case], str | None]
) -> torch.Tensor | str:
    """``out`` if it can be compared with the reference, else why not."""
    out = tensor_or_reason(out, "fn", case.name)
    if isinstance(out, str):
        return out
    if out.is_complex():
        return (
            f"fn returned complex numbers ({out.dtype}, {case.name}): the bound is real, "
            "built from the moduli |S_j(r)|; take abs() of the complex partial sums"
        )
    if out.shape != case.reference.shape:
        return shape_problem(out, case) or (
            f"wrong output shape: fn returned {tuple(out.shape)} where "
            f"{tuple(case.reference.shape)} was expected ({case.name})"
        )
    if not out.is_floating_point():
        return f"wrong output dtype: fn returned {out.dtype} ({case.name}); return float64"
    return out


def _matches(result: _Result, candidate: torch.Tensor) -> bool:
    """Whether ``fn``'s output is the candidate's, entry by entry, to ``_RTOL`` of each entry
    (a wrong bound may be 0, negative or not finite where the reference is not)."""
    scale = float(result.case.reference.abs().max())
    gap = (result.output - candidate).abs()
    same = (gap <= _RTOL * candidate.abs() + 1e-12 * scale) | (result.output == candidate)
    return bool((same | (result.output.isnan() & candidate.isnan())).all())


def _reproduction(
    results: list[_Result], candidates: list[tuple[int, int, Callable[[_Case], torch.Tensor]]]
) -> int | None:
    """The index of the first candidate, fewest bugs first, that matches ``fn`` on every case."""
    ordered = sorted(results, key=lambda r: r.passed)  # failures first: they rule out most
    for _, index, output in sorted(candidates, key=lambda c: c[:2]):
        if all(_matches(r, output(r.case)) for r in ordered):
            return index
    return None


def _walk_allowance(case: _Case) -> torch.Tensor:
    r"""How far, relative to the distance factor ``(R,)``, float32 arithmetic may move it:
    :math:`4\epsilon(r + 1)`. Float32 angles :math:`r\theta_k` err by about
    :math:`\epsilon r\theta_k`, most for pair 0 (:math:`\theta_0 = 1`); readers' float32
    versions (cos and sin sums, complex walks, Hugging Face's ``inv_freq``) stay within a
    quarter of this on the checkers' cases, and a bug of relative size :math:`10^{-6} r`
    does not."""
    return 4 * _EPS32 * (case.distances.to(torch.float64) + 1)


def _float32_only(results: list[_Result], allowance: Callable[[_Case], torch.Tensor]) -> bool:
    """Whether every failing entry of ``fn`` is off by no more than float32 arithmetic allows."""
    for result in results:
        relative = (result.output - result.case.reference).abs() / result.case.reference.abs()
        if not bool((relative <= allowance(result.case)).all()):
            return False
    return True


_FLOAT32 = (
    "computed in float32: fn matches the reference only to float32 precision, off more "
    "at large distances, where float32 angles r·θ_k err by up to about r·θ_k·6e-8 rad; "
    "compute the frequencies, the angles and the sums in float64 (torch.float64 tensors, "
    "distances.double()) and return float64"
)

# --- check_relative_bound ---------------------------------------------------------------------

_RELATIVE_WALK = _Walk()
_RELATIVE_AXES: dict[str, Sequence[Any]] = {
    "ladder": tuple(_LADDERS),
    "terms": tuple(_TERMS),
    "size": tuple(_SIZES),
    "divisor": ("K", "1", "d", "K+1", "K-1"),
    "shift": (0, 1, -1),
}


def check_relative_bound(
    fn: Callable[[torch.Tensor, int, float], torch.Tensor], *, seed: int = 0
) -> Report:
    r"""Check that ``fn`` is RoFormer's relative bound :math:`B(r)`, and name the bug if not.

    ``fn(distances, d, base)`` gets an int64 tensor ``distances`` ``(R,)`` of
    distances ``r >= 0``, an even head dimension ``d`` and a frequency base, and
    returns float64 ``(R,)``:

    .. math:: B(r) = \frac{1}{d/2}\sum_{j=1}^{d/2} |S_j(r)|, \qquad
              S_j(r) = \sum_{k=0}^{j-1} e^{ir\theta_k}, \quad \theta_k = \text{base}^{-2k/d}.

    It is run on five cases, on fresh copies of the distances: the chapter's
    table (``d = 128``, base 10000, distances 0 to :math:`10^5`); ``d = 8`` at
    every distance 0 to 32; ``d = 64`` with Llama 3's base 500000 up to 131072;
    ``d = 2`` (one pair, :math:`B = 1`); ``d = 16``, base 100, at twelve seeded
    random distances below 10000. Each output is compared with
    :func:`~rope_lessons.chapters.decay_bounds.roformer_bound`, relative error
    at most 1e-8.

    The diagnosis starts with one of these phrases (the messages of two bugs
    that one wrong function reproduces are joined by ``"; "``):

    * ``"correct"``: every case matched;
    * ``"partial sums off by one"``: :math:`S_0 .. S_{d/2-1}` or
      :math:`S_1 .. S_{d/2-1}`, without :math:`S_{d/2}`;
    * ``"real parts in place of moduli"``, ``"|Re S_j| in place of |S_j|"``,
      ``"squared moduli"``, ``"moduli of the steps, not of the partial sums"``,
      ``"modulus taken after the sum over j"``;
    * ``"not divided by d/2"``, ``"divided by d instead of d/2"``, ``"averaged over
      d/2 + 1 terms"``, ``"averaged over d/2 - 1 terms"``;
    * ``"distances off by one"``;
    * ``"wrong exponent"`` (three kinds), ``"walk taken slowest pair first"``,
      ``"frequencies inverted"``, ``"every pair turns at 1 radian per position"``,
      ``"base ignored"``;
    * ``"computed in float32"``: right to float32 precision only;
    * ``"fn raised"``, ``"not written yet"``, ``"fn did not return a tensor"``,
      ``"fn returned complex numbers"``, ``"one value per partial sum"``,
      ``"wrong output shape"``, ``"wrong output dtype"``;
    * ``"unrecognised difference"``: none of the above reproduces ``fn``.

    Args:
        fn: the function to check, ``(distances, d, base) -> B``.
        seed: seed of the random distances of the last case.

    Returns:
        A :class:`~rope_lessons._grading.Report`; ``max_error`` is relative to
        :math:`B(r)`.

    Raises:
        TypeError: if ``fn`` is not callable or ``seed`` is not an int.
        ValueError: if ``seed`` is negative or not below 2**63.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, fn(distances, d, base) -> B; got {fn!r}")
    check_seed(seed)
    cases = _relative_cases(seed)
    run = _run(fn, cases, _relative_shape_problem)
    if isinstance(run, Report):
        return run
    names = tuple(case.name for case in cases)
    failed = tuple(r.case.name for r in run if not r.passed)
    max_error = max(r.error for r in run)
    if not failed:
        return Report(
            True,
            f"correct: fn matches roformer_bound on all {len(cases)} cases (d = 2 to 128, "
            f"bases 100 to 500000, distances 0 to {_farthest(cases):,})",
            max_error,
            names,
            (),
        )
    walks = [_RELATIVE_WALK, *_combinations(_RELATIVE_WALK, _RELATIVE_AXES)]
    candidates = [
        (
            len(_walk_bugs(walk, _RELATIVE_WALK)),
            index,
            _relative_output(walk),
        )
        for index, walk in enumerate(walks)
        if _walk_bugs(walk, _RELATIVE_WALK)
    ]
    found = _reproduction(run, candidates)
    if found is not None:
        diagnosis = "; ".join(_walk_bugs(walks[found], _RELATIVE_WALK))
    elif _float32_only(run, _relative_allowance):
        diagnosis = _FLOAT32
    else:
        first = next(r for r in run if not r.passed)
        diagnosis = unrecognised(
            first.case.name,
            max_error,
            "Print fn(distances, d, base) beside roformer_bound(distances, d, base) for "
            "this case, and check B(0) = (d/2 + 1)/2 first.",
        )
    return Report(False, diagnosis, max_error, names, failed)


def _farthest(cases: list[_Case]) -> int:
    return max(int(case.distances.max()) for case in cases)


def _combinations(default: _Hypothesis, axes: dict[str, Sequence[Any]]) -> list[_Hypothesis]:
    """Every hypothesis with one or two of the axes changed from ``default``."""
    single: list[_Hypothesis] = _variants(default, axes)
    double: list[_Hypothesis] = []
    names = list(axes)
    for first, second in itertools.combinations(names, 2):
        for a, b in itertools.product(axes[first], axes[second]):
            if a != getattr(default, first) and b != getattr(default, second):
                double.append(replace(default, **{first: a, second: b}))
    return single + double


def _relative_output(walk: _Walk) -> Callable[[_Case], torch.Tensor]:
    return lambda case: _walk_value(walk, case.distances, case.d, case.base)


def _relative_allowance(case: _Case) -> torch.Tensor:
    return _walk_allowance(case)


def _relative_cases(seed: int) -> list[_Case]:
    generator = torch.Generator().manual_seed(seed)
    table = torch.tensor([0, 1, 10, 100, 256, 1000, 5000, 10000, 50000, _FAR])
    sets = [
        (128, 10000.0, table, "the chapter's table, distances 0 to 100,000"),
        (8, 10000.0, torch.arange(33), "distances arange(33)"),
        (64, 500000.0, torch.tensor([0, 3, 17, 128, 4096, 131072]), "distances 0 to 131,072"),
        (2, 10000.0, torch.tensor([0, 1, 7, 1000]), "one pair, distances 0, 1, 7, 1000"),
        (
            16,
            100.0,
            torch.randint(0, 10000, (12,), generator=generator),
            f"12 random distances below 10,000 (seed {seed})",
        ),
    ]
    return [
        _Case(
            name=f"d={d}, base={base:g}, {described}",
            args=(distances, d, base),
            reference=roformer_bound(distances, d, base),
            d=d,
            base=base,
            distances=distances,
        )
        for d, base, distances, described in sets
    ]


def _relative_shape_problem(out: torch.Tensor, case: _Case) -> str | None:
    rows = case.distances.numel()
    if out.shape in ((rows, case.d // 2), (rows, case.d // 2 + 1), (rows, case.d // 2 - 1)):
        return (
            f"one value per partial sum: fn returned {tuple(out.shape)} for {rows} distances "
            f"({case.name}); B(r) is one number per distance, the mean of |S_j(r)| over j"
        )
    return None


# --- check_abel_bound ---------------------------------------------------------------------------

_ABEL_WALK = _Walk(divisor="1")
_ABEL_AXES: dict[str, Sequence[Any]] = {
    "pairs": ("interleaved", "half"),
    "product": tuple(_CONTENT["product"]),
    "steps": tuple(_CONTENT["steps"]),
    "norm": tuple(_CONTENT["norm"]),
    "scale": tuple(_CONTENT["scale"]),
}
_ABEL_WALK_AXES: dict[str, Sequence[Any]] = {
    "ladder": ("rope", "half_exponent", "linspace", "from_one", "reversed", "inverted", "flat"),
    "terms": tuple(_TERMS),
    "size": tuple(_SIZES),
    "divisor": ("1", "K"),
    "shift": (0, 1, -1),
}


@dataclass(frozen=True)
class _Bound:
    """A hypothesis about the whole bound: content factor times distance factor."""

    content: _Content = _Content()
    walk: _Walk = _ABEL_WALK

    def bugs(self) -> list[str]:
        return [*_content_bugs(self.content), *_walk_bugs(self.walk, _ABEL_WALK)]


def check_abel_bound(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor], *, seed: int = 0
) -> Report:
    r"""Check that ``fn`` is RoFormer's whole bound on the score, and name the bug if not.

    ``fn(q, k, distances)`` gets queries and keys ``(..., d)`` (broadcastable,
    float64 or float32) and an int64 tensor ``distances`` ``(R,)``, and returns
    float64 ``(..., R)``, the right-hand side of the chapter's bound for
    :math:`\theta_k = 10000^{-2k/d}` and interleaved pairs
    :math:`z_k(x) = x_{2k} + i\,x_{2k+1}`:

    .. math:: \Bigl(\max_{k} |h_{k+1} - h_k|\Bigr) \sum_{j=1}^{d/2} |S_j(r)|, \qquad
              h_k = z_k(\mathbf q)\,\overline{z_k(\mathbf k)}, \quad h_{d/2} = 0.

    It is run on five cases, on fresh copies of the inputs: one Gaussian pair of
    vectors ``(8,)`` at distances 0 to 15; four Gaussian pairs ``(4, 64)`` at
    distances 0 to :math:`10^5`; all-ones ``q = k`` with ``d = 16`` (every step
    0 but the last); the chapter's tight case ``q = k`` with
    :math:`|z_k|^2 = 1 - 2k/d`, ``d = 32``; float32 ``q`` ``(2, 1, 16)`` and ``k``
    ``(1, 3, 16)`` broadcast to ``(2, 3, R)``. Each output is compared with
    :func:`~rope_lessons.chapters.decay_bounds.abel_bound`, relative error at
    most 1e-8.

    The diagnosis starts with one of these phrases (the messages of two bugs
    that one wrong function reproduces are joined by ``"; "``):

    * ``"correct"``: every case matched;
    * ``"h_{d/2} = 0 forgotten"``, ``"zero put before h_0"``, ``"sizes in place of
      steps"``, ``"wrong norm of the steps"`` (their sum or Euclidean norm);
    * ``"conjugate missing"``, ``"h_k taken real"``, ``"pairs of the half layout"``;
    * ``"mean in place of the sum"``: :math:`B(r)` where :math:`\sum_j |S_j(r)|`
      is meant; ``"divided by sqrt(d)"``;
    * the distance factor's bugs of :func:`check_relative_bound`: ``"partial sums
      off by one"``, ``"real parts in place of moduli"``, ``"|Re S_j| in place of
      |S_j|"``, ``"squared moduli"``, ``"moduli of the steps, not of the partial
      sums"``, ``"modulus taken after the sum over j"``, ``"distances off by one"``,
      ``"wrong exponent"``, ``"walk taken slowest pair first"``, ``"frequencies
      inverted"``, ``"every pair turns at 1 radian per position"``;
    * ``"computed in float32"``: right to float32 precision only;
    * ``"fn raised"``, ``"not written yet"``, ``"fn did not return a tensor"``,
      ``"fn returned complex numbers"``, ``"one value per query-key pair"``,
      ``"wrong output shape"``, ``"wrong output dtype"``;
    * ``"unrecognised difference"``: none of the above reproduces ``fn``.

    Args:
        fn: the function to check, ``(q, k, distances) -> bound``.
        seed: seed of the Gaussian queries and keys.

    Returns:
        A :class:`~rope_lessons._grading.Report`; ``max_error`` is relative to
        the bound.

    Raises:
        TypeError: if ``fn`` is not callable or ``seed`` is not an int.
        ValueError: if ``seed`` is negative or not below 2**63.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, fn(q, k, distances) -> bound; got {fn!r}")
    check_seed(seed)
    cases = _abel_cases(seed)
    run = _run(fn, cases, _abel_shape_problem)
    if isinstance(run, Report):
        return run
    names = tuple(case.name for case in cases)
    failed = tuple(r.case.name for r in run if not r.passed)
    max_error = max(r.error for r in run)
    if not failed:
        return Report(
            True,
            f"correct: fn matches abel_bound on all {len(cases)} cases (d = 8 to 64, "
            f"float64 and float32, broadcast q and k, distances 0 to {_farthest(cases):,})",
            max_error,
            names,
            (),
        )
    bounds = _abel_hypotheses()
    cache: dict[tuple[int, object], torch.Tensor] = {}

    def output(bound: _Bound) -> Callable[[_Case], torch.Tensor]:
        def value(case: _Case) -> torch.Tensor:
            q, k = case.q, case.k
            assert q is not None and k is not None
            content = _cached(
                cache, case, bound.content, lambda: _content_value(bound.content, q, k)
            )
            walk = _cached(
                cache,
                case,
                bound.walk,
                lambda: _walk_value(bound.walk, case.distances, case.d, case.base),
            )
            return content * walk

        return value

    candidates = [(len(bound.bugs()), index, output(bound)) for index, bound in enumerate(bounds)]
    found = _reproduction(run, candidates)
    if found is not None:
        diagnosis = "; ".join(bounds[found].bugs())
    elif _float32_only(run, _abel_allowance):
        diagnosis = _FLOAT32
    else:
        first = next(r for r in run if not r.passed)
        diagnosis = unrecognised(
            first.case.name,
            max_error,
            "Print the two factors of fn for this case, max_k |h_{k+1} - h_k| and "
            "Σ_j |S_j(r)|, and compare them with the chapter's (check_relative_bound checks "
            "the second, as (d/2)·B(r)).",
        )
    return Report(False, diagnosis, max_error, names, failed)


def _cached(
    cache: dict[tuple[int, object], torch.Tensor],
    case: _Case,
    key: object,
    compute: Callable[[], torch.Tensor],
) -> torch.Tensor:
    slot = (id(case), key)
    if slot not in cache:
        cache[slot] = compute()
    return cache[slot]


def _abel_hypotheses() -> list[_Bound]:
    """Every bound with one or two bugs, in the content or the distance factor."""
    contents = [_Content(), *_combinations(_Content(), _ABEL_AXES)]
    walks = [_ABEL_WALK, *_combinations(_ABEL_WALK, _ABEL_WALK_AXES)]
    bounds = []
    for content, walk in itertools.product(contents, walks):
        bound = _Bound(content, walk)
        if 1 <= len(bound.bugs()) <= 2:
            bounds.append(bound)
    return bounds


def _abel_allowance(case: _Case) -> torch.Tensor:
    assert case.q is not None and case.k is not None
    h = read_pairs(case.q.double(), "interleaved") * read_pairs(case.k.double(), "interleaved")
    step = _content_value(_Content(), case.q, case.k)  # (..., 1)
    content = 64 * _EPS32 * h.abs().amax(-1, keepdim=True) / step
    return _walk_allowance(case) + content


def _abel_cases(seed: int) -> list[_Case]:
    generator = torch.Generator().manual_seed(seed)

    def gaussian(*shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)

    tight = torch.sqrt(1 - 2 * torch.arange(16, dtype=torch.float64) / 32)  # |z_k|, d = 32
    tight_q = torch.stack((tight, torch.zeros_like(tight)), -1).flatten()
    far = torch.tensor([0, 1, 10, 100, 1000, 10000, _FAR])
    sets = [
        (
            gaussian(8),
            gaussian(8),
            torch.arange(16),
            "d=8, Gaussian q, k of shape (8,), distances arange(16)",
        ),
        (
            gaussian(4, 64),
            gaussian(4, 64),
            far,
            f"d=64, four Gaussian pairs (4, 64), distances 0 to {_FAR:,}",
        ),
        (
            torch.ones(16),
            torch.ones(16),
            torch.tensor([0, 1, 10, 100]),
            "d=16, q = k = all ones, distances 0, 1, 10, 100",
        ),
        (
            tight_q,
            tight_q.clone(),
            torch.tensor([0, 2, 50, 3000]),
            "d=32, q = k with |z_k|^2 = 1 - 2k/d (the bound is reached at r = 0), "
            "distances 0, 2, 50, 3000",
        ),
        (
            gaussian(2, 1, 16, dtype=torch.float32),
            gaussian(1, 3, 16, dtype=torch.float32),
            torch.tensor([0, 5, 50, 500]),
            "d=16, float32 q (2, 1, 16) and k (1, 3, 16) broadcast, distances 0, 5, 50, 500",
        ),
    ]
    return [
        _Case(
            name=described,
            args=(q, k, distances),
            reference=abel_bound(q, k, distances),
            d=q.shape[-1],
            base=10000.0,
            distances=distances,
            q=q,
            k=k,
        )
        for q, k, distances, described in sets
    ]


def _abel_shape_problem(out: torch.Tensor, case: _Case) -> str | None:
    expected = tuple(case.reference.shape)
    if tuple(out.shape) == expected[:-1] or tuple(out.shape) == (*expected[:-1], 1):
        return (
            f"one value per query-key pair: fn returned {tuple(out.shape)} where "
            f"{expected} was expected ({case.name}); the bound depends on the distance: "
            "one value per distance, (..., R)"
        )
    return None
