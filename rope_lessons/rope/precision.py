r"""How precisely can a floating-point format hold a position and its rotation angles?

RoPE turns pair ``k`` at position ``m`` by :math:`m\theta_k`. When the
position, the frequency or their product is stored in a narrow format, the
angle is off, and so is every attention score that uses it. This module
measures that against a float64 reference, for the formats of
:data:`FLOAT_DTYPES`:

* a format with ``p`` significand bits (counting the implicit one) holds every
  integer up to ``2**p`` and no longer all of them beyond: bfloat16 (``p=8``)
  stores 257 as 256, float16 (``p=11``) stores 2049 as 2048, holds nothing
  above 65504 and rounds every number from 65520 up to infinity, float32
  (``p=24``) is exact up to 16,777,216;
* between ``2**e`` and ``2**(e+1)`` consecutive values are ``2**(e-p+1)``
  apart (:func:`spacing_at`), e.g. 64 for bfloat16 in ``[8192, 16384)``.

Angles are formed as in :func:`rope_lessons.rope.ladder.rotation_angles`: the
position and the frequencies are rounded to the format and multiplied in it,
which is what implementations that build their tables in half precision do.
"""

from __future__ import annotations

import math

import torch

from rope_lessons._checks import check_even_dim, check_positions
from rope_lessons.rope.kernels import rotate
from rope_lessons.rope.ladder import rotation_angles
from rope_lessons.rope.spec import Rope

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _check_float_dtype(dtype: object) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or dtype not in FLOAT_DTYPES:
        names = [str(d) for d in FLOAT_DTYPES]
        raise ValueError(f"dtype must be one of {names}, got {dtype!r}")
    return dtype


def significand_bits(dtype: torch.dtype) -> int:
    """Bits of precision ``p`` of a format, the implicit leading one included.

    float16: 11, bfloat16: 8, float32: 24, float64: 53.
    """
    eps = torch.finfo(_check_float_dtype(dtype)).eps  # 2 ** (1 - p)
    return 1 - round(math.log2(eps))


def first_inexact_integer(dtype: torch.dtype) -> int:
    """The smallest positive integer that ``dtype`` cannot store exactly: ``2**p + 1``."""
    return (1 << significand_bits(dtype)) + 1


def spacing_at(value: float, dtype: torch.dtype) -> float:
    """Distance between consecutive numbers of ``dtype`` around ``value`` (``|value| >= 1``).

    For ``2**e <= |value| < 2**(e+1)`` it is ``2**(e - p + 1)``; an integer
    position is rounded by at most half of it.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"value must be a number, got {type(value).__name__}")
    if not (math.isfinite(value) and abs(value) >= 1):
        raise ValueError(f"value must be finite with |value| >= 1, got {value}")
    exponent = math.frexp(abs(value))[1] - 1  # exact: |value| = m 2**(e+1), 1/2 <= m < 1
    return 2.0 ** (exponent - significand_bits(dtype) + 1)


def round_to_dtype(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The numbers ``dtype`` actually stores for ``values`` (round to nearest even).

    Args:
        values: any real tensor, shape ``(...,)``.
        dtype: one of :data:`FLOAT_DTYPES`.

    Returns:
        float64 tensor of shape ``(...,)``; ``inf`` where the format overflows.
    """
    if not isinstance(values, torch.Tensor):
        raise TypeError(f"values must be a torch.Tensor, got {type(values).__name__}")
    return values.to(torch.float64).to(_check_float_dtype(dtype)).to(torch.float64)


def _wrapped(delta: torch.Tensor) -> torch.Tensor:
    """``|delta|`` folded into ``[0, pi]``; ``inf`` where ``delta`` is not finite."""
    folded = (torch.remainder(delta + math.pi, 2 * math.pi) - math.pi).abs()
    return torch.where(delta.isfinite(), folded, torch.full_like(folded, math.inf))


def angle_error(
    positions: torch.Tensor, dim: int, dtype: torch.dtype, *, rope: Rope | None = None
) -> torch.Tensor:
    r"""Error of every angle :math:`m\theta_k` formed in ``dtype``, against float64.

    The error is taken modulo a full turn (an angle off by exactly
    :math:`2\pi` rotates correctly), so it lies in ``[0, pi]``.

    Args:
        positions: integer tensor ``(...,)``.
        dim: head dimension ``d`` (even).
        dtype: the format the angles are computed in.
        rope: the spec whose frequencies are used, of dimension ``dim``;
            default ``Rope(dim)``.

    Returns:
        float64 tensor ``(..., d/2)`` in radians; ``inf`` where the format
        overflows (float16 from 65520 on).
    """
    dim = check_even_dim(dim)
    rope = Rope(dim) if rope is None else rope
    rope.check_dim(dim, "dim")
    theta = rope.theta  # (d/2,) float64
    low = rotation_angles(positions, dim, theta=theta, dtype=_check_float_dtype(dtype))
    reference = rotation_angles(positions, dim, theta=theta, dtype=torch.float64)
    return _wrapped(low.to(torch.float64) - reference)  # (..., d/2)


def score_error(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor,
    offset: int,
    dtype: torch.dtype,
    *,
    rope: Rope | None = None,
) -> torch.Tensor:
    r"""Error of the score :math:`\langle R_m q, R_{m+r} k\rangle` with angles formed in ``dtype``.

    Only the angles are computed in ``dtype``; the cosines, sines, the
    rotation and the dot product run in float64, so the error measured is the
    error of the angles alone. Because the score depends on the two angles
    through their difference, what matters is how well ``dtype`` keeps the
    distance ``r`` between the two positions, not the positions themselves.

    Args:
        q, k: queries and keys of shape ``(..., d)``, broadcastable together.
        positions: query positions ``m``, integer tensor ``(P,)``.
        offset: the key sits at ``n = m + offset``.
        dtype: the format the angles are computed in.
        rope: the spec (frequencies and layout), ``dim == d``; default ``Rope(d)``.

    Returns:
        float64 tensor ``(..., P)``: ``|score - reference|``, with the
        reference computed entirely in float64; ``inf`` where the format
        overflows.
    """
    for name, t in (("q", q), ("k", k)):
        if not isinstance(t, torch.Tensor) or t.ndim < 1 or not t.is_floating_point():
            raise TypeError(f"{name} must be a floating tensor of shape (..., d)")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension, got {q.shape} and {k.shape}")
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset must be an int, got {type(offset).__name__}")
    if not isinstance(positions, torch.Tensor) or positions.ndim != 1:
        raise ValueError("positions must be a 1-D integer tensor of shape (P,)")
    positions = check_positions(positions)  # int64 before the offset: int8 120 + 10 must be 130
    dim = check_even_dim(q.shape[-1], "the last dimension of q")
    rope = Rope(dim) if rope is None else rope
    rope.check_dim(dim, "the last dimension of q")
    theta = rope.theta  # (d/2,) float64
    q64 = q.to(torch.float64).unsqueeze(-2)  # (..., 1, d)
    k64 = k.to(torch.float64).unsqueeze(-2)  # (..., 1, d)

    def scores(angle_dtype: torch.dtype) -> torch.Tensor:
        query_angles = rotation_angles(positions, dim, theta=theta, dtype=angle_dtype).double()
        key_angles = rotation_angles(
            positions + offset, dim, theta=theta, dtype=angle_dtype
        ).double()
        rotated_q = rotate(q64, query_angles.cos(), query_angles.sin(), rope.layout)  # (.., P, d)
        rotated_k = rotate(k64, key_angles.cos(), key_angles.sin(), rope.layout)  # (.., P, d)
        return (rotated_q * rotated_k).sum(-1)  # (..., P)

    error = (scores(_check_float_dtype(dtype)) - scores(torch.float64)).abs()
    return torch.where(error.isfinite(), error, torch.full_like(error, math.inf))
