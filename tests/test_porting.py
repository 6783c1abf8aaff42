"""Hugging Face's Llama checkpoint ``permute`` is our layout permutation, head by head.

``permute`` below is the function of transformers' ``convert_llama_weights_to_hf.py``
(written out here: recent releases no longer ship the script). It turns Meta's
interleaved query and key projections into Hugging Face's half layout. The tests
show that it equals ``W[head_permutation(n_heads, D, "half")]``, that the ported
projections give the same rotated vectors and scores under Hugging Face's
``rotate_half`` as the originals under our interleaved ``apply_rope``, and what
grouped-query attention, biases and partial rotary do to it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from helpers import random_features

from rope_lessons.rope.forms import layout_permutation
from rope_lessons.rope.kernels import apply_rope
from rope_lessons.rope.ladder import frequencies
from rope_lessons.toy.layouts import head_permutation

HEAD_DIM, N_HEADS, N_KV_HEADS, WIDTH, T = 8, 4, 2, 16, 7


def permute(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """transformers' conversion: rows ``(n_heads * D, ...)``, interleaved to half."""
    dim1 = w.shape[0]
    rest = w.shape[1:]
    return w.view(n_heads, dim1 // n_heads // 2, 2, *rest).transpose(1, 2).reshape(dim1, *rest)


def hf_rotate(x: torch.Tensor, positions: torch.Tensor, rotary_dim: int) -> torch.Tensor:
    """Hugging Face's half-layout rotation of the first ``rotary_dim`` features (Phi-style)."""
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    angles = positions[:, None].double() * frequencies(rotary_dim)  # (T, r/2)
    emb = torch.cat((angles, angles), dim=-1)  # (T, r): HF's cat(freqs, freqs)
    rot, passed = x[..., :rotary_dim], x[..., rotary_dim:]
    rotated, _ = llama.apply_rotary_pos_emb(rot, rot, emb.cos(), emb.sin(), unsqueeze_dim=0)
    return torch.cat((rotated, passed), dim=-1)


def meta_rotate(x: torch.Tensor, positions: torch.Tensor, rotary_dim: int) -> torch.Tensor:
    """Our interleaved rotation of the first ``rotary_dim`` features."""
    rotated = apply_rope(x[..., :rotary_dim], positions)
    return torch.cat((rotated, x[..., rotary_dim:]), dim=-1)


def heads(y: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(T, n_heads * D) -> (n_heads, T, D)."""
    result: torch.Tensor = y.unflatten(-1, (n_heads, -1)).transpose(0, 1)
    return result


def partial_permutation(n_heads: int, head_dim: int, rotary_dim: int) -> torch.Tensor:
    """Within each head, the rotary features permuted, the others left in place."""
    within = torch.cat((layout_permutation(rotary_dim), torch.arange(rotary_dim, head_dim)))
    return (torch.arange(n_heads)[:, None] * head_dim + within).flatten()


def test_permute_is_the_layout_permutation_in_every_head() -> None:
    w = random_features(N_HEADS * HEAD_DIM, WIDTH)
    bias = random_features(N_HEADS * HEAD_DIM)
    to_half = head_permutation(N_HEADS, HEAD_DIM, "half")
    assert torch.equal(permute(w, N_HEADS), w[to_half])
    assert torch.equal(permute(bias, N_HEADS), bias[to_half])  # a bias is one more row entry
    # and Hugging Face's inverse (half back to interleaved) is our "interleaved" direction
    assert torch.equal(permute(w, N_HEADS)[head_permutation(N_HEADS, HEAD_DIM, "interleaved")], w)
    assert not torch.equal(
        permute(w, N_HEADS), w[head_permutation(N_HEADS, HEAD_DIM, "interleaved")]
    )


@pytest.mark.parametrize("rotary_dim", [HEAD_DIM, HEAD_DIM // 2])
def test_ported_projections_give_the_same_scores_with_gqa_biases_and_partial_rotary(
    rotary_dim: int,
) -> None:
    """Meta layout + interleaved RoPE == HF layout + rotate_half, query by key."""
    x = random_features(T, WIDTH)
    positions = torch.arange(T) + 100
    w_q, b_q = random_features(N_HEADS * HEAD_DIM, WIDTH), random_features(N_HEADS * HEAD_DIM)
    w_k, b_k = random_features(N_KV_HEADS * HEAD_DIM, WIDTH), random_features(N_KV_HEADS * HEAD_DIM)
    q_perm = partial_permutation(N_HEADS, HEAD_DIM, rotary_dim)
    k_perm = partial_permutation(N_KV_HEADS, HEAD_DIM, rotary_dim)
    if rotary_dim == HEAD_DIM:  # full rotary: exactly the conversion script's permute
        assert torch.equal(w_q[q_perm], permute(w_q, N_HEADS))
        assert torch.equal(w_k[k_perm], permute(w_k, N_KV_HEADS))  # n_kv_heads for k
    group = N_HEADS // N_KV_HEADS  # query heads per key head

    def scores(
        w_q: torch.Tensor,
        b_q: torch.Tensor,
        w_k: torch.Tensor,
        b_k: torch.Tensor,
        rotate: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor],
    ) -> torch.Tensor:
        q = rotate(heads(x @ w_q.T + b_q, N_HEADS), positions, rotary_dim)  # (H, T, D)
        k = rotate(heads(x @ w_k.T + b_k, N_KV_HEADS), positions, rotary_dim)  # (H_kv, T, D)
        return q @ k.repeat_interleave(group, dim=0).transpose(-1, -2)  # (H, T, T)

    meta = scores(w_q, b_q, w_k, b_k, meta_rotate)
    ported = scores(w_q[q_perm], b_q[q_perm], w_k[k_perm], b_k[k_perm], hf_rotate)
    torch.testing.assert_close(ported, meta, rtol=1e-10, atol=1e-10)
    # each of the four shortcuts breaks it: unported weights, unported biases,
    # k permuted with the query head count, every feature permuted under partial rotary
    wrong_k = head_permutation(N_HEADS, N_KV_HEADS * HEAD_DIM // N_HEADS)
    assert torch.equal(w_k[wrong_k], permute(w_k, N_HEADS))  # what permute(w_k, n_heads) does
    mistakes = [
        (w_q, b_q[q_perm], w_k, b_k[k_perm]),
        (w_q[q_perm], b_q, w_k[k_perm], b_k),
        (w_q[q_perm], b_q[q_perm], w_k[wrong_k], b_k[wrong_k]),
    ]
    if rotary_dim < HEAD_DIM:
        full_q = head_permutation(N_HEADS, HEAD_DIM, "half")
        full_k = head_permutation(N_KV_HEADS, HEAD_DIM, "half")
        mistakes.append((w_q[full_q], b_q[full_q], w_k[full_k], b_k[full_k]))
    for mistake in mistakes:
        wrong = scores(*mistake, hf_rotate)
        assert (wrong - meta).abs().max().item() > 1e-3
