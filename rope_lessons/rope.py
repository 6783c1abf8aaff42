r"""Rotary position embeddings (RoPE): frequencies, rotation and its equivalent forms.

Reference: J. Su, Y. Lu, S. Pan, A. Murtadha, B. Wen, Y. Liu, "RoFormer:
Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864
(eq. 34 is the elementwise form used here).

Conventions (the same everywhere in the course):

* positions ``m, n`` are 0-based integers; the head dimension ``d`` is even;
* frequencies :math:`\theta_k = \text{base}^{-2k/d}` for ``k = 0 .. d/2 - 1``;
* position ``m`` turns pair ``k`` counter-clockwise by the angle
  :math:`m\theta_k`: :math:`(x_1, x_2) \mapsto (x_1\cos - x_2\sin,\;
  x_1\sin + x_2\cos)`, so that :math:`R_m^\top R_n = R_{n-m}`;
* layout ``"interleaved"`` pairs dimensions ``(2k, 2k+1)`` (RoFormer, Meta
  Llama, GPT-J); layout ``"half"`` pairs ``(k, k + d/2)`` (GPT-NeoX, Hugging
  Face ``rotate_half``). They differ by :func:`layout_permutation`.

Shapes used in the docstrings:

* ``...``: any leading dimensions (batch, heads);
* ``T``: sequence length;
* ``d``: feature (head) dimension, even; ``d/2`` rotation pairs.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

import torch

from rope_lessons._checks import (
    check_base,
    check_even_dim,
    check_features,
    check_fraction,
    check_layout,
    check_positions,
)

Layout = Literal["interleaved", "half"]


def rotating_pairs(dim: int, p: float = 1.0) -> int:
    """Number of pairs that keep rotating under p-RoPE: ``floor(p * dim / 2)``.

    p-RoPE (Barbero et al. 2025, arXiv:2410.06205) keeps the highest
    frequencies (the first pairs, ``k = 0, 1, ...``) and sets the lowest ones to
    zero, which leaves those pairs unrotated. The rounding down matches the
    ``rope_proportion`` of Google's Gemma code.
    """
    dim = check_even_dim(dim)
    p = check_fraction(p)
    return math.floor(p * dim / 2)


def frequencies(
    dim: int,
    base: float = 10000.0,
    *,
    p: float = 1.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""The angle per position of each pair, :math:`\theta_k = \text{base}^{-2k/d}`.

    Args:
        dim: the feature dimension ``d`` (even).
        base: the base of the geometric sequence (10000 in RoFormer).
        p: fraction of pairs, counted from the highest frequency, that keep
            rotating; the others get frequency 0 (p-RoPE). ``p=1`` is plain RoPE.
        dtype: float64 by default so that it can serve as a reference.
        device: where to put the result.

    Returns:
        Tensor of shape ``(d/2,)``: ``theta[0] = 1`` down to ``base ** (-(d-2)/d)``.
    """
    dim = check_even_dim(dim)
    base = check_base(base)
    k = torch.arange(dim // 2, dtype=torch.float64, device=device)
    theta = base ** (-2.0 * k / dim)
    theta[rotating_pairs(dim, p) :] = 0.0
    return theta.to(dtype)


def rotation_angles(
    positions: torch.Tensor,
    dim: int,
    base: float = 10000.0,
    *,
    p: float = 1.0,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    r"""The angles :math:`m\,\theta_k` for every position ``m`` in ``positions``.

    Args:
        positions: integer tensor of any shape ``(...,)``.
        dim, base, p: as in :func:`frequencies`.
        dtype: the dtype in which the product is computed and returned.
            The course's precision chapter varies it; the default float64 is
            exact enough to be a reference for positions up to about 1e12.

    Returns:
        Tensor of shape ``(..., d/2)``.
    """
    if not isinstance(positions, torch.Tensor) or positions.is_floating_point():
        raise TypeError("positions must be an integer torch.Tensor")
    theta = frequencies(dim, base, p=p, dtype=dtype, device=positions.device)
    return positions.to(dtype).unsqueeze(-1) * theta  # (..., d/2)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: Layout) -> torch.Tensor:
    """Turn each pair of ``x`` by the angle whose cosine and sine are given.

    This is the elementwise form of RoFormer eq. 34, written for both layouts.

    Args:
        x: features ``(..., T, d)``.
        cos, sin: ``(..., T, d/2)``, broadcastable against ``x``'s pairs.
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        Tensor of shape ``(..., T, d)``, in the dtype of ``x``, ``cos`` and
        ``sin`` promoted together.
    """
    half = x.shape[-1] // 2
    if layout == "interleaved":
        x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each
        out1, out2 = x1 * cos - x2 * sin, x1 * sin + x2 * cos
        return torch.stack((out1, out2), dim=-1).flatten(-2)  # (..., T, d)
    x1, x2 = x[..., :half], x[..., half:]  # (..., T, d/2) each
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def rotate_complex(x: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
    r"""Interleaved RoPE as one complex multiplication: :math:`z_k \mapsto z_k e^{i m\theta_k}`.

    Pair ``k`` of ``x`` is read in place as :math:`z_k = x_{2k} + i\,x_{2k+1}`.
    The same arithmetic as :func:`rotate` with ``layout="interleaved"``, done
    by one fused kernel instead of six, which is why :func:`apply_rope` uses it.

    Args:
        x: features ``(..., T, d)``, float32 or float64.
        phase: unit complex numbers :math:`e^{i m\theta_k}`, ``(..., T, d/2)``.

    Returns:
        Tensor ``(..., T, d)`` in the dtype of ``x``.
    """
    pairs = x.unflatten(-1, (-1, 2))  # (..., T, d/2, 2)
    viewable = pairs.storage_offset() % 2 == 0 and all(s % 2 == 0 for s in pairs.stride()[:-1])
    if not viewable:  # view_as_complex needs even strides and offset
        pairs = pairs.clone(memory_format=torch.contiguous_format)
    return torch.view_as_real(torch.view_as_complex(pairs) * phase).flatten(-2)


def _angle_dtype(device: torch.device) -> torch.dtype:
    """float64 wherever the device has it (Apple's MPS does not)."""
    return torch.float32 if device.type == "mps" else torch.float64


@lru_cache(maxsize=64)
def _cached_cos_sin(
    seq_len: int,
    dim: int,
    base: float,
    p: float,
    device: torch.device,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables ``(T, d/2)`` for positions ``0 .. T-1``, built once."""
    positions = torch.arange(seq_len, device=device)
    angles = rotation_angles(positions, dim, base, p=p, dtype=_angle_dtype(device))
    return angles.cos().to(dtype), angles.sin().to(dtype)


@lru_cache(maxsize=64)
def _cached_phase(
    seq_len: int,
    dim: int,
    base: float,
    p: float,
    device: torch.device,
    dtype: torch.dtype,
) -> torch.Tensor:
    r"""The complex table :math:`e^{i m\theta_k}`, ``(T, d/2)``, built once."""
    return torch.complex(*_cached_cos_sin(seq_len, dim, base, p, device, dtype))


def cos_sin(
    leading_shape: torch.Size,
    dim: int,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    p: float = 1.0,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosine and sine tables for features whose shape is ``leading_shape + (d,)``.

    With ``positions=None`` the positions are ``0 .. T-1`` and the tables come
    from a cache, so a model pays for them once per length. Explicit positions
    are computed afresh. Angles are formed in float64 (float32 on MPS) and only
    then rounded to ``dtype``.

    Returns:
        ``(cos, sin)``, each of shape ``(T, d/2)`` or ``(..., T, d/2)``.
    """
    dim = check_even_dim(dim)
    device = torch.device(device)
    if positions is None:
        return _cached_cos_sin(leading_shape[-1], dim, base, p, device, dtype)
    positions = check_positions(positions, leading_shape).to(device)
    angles = rotation_angles(positions, dim, base, p=p, dtype=_angle_dtype(device))
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    p: float = 1.0,
) -> torch.Tensor:
    r"""Rotate the last dimension of ``x`` by :math:`R_m` at each position ``m``.

    Args:
        x: features of shape ``(..., T, d)``, ``d`` even, any floating dtype.
        positions: integer tensor broadcastable to ``(..., T)``; defaults to
            ``arange(T)``. Negative positions are allowed: ``R_{-m} = R_m^T``.
        base: frequency base (10000 by default).
        layout: ``"interleaved"`` (pairs ``2k, 2k+1``) or ``"half"`` (pairs
            ``k, k + d/2``).
        p: fraction of the highest frequencies that rotate (p-RoPE); the other
            pairs pass through unchanged. ``p=1`` is plain RoPE.

    Returns:
        Tensor of the shape and dtype of ``x``. The arithmetic runs in float32
        (float64 when ``x`` is float64), whatever the dtype of ``x``.
    """
    x = check_features(x)
    layout = check_layout(layout)  # type: ignore[assignment]
    base = check_base(base)
    p = check_fraction(p)
    dim = x.shape[-1]
    compute_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    x_compute = x.to(compute_dtype)
    if layout == "interleaved" and positions is None:
        phase = _cached_phase(x.shape[-2], dim, base, p, x.device, compute_dtype)
        return rotate_complex(x_compute, phase).to(x.dtype)
    cos, sin = cos_sin(
        x.shape[:-1], dim, positions, base=base, p=p, device=x.device, dtype=compute_dtype
    )
    if layout == "interleaved":
        return rotate_complex(x_compute, torch.complex(cos, sin)).to(x.dtype)
    return rotate(x_compute, cos, sin, layout).to(x.dtype)


def rotation_matrix(
    position: int,
    dim: int,
    base: float = 10000.0,
    *,
    p: float = 1.0,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    r"""The explicit block-diagonal matrix :math:`R_m` (interleaved layout).

    Block ``k`` sits on rows and columns ``2k, 2k+1`` and is
    :math:`\begin{pmatrix}\cos m\theta_k & -\sin m\theta_k\\
    \sin m\theta_k & \cos m\theta_k\end{pmatrix}`. Meant for teaching and
    testing: applying it costs ``O(d^2)`` against ``O(d)`` for :func:`apply_rope`.

    Returns:
        Tensor of shape ``(d, d)``.
    """
    if isinstance(position, bool) or not isinstance(position, int):
        raise TypeError(f"position must be an int, got {type(position).__name__}")
    angles = rotation_angles(torch.tensor(position), dim, base, p=p)  # (d/2,)
    cos, sin = angles.cos(), angles.sin()
    blocks = torch.stack(
        (torch.stack((cos, -sin), -1), torch.stack((sin, cos), -1)), -2
    )  # (d/2, 2, 2)
    return torch.block_diag(*blocks).to(dtype)


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
) -> torch.Tensor:
    r"""RoPE as complex multiplication (interleaved layout, the Meta Llama form).

    Pair ``k`` is read as the complex number :math:`z_k = x_{2k} + i\,x_{2k+1}`
    and multiplied by :math:`e^{i m \theta_k}`.

    Args, Returns: as :func:`apply_rope` with ``layout="interleaved"``.
    """
    x = check_features(x)
    compute_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    if positions is None:
        positions = torch.arange(x.shape[-2], device=x.device)
    positions = check_positions(positions, x.shape[:-1])
    angles = rotation_angles(positions, x.shape[-1], base, p=p).to(compute_dtype)
    phase = torch.polar(torch.ones_like(angles), angles)  # (..., T, d/2) complex
    pairs = x.to(compute_dtype).unflatten(-1, (-1, 2))  # (..., T, d/2, 2)
    rotated = torch.view_as_complex(pairs.contiguous()) * phase
    return torch.view_as_real(rotated).flatten(-2).to(x.dtype)  # (..., T, d)


def apply_rope_loop(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
) -> torch.Tensor:
    """RoPE written as a plain Python loop over positions and pairs.

    The slow, obviously-correct version (interleaved layout): one scalar angle
    per (position, pair), computed with :mod:`math`. It exists to be timed
    against the vectorised forms; never use it in a model.

    Args:
        x: features ``(..., T, d)``.
        positions: 1-D integer tensor ``(T,)``; defaults to ``arange(T)``.

    Returns:
        Tensor of the shape and dtype of ``x``.
    """
    x = check_features(x)
    base = check_base(base)
    seq_len, dim = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(seq_len)
    positions = check_positions(positions, x.shape[-2:-1])
    out = torch.empty_like(x)
    for t in range(seq_len):
        m = int(positions[t])
        for k in range(dim // 2):
            angle = m * base ** (-2 * k / dim)
            c, s = math.cos(angle), math.sin(angle)
            x1, x2 = x[..., t, 2 * k], x[..., t, 2 * k + 1]
            out[..., t, 2 * k] = x1 * c - x2 * s
            out[..., t, 2 * k + 1] = x1 * s + x2 * c
    return out
