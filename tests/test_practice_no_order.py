"""check_attention: right implementations pass, and each planted bug is named.

The implementations are written as a reader would write them, in plain torch: one
parametrised function (scores, mask, softmax, weighted sum) into which the bugs are
planted, a loop over queries, and PyTorch's fused kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons.practice.no_order import check_attention
from rope_lessons.toy.rotary_attention import attention

Fn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]


def reader_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    *,
    scale: Callable[[int], float] = lambda d: 1 / math.sqrt(d),
    masked: Callable[[bool], bool] = lambda causal: causal,
    future: Callable[[int], torch.Tensor] = lambda t: torch.ones(t, t, dtype=torch.bool).triu(1),
    fill: float = float("-inf"),
    dim: int = -1,
    naive: bool = False,
) -> torch.Tensor:
    """``softmax(q k^T / sqrt(D), masked) v`` with the knobs the bugs turn: ``future``
    gives the (T, T) positions filled with ``fill`` when ``masked(causal)``."""
    scores = q @ k.transpose(-2, -1) * scale(q.shape[-1])  # (B, H, T, T)
    if masked(causal):
        scores = scores.masked_fill(future(q.shape[-2]), fill)
    if naive:
        exp = scores.exp()
        weights = exp / exp.sum(dim, keepdim=True)
    else:
        weights = scores.softmax(dim)
    return weights @ v


def looped_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
) -> torch.Tensor:
    """One query at a time, over the keys it may see."""
    out = torch.empty_like(q)
    for m in range(q.shape[-2]):
        seen = m + 1 if causal else k.shape[-2]
        scores = torch.einsum("bhd,bhnd->bhn", q[:, :, m], k[:, :, :seen]) / q.shape[-1] ** 0.5
        out[:, :, m] = torch.einsum("bhn,bhnd->bhd", scores.softmax(-1), v[:, :, :seen])
    return out


def fused_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


@pytest.mark.parametrize(
    "fn",
    [
        reader_attention,
        looped_attention,
        fused_attention,
        lambda q, k, v, c: reader_attention(q, k, v, c, fill=-1e9),
        lambda q, k, v, c: attention(q, k, v, placement="nope", causal=c),
    ],
    ids=["reader", "loop", "fused", "fill-1e9", "package"],
)
def test_a_right_implementation_passes(fn: Fn) -> None:
    report = check_attention(fn)
    assert report.ok, report.diagnosis
    assert report.diagnosis.startswith("correct: fn matches attention(q, k, v, placement='nope'")
    assert report.failed == () and len(report.cases) == 6
    assert (
        "With causal=False: permuting the queries permutes the outputs (holds, as it must)"
        in report.diagnosis
    )
    assert report.diagnosis.count("as it must") == 4 and "where it must" not in report.diagnosis


def test_the_cases_cover_both_dtypes_both_flags_one_token_and_large_scores() -> None:
    cases = "\n".join(check_attention(reader_attention).cases)
    for part in ("float64", "float32", "causal=False", "causal=True", "(2, 1, 1, 32)", "by 8"):
        assert part in cases


def strict(t: int) -> torch.Tensor:
    return torch.ones(t, t, dtype=torch.bool).triu(0)


# Each planted bug and the phrase its diagnosis starts with.
PLANTED: dict[str, tuple[Fn, str]] = {
    "mask-missing": (lambda q, k, v, c: reader_attention(q, k, v, False), "causal mask missing"),
    "mask-always": (
        lambda q, k, v, c: reader_attention(q, k, v, True),
        "mask applied when causal=False",
    ),
    "flag-inverted": (
        lambda q, k, v, c: reader_attention(q, k, v, not c),
        "causal flag inverted",
    ),
    "diagonal-excluded": (
        lambda q, k, v, c: reader_attention(q, k, v, c, future=strict),
        "mask excludes the diagonal",
    ),
    "diagonal-excluded-fill-1e9": (
        lambda q, k, v, c: reader_attention(q, k, v, c, future=strict, fill=-1e9),
        "mask excludes the diagonal",
    ),
    "one-key-ahead": (
        lambda q, k, v, c: reader_attention(
            q, k, v, c, future=lambda t: torch.ones(t, t, dtype=torch.bool).triu(2)
        ),
        "mask off by one: query m also sees key m + 1",
    ),
    "mask-flipped": (
        lambda q, k, v, c: reader_attention(
            q, k, v, c, future=lambda t: torch.ones(t, t, dtype=torch.bool).tril(-1)
        ),
        "mask flipped",
    ),
    "mask-inverted": (
        lambda q, k, v, c: reader_attention(
            q, k, v, c, future=lambda t: torch.ones(t, t, dtype=torch.bool).tril(0), fill=-1e9
        ),
        "mask inverted",
    ),
    "no-scale": (
        lambda q, k, v, c: reader_attention(q, k, v, c, scale=lambda d: 1.0),
        "missing 1/sqrt(D) scale",
    ),
    "divided-by-d": (
        lambda q, k, v, c: reader_attention(q, k, v, c, scale=lambda d: 1 / d),
        "scores divided by D",
    ),
    "times-sqrt-d": (
        lambda q, k, v, c: reader_attention(q, k, v, c, scale=math.sqrt),
        "scores multiplied by sqrt(D)",
    ),
    "softmax-over-queries": (
        lambda q, k, v, c: reader_attention(q, k, v, c, dim=-2),
        "softmax over the wrong axis",
    ),
    "keys-values-swapped": (
        lambda q, k, v, c: reader_attention(q, v, k, c),
        "keys and values swapped",
    ),
    "naive-softmax": (
        lambda q, k, v, c: reader_attention(q, k, v, c, naive=True),
        "softmax overflowed",
    ),
    "not-attention": (
        lambda q, k, v, c: reader_attention(q, k, v, c) + 0.01 * v,
        "unrecognised difference",
    ),
}


@pytest.mark.parametrize("bug", PLANTED)
def test_a_planted_bug_is_named(bug: str) -> None:
    fn, phrase = PLANTED[bug]
    report = check_attention(fn)
    assert not report.ok
    assert report.diagnosis.startswith(phrase), report.diagnosis
    assert report.failed and set(report.failed) <= set(report.cases)
    assert "Symmetries of fn (T = 6). With causal=False" in report.diagnosis


def test_a_missing_mask_shows_in_the_symmetries() -> None:
    report = check_attention(PLANTED["mask-missing"][0])
    with_mask = report.diagnosis.split("With causal=True")[1]
    assert with_mask.count("holds, where it must fail") == 2
    always = check_attention(PLANTED["mask-always"][0]).diagnosis
    assert always.split("With causal=True")[0].count("fails, where it must hold") == 2


def test_several_bugs_are_named_together() -> None:
    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        return reader_attention(q, k, v, causal, masked=lambda c: True, scale=lambda d: 1.0)

    named = check_attention(fn).diagnosis.split(". Symmetries of fn")[0]
    bugs = [bug.split(":")[0] for bug in named.split("; ")]
    assert bugs == ["mask applied when causal=False", "missing 1/sqrt(D) scale"]


def test_an_unrecognised_difference_gives_the_case_and_a_finite_error() -> None:
    report = check_attention(PLANTED["not-attention"][0])
    assert report.first_failure is not None and report.first_failure in report.diagnosis
    assert math.isfinite(report.max_error) and report.max_error > 0.005
    assert "largest error" in str(report)


def test_a_stub_is_not_written_yet() -> None:
    def stub(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        raise NotImplementedError("write attention without positions")

    report = check_attention(stub)
    assert not report.ok and report.diagnosis.startswith("not written yet")
    assert len(report.failed) == 1


def test_a_function_that_raises_is_reported_with_the_case_and_a_hint() -> None:
    def untransposed(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
    ) -> torch.Tensor:
        return (q @ k).softmax(-1) @ v  # k not transposed: T != D

    report = check_attention(untransposed)
    assert report.diagnosis.startswith("fn raised RuntimeError")
    assert "(2, 3, 7, 16)" in report.diagnosis and "k.transpose(-2, -1)" in report.diagnosis
    assert report.max_error == math.inf


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        (lambda q, k, v, c: reader_attention(q, k, v, c)[..., :-1], "wrong output shape"),
        (lambda q, k, v, c: reader_attention(q, k, v, c).tolist(), "fn did not return a tensor"),
        (
            lambda q, k, v, c: reader_attention(q.double(), k.double(), v.double(), c),
            "wrong output dtype",
        ),
    ],
    ids=["cut", "list", "float64"],
)
def test_an_output_of_the_wrong_kind_is_named(fn: Fn, phrase: str) -> None:
    report = check_attention(fn)
    assert not report.ok and report.diagnosis.startswith(phrase), report.diagnosis


def test_the_inputs_given_to_fn_cannot_corrupt_the_check() -> None:
    def in_place(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        out = reader_attention(q, k, v, causal)
        q.zero_(), k.zero_(), v.zero_()
        return out

    assert check_attention(in_place).ok


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"fn": "attention"}, TypeError, "fn must be callable"),
        ({"seed": 0.5}, TypeError, "seed must be an int"),
        ({"seed": True}, TypeError, "seed must be an int"),
    ],
)
def test_bad_arguments_are_refused(
    arguments: dict[str, object], error: type[Exception], match: str
) -> None:
    call: dict[str, object] = {"fn": reader_attention} | arguments
    with pytest.raises(error, match=match):
        check_attention(call.pop("fn"), **call)  # type: ignore[arg-type]


@settings(max_examples=10)
@given(seed=st.integers(0, 2**31 - 1))
def test_the_checker_accepts_attention_and_names_a_missing_mask_for_any_seed(seed: int) -> None:
    assert check_attention(fused_attention, seed=seed).ok
    missing = check_attention(PLANTED["mask-missing"][0], seed=seed)
    assert missing.diagnosis.startswith("causal mask missing")
