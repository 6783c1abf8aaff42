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

The rotations themselves live in :func:`rotate_inputs` and
:func:`rotate_output`, apart from the softmax, so that any other kernel
(linear attention, a recurrence) reuses exactly the same placements.

Shapes: ``B`` batch, ``H`` heads, ``T`` sequence length, ``D`` head dimension.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args, overload

import torch
import torch.nn.functional as F

from rope_lessons._checks import (
    check_base,
    check_choice,
    check_fraction,
    check_layout,
    check_positions,
)
from rope_lessons.rope import Layout, apply_rope, resolve_theta

Placement = Literal["nope", "q", "k", "v", "o", "qk", "vo", "qkv", "qkvo"]
PLACEMENTS: tuple[Placement, ...] = get_args(Placement)
RELATIVE_PLACEMENTS: tuple[Placement, ...] = ("nope", "qk", "vo", "qkvo")


def check_placement(rope: object) -> Placement:
    """Return ``rope`` if it is one of :data:`PLACEMENTS`."""
    return check_choice(rope, "rope", PLACEMENTS)


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


@dataclass(frozen=True)
class _Rotary:
    """A validated placement with its RoPE settings."""

    placement: Placement
    positions: torch.Tensor | None
    base: float
    layout: Layout
    p: float
    theta: torch.Tensor | None

    @classmethod
    def checked(
        cls,
        rope: object,
        positions: torch.Tensor | None,
        leading_shape: torch.Size,
        dim: int,
        base: float,
        layout: object,
        p: float,
        theta: torch.Tensor | None,
    ) -> _Rotary:
        check_base(base)
        check_fraction(p)
        resolve_theta(dim, base, p, theta)  # validates theta against the head dimension
        if positions is not None:
            positions = check_positions(positions, leading_shape)
        return cls(check_placement(rope), positions, base, check_layout(layout), p, theta)

    def names(self) -> set[str]:
        """Which of q, k, v, o the placement rotates."""
        return set() if self.placement == "nope" else set(self.placement)

    def turn(self, x: torch.Tensor, *, transpose: bool = False) -> torch.Tensor:
        """``R_m x`` at every position, or ``R_m^T x = R_{-m} x`` with ``transpose``."""
        positions = self.positions
        if transpose:
            positions = -(positions if positions is not None else torch.arange(x.shape[-2]))
        return apply_rope(
            x, positions, base=self.base, layout=self.layout, p=self.p, theta=self.theta
        )


def rotate_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    rope: Placement = "qk",
    positions: torch.Tensor | None = None,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    p: float = 1.0,
    theta: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Rotate the queries, keys and values that the placement ``rope`` names.

    ``q`` by :math:`R_m`, ``k`` and ``v`` by :math:`R_n`, each at its own
    position. Any attention kernel can run on the result; :func:`rotate_output`
    then applies the ``o`` part of the placement.

    Args:
        q, k: ``(B, H, T, D)``; v: ``(B, H, T, Dv)``.
        rope: the placement, one of :data:`PLACEMENTS`.
        positions: integer positions broadcastable to ``(B, H, T)``; default ``arange(T)``.
        base, layout, p, theta: as in :func:`~rope_lessons.rope.apply_rope`.

    Returns:
        ``(q, k, v)`` with the named ones rotated, the others unchanged.
    """
    _check_qkv(q, k, v)
    rotary = _Rotary.checked(rope, positions, q.shape[:-1], q.shape[-1], base, layout, p, theta)
    names = rotary.names()
    return (
        rotary.turn(q) if "q" in names else q,
        rotary.turn(k) if "k" in names else k,
        rotary.turn(v) if "v" in names else v,
    )


def rotate_output(
    out: torch.Tensor,
    *,
    rope: Placement = "qk",
    positions: torch.Tensor | None = None,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    p: float = 1.0,
    theta: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Turn each output :math:`o_m` by :math:`R_m^\top` if the placement ``rope`` names ``o``.

    Args:
        out: attention outputs ``(B, H, T, Dv)``.
        rope, positions, base, layout, p, theta: as in :func:`rotate_inputs`.

    Returns:
        ``out`` rotated back, or unchanged.
    """
    if not isinstance(out, torch.Tensor) or out.ndim != 4:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"out must have shape (batch, heads, seq, head_dim), got {shape}")
    rotary = _Rotary.checked(rope, positions, out.shape[:-1], out.shape[-1], base, layout, p, theta)
    return rotary.turn(out, transpose=True) if "o" in rotary.names() else out


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
    theta: torch.Tensor | None = ...,
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
    theta: torch.Tensor | None = ...,
    return_weights: Literal[True],
) -> tuple[torch.Tensor, torch.Tensor]: ...


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
    theta: torch.Tensor | None = ...,
    return_weights: bool,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]: ...


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
    theta: torch.Tensor | None = None,
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
        base, layout, p, theta: passed to :func:`~rope_lessons.rope.apply_rope`.
        return_weights: also return the attention weights. Without them the
            fused ``torch.nn.functional.scaled_dot_product_attention`` runs.

    Returns:
        The output ``(B, H, T, Dv)``, and with ``return_weights`` the weights
        ``(B, H, T, T)`` whose rows sum to one.
    """
    q, k, v = rotate_inputs(
        q, k, v, rope=rope, positions=positions, base=base, layout=layout, p=p, theta=theta
    )
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
    out = rotate_output(
        out, rope=rope, positions=positions, base=base, layout=layout, p=p, theta=theta
    )
    return (out, weights) if return_weights else out
