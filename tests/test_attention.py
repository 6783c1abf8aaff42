"""Attention with RoPE placements: the fused path, shift invariance, VO-RoPE, bad input."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from helpers import random_features

from rope_lessons.attention import PLACEMENTS, Placement, attention
from rope_lessons.rope import Layout, apply_rope

B, H, T, D = 2, 3, 7, 8


def qkv(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q, k, v = random_features(3, B, H, T, D, seed=seed)
    return q, k, v


@pytest.mark.parametrize("rope", PLACEMENTS)
@pytest.mark.parametrize("causal", [True, False])
def test_fused_path_equals_explicit_weights(rope: Placement, causal: bool) -> None:
    q, k, v = qkv()
    fused = attention(q, k, v, rope=rope, causal=causal)
    explicit, weights = attention(q, k, v, rope=rope, causal=causal, return_weights=True)
    torch.testing.assert_close(fused, explicit, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T, dtype=torch.float64))
    if causal:
        assert (weights.triu(1) == 0).all()


@pytest.mark.parametrize("rope", ["qk", "vo", "qkvo", "nope"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_relative_placements_ignore_a_common_shift(rope: Placement, layout: Layout) -> None:
    q, k, v = qkv()
    base_out = attention(q, k, v, rope=rope, layout=layout)
    for shift in (1, 13, 1000, -50):
        shifted = attention(q, k, v, rope=rope, layout=layout, positions=torch.arange(T) + shift)
        torch.testing.assert_close(shifted, base_out, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("rope", ["q", "k", "v", "o", "qkv"])
def test_absolute_placements_change_under_a_shift(rope: Placement) -> None:
    q, k, v = qkv()
    base_out = attention(q, k, v, rope=rope)
    shifted = attention(q, k, v, rope=rope, positions=torch.arange(T) + 13)
    assert (shifted - base_out).abs().max() > 1e-2


def test_vo_rope_output_is_a_sum_of_relatively_rotated_values() -> None:
    """o_m = R_m^T sum_n a_mn R_n v_n = sum_n a_mn R_{n-m} v_n."""
    q, k, v = qkv()
    out, weights = attention(q, k, v, rope="vo", return_weights=True)
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
    out = attention(q, k, v, rope="nope", causal=False)
    permuted = attention(q[:, :, perm], k[:, :, perm], v[:, :, perm], rope="nope", causal=False)
    torch.testing.assert_close(permuted, out[:, :, perm], rtol=1e-12, atol=1e-12)


def test_float32_inputs_stay_float32() -> None:
    q, k, v = (t.float() for t in qkv())
    assert attention(q, k, v, rope="qkvo").dtype == torch.float32


@pytest.mark.parametrize(
    ("kwargs", "error", "word"),
    [
        ({"rope": "qo"}, ValueError, "rope must be one of"),
        ({"k": torch.zeros(B, H, T + 1, D)}, ValueError, "q and k must have the same shape"),
        ({"v": torch.zeros(B, H, T + 1, D)}, ValueError, "v must match k"),
        ({"q": torch.zeros(H, T, D)}, ValueError, "q must have shape"),
        ({"v": torch.zeros(B, H, T, D, dtype=torch.long)}, TypeError, "v must have a floating"),
        ({"positions": torch.arange(T).float()}, TypeError, "integer dtype"),
        ({"positions": torch.arange(T + 2)}, ValueError, "do not broadcast"),
        ({"layout": "rotate_half"}, ValueError, "layout"),
        ({"p": 2.0}, ValueError, "p must lie in"),
    ],
)
def test_bad_input_names_the_argument(
    kwargs: dict[str, Any], error: type[Exception], word: str
) -> None:
    q, k, v = (t.float() for t in qkv())
    args = {"q": q, "k": k, "v": v} | kwargs
    with pytest.raises(error, match=word):
        attention(**args)
