r"""Chapter 9's exercise: read from a projection's weights which rotary pairs hold the norm.

Chapter 9 measures each rotary pair's share of a head's mean squared query (or
key) norm on real text (:func:`~rope_lessons.chapters.spectrum.pair_energy_shares`).
The weights alone give a first reading of the same thing: for inputs whose
features are uncorrelated and of equal size, :math:`E[x x^\top] = I`, the mean
squared norm of pair ``k`` of a head is the squared norm of the two rows of
:math:`W_q` (or :math:`W_k`) that make that pair,
:math:`\lVert W^{(k)}\rVert_F^2`. These are the queries of the ``C`` unit
inputs, the columns of ``W``, and :func:`check_pair_shares` computes the
reference exactly that way: chapter 5's ``pair_energy_shares`` on those queries.

The reader writes ``fn(weight, head_dim, layout)``: ``weight`` as
``nn.Linear`` holds it, ``(heads * head_dim, C)`` (out, in), heads one after
another, each head's features in ``layout``; it returns each head's share of
its squared norm in each pair, ``(heads, head_dim / 2)``, pair 0 the fastest.
The checker runs it on seeded stand-in weights with a few planted heavy pairs
per head, in both layouts, for query and (grouped-query) key projections of
several sizes, SmolLM2-135M's among them, in float64, float32 and bfloat16; when
``fn`` differs it names the bug: the layout confused or ignored, the rows split
into heads the wrong way, rows and columns swapped, norms not squared, shares
not normalised per head, the pairs reversed, per-feature shares, heads pooled.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from rope_lessons._checks import LAYOUTS, Layout, check_even_dim, check_layout, check_seed
from rope_lessons._grading import Report, raised, unrecognised
from rope_lessons.chapters.spectrum import pair_dims, pair_energy_shares, pair_norms
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.model import QKV

__all__ = ["check_pair_shares", "weight_pair_shares"]

PairShares = Callable[[torch.Tensor, int, Layout], torch.Tensor]

_TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-5, torch.bfloat16: 1e-2}
_PAIRS = {"interleaved": "pairs (2k, 2k+1)", "half": "pairs (k, k + d/2)"}


def weight_pair_shares(weight: torch.Tensor, head_dim: int, layout: Layout) -> torch.Tensor:
    r"""Each head's share of its squared norm in each rotary pair, read from the weight.

    The queries (or keys) of the ``C`` unit inputs are the columns of ``weight``;
    chapter 5's :func:`~rope_lessons.chapters.spectrum.pair_energy_shares` of them is
    :math:`\lVert W^{(k)}_h\rVert_F^2 / \lVert W_h\rVert_F^2` for pair ``k`` of head ``h``:
    the share of :math:`E\lVert q^{(k)}\rVert^2` for inputs with :math:`E[x x^\top] = I`.

    Args:
        weight: ``(heads * head_dim, C)``, an ``nn.Linear`` weight (out, in), each
            head's rows in ``layout``.
        head_dim: the head dimension ``d``, even.
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        float64 ``(heads, d/2)``, each row summing to 1, pair 0 the fastest.

    Raises:
        TypeError: if ``weight`` is not a floating tensor of two dimensions.
        ValueError: for an odd ``head_dim``, one that does not divide the rows, or
            an unknown layout.
    """
    if not isinstance(weight, torch.Tensor) or not weight.is_floating_point() or weight.ndim != 2:
        raise TypeError("weight must be a floating tensor (heads * head_dim, C)")
    head_dim = check_even_dim(head_dim, "head_dim")
    layout = check_layout(layout)
    rows, columns = weight.shape
    if rows % head_dim:
        raise ValueError(f"head_dim {head_dim} does not divide the weight's {rows} rows")
    queries = weight.detach().double().T.reshape(1, columns, rows // head_dim, head_dim)
    queries = queries.transpose(1, 2)  # (1, heads, C, d): one "position" per unit input
    shares, _ = pair_energy_shares([QKV(queries, queries, queries)], Rope(head_dim, layout=layout))
    return shares[0]


@dataclass(frozen=True, eq=False)
class _Case:
    name: str
    weight: torch.Tensor  # (heads * d, C)
    head_dim: int
    layout: Layout
    reference: torch.Tensor  # (heads, d/2) float64

    @property
    def heads(self) -> int:
        return self.weight.shape[0] // self.head_dim

    @property
    def tolerance(self) -> float:
        return _TOLERANCE[self.weight.dtype]


@dataclass(frozen=True)
class _Candidate:
    """A reading with up to six bugs; all defaults make it the reference."""

    pairs: str = "claimed"  # "claimed", "other", "interleaved", "half": whose pairs
    split: str = "heads"  # "heads": rows (H, d); "dims": rows read as (d, H)
    transposed: bool = False  # columns of the weight read as its rows
    squared: bool = True
    normalise: str = "head"  # "head", "layer" or "none"
    flipped: bool = False

    def bugs(self) -> list[str]:
        notes = []
        if self.pairs == "other":
            notes.append(
                "layouts swapped: fn reads the other layout's pairs, rows (k, k + d/2) of a "
                "head where layout='interleaved' means rows (2k, 2k+1), and the reverse; "
                "pick the rows by the layout fn is given"
            )
        elif self.pairs in LAYOUTS:
            notes.append(
                f"ignores the layout: fn always reads {_PAIRS[self.pairs]}, the "
                f"{self.pairs} layout's, whatever layout it is given; pick the pairs by "
                "layout (SmolLM2's loaded rows are half, its GGUF file's interleaved)"
            )
        if self.split == "dims":
            notes.append(
                "heads split the wrong way: fn reads the rows as (d, heads), head h taking "
                "every heads-th row; nn.Linear's output is heads one after another, so "
                "split the rows as (heads, d): weight.view(heads, d, C)"
            )
        if self.transposed:
            notes.append(
                "rows and columns swapped: fn splits the columns of the weight into heads; "
                "nn.Linear's weight is (out_features, in_features), a query feature per row, "
                "so the heads are blocks of rows"
            )
        if not self.squared:
            notes.append(
                "norms not squared: fn gives each pair's share of the sum of the pairs' "
                "norms; the share of the squared norm, sum of squares of the pair's rows "
                "over the head's, adds up as the dot products do"
            )
        if self.normalise == "layer":
            notes.append(
                "normalised over the layer, not per head: fn divides by the whole "
                "projection's squared norm, so a head's shares sum to its share of the "
                "layer; divide each head's pairs by that head's total"
            )
        elif self.normalise == "none":
            notes.append(
                "shares not normalised: fn returns each pair's squared norm, not its share; "
                "divide each head's row by its sum"
            )
        if self.flipped:
            notes.append(
                "pairs reversed: fn's pair 0 is the slowest and its last pair the fastest; "
                "pair k turns at base^(-2k/d), pair 0 fastest"
            )
        return notes

    def output(self, case: _Case) -> torch.Tensor | None:
        weight = case.weight.detach().double()
        if self.transposed:
            if weight.shape[0] != weight.shape[1]:
                return None
            weight = weight.T
        d = case.head_dim
        heads = weight.shape[0] // d
        layout: Layout = (
            case.layout
            if self.pairs == "claimed"
            else ("half" if case.layout == "interleaved" else "interleaved")
            if self.pairs == "other"
            else check_layout(self.pairs)
        )
        if self.split == "heads":
            rows = weight.reshape(heads, d, -1)
        else:
            rows = weight.reshape(d, heads, -1).transpose(0, 1)
        per_pair = pair_norms(rows.transpose(1, 2), Rope(d, layout=layout)) ** 2  # (H, C, d/2)
        energy = per_pair.sum(1)  # (H, d/2)
        if not self.squared:
            energy = energy.sqrt()
        if self.normalise == "head":
            energy = energy / energy.sum(-1, keepdim=True)
        elif self.normalise == "layer":
            energy = energy / energy.sum()
        return energy.flip(-1) if self.flipped else energy


def _candidates() -> list[_Candidate]:
    """Every combination, fewest bugs first."""
    options = itertools.product(
        ("claimed", "other", "interleaved", "half"),
        ("heads", "dims"),
        (False, True),
        (True, False),
        ("head", "layer", "none"),
        (False, True),
    )
    candidates = [_Candidate(*values) for values in options][1:]
    return sorted(candidates, key=lambda c: len(c.bugs()))


def _weight(
    heads: int, d: int, columns: int, dtype: torch.dtype, generator: torch.Generator
) -> torch.Tensor:
    """Random rows of uneven size: each row scaled by a factor in [0.5, 1.5)."""
    weight = torch.randn(heads * d, columns, generator=generator, dtype=torch.float64)
    weight *= 0.5 + torch.rand(heads * d, 1, generator=generator, dtype=torch.float64)
    return weight.to(dtype)


def _planted(
    weight: torch.Tensor, d: int, layout: Layout, generator: torch.Generator
) -> torch.Tensor:
    """``weight`` with two heavy pairs per head, their rows (in ``layout``) scaled by 4 and 3."""
    heads = weight.shape[0] // d
    rope = Rope(d, layout=layout)
    scaled = weight.double().clone()
    dims = pair_dims(rope)  # (d/2, 2)
    for h in range(heads):
        heavy = torch.randperm(d // 2, generator=generator)[:2]
        for rank, pair in enumerate(heavy.tolist()):
            scaled[h * d + dims[pair]] *= 4.0 - rank
    return scaled.to(weight.dtype)


def _cases(seed: int) -> list[_Case]:
    generator = torch.Generator().manual_seed(seed)
    specs: list[tuple[str, int, int, int, Layout, torch.dtype]] = [
        ("W_q", 4, 16, 64, "interleaved", torch.float32),
        ("W_q", 4, 16, 64, "half", torch.float32),
        ("W_k", 2, 16, 64, "half", torch.float32),
        ("W_k", 1, 8, 32, "interleaved", torch.float64),
        ("W_q", 9, 64, 576, "half", torch.bfloat16),
        ("W_k", 3, 64, 576, "interleaved", torch.float32),
    ]
    cases = []
    for which, heads, d, columns, layout, dtype in specs:
        weight = _planted(_weight(heads, d, columns, dtype, generator), d, layout, generator)
        kind = "query" if which == "W_q" else "key"
        name = (
            f"{which} {tuple(weight.shape)}: {heads} {kind} head{'s' * (heads > 1)} of d = {d}, "
            f"{layout}, {str(dtype).removeprefix('torch.')}"
        )
        reference = weight_pair_shares(weight, d, layout)
        cases.append(_Case(name, weight, d, layout, reference))
    return cases


def _shape_problem(out: torch.Tensor, case: _Case) -> str | None:
    heads, d = case.heads, case.head_dim
    shape = tuple(out.shape)
    if shape == (heads, d // 2):
        return None
    expected = f"(heads, d/2) = {(heads, d // 2)}"
    rows, columns = case.weight.shape
    if shape == (heads, d):
        return (
            f"per-feature shares: fn returned {shape}, one share per feature, where "
            f"{expected} is needed: add the squares of each pair's two rows ({_PAIRS[case.layout]}"
            f" in the {case.layout} layout) before dividing"
        )
    if shape in ((d // 2,), (1, d // 2)) and heads > 1:
        return (
            f"heads pooled: fn returned {shape}, one row for the whole projection, where "
            f"{expected} is needed: keep one row of shares per head"
        )
    if columns % d == 0 and rows != columns and shape == (columns // d, d // 2):
        return (
            f"rows and columns swapped: fn returned {shape}, heads read from the "
            f"{columns} columns of the ({rows}, {columns}) weight, where {expected} is needed; "
            "nn.Linear's weight is (out_features, in_features): the heads are blocks of rows"
        )
    if shape == (d // 2, heads):
        return f"wrong output shape: fn returned {shape}, (d/2, heads), where {expected} is needed"
    return f"wrong output shape: fn returned {shape} where {expected} is needed ({case.name})"


def check_pair_shares(fn: PairShares, *, seed: int = 0) -> Report:
    r"""Check that ``fn`` reads each head's share of its squared norm per rotary pair.

    ``fn(weight, head_dim, layout)`` gets a projection's weight as ``nn.Linear``
    holds it, ``(heads * head_dim, C)`` (out, in; float64, float32 or bfloat16),
    the head dimension ``d`` and the layout of each head's rows
    (``"interleaved"``: pair ``k`` is rows ``2k, 2k+1`` of the head; ``"half"``:
    rows ``k, k + d/2``). It returns a floating tensor ``(heads, d/2)``: for head
    ``h`` and pair ``k`` (pair 0 the fastest),
    :math:`\lVert W^{(k)}_h\rVert_F^2 / \lVert W_h\rVert_F^2`, the sum of squares of the
    pair's two rows over the head's, each row of the result summing to 1.

    Six seeded cases: query weights of 4 heads of ``d = 16`` in each layout
    (float32), key weights of 2 heads (grouped-query, non-square) and of a single
    head of ``d = 8`` (float64), and SmolLM2-135M's sizes, ``W_q`` of 9 heads
    (bfloat16) and ``W_k`` of 3 heads of ``d = 64`` over 576 inputs; each head has
    two planted heavy pairs. Each output is compared with
    :func:`weight_pair_shares` (chapter 5's ``pair_energy_shares`` of the
    columns); the error is the largest absolute difference of a share, allowed up
    to 1e-6, 1e-5 and 1e-2 for float64, float32 and bfloat16 weights (a
    reading computed in float32 passes).

    The diagnosis starts with one of these phrases (several bugs of one implementation joined
    by ``"; "``):

    * ``"correct"``; ``"not written yet"``; ``"fn raised"``;
    * ``"fn did not return a tensor"``, ``"per-feature shares"`` (``(heads, d)``
      returned), ``"heads pooled"`` (one row), ``"wrong output shape"``,
      ``"non-finite output"``;
    * ``"layouts swapped"``, ``"ignores the layout"``;
    * ``"heads split the wrong way"``: rows read as ``(d, heads)``;
    * ``"rows and columns swapped"``: the columns split into heads;
    * ``"norms not squared"``;
    * ``"normalised over the layer, not per head"``, ``"shares not normalised"``;
    * ``"pairs reversed"``: pair 0 the slowest;
    * ``"unrecognised difference"``: none of those reproduces ``fn``.

    Args:
        fn: ``(weight, head_dim, layout) -> shares``.
        seed: seed of the stand-in weights.

    Returns:
        A :class:`~rope_lessons._grading.Report`; ``max_error`` is the largest
        absolute difference of a share.

    Raises:
        TypeError: if ``fn`` is not callable or ``seed`` not an int.
        ValueError: if ``seed`` is negative or not below 2**63.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, fn(weight, head_dim, layout) -> shares; got {fn!r}")
    cases = _cases(check_seed(seed))
    names = tuple(case.name for case in cases)
    outputs: list[torch.Tensor] = []
    with torch.no_grad():
        for case in cases:
            try:
                out: object = fn(case.weight.clone(), case.head_dim, case.layout)
            except Exception as error:  # the reader's code may raise anything; a stub, too
                return raised(error, "fn", case.name, names)
            if not isinstance(out, torch.Tensor) or not (
                out.is_floating_point() or out.is_complex()
            ):
                what = type(out).__name__ if not isinstance(out, torch.Tensor) else out.dtype
                return Report(
                    False,
                    f"fn did not return a tensor of floats: got {what} ({case.name})",
                    math.inf,
                    names,
                    (case.name,),
                )
            problem = _shape_problem(out, case)
            if problem is not None:
                return Report(False, problem, math.inf, names, (case.name,))
            out = out.detach().cpu().real.double()
            if not bool(torch.isfinite(out).all()):
                return Report(
                    False,
                    f"non-finite output: fn returned NaN or inf ({case.name}); a head whose "
                    "rows are all zero would give 0/0, but no case has one",
                    math.inf,
                    names,
                    (case.name,),
                )
            outputs.append(out)
    errors = [float((o - c.reference).abs().max()) for o, c in zip(outputs, cases, strict=True)]
    failed = tuple(c.name for c, e in zip(cases, errors, strict=True) if e > c.tolerance)
    largest = max(errors)
    if not failed:
        return Report(
            True,
            f"correct: fn's shares match weight_pair_shares on all {len(cases)} cases (both "
            "layouts; query and grouped-query key weights; float64, float32, bfloat16)",
            largest,
            names,
            (),
        )
    for candidate in _candidates():
        if _reproduces(candidate, cases, outputs):
            return Report(False, "; ".join(candidate.bugs()), largest, names, failed)
    first = failed[0]
    return Report(
        False,
        unrecognised(
            first,
            largest,
            "Print fn's shares beside rope_lessons.practice.real_model.weight_pair_shares "
            "for that case, head by head.",
        ),
        largest,
        names,
        failed,
    )


def _reproduces(candidate: _Candidate, cases: list[_Case], outputs: list[torch.Tensor]) -> bool:
    for case, out in zip(cases, outputs, strict=True):
        expected = candidate.output(case)
        if expected is None or expected.shape != out.shape:
            return False
        scale = max(1.0, float(expected.abs().max()))
        if float((out - expected).abs().max()) > case.tolerance * scale:
            return False
    return True
