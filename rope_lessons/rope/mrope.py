r"""Multimodal RoPE: positions on several axes, each pair turning with one of them.

Chapter 3's 2D RoPE turns pair ``j`` of a patch at ``(x, y)`` by
:math:`x a_j + y b_j`. A vision-language model places every token on three
axes, time, height and width (a text token at ``(m, m, m)``, an image patch
at ``(t, row, column)``), and turns pair ``j`` by
:math:`\sum_a p_a f_{a j}`: :func:`apply_rope_nd`. Each rotation
:math:`R_p` so built satisfies :math:`R_p^\top R_{p'} = R_{p'-p}`, so a score
depends on the offset along each axis only.

Multimodal RoPE (MRoPE) gives each pair one axis and the pair's own
frequency :math:`\theta_j` of the 1D ladder (:func:`multimodal_frequencies`).
Which pairs go to which axis is the design choice:

- ``"sections"`` (Qwen2-VL): the first ``s_t`` pairs follow time, the next
  ``s_h`` height, the last ``s_w`` width, so time gets all the fast
  frequencies and width only slow ones;
- ``"interleaved"`` (Qwen3-VL, Qwen3.5): pairs cycle time, height, width
  (pair ``k`` follows height when ``k % 3 == 1`` and ``k < 3 s_h``, width when
  ``k % 3 == 2`` and ``k < 3 s_w``, time otherwise), so each axis gets fast
  and slow frequencies alike.

For text, whose three positions are equal, both reduce to plain RoPE.
Shapes: ``A`` axes, ``...`` leading dimensions, ``T`` tokens, ``d`` features.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import torch

from rope_lessons._checks import Layout, check_choice, check_features, check_layout, check_positions
from rope_lessons.rope.kernels import _compute_dtype, _cos_sin_from_angles, rotate
from rope_lessons.rope.ladder import _angle_dtype

Assignment = Literal["sections", "interleaved"]
ASSIGNMENTS: tuple[Assignment, ...] = get_args(Assignment)


def pair_axes(sections: Sequence[int], assignment: Assignment) -> torch.Tensor:
    """The axis each pair turns with, ``(d/2,)`` int64, for ``sections`` = pairs per axis.

    Args:
        sections: how many pairs follow each axis, ``(s_t, s_h, s_w)`` for three
            axes; their sum is the number of pairs ``d/2``.
        assignment: ``"sections"`` (consecutive blocks, Qwen2-VL) or
            ``"interleaved"`` (cycling, Qwen3-VL; three axes only).

    Raises:
        ValueError: for non-positive sections, or an interleaved assignment whose
            cycle cannot give each axis its count.
    """
    check_choice(assignment, "assignment", ASSIGNMENTS)
    counts = list(sections)
    if not counts or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in counts):
        raise ValueError(f"sections must be positive integers, got {counts}")
    pairs = sum(counts)
    if assignment == "sections":
        return torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))
    if len(counts) != 3:
        raise ValueError(f"the interleaved assignment has three axes (t, h, w), got {counts}")
    k = torch.arange(pairs)
    axes = torch.zeros(pairs, dtype=torch.long)  # time unless height or width claims it
    axes[(k % 3 == 1) & (k < 3 * counts[1])] = 1
    axes[(k % 3 == 2) & (k < 3 * counts[2])] = 2
    got = torch.bincount(axes, minlength=3).tolist()
    if got != counts:
        raise ValueError(
            f"interleaving {pairs} pairs gives the axes {got} pairs, not the sections {counts}"
        )
    return axes


def multimodal_frequencies(
    theta: torch.Tensor, sections: Sequence[int], assignment: Assignment
) -> torch.Tensor:
    r"""Per-axis frequencies ``(A, d/2)``: :math:`f_{aj} = \theta_j` if pair ``j`` follows
    axis ``a`` (:func:`pair_axes`), else 0.

    Args:
        theta: the 1D ladder ``(d/2,)``, pair 0 first (e.g. ``Rope.theta``).
        sections, assignment: as in :func:`pair_axes`; ``sum(sections) = d/2``.
    """
    axes = pair_axes(sections, assignment)
    if theta.ndim != 1 or theta.shape[0] != axes.shape[0]:
        raise ValueError(
            f"theta must have shape (d/2,) = ({axes.shape[0]},) for sections "
            f"{list(sections)}, got {tuple(theta.shape)}"
        )
    one_hot = torch.nn.functional.one_hot(axes, len(sections)).T.to(theta.dtype)  # (A, d/2)
    return one_hot * theta


def apply_rope_nd(
    x: torch.Tensor,
    positions: Sequence[torch.Tensor],
    freqs: torch.Tensor,
    *,
    layout: Layout = "interleaved",
) -> torch.Tensor:
    r"""Turn pair ``j`` of a token at positions :math:`(p_1, \dots, p_A)` by
    :math:`\sum_a p_a f_{aj}`.

    Angles are formed in float64 (float32 on Apple's MPS) and the rotation
    runs in float32 (float64 for float64 input), as in
    :func:`rope_lessons.rope.kernels.apply_rope`, with its helpers.

    Args:
        x: features ``(..., T, d)``, ``d`` even.
        positions: one integer tensor per axis, each broadcastable to ``(..., T)``.
        freqs: floating ``(A, d/2)``, row ``a`` the frequencies of axis ``a``.
        layout: which coordinates form pair ``j`` (as in ``apply_rope``).

    Returns:
        Tensor of the shape and dtype of ``x``.
    """
    x = check_features(x)
    check_layout(layout)
    pairs = x.shape[-1] // 2
    if not isinstance(freqs, torch.Tensor) or not freqs.is_floating_point():
        raise TypeError("freqs must be a floating torch.Tensor of shape (A, d/2)")
    if freqs.ndim != 2 or freqs.shape != (len(positions), pairs):
        raise ValueError(
            f"freqs must have shape (A, d/2) = ({len(positions)}, {pairs}), "
            f"got {tuple(freqs.shape)}"
        )
    if not bool(freqs.isfinite().all()):
        raise ValueError("freqs must be finite")
    angle_dtype = _angle_dtype(x.device)
    rows = freqs.to(x.device, angle_dtype)
    angles = torch.zeros((), dtype=angle_dtype, device=x.device)
    for axis, axis_positions in enumerate(positions):
        checked = check_positions(axis_positions, x.shape[:-1], name=f"positions[{axis}]")
        angles = angles + checked.to(x.device, angle_dtype)[..., None] * rows[axis]
    angles = angles.expand(*x.shape[:-1], pairs)  # (..., T, d/2)
    compute_dtype = _compute_dtype(x)
    cos, sin = _cos_sin_from_angles(angles, compute_dtype)
    return rotate(x.to(compute_dtype), cos, sin, layout).to(x.dtype)
