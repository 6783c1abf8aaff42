"""Attention with RoPE placements: the fused path, shift invariance, VO-RoPE, bad input."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from helpers import random_features

from rope_lessons._checks import Layout
from rope_lessons.rope.kernels import apply_rope, cos_sin
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import PLACEMENTS, Placement, attention

B, H, T, D = 2, 3, 7, 8


def qkv(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q, k, v = random_features(3, B, H, T, D, seed=seed)
    return q, k, v


@pytest.mark.parametrize("rope", PLACEMENTS)
@pytest.mark.parametrize("causal", [True, False])
def test_fused_path_equals_explicit_weights(rope: Placement, causal: bool) -> None:
    q, k, v = qkv()
    fused = attention(q, k, v, placement=rope, causal=causal)
    explicit, weights = attention(q, k, v, placement=rope, causal=causal, return_weights=True)
    torch.testing.assert_close(fused, explicit, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T, dtype=torch.float64))
    if causal:
        assert (weights.triu(1) == 0).all()


@pytest.mark.parametrize("rope", ["qk", "vo", "qkvo", "nope"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_relative_placements_ignore_a_common_shift(rope: Placement, layout: Layout) -> None:
    q, k, v = qkv()
    spec = Rope(q.shape[-1], layout=layout)
    base_out = attention(q, k, v, placement=rope, rope=spec)
    for shift in (1, 13, 1000, -50):
        shifted = attention(q, k, v, placement=rope, rope=spec, positions=torch.arange(T) + shift)
        torch.testing.assert_close(shifted, base_out, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("rope", ["q", "k", "v", "o", "qkv"])
def test_absolute_placements_change_under_a_shift(rope: Placement) -> None:
    q, k, v = qkv()
    base_out = attention(q, k, v, placement=rope)
    shifted = attention(q, k, v, placement=rope, positions=torch.arange(T) + 13)
    assert (shifted - base_out).abs().max() > 1e-2


def test_vo_rope_output_is_a_sum_of_relatively_rotated_values() -> None:
    """o_m = R_m^T sum_n a_mn R_n v_n = sum_n a_mn R_{n-m} v_n."""
    q, k, v = qkv()
    out, weights = attention(q, k, v, placement="vo", return_weights=True)
    expected = torch.zeros_like(out)
    for m in range(T):
        for n in range(T):
            offset = torch.tensor([n - m])
            rotated = apply_rope(v[:, :, n : n + 1], offset)  # R_{n-m} v_n: (B, H, 1, D)
            expected[:, :, m] += weights[:, :, m, n, None] * rotated[:, :, 0]
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)


def test_nope_bidirectional_attention_is_permutation_equivariant() -> None:
    q, k, v = qkv()
    perm = torch.randperm(T)
    out = attention(q, k, v, placement="nope", causal=False)
    permuted = attention(
        q[:, :, perm], k[:, :, perm], v[:, :, perm], placement="nope", causal=False
    )
    torch.testing.assert_close(permuted, out[:, :, perm], rtol=1e-12, atol=1e-12)


def test_float32_inputs_stay_float32() -> None:
    q, k, v = (t.float() for t in qkv())
    assert attention(q, k, v, placement="qkvo").dtype == torch.float32


@pytest.mark.parametrize(
    ("kwargs", "error", "word"),
    [
        ({"placement": "qo"}, ValueError, "placement must be one of"),
        ({"rope": "qk"}, TypeError, "placement is now given as placement='qk'"),
        ({"rope": "qo"}, TypeError, "rope must be a Rope spec or None, got the string 'qo'"),
        ({"rope": 10000.0}, TypeError, "rope must be a Rope spec or None, got float"),
        ({"rope": Rope(D + 2)}, ValueError, rf"rope.dim = {D + 2} .* head dimension D .* {D}"),
        ({"k": torch.zeros(B, H, T, D + 2)}, ValueError, "same batch and head dimension"),
        ({"v": torch.zeros(B, H, T + 1, D)}, ValueError, "v must match k"),
        ({"q": torch.zeros(H, T, D)}, ValueError, "q must have shape"),
        ({"v": torch.zeros(B, H, T, D, dtype=torch.long)}, TypeError, "v must have a floating"),
        ({"positions": torch.arange(T).float()}, TypeError, "integer dtype"),
        ({"positions": torch.arange(T + 2)}, ValueError, "do not broadcast"),
        ({"layout": "half"}, TypeError, "unexpected keyword argument 'layout'"),
        ({"base": 500.0}, TypeError, "unexpected keyword argument 'base'"),
    ],
)
def test_bad_input_names_the_argument(
    kwargs: dict[str, Any], error: type[Exception], word: str
) -> None:
    q, k, v = (t.float() for t in qkv())
    args = {"q": q, "k": k, "v": v} | kwargs
    with pytest.raises(error, match=word):
        attention(**args)


# Positions as practitioners pass them: 2-D positions for (B, H, T, D) input are (B, T).


@pytest.mark.parametrize(("batch", "heads"), [(2, 3), (3, 3), (3, 1), (1, 3)])
def test_two_d_positions_are_read_as_batch_by_seq(batch: int, heads: int) -> None:
    """(B, T) means positions[:, None, :] for apply_rope and attention, also when B == H."""
    x = random_features(batch, heads, T, D, seed=1)
    generator = torch.Generator().manual_seed(0)
    per_batch = torch.randint(-20, 2000, (batch, T), generator=generator)
    torch.testing.assert_close(
        apply_rope(x, per_batch), apply_rope(x, per_batch[:, None, :]), rtol=0, atol=0
    )
    for rope in PLACEMENTS:
        torch.testing.assert_close(
            attention(x, x, x, placement=rope, positions=per_batch),
            attention(x, x, x, placement=rope, positions=per_batch[:, None, :]),
            rtol=0,
            atol=0,
        )
    for b in range(batch):  # row b turns batch element b, every head alike
        torch.testing.assert_close(
            apply_rope(x, per_batch)[b], apply_rope(x[b], per_batch[b]), rtol=0, atol=0
        )


def test_when_batch_equals_heads_two_d_positions_are_not_per_head() -> None:
    """The collision the rule settles: with B == H, (X, T) is per batch, never per head."""
    x = random_features(3, 3, T, D, seed=2)
    rows = torch.tensor([[0] * T, [100] * T, [5000] * T]) + torch.arange(T)
    per_batch = apply_rope(x, rows)
    per_head = apply_rope(x, rows[None])  # (1, H, T): the explicit per-head form
    assert (per_batch - per_head).abs().max() > 1e-2
    torch.testing.assert_close(per_head[:, 1], apply_rope(x[:, 1], rows[1]), rtol=0, atol=0)


@pytest.mark.parametrize("call", ["apply_rope", "attention", "cos_sin"])
def test_two_d_positions_that_fit_neither_batch_nor_one_are_refused(call: str) -> None:
    """(H, T) with H != B once broadcast as per-head positions; now the expected shape is named."""
    x = random_features(2, 3, T, D)
    per_head = torch.zeros(3, T, dtype=torch.long)
    expected = r"positions of shape \(3, 7\).*read as \(batch, seq\) = \(2, 7\).*\(1, 3, 7\)"
    with pytest.raises(ValueError, match=expected):
        if call == "apply_rope":
            apply_rope(x, per_head)
        elif call == "attention":
            attention(x, x, x, positions=per_head)
        else:
            cos_sin(x.shape[:-1], D, per_head)
    with pytest.raises(ValueError, match=r"positions of shape \(2, 6\) do not broadcast"):
        apply_rope(x, torch.zeros(2, T - 1, dtype=torch.long))


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_given_frequencies_equal_the_specs_own(placement: Placement) -> None:
    generator = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 2, 2, 9, 8, dtype=torch.float64, generator=generator)
    rope = Rope(8, base=100.0, layout="half")
    fixed = attention(q, k, v, placement=placement, rope=rope)
    given = attention(q, k, v, placement=placement, rope=rope, theta=rope.theta.clone())
    torch.testing.assert_close(given, fixed, atol=1e-12, rtol=0)


def test_gradients_reach_trained_frequencies_and_change_the_output() -> None:
    generator = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 1, 2, 9, 8, dtype=torch.float64, generator=generator)
    theta = Rope(8).theta.clone().requires_grad_()
    out = attention(q, k, v, placement="vo", theta=theta)
    out.square().sum().backward()
    assert theta.grad is not None and bool((theta.grad.abs() > 0).all())
    moved = attention(q, k, v, placement="vo", theta=theta.detach() * 1.5)
    assert not torch.allclose(moved, out.detach())


@pytest.mark.parametrize(
    "theta",
    [torch.ones(3, dtype=torch.float64), torch.ones(4, dtype=torch.long), [1.0, 1.0, 1.0, 1.0]],
)
def test_bad_frequencies_are_refused(theta: object) -> None:
    q = torch.randn(1, 1, 5, 8)
    with pytest.raises(ValueError, match="theta must be a floating tensor of shape"):
        attention(q, q, q, placement="qk", theta=theta)  # type: ignore[call-overload]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("return_weights", [False, True])
def test_non_finite_frequencies_are_refused_on_every_path(bad: float, return_weights: bool) -> None:
    """The fused path would return finite numbers that match nothing; refuse instead."""
    q = torch.randn(1, 1, 5, 8)
    theta = Rope(8).theta.clone().float()
    theta[2] = bad
    with pytest.raises(ValueError, match="theta must be finite"):
        attention(q, q, q, placement="qk", theta=theta, return_weights=return_weights)
