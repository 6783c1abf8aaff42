"""RoPE's teaching forms: the rotation matrix, the complex product and the loop,
each reading the same frequencies and angles as the kernel.
"""

from __future__ import annotations

import math

import torch

from rope_lessons._checks import (
    check_even_dim,
    check_features,
    check_positions,
)
from rope_lessons.rope.kernels import _compute_dtype, turn
from rope_lessons.rope.ladder import resolve_theta, rotation_angles


def rotation_matrix(
    position: int,
    dim: int,
    base: float = 10000.0,
    *,
    p: float = 1.0,
    theta: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    r"""The explicit block-diagonal matrix :math:`R_m` (interleaved layout).

    Block ``k`` sits on rows and columns ``2k, 2k+1`` and is
    :math:`\begin{pmatrix}\cos m\theta_k & -\sin m\theta_k\\
    \sin m\theta_k & \cos m\theta_k\end{pmatrix}`: the columns are
    :func:`~.turn` applied to the unit vectors. Meant for teaching and testing:
    applying it costs ``O(d^2)`` against ``O(d)`` for :func:`~rope_lessons.rope.kernels.apply_rope`.

    Returns:
        Tensor of shape ``(d, d)``.
    """
    if isinstance(position, bool) or not isinstance(position, int):
        raise TypeError(f"position must be an int, got {type(position).__name__}")
    angles = rotation_angles(torch.tensor(position), dim, base, p=p, theta=theta)  # (d/2,)
    return block_rotation(angles).to(dtype)


def block_rotation(angles: torch.Tensor) -> torch.Tensor:
    r"""Block-diagonal matrix turning pair ``j`` (coordinates ``2j, 2j+1``) by ``angles[j]``.

    The columns of each block are :func:`~.turn` applied to the unit vectors.
    With ``angles = m * theta`` it is :func:`rotation_matrix`.

    Args:
        angles: float tensor ``(d/2,)``.

    Returns:
        Tensor ``(d, d)`` in the dtype of ``angles``.
    """
    if not isinstance(angles, torch.Tensor) or angles.ndim != 1:
        raise ValueError("angles must be a 1-D tensor of shape (d/2,)")
    if not angles.is_floating_point():
        raise TypeError(f"angles must have a floating dtype, got {angles.dtype}")
    cos, sin = angles.cos(), angles.sin()
    ones, zeros = torch.ones_like(cos), torch.zeros_like(cos)
    first_column = torch.stack(turn(ones, zeros, cos, sin), -1)  # (d/2, 2): image of e_1
    second_column = torch.stack(turn(zeros, ones, cos, sin), -1)  # (d/2, 2): image of e_2
    blocks = torch.stack((first_column, second_column), -1)  # (d/2, 2, 2)
    matrix: torch.Tensor = torch.block_diag(*blocks.unbind(0))  # (d, d)
    return matrix


def layout_permutation(dim: int) -> torch.Tensor:
    """Index permutation that turns the interleaved layout into the half layout.

    With ``perm = layout_permutation(d)``, the vector ``x[..., perm]`` holds the
    first members of all pairs, then the second members, so that

    ``apply_rope(x, layout="interleaved")[..., perm] ==
    apply_rope(x[..., perm], layout="half")``.

    Porting weights between the two conventions permutes the output rows of
    ``W_q`` and ``W_k`` the same way: ``W_half = W_interleaved[perm]``.

    Returns:
        Long tensor of shape ``(d,)``: ``[0, 2, 4, ..., d-2, 1, 3, ..., d-1]``.
    """
    dim = check_even_dim(dim)
    return torch.cat((torch.arange(0, dim, 2), torch.arange(1, dim, 2)))


def apply_rope_complex(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    p: float = 1.0,
    theta: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""RoPE as complex multiplication (interleaved layout, the Meta Llama form).

    Pair ``k`` is read as the complex number :math:`z_k = x_{2k} + i\,x_{2k+1}`
    and multiplied by :math:`e^{i m \theta_k}`, built with ``torch.polar`` from
    float64 angles on every call (Meta builds a table once; see
    :func:`~rope_lessons.rope.kernels.apply_rope` for the cached path).

    Args, Returns: as :func:`~rope_lessons.rope.kernels.apply_rope` with ``layout="interleaved"``.
    """
    x = check_features(x)
    compute_dtype = _compute_dtype(x)
    if positions is None:
        positions = torch.arange(x.shape[-2], device=x.device)
    positions = check_positions(positions, x.shape[:-1])
    angles = rotation_angles(positions, x.shape[-1], base, p=p, theta=theta)  # float64
    complex_dtype = torch.complex128 if compute_dtype == torch.float64 else torch.complex64
    phase = torch.polar(torch.ones_like(angles), angles).to(complex_dtype)
    pairs = x.to(compute_dtype).unflatten(-1, (-1, 2))  # (..., T, d/2, 2)
    rotated = torch.view_as_complex(pairs.contiguous()) * phase
    return torch.view_as_real(rotated).flatten(-2).to(x.dtype)  # (..., T, d)


def apply_rope_loop(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    p: float = 1.0,
    theta: torch.Tensor | None = None,
) -> torch.Tensor:
    """RoPE written as a plain Python loop over positions and pairs.

    The slow, obviously-correct version (interleaved layout): one scalar angle
    per (position, pair), from the same frequencies as every other form and
    turned by the same :func:`~.turn`, in Python floats (float64). It exists to be
    timed against the vectorised forms; never use it in a model.

    Args:
        x: features ``(..., T, d)``.
        positions: 1-D integer tensor ``(T,)``; defaults to ``arange(T)``.

    Returns:
        Tensor of the shape and dtype of ``x``.
    """
    x = check_features(x)
    seq_len, dim = x.shape[-2], x.shape[-1]
    freqs = resolve_theta(dim, base, p, theta).tolist()
    if positions is None:
        positions = torch.arange(seq_len)
    positions = check_positions(positions, x.shape[-2:-1])
    out = torch.empty_like(x)
    for t in range(seq_len):
        m = int(positions[t])
        for k, freq in enumerate(freqs):
            c, s = math.cos(m * freq), math.sin(m * freq)
            out[..., t, 2 * k], out[..., t, 2 * k + 1] = turn(
                x[..., t, 2 * k].double(), x[..., t, 2 * k + 1].double(), c, s
            )
    return out
