"""Chapter 9's checker: each planted misreading of a projection's pair shares is named."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons._checks import Layout
from rope_lessons.chapters.spectrum import pair_dims
from rope_lessons.practice import real_model as rm
from rope_lessons.practice.real_model import check_pair_shares, weight_pair_shares
from rope_lessons.rope.spec import Rope

Fn = Callable[[torch.Tensor, int, Layout], torch.Tensor]
OTHER: dict[Layout, Layout] = {"interleaved": "half", "half": "interleaved"}


def shares(
    *,
    layout_of: Callable[[Layout], Layout] = lambda layout: layout,
    split: str = "heads",
    transposed: bool = False,
    squared: bool = True,
    normalise: str = "head",
    flipped: bool = False,
    per_feature: bool = False,
    pooled: bool = False,
) -> Fn:
    """The shares written with indexing and sums, with the bugs asked for."""

    def fn(weight: torch.Tensor, head_dim: int, layout: Layout) -> torch.Tensor:
        w = weight.double()
        if transposed:
            w = w.T
        heads = w.shape[0] // head_dim
        if split == "heads":
            rows = w.view(heads, head_dim, -1)
        else:
            rows = w.view(head_dim, heads, -1).transpose(0, 1)
        per_row = (rows**2).sum(-1)  # (H, d)
        if per_feature:
            return per_row / per_row.sum(-1, keepdim=True)
        pairs = pair_dims(Rope(head_dim, layout=layout_of(layout)))  # (d/2, 2)
        energy = per_row[:, pairs].sum(-1)  # (H, d/2)
        if not squared:
            energy = rows[:, pairs].pow(2).sum((-1, -2)).sqrt()
        if pooled:
            return energy.sum(0) / energy.sum()
        if normalise == "head":
            energy = energy / energy.sum(-1, keepdim=True)
        elif normalise == "layer":
            energy = energy / energy.sum()
        return energy.flip(-1) if flipped else energy

    return fn


def looped(weight: torch.Tensor, head_dim: int, layout: Layout) -> torch.Tensor:
    """Correct, written as loops over heads and pairs in float32."""
    heads = weight.shape[0] // head_dim
    out = torch.zeros(heads, head_dim // 2)
    for h in range(heads):
        block = weight[h * head_dim : (h + 1) * head_dim].float()
        total = float((block**2).sum())
        for k in range(head_dim // 2):
            if layout == "interleaved":
                first, second = 2 * k, 2 * k + 1
            else:
                first, second = k, k + head_dim // 2
            out[h, k] = float((block[first] ** 2).sum() + (block[second] ** 2).sum()) / total
    return out


def test_correct_implementations_pass() -> None:
    for fn in (shares(), looped, weight_pair_shares):
        report = check_pair_shares(fn)
        assert report.ok, report.diagnosis
        assert report.diagnosis.startswith("correct") and len(report.cases) == 6


def test_both_layouts_and_grouped_keys_are_tried() -> None:
    cases = rm._cases(0)
    assert {case.layout for case in cases} == {"interleaved", "half"}
    assert any(case.weight.shape[0] != case.weight.shape[1] for case in cases)
    assert {case.weight.dtype for case in cases} == {torch.float64, torch.float32, torch.bfloat16}
    for case in cases:
        assert torch.allclose(case.reference.sum(-1), torch.ones(case.heads, dtype=torch.float64))
        bug_free = rm._Candidate().output(case)
        assert bug_free is not None
        assert torch.allclose(bug_free, case.reference, rtol=0.0, atol=1e-12)


@pytest.mark.parametrize(
    ("fn", "verdict"),
    [
        (shares(layout_of=lambda layout: OTHER[layout]), "layouts swapped"),
        (shares(layout_of=lambda layout: "half"), "ignores the layout"),
        (shares(layout_of=lambda layout: "interleaved"), "ignores the layout"),
        (shares(split="dims"), "heads split the wrong way"),
        (shares(transposed=True), "rows and columns swapped"),
        (shares(squared=False), "norms not squared"),
        (shares(normalise="layer"), "normalised over the layer, not per head"),
        (shares(normalise="none"), "shares not normalised"),
        (shares(flipped=True), "pairs reversed"),
        (shares(per_feature=True), "per-feature shares"),
        (shares(pooled=True), "heads pooled"),
    ],
)
def test_planted_bugs_are_named(fn: Fn, verdict: str) -> None:
    report = check_pair_shares(fn)
    assert not report.ok
    assert report.diagnosis.startswith(verdict), report.diagnosis
    assert report.failed


def test_two_bugs_are_both_named() -> None:
    report = check_pair_shares(shares(layout_of=lambda layout: OTHER[layout], flipped=True))
    assert report.diagnosis.startswith("layouts swapped")
    assert "; pairs reversed" in report.diagnosis
    assert math.isfinite(report.max_error) and report.max_error > 0.01


def test_stub_unrecognised_shapes_and_errors() -> None:
    def stub(weight: torch.Tensor, head_dim: int, layout: Layout) -> torch.Tensor:
        raise NotImplementedError

    def cubed(weight: torch.Tensor, head_dim: int, layout: Layout) -> torch.Tensor:
        energy = weight_pair_shares(weight, head_dim, layout) ** 1.5
        return energy / energy.sum(-1, keepdim=True)

    assert check_pair_shares(stub).diagnosis.startswith("not written yet")
    report = check_pair_shares(cubed)
    assert report.diagnosis.startswith("unrecognised difference")
    assert report.first_failure == rm._cases(0)[0].name
    assert math.isfinite(report.max_error) and report.max_error > 1e-3
    assert "largest error" in str(report)
    listed: Fn = lambda w, d, layout: [0.0]  # type: ignore[assignment,return-value]  # noqa: E731
    assert check_pair_shares(listed).diagnosis.startswith("fn did not return a tensor")
    wide: Fn = lambda w, d, layout: torch.zeros(3, 3)  # noqa: E731
    assert check_pair_shares(wide).diagnosis.startswith("wrong output shape")
    nan: Fn = lambda w, d, layout: torch.full((w.shape[0] // d, d // 2), math.nan)  # noqa: E731
    assert check_pair_shares(nan).diagnosis.startswith("non-finite output")
    failing: Fn = lambda w, d, layout: w.view(7, -1)  # noqa: E731
    assert check_pair_shares(failing).diagnosis.startswith("fn raised RuntimeError")


def test_fn_gets_fresh_copies() -> None:
    def spoiling(weight: torch.Tensor, head_dim: int, layout: Layout) -> torch.Tensor:
        out = weight_pair_shares(weight, head_dim, layout)
        weight.zero_()
        return out

    assert check_pair_shares(spoiling).ok
    assert check_pair_shares(shares()).ok


def test_bad_arguments() -> None:
    with pytest.raises(TypeError):
        check_pair_shares("not a function")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        check_pair_shares(shares(), seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seed"):
        check_pair_shares(shares(), seed=-1)
    with pytest.raises(ValueError, match="divide"):
        weight_pair_shares(torch.ones(12, 4), 8, "half")
    with pytest.raises(ValueError):
        weight_pair_shares(torch.ones(12, 4), 3, "half")
    with pytest.raises(TypeError):
        weight_pair_shares(torch.ones(12, dtype=torch.long), 4, "half")


@settings(max_examples=3, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_any_seed_accepts_the_reference_and_names_the_swap(seed: int) -> None:
    assert check_pair_shares(looped, seed=seed).ok
    swapped = shares(layout_of=lambda layout: OTHER[layout])
    assert check_pair_shares(swapped, seed=seed).diagnosis.startswith("layouts swapped")
