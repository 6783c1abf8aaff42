"""Specs for contexts longer than the trained one: a context-extension method as a
:class:`~rope_lessons.rope.spec.Rope` (:func:`scaled_frequencies`, from
:func:`~rope_lessons.rope.scaling.scaled_theta`'s formulas) and, per pair, the
distances a spec keeps on angles met in training (:func:`safe_distances`).
"""

from __future__ import annotations

import math

import torch

from rope_lessons._checks import Layout
from rope_lessons.rope.scaling import ExtensionMethod, Ramp, _integer, scaled_theta
from rope_lessons.rope.spec import Rope


def scaled_frequencies(
    d: int,
    method: ExtensionMethod,
    *,
    factor: float,
    original_length: int,
    base: float = 10000.0,
    alpha: float | None = None,
    length: int | None = None,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    ramp: Ramp = "pairs",
    truncate: bool = True,
    mscale: float | None = None,
    mscale_all_dim: float | None = None,
    attention_factor: float | None = None,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    layout: Layout = "interleaved",
) -> Rope:
    """The spec of a context-extension method: the frequencies and attention factor of
    :func:`~rope_lessons.rope.scaling.scaled_theta` (where each method's formula and
    every argument are described), in ``layout``.

    Pass it to :func:`~rope_lessons.toy.rotary_attention.attention` as ``rope=``, to
    :meth:`~rope_lessons.rope.spec.Rope.apply` or to
    :func:`~rope_lessons.chapters.extension.extended`.
    """
    theta, scale = scaled_theta(
        d,
        method,
        factor=factor,
        original_length=original_length,
        base=base,
        alpha=alpha,
        length=length,
        beta_fast=beta_fast,
        beta_slow=beta_slow,
        ramp=ramp,
        truncate=truncate,
        mscale=mscale,
        mscale_all_dim=mscale_all_dim,
        attention_factor=attention_factor,
        low_freq_factor=low_freq_factor,
        high_freq_factor=high_freq_factor,
    )
    return Rope.from_theta(theta, layout, attention_factor=scale)


def safe_distances(rope: Rope, trained: Rope, original_length: int) -> torch.Tensor:
    r"""Per pair, the longest distance up to which ``rope`` keeps it on angles met in training.

    A model trained with ``trained`` on ``original_length`` = :math:`L`
    tokens met, on pair :math:`k`, the angles :math:`m\theta_k` for
    :math:`m = 0..L-1`. If the pair turns fully within :math:`L`
    (:math:`\lambda_k \le L`, as in :func:`~.critical_pair`; the arc it leaves
    out is then no wider than one step) it met every angle, and every
    distance is safe. Otherwise it met the arc :math:`[0, (L-1)\theta_k]`,
    and read with the new frequency :math:`\theta'_k` it stays on that arc up
    to distance :math:`\lfloor (L-1)\theta_k/\theta'_k \rfloor` (a relative
    tolerance of :math:`10^{-9}` absorbs float rounding at the edge).

    For plain RoPE this is :math:`L - 1` on the slow pairs; position
    interpolation multiplies it by :math:`s`, NTK-aware scaling by the pair's
    own division factor.

    Args:
        rope: the spec read (e.g. :func:`scaled_frequencies`).
        trained: the spec the model was trained with, of the same dimension.
        original_length: :math:`L`.

    Returns:
        float64 tensor ``(d/2,)``: the safe distance of each pair, ``inf``
        where every distance is safe (the pair turned fully in training, or
        the new frequency is 0).

    Raises:
        ValueError: if a pair of ``rope`` turns so much faster than in
            training that one step could jump over the unseen arc
            (:math:`\theta'_k > 2\pi - (L-1)\theta_k`): its safe distance is
            not a single threshold.
    """
    for name, spec in (("rope", rope), ("trained", trained)):
        if not isinstance(spec, Rope):
            raise TypeError(f"{name} must be a Rope spec, got {type(spec).__name__}")
    trained.check_dim(rope.dim, "the dimension of rope")
    original_length = _integer(original_length, "original_length")
    theta, new = trained.theta, rope.theta  # (d/2,) each
    arc = (original_length - 1) * theta
    full = 2.0 * math.pi / theta <= original_length  # inf wavelength where theta = 0
    jumps = ~full & (new > 2.0 * math.pi - arc)
    if bool(jumps.any()):
        pairs = torch.nonzero(jumps).flatten().tolist()
        raise ValueError(
            f"pairs {pairs} of rope turn by more per position than the arc their trained "
            "angles left unseen: a step can jump over it, so no single safe distance exists"
        )
    safe = torch.floor(arc / new * (1.0 + 1e-9))
    return torch.where(full | (new == 0.0), math.inf, safe)
