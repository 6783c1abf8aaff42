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

Shapes: ``...`` leading dimensions (batch, heads), ``T`` number of patches,
``d`` feature dimension, a multiple of 4.
"""

from __future__ import annotations

import torch

from rope_lessons._checks import check_base, check_features, check_layout, check_positive_int
from rope_lessons.rope import Layout, apply_rope, rotation_matrix


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
    return torch.block_diag(
        rotation_matrix(column, half, base, dtype=dtype),
        rotation_matrix(row, half, base, dtype=dtype),
    )
