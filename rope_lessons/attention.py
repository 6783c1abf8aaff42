r"""Scaled dot-product attention with RoPE applied at any of nine placements.

The placement names where the rotation acts (J. Su, "The second kind of rotary
position embedding", kexue.fm/archives/10862, 2025):

===========  ===============================================================
``nope``     no rotation anywhere
``q``        queries rotated by :math:`R_m`
``k``        keys rotated by :math:`R_n`
``v``        values rotated by :math:`R_n`
``o``        each output :math:`o_m` rotated by :math:`R_m^\top`
``qk``       the usual RoPE: queries and keys
``vo``       values by :math:`R_n`, outputs by :math:`R_m^\top`, so that
             :math:`o_m = \sum_n a_{mn} R_{n-m} v_n`
``qkv``      queries, keys and values
``qkvo``     all four
===========  ===============================================================

Only ``qk``, ``vo`` and ``qkvo`` (and trivially ``nope``) give outputs that
depend on relative positions alone; the others are absolute encodings.

Shapes: ``B`` batch, ``H`` heads, ``T`` sequence length, ``D`` head dimension.
"""

from __future__ import annotations

import math
from typing import Literal, overload

import torch
import torch.nn.functional as F

from rope_lessons._checks import (
    check_base,
    check_choice,
    check_fraction,
    check_layout,
    check_positions,
)
from rope_lessons.rope import Layout, apply_rope

Placement = Literal["nope", "q", "k", "v", "o", "qk", "vo", "qkv", "qkvo"]
PLACEMENTS = ("nope", "q", "k", "v", "o", "qk", "vo", "qkv", "qkvo")
RELATIVE_PLACEMENTS = ("nope", "qk", "vo", "qkvo")


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.ndim != 4:
            raise ValueError(
                f"{name} must have shape (batch, heads, seq, head_dim), got {tuple(t.shape)}"
            )
        if not t.is_floating_point():
            raise TypeError(f"{name} must have a floating dtype, got {t.dtype}")
    if q.shape != k.shape:
        raise ValueError(
            f"q and k must have the same shape, got {tuple(q.shape)} and {tuple(k.shape)}"
        )
    if v.shape[:-1] != k.shape[:-1]:
        raise ValueError(
            f"v must match k in (batch, heads, seq), got {tuple(v.shape)} and {tuple(k.shape)}"
        )


@overload
def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    rope: Placement = ...,
    causal: bool = ...,
    positions: torch.Tensor | None = ...,
    base: float = ...,
    layout: Layout = ...,
    p: float = ...,
    return_weights: Literal[False] = ...,
) -> torch.Tensor: ...


@overload
def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    rope: Placement = ...,
    causal: bool = ...,
    positions: torch.Tensor | None = ...,
    base: float = ...,
    layout: Layout = ...,
    p: float = ...,
    return_weights: Literal[True],
) -> tuple[torch.Tensor, torch.Tensor]: ...


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    rope: Placement = "qk",
    causal: bool = True,
    positions: torch.Tensor | None = None,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    p: float = 1.0,
    return_weights: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Softmax attention :math:`o_m = \sum_n a_{mn} v_n` with RoPE at ``rope``.

    Args:
        q, k: queries and keys ``(B, H, T, D)``.
        v: values ``(B, H, T, Dv)``; ``Dv`` must be even when ``v`` or ``o``
            is rotated.
        rope: the placement, one of :data:`PLACEMENTS`.
        causal: mask out keys after the query (``n > m``).
        positions: integer positions broadcastable to ``(B, H, T)``, shared by
            queries and keys; defaults to ``arange(T)``.
        base, layout, p: passed to :func:`~rope_lessons.rope.apply_rope`.
        return_weights: also return the attention weights. Without them the
            fused ``torch.nn.functional.scaled_dot_product_attention`` runs.

    Returns:
        The output ``(B, H, T, Dv)``, and with ``return_weights`` the weights
        ``(B, H, T, T)`` whose rows sum to one.
    """
    rope = check_choice(rope, "rope", PLACEMENTS)  # type: ignore[assignment]
    _check_qkv(q, k, v)
    check_layout(layout)
    check_base(base)
    check_fraction(p)
    if positions is not None:
        positions = check_positions(positions, q.shape[:-1])

    def rotate(x: torch.Tensor, sign: int = 1) -> torch.Tensor:
        pos = positions
        if sign < 0:  # R_m^T = R_{-m}
            pos = -(pos if pos is not None else torch.arange(x.shape[-2], device=x.device))
        return apply_rope(x, pos, base=base, layout=layout, p=p)

    rotated = set() if rope == "nope" else set(rope)  # e.g. {"v", "o"}
    if "q" in rotated:
        q = rotate(q)
    if "k" in rotated:
        k = rotate(k)
    if "v" in rotated:
        v = rotate(v)

    if return_weights:
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T)
        if causal:
            seq_len = q.shape[-2]
            future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        weights = scores.softmax(dim=-1)
        out = weights @ v  # (B, H, T, Dv)
    else:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    if "o" in rotated:
        out = rotate(out, sign=-1)
    return (out, weights) if return_weights else out
