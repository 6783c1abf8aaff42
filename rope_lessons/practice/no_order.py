r"""Chapter 1's exercise: attention without positions, with and without a causal mask.

The reader writes ``fn(q, k, v, causal)``: softmax attention
:math:`o_m = \sum_n a_{mn} v_n` with :math:`a_{mn} = \operatorname{softmax}_n(q_m \cdot
k_n / \sqrt{D})` and no position information, where ``causal=True`` lets query
:math:`m` see only the keys :math:`n \le m`. :func:`check_attention` compares it
with :func:`rope_lessons.toy.rotary_attention.attention` (``placement="nope"``) on
seeded cases: two sizes in float64 and float32, each with and without the mask, a
single token, and large scores in float32. When the outputs differ it looks for the
bug among the usual ones, each a wrong attention written with the package's
``attention``, and reports the one that reproduces ``fn`` on every case:

* the causal mask missing, applied when ``causal=False`` too, or the flag inverted;
* the mask off by one (the diagonal excluded, or one key ahead seen), flipped to the
  future, or inverted (the allowed keys masked);
* the scores not divided by :math:`\sqrt{D}`, divided by :math:`D`, or multiplied by
  :math:`\sqrt{D}`;
* the softmax over the queries (``dim=-2``) instead of the keys;
* keys and values swapped;

and alone, a softmax that overflows on large scores (``exp`` without subtracting
each row's maximum).

Every report also says which permutation symmetries ``fn`` shows, as chapter 1
proves them for attention without positions: without the mask, permuting the
queries permutes the outputs (equivariance) and permuting keys and values together
changes nothing (invariance); with the mask both fail, because query :math:`m` sees
the keys :math:`0, \dots, m`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from rope_lessons._checks import check_seed
from rope_lessons._grading import Report, raised, tensor_or_reason, unrecognised, wrong_shape
from rope_lessons.chapters.nope import permute_sequence
from rope_lessons.toy.rotary_attention import attention

__all__ = ["check_attention"]

AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]

MaskKind = Literal["none", "lower", "strict", "ahead", "upper", "strict_upper"]
"""Which keys a mask lets query ``m`` see: all; ``n <= m`` (the causal mask); ``n < m``;
``n <= m + 1``; ``n >= m``; ``n > m``."""
_MASK_KINDS: tuple[MaskKind, ...] = ("lower", "none", "strict", "ahead", "upper", "strict_upper")
# Each mask kind as the diagonal of tril (lower kinds) or triu (upper kinds) that it keeps.
_DIAGONAL: dict[MaskKind, tuple[str, int]] = {
    "lower": ("tril", 0),
    "strict": ("tril", -1),
    "ahead": ("tril", 1),
    "upper": ("triu", 0),
    "strict_upper": ("triu", 1),
}
# Each scale bug as the factor that multiplies 1/sqrt(D) in the scores, a function of D.
_SCALES: dict[str, Callable[[int], float]] = {
    "sqrt": lambda d: 1.0,
    "none": lambda d: math.sqrt(d),
    "d": lambda d: 1.0 / math.sqrt(d),
    "times_sqrt": lambda d: float(d),
}
Axis = Literal["keys", "queries"]
_AXES: tuple[Axis, ...] = ("keys", "queries")
_EPS = {
    torch.float64: torch.finfo(torch.float64).eps,
    torch.float32: torch.finfo(torch.float32).eps,
}


@dataclass(frozen=True, eq=False)
class _Case:
    """One input of the check: ``q``, ``k``, ``v`` of shape ``(B, H, T, D)``, the flag,
    and the reference output computed in float64."""

    name: str
    kind: str  # "plain", "single" or "large"
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    causal: bool
    reference: torch.Tensor  # (B, H, T, D) float64
    tolerance: float  # relative to max |v|


@dataclass(frozen=True, eq=False)
class _Result:
    case: _Case
    output: torch.Tensor  # float64
    error: float  # max |output - reference| / max |v|, inf where fn gave inf or NaN

    @property
    def passed(self) -> bool:
        return self.error <= self.case.tolerance


@dataclass(frozen=True, eq=False)
class _Candidate:
    """A wrong attention: the mask it uses with and without ``causal``, its scale, the
    axis of its softmax, and whether it swaps keys and values."""

    causal_mask: MaskKind
    plain_mask: MaskKind
    scale: str = "sqrt"
    axis: Axis = "keys"
    swapped: bool = False


def check_attention(fn: AttentionFn, *, seed: int = 0) -> Report:
    r"""Check that ``fn`` is attention without positions, and name what is wrong if not.

    ``fn(q, k, v, causal)`` gets queries, keys and values of shape ``(B, H, T, D)``
    (float64 or float32, all three alike) and a bool, and returns the outputs
    :math:`o_m = \sum_n a_{mn} v_n`, :math:`a_{mn} = \operatorname{softmax}_n(q_m
    \cdot k_n / \sqrt{D})`, of shape ``(B, H, T, D)`` and the dtype of ``q``. With
    ``causal=True`` query :math:`m` sees only the keys :math:`n \le m` (positions
    0-based). ``fn`` is called positionally, ``fn(q, k, v, causal)``, on fresh
    copies of seeded random inputs:

    * ``(B, H, T, D) = (2, 3, 7, 16)`` in float64, with ``causal`` False and True;
    * ``(1, 2, 12, 8)`` in float32, with ``causal`` False and True;
    * one token, ``(2, 1, 1, 32)`` in float64, with the mask;
    * large scores, ``(1, 2, 6, 16)`` in float32 with queries and keys scaled by 8,
      so that some scores pass 88, where ``exp`` overflows in float32; with the mask.

    Each output is compared with
    :func:`~rope_lessons.toy.rotary_attention.attention` (``placement="nope"``) in
    float64. Then the permutation symmetries of ``fn`` are measured on one more
    input (``(1, 2, 6, 8)``, float64), with and without the mask.

    The diagnosis starts with one of these phrases (the messages of several bugs
    that one wrong implementation reproduces are joined by ``"; "``), and ends with
    the permutation symmetries seen, when ``fn`` ran on every case:

    * ``"correct"``: every case matched;
    * ``"causal mask missing"``, ``"causal flag inverted"``, ``"mask applied when
      causal=False"``;
    * ``"mask excludes the diagonal"``, ``"mask off by one"`` (one key ahead seen),
      ``"mask flipped"`` (the future seen), ``"mask inverted"`` (only the strict
      future seen);
    * ``"missing 1/sqrt(D) scale"``, ``"scores divided by D"``, ``"scores multiplied
      by sqrt(D)"``;
    * ``"softmax over the wrong axis"``;
    * ``"keys and values swapped"``;
    * ``"softmax overflowed"``: right except on large scores, where the output holds
      inf or NaN;
    * ``"fn raised"``, ``"fn did not return a tensor"``, ``"wrong output shape"``,
      ``"wrong output dtype"``;
    * ``"unrecognised difference"``: none of the above reproduces ``fn``;
    * ``"not written yet"``: ``fn`` raised ``NotImplementedError``.

    Args:
        fn: the function to check, ``(q, k, v, causal) -> output``.
        seed: seed of the random inputs.

    Returns:
        A :class:`~rope_lessons._grading.Report`; ``max_error`` is relative to
        ``max |v|`` of the case.

    Raises:
        TypeError: if ``fn`` is not callable or ``seed`` is not an int.
        ValueError: if ``seed`` is negative or not below 2**63.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, fn(q, k, v, causal) -> output; got {fn!r}")
    cases = _cases(check_seed(seed))
    names = tuple(case.name for case in cases)
    results: list[_Result] = []
    with torch.no_grad():
        for case in cases:
            try:
                out: object = fn(case.q.clone(), case.k.clone(), case.v.clone(), case.causal)
            except Exception as failure:  # the reader's code may raise anything; a stub, too
                return raised(failure, "fn", case.name, names, hint=_raised_hint(failure))
            checked = _checked_output(out, case)
            if isinstance(checked, str):
                return Report(False, checked, math.inf, names, (case.name,))
            output = checked.detach().to(torch.float64)
            largest = float((output - case.reference).abs().max()) / float(case.v.abs().max())
            results.append(_Result(case, output, largest if math.isfinite(largest) else math.inf))
        symmetries = _symmetries(fn, seed)
    failed = tuple(r.case.name for r in results if not r.passed)
    max_error = max(r.error for r in results)
    if failed:
        diagnosis = f"{_diagnose(results)}. {symmetries}"
        return Report(False, diagnosis, max_error, names, failed)
    diagnosis = (
        f"correct: fn matches attention(q, k, v, placement='nope', causal=...) on all "
        f"{len(cases)} cases (float64 and float32, with and without the mask, one token, "
        f"large scores). {symmetries}"
    )
    return Report(True, diagnosis, max_error, names, ())


def _cases(seed: int) -> list[_Case]:
    generator = torch.Generator().manual_seed(seed)
    specs = (
        ("plain", (2, 3, 7, 16), torch.float64, False, 1.0),
        ("plain", (2, 3, 7, 16), torch.float64, True, 1.0),
        ("plain", (1, 2, 12, 8), torch.float32, False, 1.0),
        ("plain", (1, 2, 12, 8), torch.float32, True, 1.0),
        ("single", (2, 1, 1, 32), torch.float64, True, 1.0),
        ("large", (1, 2, 6, 16), torch.float32, True, 8.0),
    )
    cases = []
    for kind, shape, dtype, causal, size in specs:
        q, k, v = (torch.randn(*shape, generator=generator, dtype=torch.float64) for _ in range(3))
        q, k, v = (size * q).to(dtype), (size * k).to(dtype), v.to(dtype)
        reference = attention(q.double(), k.double(), v.double(), placement="nope", causal=causal)
        described = {
            "plain": "",
            "single": ", one token",
            "large": f", queries and keys scaled by {size:g}",
        }[kind]
        # Rounding of the scores, up to |q| |k| (no scale), carried into the weights.
        bound = float(q.double().norm(dim=-1).max() * k.double().norm(dim=-1).max())
        cases.append(
            _Case(
                name=f"(B, H, T, D) = {shape}, {str(dtype).removeprefix('torch.')}, "
                f"causal={causal}{described}",
                kind=kind,
                q=q,
                k=k,
                v=v,
                causal=causal,
                reference=reference,
                tolerance=64 * _EPS[dtype] * (1.0 + bound),
            )
        )
    return cases


def _raised_hint(error: Exception) -> str:
    """A likely cause of ``error``, or an empty string."""
    if isinstance(error, RuntimeError) and "size" in str(error).lower():
        return "; the scores are q @ k.transpose(-2, -1), (B, H, T, T), and the outputs weights @ v"
    return ""


def _checked_output(out: object, case: _Case) -> torch.Tensor | str:
    """``out`` if it can be compared with the reference, else why not."""
    out = tensor_or_reason(out, "fn", case.name)
    if isinstance(out, str):
        return out
    if out.shape != case.v.shape:
        fix = "return one output per query, (B, H, T, D)"
        return wrong_shape(out, case.name, inputs="q, k, v", shape=case.q.shape, fix=fix)
    if out.dtype != case.q.dtype:
        return (
            f"wrong output dtype: fn returned {out.dtype} for {case.q.dtype} inputs "
            f"({case.name}); return the dtype of q"
        )
    return out


def _diagnose(results: list[_Result]) -> str:
    """Name the bug of an ``fn`` that failed some case."""
    candidate = _reproduction(results)
    if candidate is not None:
        return "; ".join(_bugs(candidate))
    failed = [r for r in results if not r.passed]
    if all(r.case.kind == "large" and not bool(r.output.isfinite().all()) for r in failed):
        return (
            "softmax overflowed: fn is right except on large scores (queries and keys "
            "scaled by 8), where its output holds inf or NaN, as exp(scores) / sum(exp(scores)) "
            "gives once a score passes 88 in float32; subtract each row's maximum before exp, "
            "or use torch.softmax, which does"
        )
    worst = max(results, key=lambda r: r.error)
    return unrecognised(
        failed[0].case.name,
        worst.error,
        "Compare fn's weights for that case with torch.softmax(q @ k.transpose(-2, -1) / "
        "sqrt(D), dim=-1), masked where the key comes after the query if causal",
    )


def _candidates() -> list[tuple[int, int, _Candidate]]:
    """Every wrong attention tried, with its number of bugs and its rank in the order
    tried: fewest bugs first."""
    ranked = []
    order = 0
    for causal_mask, scale, axis, swapped in itertools.product(
        _MASK_KINDS, _SCALES, _AXES, (False, True)
    ):
        plains: tuple[MaskKind, ...] = (
            ("none", "lower") if causal_mask in ("none", "lower") else ("none", causal_mask)
        )
        for plain_mask in plains:
            if axis == "queries" and (
                causal_mask not in ("none", "lower", "ahead", "upper") or plain_mask != "none"
            ):
                continue  # a key that no query sees gives NaN in every output
            candidate = _Candidate(causal_mask, plain_mask, scale, axis, swapped)
            bugs = len(_bugs(candidate))
            if bugs:
                ranked.append((bugs, order, candidate))
                order += 1
    return sorted(ranked, key=lambda item: item[:2])


def _reproduction(results: list[_Result]) -> _Candidate | None:
    """The simplest wrong attention that matches ``fn`` on every case, if one does."""
    ordered = sorted(results, key=lambda r: r.passed)  # failures first: they rule out most
    for _, _, candidate in _candidates():
        if all(_matches(candidate, r) for r in ordered):
            return candidate
    return None


def _allowed(kind: MaskKind, seq_len: int) -> torch.Tensor | None:
    """The keys query ``m`` may see, ``(T, T)`` boolean; None for no mask."""
    if kind == "none":
        return None
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool)
    side, diagonal = _DIAGONAL[kind]
    return ones.tril(diagonal) if side == "tril" else ones.triu(diagonal)


def _matches(candidate: _Candidate, result: _Result) -> bool:
    """Whether ``fn``'s output equals the candidate's on every query that sees a key."""
    case = result.case
    q, k, v = case.q.double(), case.k.double(), case.v.double()
    if candidate.swapped:
        k, v = v, k
    q = q * _SCALES[candidate.scale](q.shape[-1])
    seq_len = q.shape[-2]
    allowed = _allowed(candidate.causal_mask if case.causal else candidate.plain_mask, seq_len)
    if candidate.axis == "keys":
        expected = attention(q, k, v, placement="nope", causal=False, attn_mask=allowed)
        alive = torch.ones(seq_len, dtype=torch.bool) if allowed is None else allowed.any(-1)
    else:  # each key's column normalised over the queries that see it
        _, columns = attention(
            k,
            q,
            v,
            placement="nope",
            causal=False,
            attn_mask=None if allowed is None else allowed.T,
            return_weights=True,
        )  # (B, H, T_k, T_q)
        expected = columns.transpose(-2, -1) @ v
        alive = torch.ones(seq_len, dtype=torch.bool)
    difference = (result.output - expected)[..., alive, :].abs()
    if difference.numel() == 0:
        return True  # the candidate leaves every query of this case without a key
    return float(difference.max()) <= case.tolerance * float(v.abs().max())


def _bugs(candidate: _Candidate) -> list[str]:
    """The messages of the candidate's bugs."""
    bugs = []
    causal_mask, plain_mask = candidate.causal_mask, candidate.plain_mask
    if causal_mask == "none" and plain_mask == "none":
        bugs.append(
            "causal mask missing: with causal=True fn lets every query see every key, the "
            "future included. Before the softmax, set the scores of keys n > m to -inf "
            "(torch.ones(T, T, dtype=torch.bool).triu(1) marks them)"
        )
    elif causal_mask == "none":
        bugs.append(
            "causal flag inverted: fn masks the future when causal=False and not when "
            "causal=True: apply the mask if causal, not if not causal"
        )
    elif plain_mask != "none":
        bugs.append(
            "mask applied when causal=False: fn masks the future whatever causal says, but "
            "bidirectional attention lets every query see every key, so apply the mask "
            "only if causal"
        )
    messages: dict[MaskKind, str] = {
        "strict": "mask excludes the diagonal: query m sees the keys n < m but not its own "
        "key, as triu(0) masked (or tril(-1) kept) gives, and query 0 sees no key at all "
        "(its output is NaN or a mean over every value). Mask only n > m: triu(1)",
        "ahead": "mask off by one: query m also sees key m + 1, as triu(2) masked (or "
        "tril(1) kept) gives. Mask every key n > m: triu(1)",
        "upper": "mask flipped: query m sees the keys n >= m, the future, where it must see "
        "n <= m (tril kept where triu was meant, or the mask transposed)",
        "strict_upper": "mask inverted: fn masks the keys a query may see and keeps the "
        "others, so query m sees only the keys n > m and the last query none (a keep-mask "
        "passed to masked_fill, which fills where the mask is True: use ~mask)",
    }
    if causal_mask in messages:
        bugs.append(messages[causal_mask])
    scales = {
        "none": "missing 1/sqrt(D) scale: fn's scores are q·k, where attention divides them "
        "by sqrt(D), D the head dimension (q.shape[-1]). Without it the softmax is too sharp",
        "d": "scores divided by D: fn divides q·k by the head dimension D, where attention "
        "divides by sqrt(D) (math.sqrt(q.shape[-1]) or ** 0.5)",
        "times_sqrt": "scores multiplied by sqrt(D): fn multiplies q·k by sqrt(D) where "
        "attention divides by it",
    }
    if candidate.scale in scales:
        bugs.append(scales[candidate.scale])
    if candidate.axis == "queries":
        bugs.append(
            "softmax over the wrong axis: fn normalises each key's column over the queries "
            "(softmax(dim=-2)), where each query's row of weights over the keys must sum to "
            "1 (softmax(dim=-1) of the (B, H, T_q, T_k) scores)"
        )
    if candidate.swapped:
        bugs.append(
            "keys and values swapped: fn scores the queries against the values and averages "
            "the keys (softmax(q v^T) k). The scores are q k^T and the outputs weights @ v"
        )
    return bugs


def _symmetries(fn: AttentionFn, seed: int) -> str:
    """Which permutation symmetries ``fn`` shows, with and without the mask, in words."""
    generator = torch.Generator().manual_seed(seed + 1)
    q, k, v = (torch.randn(1, 2, 6, 8, generator=generator, dtype=torch.float64) for _ in range(3))
    permutation = torch.tensor([3, 0, 5, 1, 4, 2])
    parts = []
    for causal in (False, True):
        try:
            out = fn(q.clone(), k.clone(), v.clone(), causal).double()
            by_query = fn(permute_sequence(q, permutation), k.clone(), v.clone(), causal).double()
            by_key = fn(
                q.clone(),
                permute_sequence(k, permutation),
                permute_sequence(v, permutation),
                causal,
            ).double()
        except Exception:  # the reader's code may raise anything
            return "The permutation symmetries could not be measured: fn raised on them."
        tolerance = 1e-6 * float(v.abs().max())
        equivariant = _close(by_query, permute_sequence(out, permutation), tolerance)
        invariant = _close(by_key, out, tolerance)
        must = "fails, as it must" if causal else "holds, as it must"
        wrong = "holds, where it must fail" if causal else "fails, where it must hold"
        parts.append(
            f"With causal={causal}: permuting the queries permutes the outputs "
            f"({must if equivariant != causal else wrong}), and permuting keys and values "
            f"together leaves the outputs unchanged ({must if invariant != causal else wrong})"
        )
    return f"Symmetries of fn (T = 6). {'. '.join(parts)}."


def _close(a: torch.Tensor, b: torch.Tensor, tolerance: float) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, rtol=0.0, atol=tolerance, equal_nan=True)
