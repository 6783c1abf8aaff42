"""Attention as used in inference: decode steps against a cache, GQA/MQA, the causal mask.

The rules under test (see the docstring of :mod:`rope_lessons.toy.rotary_attention`):
keys sit at ``0 .. T_k-1`` and queries at the end of them by default; the
causal mask is by index, aligned with the end of the keys, or by position
(``k_position <= q_position``) when ``q_positions``/``k_positions`` are given.
"""

from __future__ import annotations

import importlib
from typing import TypedDict

import pytest
import torch
from helpers import random_features
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons._checks import Layout
from rope_lessons.rope.kernels import apply_rope
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import (
    PLACEMENTS,
    Placement,
    attention,
    rotate_inputs,
    rotate_output,
)

B, D = 2, 8
# the module itself: the package's ``attention`` attribute is the function
attention_module = importlib.import_module("rope_lessons.toy.rotary_attention")


def cache(
    heads: int, kv_heads: int, seq: int, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries ``(B, H, T, D)``, keys and values ``(B, H_kv, T, D)`` for a whole sequence."""
    q = random_features(B, heads, seq, D, seed=seed)
    k, v = random_features(2, B, kv_heads, seq, D, seed=seed + 1)
    return q, k, v


@given(
    rope=st.sampled_from(PLACEMENTS),
    heads=st.sampled_from([(1, 1), (2, 2), (4, 2), (4, 1), (6, 3)]),
    seq=st.integers(1, 12),
    new=st.integers(1, 12),
    shift=st.sampled_from([0, 0, 7, 1000, -40]),
    layout=st.sampled_from(["interleaved", "half"]),
    base=st.sampled_from([10000.0, 37.5]),
    factor=st.sampled_from([1.0, 1.3]),
    seed=st.integers(0, 2**16),
)
def test_the_last_queries_against_a_cache_equal_the_last_rows_of_full_attention(
    rope: Placement,
    heads: tuple[int, int],
    seq: int,
    new: int,
    shift: int,
    layout: Layout,
    base: float,
    factor: float,
    seed: int,
) -> None:
    """For every placement and spec (layout, base, attention factor where the placement
    rotates q or k), with and without GQA: decoding the last ``new`` tokens
    (``new = 1``: one decode step) gives the last rows of full causal attention."""
    new = min(new, seq)
    q, k, v = cache(*heads, seq, seed=seed)
    scales_logits = rope != "nope" and bool(set(rope) & {"q", "k"})
    spec = Rope(D, base, layout, attention_factor=factor if scales_logits else 1.0)
    full = attention(q, k, v, placement=rope, rope=spec, positions=torch.arange(seq) + shift)
    explicit = attention(
        q[:, :, -new:],
        k,
        v,
        placement=rope,
        rope=spec,
        q_positions=torch.arange(seq - new, seq) + shift,
        k_positions=torch.arange(seq) + shift,
    )
    torch.testing.assert_close(explicit, full[:, :, -new:], rtol=1e-10, atol=1e-10)
    if shift == 0:  # default positions: the queries sit at the end of the keys
        default = attention(q[:, :, -new:], k, v, placement=rope, rope=spec)
        torch.testing.assert_close(default, full[:, :, -new:], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("rope", PLACEMENTS)
@pytest.mark.parametrize("heads", [(3, 3), (4, 2), (4, 1)])
def test_a_decode_step_at_position_1000(rope: Placement, heads: tuple[int, int]) -> None:
    """T_q = 1 at position 1000 against a cache of 1001 keys: the last row of full attention."""
    q, k, v = cache(*heads, 1001, seed=3)
    full = attention(q, k, v, placement=rope)
    step = attention(q[:, :, -1:], k, v, placement=rope)
    torch.testing.assert_close(step, full[:, :, -1:], rtol=1e-10, atol=1e-10)
    placed = attention(
        q[:, :, -1:],
        k,
        v,
        placement=rope,
        q_positions=torch.tensor([1000]),
        k_positions=torch.arange(1001),
    )
    torch.testing.assert_close(placed, step, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("rope", PLACEMENTS)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("by_position", [False, True])
def test_gqa_equals_repeated_key_and_value_heads(
    rope: Placement, causal: bool, by_position: bool
) -> None:
    """Key and value head j serves query heads j*g .. j*g + g-1, fused and explicit alike."""
    q, k, v = cache(6, 2, 9, seed=4)
    q = q[:, :, -4:]  # T_q = 4 against T_k = 9
    # None is the default: no positions given
    q_positions, k_positions = (
        (torch.tensor([[5, 6, 7, 8], [0, 9, 3, 8]]), torch.arange(9))
        if by_position
        else (None, None)
    )
    repeated = attention(
        q,
        k.repeat_interleave(3, 1),
        v.repeat_interleave(3, 1),
        placement=rope,
        causal=causal,
        q_positions=q_positions,
        k_positions=k_positions,
    )
    grouped = attention(
        q, k, v, placement=rope, causal=causal, q_positions=q_positions, k_positions=k_positions
    )
    explicit, weights = attention(
        q,
        k,
        v,
        placement=rope,
        causal=causal,
        q_positions=q_positions,
        k_positions=k_positions,
        return_weights=True,
    )
    torch.testing.assert_close(grouped, repeated, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(explicit, repeated, rtol=1e-10, atol=1e-10)
    assert weights.shape == (B, 6, 4, 9)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, 6, 4, dtype=torch.float64))


def test_gqa_without_sdpas_enable_gqa_repeats_the_heads(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch < 2.5 has no ``enable_gqa``: the fallback repeats heads, with the same result."""
    q, k, v = cache(4, 2, 6, seed=5)
    native = attention(q[:, :, -2:], k, v, placement="qkvo")
    monkeypatch.setattr(attention_module, "_SDPA_HAS_GQA", False)
    fallback = attention(q[:, :, -2:], k, v, placement="qkvo")
    torch.testing.assert_close(fallback, native, rtol=1e-12, atol=1e-12)


def test_the_default_mask_aligns_the_queries_with_the_end_of_the_keys() -> None:
    """Query i sees keys 0 .. T_k - T_q + i."""
    q, k, v = cache(2, 2, 7, seed=6)
    _, weights = attention(q[:, :, -3:], k, v, return_weights=True)
    visible = weights[0, 0] > 0
    expected = torch.arange(7)[None, :] <= torch.arange(4, 7)[:, None]
    assert torch.equal(visible, expected)


def test_explicit_positions_mask_by_position() -> None:
    """Key n is visible to query m iff k_position[n] <= q_position[m], equal positions included."""
    q, k, v = cache(2, 1, 6, seed=7)
    q_positions = torch.tensor([[3, 0, 9], [2, 2, 5]])  # (B, T_q): per batch element
    k_positions = torch.tensor([[0, 5, 1, 3, 8, 2], [9, 2, 0, 4, 4, 5]])  # (B, T_k), not sorted
    out, weights = attention(
        q[:, :, :3],
        k,
        v,
        placement="qk",
        q_positions=q_positions,
        k_positions=k_positions,
        return_weights=True,
    )
    expected = k_positions[:, None, None, :] <= q_positions[:, None, :, None]  # (B, 1, 3, 6)
    assert torch.equal(weights > 0, expected.expand_as(weights))
    fused = attention(
        q[:, :, :3], k, v, placement="qk", q_positions=q_positions, k_positions=k_positions
    )
    torch.testing.assert_close(fused, out, rtol=1e-10, atol=1e-10)


def test_outputs_turn_back_by_the_query_position_and_values_by_the_key_position() -> None:
    """VO-RoPE in a decode step: o_m = sum_n a_mn R_{n-m} v_n with m the query's position."""
    q, k, v = cache(2, 2, 5, seed=8)
    m, keys = 104, torch.arange(100, 105)
    out, weights = attention(
        q[:, :, -1:],
        k,
        v,
        placement="vo",
        q_positions=torch.tensor([m]),
        k_positions=keys,
        return_weights=True,
    )
    expected = sum(
        weights[:, :, :, n, None] * apply_rope(v[:, :, n : n + 1], torch.tensor([int(keys[n]) - m]))
        for n in range(5)
    )
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)


def test_rotate_inputs_and_output_rebuild_a_decode_step() -> None:
    """The placements stay apart from the kernel with queries and keys of their own positions."""
    q, k, v = cache(4, 2, 6, seed=9)
    q_new = q[:, :, -1:]
    rq, rk, rv = rotate_inputs(q_new, k, v, placement="qkvo", q_positions=torch.tensor([5]))
    rk, rv = rk.repeat_interleave(2, 1), rv.repeat_interleave(2, 1)
    read = torch.nn.functional.scaled_dot_product_attention(rq, rk, rv)
    out = rotate_output(read, placement="qkvo", positions=torch.tensor([5]))
    torch.testing.assert_close(
        out, attention(q_new, k, v, placement="qkvo"), rtol=1e-10, atol=1e-10
    )


class AttentionInput(TypedDict, total=False):
    """What a refusal case replaces in a valid call of :func:`attention`."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    positions: torch.Tensor
    q_positions: torch.Tensor
    k_positions: torch.Tensor


@pytest.mark.parametrize(
    ("kwargs", "error", "word"),
    [
        ({"k": torch.zeros(B + 1, 2, 6, D)}, ValueError, "same batch and head dimension"),
        ({"k": torch.zeros(B, 3, 6, D), "v": torch.zeros(B, 3, 6, D)}, ValueError, "multiple"),
        ({"v": torch.zeros(B, 4, 6, D)}, ValueError, "v must match k"),
        (
            {"positions": torch.arange(6), "q_positions": torch.tensor([5])},
            ValueError,
            "positions is shared by queries and keys: give it alone",
        ),
        (
            {"positions": torch.arange(6), "k_positions": torch.arange(6)},
            ValueError,
            "give it alone",
        ),
        ({"positions": torch.arange(6)}, ValueError, "needs T_q == T_k, got T_q = 2 and T_k = 6"),
        ({"q_positions": torch.arange(3)}, ValueError, r"q_positions of shape \(3,\)"),
        ({"k_positions": torch.arange(5)}, ValueError, r"k_positions of shape \(5,\)"),
        ({"q_positions": torch.tensor([4.0, 5.0])}, TypeError, "q_positions must have an integer"),
        (
            {"k_positions": torch.zeros(2 * B, 6, dtype=torch.long)},
            ValueError,
            r"k_positions of shape \(4, 6\).*read as \(batch, seq\) = \(2, 6\)",
        ),
        ({"q": torch.zeros(B, 4, 7, D, dtype=torch.float64)}, ValueError, "sees no key"),
        (
            {"q_positions": torch.tensor([0, 3]), "k_positions": torch.arange(6) + 1},
            ValueError,
            "sees no key.*with the positions given",
        ),
    ],
)
def test_bad_inference_input_is_refused(
    kwargs: AttentionInput, error: type[Exception], word: str
) -> None:
    q, k, v = cache(4, 2, 6)
    with pytest.raises(error, match=word):
        attention(
            kwargs.get("q", q[:, :, -2:]),
            kwargs.get("k", k),
            kwargs.get("v", v),
            positions=kwargs.get("positions"),
            q_positions=kwargs.get("q_positions"),
            k_positions=kwargs.get("k_positions"),
        )


def test_a_query_with_no_earlier_key_is_fine_without_the_causal_mask() -> None:
    _, k, v = cache(2, 2, 3)
    out = attention(random_features(B, 2, 5, D), k, v, causal=False)  # T_q > T_k, not causal
    assert out.shape == (B, 2, 5, D) and bool(torch.isfinite(out).all())


def test_per_head_positions_with_gqa_are_given_per_group() -> None:
    """Shared 3-D per-head positions fit queries (H) but not keys (H_kv): q_positions and
    k_positions then give each its own heads."""
    q, k, v = cache(4, 2, 5, seed=10)
    per_head = torch.arange(5) + torch.tensor([0, 10, 20, 30])[:, None]  # (H, T)
    with pytest.raises(ValueError, match=r"positions of shape \(1, 4, 5\) do not broadcast"):
        attention(q, k, v, positions=per_head[None])
    grouped = attention(q, k, v, q_positions=per_head[None], k_positions=per_head[None, ::2])
    repeated = attention(
        q,
        k.repeat_interleave(2, 1),
        v.repeat_interleave(2, 1),
        q_positions=per_head[None],
        k_positions=per_head[None, ::2].repeat_interleave(2, 1),
    )
    torch.testing.assert_close(grouped, repeated, rtol=1e-10, atol=1e-10)
