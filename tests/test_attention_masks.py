"""attention's key_mask and attn_mask: against masking by hand, through the fused and the
weights paths, with causal, local and decode positions, and a left-padded batch against
transformers' eager Llama attention."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from helpers import random_features

from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import Local, attention

B, H, H_KV, T, D = 2, 4, 2, 7, 8


def qkv(t_q: int = T) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        random_features(B, H, t_q, D, seed=1),
        random_features(B, H_KV, T, D, seed=2),
        random_features(B, H_KV, T, D, seed=3),
    )


def by_hand(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor, rope: Rope
) -> torch.Tensor:
    """Rotate, repeat the key heads, mask with ``allowed`` (broadcastable to (B, H, T_q,
    T_k)), softmax; a query with no allowed key gets 0."""
    t_q = q.shape[-2]
    q_rot = rope.apply(q, torch.arange(T - t_q, T))
    k_rot = rope.apply(k).repeat_interleave(H // H_KV, dim=1)
    scores = q_rot @ k_rot.transpose(-2, -1) / math.sqrt(D)
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = scores.softmax(-1).nan_to_num(0.0)
    return weights @ v.repeat_interleave(H // H_KV, dim=1)


PADDING = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]])  # row 0 left-padded


@pytest.mark.parametrize("return_weights", [False, True])
@pytest.mark.parametrize("t_q", [T, 1])
def test_key_mask_equals_masking_by_hand(t_q: int, return_weights: bool) -> None:
    q, k, v = qkv(t_q)
    rope = Rope(D)
    causal = torch.ones(t_q, T, dtype=torch.bool).tril(T - t_q)  # aligned with the end
    allowed = causal & PADDING.bool()[:, None, None, :]
    expected = by_hand(q, k, v, allowed, rope)
    out, weights = attention(q, k, v, key_mask=PADDING, return_weights=True)
    if not return_weights:
        out = attention(q, k, v, key_mask=PADDING)  # the fused path
    torch.testing.assert_close(out, expected)
    assert bool(torch.isfinite(out).all())
    if t_q == T:  # the first two queries of row 0 see only padding: output and weights 0
        assert bool((out[0, :, :2] == 0).all())
    if return_weights:
        assert bool((weights[0, ..., :2] == 0).all())  # no weight on padding keys
        live = allowed.expand(B, H, t_q, T).any(-1)
        torch.testing.assert_close(weights.sum(-1)[live], torch.ones(int(live.sum())).double())


def test_attn_mask_boolean_and_additive_agree_and_combine_with_the_others() -> None:
    q, k, v = qkv()
    rope = Rope(D)
    block = torch.ones(T, T, dtype=torch.bool)
    block[:, 3] = False  # nobody may read key 3
    additive = torch.zeros(T, T).masked_fill(~block, float("-inf"))
    window = Local(3)
    near = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs() < 3
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    allowed = causal & near & block & PADDING.bool()[:, None, None, :]
    expected = by_hand(q, k, v, allowed, rope)
    for mask in (block, additive, additive.double()):
        fused = attention(q, k, v, local=window, key_mask=PADDING.bool(), attn_mask=mask)
        with_weights, _ = attention(
            q, k, v, local=window, key_mask=PADDING.bool(), attn_mask=mask,
            return_weights=True,
        )  # fmt: skip
        torch.testing.assert_close(fused, expected)
        torch.testing.assert_close(with_weights, expected)
    # an additive mask that is not -inf moves the weights, as SDPA's does
    bias = torch.linspace(-1.0, 1.0, T).expand(T, T)
    out, biased = attention(q, k, v, attn_mask=bias, return_weights=True)
    torch.testing.assert_close(attention(q, k, v, attn_mask=bias), out)
    _, plain = attention(q, k, v, return_weights=True)
    assert not torch.allclose(biased, plain)


def test_masks_follow_given_positions_in_a_decode_step() -> None:
    """A decode step against a cache of 7 keys, the first two of row 0 padding."""
    q, k, v = qkv(1)
    rope = Rope(D)
    out = attention(
        q, k, v, q_positions=torch.tensor([6]), k_positions=torch.arange(T), key_mask=PADDING
    )
    expected = by_hand(q, k, v, PADDING.bool()[:, None, None, :], rope)
    torch.testing.assert_close(out, expected)


def test_masks_are_checked() -> None:
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"key_mask must have shape \(B, T_k\) = \(2, 7\)"):
        attention(q, k, v, key_mask=PADDING[:, :5])
    with pytest.raises(TypeError, match="key_mask must be a boolean or 0/1"):
        attention(q, k, v, key_mask=PADDING.float())
    with pytest.raises(ValueError, match=r"only 0 \(padding\) and 1"):
        attention(q, k, v, key_mask=PADDING * 2)
    with pytest.raises(ValueError, match="does not broadcast"):
        attention(q, k, v, attn_mask=torch.ones(3, T, dtype=torch.bool))
    with pytest.raises(TypeError, match="boolean or floating"):
        attention(q, k, v, attn_mask=torch.ones(T, T, dtype=torch.long))
    with pytest.raises(ValueError, match="NaN"):
        attention(q, k, v, attn_mask=torch.full((T, T), math.nan))


def test_a_left_padded_batch_equals_transformers_eager_attention() -> None:
    """A Llama attention layer of transformers (eager, its own 4-D mask from the 2-D
    attention_mask and position_ids as a generate call builds them) against the course's
    attention on the same projections, with Rope.from_hf and key_mask: equal on every
    query that is a real token (transformers' outputs on padding queries are not used)."""
    transformers = pytest.importorskip("transformers")
    from transformers.masking_utils import create_causal_mask
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.LlamaConfig(
            hidden_size=32,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=64,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            attn_implementation="eager",
        )
    torch.manual_seed(0)
    layer = LlamaAttention(config, layer_idx=0).eval()
    padding = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1]])
    position_ids = (padding.cumsum(-1) - 1).clamp(min=0)  # as generate builds them
    hidden = torch.randn(2, 9, 32)
    mask_4d = create_causal_mask(
        config=config, inputs_embeds=hidden, attention_mask=padding,
        past_key_values=None, position_ids=position_ids,
    )  # fmt: skip
    cos_sin = LlamaRotaryEmbedding(config)(hidden, position_ids)
    with torch.no_grad():
        theirs, _ = layer(hidden, cos_sin, mask_4d)
        split = (2, 9, -1, 8)
        q = layer.q_proj(hidden).view(split).transpose(1, 2)  # (B, H, T, D)
        k = layer.k_proj(hidden).view(split).transpose(1, 2)  # (B, H_kv, T, D)
        v = layer.v_proj(hidden).view(split).transpose(1, 2)
        out = attention(
            q, k, v, rope=Rope.from_hf(config), q_positions=position_ids,
            k_positions=position_ids, key_mask=padding,
        )  # fmt: skip
        ours = layer.o_proj(out.transpose(1, 2).reshape(2, 9, 32))
    real = padding.bool()
    torch.testing.assert_close(ours[real], theirs[real], rtol=1e-5, atol=1e-5)
    # without the mask the padded row reads its padding, and differs
    unmasked = attention(q, k, v, rope=Rope.from_hf(config), q_positions=position_ids,
                         k_positions=position_ids)  # fmt: skip
    assert not torch.allclose(unmasked[0, :, 3:], out[0, :, 3:], atol=1e-3)


def test_a_sink_scales_each_row_by_the_share_the_keys_keep() -> None:
    """With sinks the weights are softmax over keys and sink with the sink's column dropped:
    the keys' weights keep their ratios, and the row sums to 1 / (1 + e^(s - lse))."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    sinks = torch.tensor([-1.0, 0.0, 1.0, 3.0])
    plain, plain_weights = attention(q, k, v, rope=Rope(8), return_weights=True)
    out, weights = attention(q, k, v, rope=Rope(8), sinks=sinks, return_weights=True)
    kept = weights.sum(-1, keepdim=True)  # (B, H, T, 1)
    torch.testing.assert_close(weights, plain_weights * kept)
    torch.testing.assert_close(out, plain * kept)
    fused = attention(q, k, v, rope=Rope(8), sinks=sinks)  # the same path without weights
    torch.testing.assert_close(fused, out)
    # the first query sees one key: its weight is the logistic of score minus sink
    score = Rope(8).apply(q)[..., 0, :] * Rope(8).apply(k).repeat_interleave(2, 1)[..., 0, :]
    expected = torch.sigmoid(score.sum(-1) / 8**0.5 - sinks)  # (B, H)
    torch.testing.assert_close(weights[..., 0, 0], expected)
    # a very low sink takes nothing; a higher sink takes more of every row
    low = attention(q, k, v, rope=Rope(8), sinks=torch.full((4,), -1e4))
    torch.testing.assert_close(low, plain)
    assert bool((kept[:, 3] < kept[:, 0]).all())


def test_sinks_learn_and_bad_sinks_are_refused() -> None:
    q, k, v = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    sinks = torch.zeros(2, requires_grad=True)
    attention(q, k, v, sinks=sinks).square().sum().backward()
    assert sinks.grad is not None and bool((sinks.grad != 0).all())
    with pytest.raises(ValueError, match=r"sinks must have shape \(H,\) = \(2,\)"):
        attention(q, k, v, sinks=torch.zeros(3))
    with pytest.raises(TypeError, match="sinks must be a floating tensor"):
        attention(q, k, v, sinks=torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="sinks must be finite"):
        attention(q, k, v, sinks=torch.tensor([0.0, float("nan")]))
