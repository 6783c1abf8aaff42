"""Argument checks shared by the public functions.

Every check raises a ``TypeError`` (wrong kind of object) or a ``ValueError``
(right kind, wrong value) whose message names the offending argument, so that a
reader who passes a bad value learns which one and why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, TypeVar, cast, get_args

import torch

Layout = Literal["interleaved", "half"]
LAYOUTS: tuple[Layout, ...] = get_args(Layout)
RotarySlice = Literal["leading", "trailing"]
"""Where a partial-rotary head's rotating features sit (:class:`~rope_lessons.rope.spec.Rope`)."""
ROTARY_SLICES: tuple[RotarySlice, ...] = get_args(RotarySlice)

Choice = TypeVar("Choice", bound=str)


def check_even_dim(dim: object, name: str = "dim") -> int:
    """Return ``dim`` if it is a positive even integer."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name} must be an int, got {type(dim).__name__}")
    if dim <= 0 or dim % 2:
        raise ValueError(f"{name} must be a positive even integer (RoPE rotates pairs), got {dim}")
    return dim


def check_seed(seed: object) -> int:
    """Return ``seed`` if it is an int that ``torch.manual_seed`` takes, in ``[0, 2**63)``."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed < 2**63:
        raise ValueError(f"seed must be >= 0 and below 2**63, got {seed}")
    return seed


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
    """Return ``base`` as a float if it is a finite number > 1.

    A base of 1 would give every pair the same frequency, and a base below 1
    frequencies that grow with the pair index: neither is RoPE's ladder.
    """
    value = check_positive_number(base, "base")
    if value <= 1.0:
        raise ValueError(f"base must be > 1 (frequencies base**(-2k/d) must fall), got {base}")
    return value


DEFAULT_BASE = 10000.0
MAX_POSITION = 2**40
"""The largest |position| accepted: up to here float64 angles ``m * theta`` err by at most
about ``m * 2**-52``, 2e-4 radians."""
DEFAULT_P = 1.0


def check_not_overridden(
    base: object, p: object, theta: object, names: tuple[str, str, str] = ("base", "p", "theta")
) -> None:
    """Refuse a non-default ``base`` or ``p`` given together with ``theta``.

    ``theta`` replaces the ladder that ``base`` and ``p`` would build, so a
    base or fraction given beside it would be kept and ignored. The defaults
    (``base=10000``, ``p=1``) are what every call passes when it means
    nothing, so they are accepted with ``theta``. ``names`` are the three
    settings as the caller calls them (e.g. ``rope_base``).
    """
    if theta is None:
        return
    base_name, p_name, theta_name = names
    for name, value, default in ((base_name, base, DEFAULT_BASE), (p_name, p, DEFAULT_P)):
        if value != default:
            raise ValueError(
                f"{name}={value!r} and {theta_name} were both given, but {theta_name} "
                f"overrides {name}; give the frequencies in {theta_name} alone, or "
                f"{name} without {theta_name}"
            )


def check_fraction(p: object, name: str = "p") -> float:
    """Return ``p`` as a float if it lies in [0, 1]."""
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"{name} must be a number in [0, 1], got {type(p).__name__}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {p}")
    return float(p)


def check_bands(bands: Sequence[tuple[int, int]], length: int) -> None:
    """Refuse a position band ``[start, stop)`` that is empty or leaves ``[0, length)``.

    A band past the last position would otherwise be cut short by slicing, and
    its mean taken over fewer positions than it names.
    """
    for start, stop in bands:
        if not 0 <= start < stop <= length:
            raise ValueError(f"band [{start}, {stop}) does not fit {length} positions")


def check_choice(value: object, name: str, choices: Sequence[Choice]) -> Choice:
    """Return ``value`` if it is one of ``choices`` (typed as a member of them)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return cast(Choice, value)


def check_layout(layout: object) -> Layout:
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


def check_positions(
    positions: object,
    leading_shape: torch.Size | None = None,
    *,
    name: str = "positions",
    shape_for_errors: tuple[int, ...] | None = None,
) -> torch.Tensor:
    """Return ``positions`` as an int64 tensor, if it is an integer tensor that fits.

    Every integer dtype is accepted and converted exactly to int64 (so that
    negation and products cannot wrap around in a narrow dtype); bool,
    floating and complex tensors are refused. With ``leading_shape`` (the
    shape of the features without their last dimension, ``(..., T)``) the
    positions must broadcast to exactly that shape, with one exception: for
    ``(B, H, T)`` (features ``(B, H, T, d)``), 2-D positions are read as
    ``(B, T)``, i.e. ``positions[:, None, :]`` (see :func:`_batch_rows`), and
    are returned so reshaped. ``shape_for_errors`` is the shape the caller
    passed, when it differs from the checked one.
    """
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"{name} must be an integer torch.Tensor, got {type(positions).__name__}")
    if positions.dtype == torch.bool:
        raise TypeError(f"{name} must have an integer dtype, got torch.bool")
    if positions.is_floating_point() or positions.is_complex():
        raise TypeError(
            f"{name} must have an integer dtype (positions are whole numbers), "
            f"got {positions.dtype}"
        )
    if positions.dtype == torch.int64 and positions.numel():
        too_far = (positions > MAX_POSITION) | (positions < -MAX_POSITION)
        if bool(too_far.any()):
            raise ValueError(
                f"{name} hold {int(positions[too_far].flatten()[0])}, beyond +-2**40 (about "
                "1.1e12): there float64 angles m * theta err by up to 2e-4 radians (m * 2**-52), "
                "and past 2**53 the positions themselves round"
            )
    if leading_shape is not None:
        shown = shape_for_errors if shape_for_errors is not None else tuple(positions.shape)
        if len(leading_shape) == 3 and positions.ndim == 2:
            positions = _batch_rows(positions, leading_shape, name, shown)
        try:
            broadcast: torch.Size | None = torch.broadcast_shapes(positions.shape, leading_shape)
        except RuntimeError:
            broadcast = None
        if broadcast != leading_shape:
            looks_transposed = (
                len(leading_shape) == 3
                and len(shown) == 2
                and shown[1] == leading_shape[1] != leading_shape[2]
            )
            hint = (
                ": the features look like (batch, seq, heads, head_dim), Hugging Face's "
                "layout before its transpose; transpose them to (batch, heads, seq, head_dim) "
                "or pass seq_dim=1"
                if looks_transposed
                else ""
            )
            raise ValueError(
                f"{name} of shape {shown} do not broadcast to (..., seq) = "
                f"{tuple(leading_shape)}{hint}"
            )
    return positions.to(torch.int64)


def _batch_rows(
    positions: torch.Tensor, leading_shape: torch.Size, name: str, shown: tuple[int, ...]
) -> torch.Tensor:
    """2-D positions for ``(B, H, T, d)`` features, read as ``(B, T)``: ``positions[:, None, :]``.

    This is Hugging Face's convention (``position_ids`` of shape ``(B, T)``)
    and :class:`~rope_lessons.toy.model.TinyTransformer`'s. Broadcasting by
    NumPy's rules would instead read ``(X, T)`` as per-head positions when
    ``X == H``, and the two readings collide when ``B == H``: the batch rule
    wins, always. A first dimension of 1 means the same either way and is
    kept as it is. Any other first dimension (``H`` included, when it is not
    ``B``) is refused: per-head positions are passed 3-D, ``(1, H, T)`` or
    ``(B, H, T)``.
    """
    batch, heads, seq = leading_shape
    rows = positions.shape[0]
    if rows == 1:
        return positions
    if rows == batch:
        return positions[:, None, :]
    raise ValueError(
        f"{name} of shape {shown}: 2-D positions for (batch, heads, seq) = "
        f"{tuple(leading_shape)} features are read as (batch, seq) = ({batch}, {seq}); "
        f"pass per-head positions 3-D, as (1, heads, seq) = (1, {heads}, {seq})"
    )


def check_theta(theta: object, dim: int) -> torch.Tensor:
    """Return ``theta`` if it is a finite, non-negative float tensor of shape ``(dim/2,)``,
    in float32 or float64: half-precision frequencies (float16, bfloat16) are refused, since
    their rounding, a few parts in 1e3, turns into whole radians at long positions."""
    if not isinstance(theta, torch.Tensor):
        raise TypeError(f"theta must be a torch.Tensor, got {type(theta).__name__}")
    if not theta.is_floating_point():
        raise TypeError(f"theta must have a floating dtype, got {theta.dtype}")
    if theta.dtype in (torch.float16, torch.bfloat16):
        raise TypeError(
            f"theta is {theta.dtype}: half-precision frequencies are rounded by up to "
            f"{2.0**-11 if theta.dtype == torch.float16 else 2.0**-8:g} of their value, a "
            "whole radian by position 2000 or so; give float32 or float64 frequencies (the "
            "features may stay in half precision)"
        )
    if theta.shape != (dim // 2,):
        raise ValueError(
            f"theta must have shape (d/2,) = ({dim // 2},) for d = {dim}, got {tuple(theta.shape)}"
        )
    if not bool(torch.isfinite(theta).all()) or bool((theta < 0).any()):
        raise ValueError("theta must be finite and >= 0 (a zero leaves its pair unrotated)")
    return theta
