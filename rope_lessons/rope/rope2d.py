r"""2D RoPE for image patches: half of the dimensions turn with x, half with y.

A patch at column ``x`` and row ``y`` of a grid is rotated by the block matrix
:math:`R_{(x, y)} = \operatorname{diag}(R^{(d/2)}_x, R^{(d/2)}_y)`: the first
``d/2`` coordinates get ordinary 1D RoPE (of dimension ``d/2``) at position
``x``, the last ``d/2`` at position ``y``. Both blocks commute and each
satisfies :math:`R_a^\top R_b = R_{b-a}`, hence

.. math:: \langle R_{(x_1, y_1)} q, R_{(x_2, y_2)} k\rangle
          = \langle q, R_{(x_2 - x_1,\, y_2 - y_1)} k\rangle,

a score that depends on the 2D offset only. The construction is J. Su's,
"Transformer upgrade road 4: rotary position embedding for 2D positions"
(kexue.fm/archives/8397, 2021). Within each half, pairs follow the chosen
layout of :mod:`rope_lessons.rope`, with frequencies
:math:`\theta_k = \text{base}^{-2k/(d/2)}`.

The general solution (derived in the chapter-3 prose): a rotation
:math:`R_{(x, y)}` with :math:`R_p^\top R_{p'} = R_{p'-p}` on the grid is a
homomorphism, :math:`R_{(x, y)} = R_{(x, 0)} R_{(0, y)}` with the two factors
commuting, so in a shared block basis pair ``j`` turns by
:math:`x a_j + y b_j`. :func:`apply_rope_2d_general` takes any per-pair
frequencies ``(a, b)``; :func:`axial_frequencies` gives those of
:func:`apply_rope_2d` (each pair turns with one coordinate only) and
:func:`mixed_frequencies` the initial frequencies of RoPE-Mixed (B. Heo,
S. Park, D. Han, S. Yun, "Rotary Position Embedding for Vision Transformer",
ECCV 2024, arXiv:2403.13298), where every pair turns with both.

Shapes: ``...`` leading dimensions (batch, heads), ``T`` number of patches,
``d`` feature dimension, a multiple of 4.
"""

from __future__ import annotations

import math

import torch

from rope_lessons._checks import (
    Layout,
    check_base,
    check_features,
    check_layout,
    check_positive_int,
)
from rope_lessons.rope.forms import rotation_matrix
from rope_lessons.rope.kernels import apply_rope
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.mrope import apply_rope_nd


def _check_dim_2d(dim: int, name: str) -> int:
    if dim <= 0 or dim % 4:
        raise ValueError(
            f"{name} must be a positive multiple of 4 (two halves of pairs), got {dim}"
        )
    return dim


def grid_positions(height: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Column and row of every patch of a ``height x width`` grid, in row-major order.

    Patch ``t = row * width + column`` is the ``t``-th token when the image is
    read line by line, as vision transformers flatten their patches.

    Returns:
        ``(xs, ys)``, two long tensors of shape ``(height * width,)``: ``xs`` the
        columns ``0 .. width-1``, ``ys`` the rows ``0 .. height-1``.
    """
    height = check_positive_int(height, "height")
    width = check_positive_int(width, "width")
    ys, xs = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    return xs.flatten(), ys.flatten()  # (H*W,) each


def apply_rope_2d(
    x: torch.Tensor,
    xs: torch.Tensor,
    ys: torch.Tensor,
    *,
    base: float = 10000.0,
    layout: Layout = "interleaved",
) -> torch.Tensor:
    """Rotate the first half of the features by column ``xs``, the second by row ``ys``.

    Args:
        x: features ``(..., T, d)``, ``d`` a multiple of 4.
        xs, ys: integer tensors broadcastable to ``(..., T)``: each patch's
            column and row (see :func:`grid_positions`).
        base: frequency base of each half.
        layout: pairing inside each half, ``"interleaved"`` or ``"half"``.

    Returns:
        Tensor of the shape and dtype of ``x``.
    """
    x = check_features(x)
    check_layout(layout)
    check_base(base)
    half = _check_dim_2d(x.shape[-1], "the last dimension of x") // 2
    by_column = apply_rope(x[..., :half], xs, base=base, layout=layout)  # (..., T, d/2)
    by_row = apply_rope(x[..., half:], ys, base=base, layout=layout)  # (..., T, d/2)
    return torch.cat((by_column, by_row), dim=-1)


def rotation_matrix_2d(
    column: int, row: int, dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    r"""The explicit matrix :math:`R_{(x, y)}` of :func:`apply_rope_2d` (interleaved layout).

    Returns:
        Tensor ``(d, d)``: the ``d/2``-dimensional RoPE matrix of ``column``
        in the top-left block and that of ``row`` in the bottom-right block.
    """
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    half = _check_dim_2d(dim, "dim") // 2
    matrix = torch.zeros(dim, dim, dtype=dtype)  # (d, d)
    matrix[:half, :half] = rotation_matrix(column, half, base, dtype=dtype)
    matrix[half:, half:] = rotation_matrix(row, half, base, dtype=dtype)
    return matrix


def axial_frequencies(dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The per-pair frequencies ``(a, b)`` of :func:`apply_rope_2d` (interleaved layout).

    The first ``d/4`` pairs (the first half of the features) turn with the
    column only, :math:`a_j = \theta_j` of dimension ``d/2`` and :math:`b_j = 0`;
    the last ``d/4`` pairs turn with the row only.

    Returns:
        ``(a, b)``, float64, each of shape ``(d/2,)``.
    """
    half = _check_dim_2d(dim, "dim") // 2
    theta = frequencies(half, base)  # (d/4,)
    zeros = torch.zeros_like(theta)
    return torch.cat((theta, zeros)), torch.cat((zeros, theta))


def mixed_frequencies(
    dim: int, base: float = 10.0, *, direction: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""RoPE-Mixed's initial frequencies: each magnitude along two perpendicular directions.

    Magnitudes :math:`\text{base}^{-4j/d}`, ``j = 0 .. d/4 - 1``; the first
    ``d/4`` pairs point along the angle ``direction`` in the (x, y) plane,
    the last ``d/4`` along ``direction + pi/2``, so that pair ``j`` turns by
    :math:`x a_j + y b_j` with :math:`(a_j, b_j)` a vector of that magnitude
    and direction. Heo et al. draw ``direction`` at random per head, use
    ``base = 10`` and then learn ``(a, b)``; ``direction = 0`` gives
    :func:`axial_frequencies` with the same base.

    Returns:
        ``(a, b)``, float64, each of shape ``(d/2,)``.
    """
    half = _check_dim_2d(dim, "dim") // 2
    if isinstance(direction, bool) or not isinstance(direction, (int, float)):
        raise TypeError(f"direction must be a number, got {type(direction).__name__}")
    if not math.isfinite(direction):
        raise ValueError(f"direction must be finite, got {direction}")
    magnitude = frequencies(half, base)  # (d/4,)
    angles = (direction, direction + math.pi / 2)
    a = torch.cat([magnitude * math.cos(angle) for angle in angles])  # (d/2,)
    b = torch.cat([magnitude * math.sin(angle) for angle in angles])  # (d/2,)
    return a, b


def _check_pair_frequencies(freqs: object, name: str, pairs: int) -> torch.Tensor:
    if not isinstance(freqs, torch.Tensor) or not freqs.is_floating_point():
        raise TypeError(f"{name} must be a floating torch.Tensor of shape (d/2,)")
    if freqs.shape != (pairs,):
        raise ValueError(f"{name} must have shape (d/2,) = ({pairs},), got {tuple(freqs.shape)}")
    if not bool(freqs.isfinite().all()):
        raise ValueError(f"{name} must be finite")
    return freqs


def apply_rope_2d_general(
    x: torch.Tensor,
    xs: torch.Tensor,
    ys: torch.Tensor,
    freqs_x: torch.Tensor,
    freqs_y: torch.Tensor,
    *,
    layout: Layout = "interleaved",
) -> torch.Tensor:
    r"""Turn pair ``j`` of the patch at ``(x, y)`` by the angle :math:`x a_j + y b_j`.

    Every rotation of the grid whose scores depend on the 2D offset alone has
    this form in a suitable basis; the frequencies ``a = freqs_x`` and
    ``b = freqs_y`` are free. Angles are formed in float64, the rotation runs
    in float32 (float64 for float64 input), as in
    :func:`rope_lessons.rope.kernels.apply_rope`.

    Args:
        x: features ``(..., T, d)``, ``d`` even.
        xs, ys: integer tensors broadcastable to ``(..., T)``: column and row.
        freqs_x, freqs_y: floating tensors ``(d/2,)``, the per-pair
            frequencies :math:`a_j` and :math:`b_j` (pair 0 first).
        layout: which coordinates form pair ``j`` (as in ``apply_rope``).

    Returns:
        Tensor of the shape and dtype of ``x``.
    """
    pairs = check_features(x).shape[-1] // 2
    a = _check_pair_frequencies(freqs_x, "freqs_x", pairs)
    b = _check_pair_frequencies(freqs_y, "freqs_y", pairs)
    return apply_rope_nd(x, (xs, ys), torch.stack((a, b.to(a.dtype))), layout=layout)
