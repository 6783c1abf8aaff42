"""RoPE's frequency ladder: how many pairs turn, their frequencies and angles,
their wavelengths and turns.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

import torch

from rope_lessons._checks import (
    check_base,
    check_even_dim,
    check_fraction,
    check_not_overridden,
    check_positions,
    check_theta,
)


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
        base: the base of the geometric sequence (10000 in RoFormer), > 1.
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


def base_from_slowest(slowest: float, dim: int) -> float | None:
    r"""The base whose ladder has ``slowest`` as its slowest frequency, or None if none has.

    The last pair, :math:`K = d/2 - 1`, turns at :math:`\theta_K = b^{-2K/d}`, so
    :math:`b = \theta_K^{-d/(2K)} = \theta_K^{-d/(d-2)}`. It inverts
    :func:`frequencies`: ``base_from_slowest(frequencies(d, b)[-1], d)`` is ``b``
    up to rounding.

    Args:
        slowest: the angle per position of the last pair, e.g. as measured on
            someone's rotation.
        dim: the feature dimension ``d`` (even, >= 4: with ``d = 2`` the one pair
            turns at 1 radian per position whatever the base).

    Returns:
        The base, > 1; None when ``slowest`` is not in ``(0, 1)`` (nan included) or
        the base it gives is not a finite number > 1.
    """
    dim = check_even_dim(dim)
    if dim < 4:
        raise ValueError(f"dim must be >= 4 (with d = 2 the base cannot be seen), got {dim}")
    slowest = float(slowest)
    if not 0.0 < slowest < 1.0:
        return None
    try:
        base = slowest ** (-dim / (dim - 2))
    except OverflowError:  # a tiny angle: no float base is that large
        return None
    return base if base > 1.0 else None


MisreadLadder = Literal[
    "half_exponent",
    "quadruple_exponent",
    "linspace",
    "from_one",
    "doubled",
    "reversed",
    "inverted",
    "flat",
]
"""A slip in writing the ladder :math:`b^{-2k/d}`, as :func:`misread_ladders` names it."""


def misread_ladders(dim: int, base: float = 10000.0) -> dict[MisreadLadder, torch.Tensor]:
    r"""The ladders that common slips in writing :math:`\theta_k = b^{-2k/d}` give,
    ``(d/2,)`` float64 each, for checkers to match a reader's frequencies against:

    * ``"half_exponent"``: :math:`b^{-k/d}` (``arange(d // 2) / d`` as the exponents);
    * ``"quadruple_exponent"``: :math:`b^{-4k/d}` (the column index ``2k`` taken
      for the pair index);
    * ``"linspace"``: :math:`b^{-2k/(d-2)}` (``linspace(0, 1, d // 2)``: the
      slowest pair at :math:`1/b`);
    * ``"from_one"``: :math:`b^{-2(k+1)/d}` (pairs counted from 1);
    * ``"doubled"``: :math:`2 b^{-2k/d}` (a rotation applied twice);
    * ``"reversed"``: the ladder flipped, pair 0 slowest;
    * ``"inverted"``: :math:`b^{+2k/d}`;
    * ``"flat"``: 1 for every pair (the exponents zero from integer division).
    """
    theta = frequencies(dim, base)
    k = torch.arange(dim // 2, dtype=torch.float64)
    return {
        "half_exponent": base ** -(k / dim),
        "quadruple_exponent": base ** -(4 * k / dim),
        "linspace": base ** -(2 * k / (dim - 2)),
        "from_one": base ** -(2 * (k + 1) / dim),
        "doubled": 2 * theta,
        "reversed": theta.flip(0),
        "inverted": base ** (2 * k / dim),
        "flat": torch.ones(dim // 2, dtype=torch.float64),
    }


def resolve_theta(
    dim: int, base: float = 10000.0, p: float = 1.0, theta: torch.Tensor | None = None
) -> torch.Tensor:
    """The frequency vector every form uses: ``theta`` if given, else :func:`frequencies`.

    Args:
        dim: the feature dimension ``d`` (even).
        base, p: as in :func:`frequencies`; with ``theta`` they must keep
            their defaults (10000 and 1): ``theta`` overrides them, so another
            value would be ignored, and is refused instead.
        theta: custom per-pair frequencies ``(d/2,)``, finite and >= 0, in the
            order of :func:`frequencies` (pair 0 fastest); a zero leaves that
            pair unrotated.

    Returns:
        float64 tensor ``(d/2,)`` on the CPU.

    Raises:
        ValueError: if ``theta`` is given with a base other than 10000 or a
            ``p`` other than 1.
    """
    dim = check_even_dim(dim)
    check_not_overridden(base, p, theta)
    if theta is None:
        return frequencies(dim, base, p=p)
    return check_theta(theta, dim).detach().to("cpu", torch.float64)


@lru_cache(maxsize=256)
def _ladder_key(dim: int, base: float, p: float) -> tuple[float, ...]:
    return tuple(frequencies(dim, base, p=p).tolist())


@lru_cache(maxsize=256, typed=True)
def _checked_ladder_key(dim: int, base: float, p: float) -> tuple[float, ...]:
    """:func:`_ladder_key` after the checks, remembered per argument (and type): a call
    with the same numbers skips them (microseconds count on short inputs)."""
    return _ladder_key(check_even_dim(dim), check_base(base), check_fraction(p))


_PLAIN_NUMBERS = (int, float)  # the types whose checks _checked_ladder_key may remember


def _theta_key(dim: int, base: float, p: float, theta: torch.Tensor | None) -> tuple[float, ...]:
    """A hashable copy of the frequency vector, the key of the table caches; ``base`` and
    ``p`` checked (and refused beside ``theta`` unless they keep their defaults)."""
    if theta is None:
        if type(dim) is int and type(base) in _PLAIN_NUMBERS and type(p) in _PLAIN_NUMBERS:
            return _checked_ladder_key(dim, base, p)
        return _ladder_key(check_even_dim(dim), check_base(base), check_fraction(p))
    return tuple(resolve_theta(dim, check_base(base), check_fraction(p), theta).tolist())


def _angle_dtype(device: torch.device) -> torch.dtype:
    """float64 wherever the device has it (Apple's MPS does not)."""
    return torch.float32 if device.type == "mps" else torch.float64


def rotation_angles(
    positions: torch.Tensor,
    dim: int,
    base: float = 10000.0,
    *,
    p: float = 1.0,
    theta: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    r"""The angles :math:`m\,\theta_k` for every position ``m`` in ``positions``.

    Args:
        positions: integer tensor of any shape ``(...,)``.
        dim, base, p, theta: as in :func:`resolve_theta`.
        dtype: the dtype in which the product is computed and returned.
            The course's precision chapter varies it; the default float64 is
            exact enough to be a reference for positions up to about 1e12.

    Returns:
        Tensor of shape ``(..., d/2)``.
    """
    positions = check_positions(positions)
    freqs = resolve_theta(dim, base, p, theta).to(positions.device, dtype)
    return positions.to(dtype).unsqueeze(-1) * freqs  # (..., d/2)


def wavelengths(dim: int, base: float = 10000.0) -> torch.Tensor:
    r"""The wavelength :math:`2\pi/\theta_k` of each pair, in positions.

    Pair ``k`` returns to its starting angle after this many positions.

    Returns:
        float64 tensor ``(d/2,)``, from :math:`2\pi` (pair 0) up to
        :math:`2\pi\,\text{base}^{(d-2)/d}`.
    """
    return 2.0 * math.pi / frequencies(dim, base)


def turns(dim: int, distance: float, base: float = 10000.0) -> torch.Tensor:
    r"""How many full turns each pair makes over ``distance`` positions: :math:`r\theta_k/2\pi`.

    With ``distance = T - 1`` it says which pairs complete a turn within a
    context of ``T`` tokens (those with a value of at least 1); a context of
    one token (``distance = 0``) turns no pair at all.

    Returns:
        float64 tensor ``(d/2,)``.
    """
    if isinstance(distance, bool) or not isinstance(distance, (int, float)):
        raise TypeError(f"distance must be a number, got {type(distance).__name__}")
    if not (math.isfinite(distance) and distance >= 0):
        raise ValueError(f"distance must be finite and >= 0, got {distance}")
    return float(distance) / wavelengths(dim, base)
