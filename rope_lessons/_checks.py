"""Argument checks shared by the public functions.

Every check raises a ``TypeError`` (wrong kind of object) or a ``ValueError``
(right kind, wrong value) whose message names the offending argument, so that a
reader who passes a bad value learns which one and why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

LAYOUTS = ("interleaved", "half")


def check_even_dim(dim: object, name: str = "dim") -> int:
    """Return ``dim`` if it is a positive even integer."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name} must be an int, got {type(dim).__name__}")
    if dim <= 0 or dim % 2:
        raise ValueError(f"{name} must be a positive even integer (RoPE rotates pairs), got {dim}")
    return dim


def check_positive_int(value: object, name: str) -> int:
    """Return ``value`` if it is an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def check_positive_number(value: object, name: str) -> float:
    """Return ``value`` as a float if it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value}")
    return float(value)


def check_base(base: object) -> float:
    """Return ``base`` as a float if it is a finite number > 0."""
    return check_positive_number(base, "base")


def check_fraction(p: object, name: str = "p") -> float:
    """Return ``p`` as a float if it lies in [0, 1]."""
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"{name} must be a number in [0, 1], got {type(p).__name__}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {p}")
    return float(p)


def check_choice(value: object, name: str, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return str(value)


def check_layout(layout: object) -> str:
    """Return ``layout`` if it is ``"interleaved"`` or ``"half"``."""
    return check_choice(layout, "layout", LAYOUTS)


def check_sequence(x: object, name: str = "x") -> torch.Tensor:
    """Return ``x`` if it is a floating tensor of shape ``(..., T, d)``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must have a floating dtype, got {x.dtype}")
    if x.ndim < 2:
        raise ValueError(f"{name} must have shape (..., seq, dim), got {tuple(x.shape)}")
    return x


def check_features(x: object, name: str = "x") -> torch.Tensor:
    """Return ``x`` if it is a floating tensor of shape ``(..., T, d)`` with even d."""
    sequence = check_sequence(x, name)
    check_even_dim(sequence.shape[-1], f"the last dimension of {name}")
    return sequence


def check_positions(positions: object, leading_shape: torch.Size) -> torch.Tensor:
    """Return ``positions`` if it is an integer tensor broadcastable to ``leading_shape``.

    ``leading_shape`` is the shape of the features without their last
    dimension, ``(..., T)``; positions must broadcast to exactly that shape.
    """
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            f"positions must be an integer torch.Tensor, got {type(positions).__name__}"
        )
    if positions.is_floating_point() or positions.is_complex():
        raise TypeError(
            f"positions must have an integer dtype (positions are whole numbers), "
            f"got {positions.dtype}"
        )
    if positions.dtype == torch.bool:
        raise TypeError("positions must have an integer dtype, got torch.bool")
    try:
        broadcast = torch.broadcast_shapes(positions.shape, leading_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != leading_shape:
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} do not broadcast to "
            f"(..., seq) = {tuple(leading_shape)}"
        )
    return positions
