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
  Face ``rotate_half``). They differ by :func:`layout_permutation`;
* a frequency vector ``theta`` (shape ``(d/2,)``, pair 0 fastest) can replace
  ``base`` and ``p`` everywhere: p-RoPE, partial rotary, truncated or
  rescaled spectra are then one argument.

One formula, one kernel: every form reads its frequencies from
:func:`resolve_theta`, its angles from :func:`rotation_angles` (float64) and
turns pairs with :func:`turn`, except the complex form, whose kernel is the
complex product itself; so the forms cannot drift apart.

Shapes used in the docstrings:

* ``...``: any leading dimensions (batch, heads);
* ``T``: sequence length;
* ``d``: feature (head) dimension, even; ``d/2`` rotation pairs.

Positions and axes, the one place where they are settled:

* features are ``(..., T, d)``: the sequence is the second-to-last axis
  unless ``seq_dim=`` says otherwise. A tensor laid out ``(B, T, H, D)``
  (Hugging Face's layout before its ``transpose(1, 2)``) needs ``seq_dim=1``
  (:func:`apply_rope`, :meth:`Rope.apply`) or a transpose. Without either it
  would be read with the *heads* as the sequence (head ``h`` turned by
  position ``h``); that is refused where it can be seen, when 2-D positions
  ``(B, T)`` come with it, and cannot be seen otherwise, since every shape is
  a valid ``(..., T, d)``;
* positions broadcast to ``(..., T)`` by NumPy's rules, with one exception
  for attention-shaped features ``(B, H, T, d)``: a 2-D position tensor is
  read as ``(B, T)``, one row per batch element (Hugging Face's
  ``position_ids``), the same as ``positions[:, None, :]``. This holds even
  when ``B == H``; a first dimension that is neither ``B`` nor 1 is refused,
  ``H`` included. Per-head positions are passed 3-D, ``(1, H, T)`` or
  ``(B, H, T)``; ``(T,)`` is shared by every batch element and head.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Literal

import torch

from rope_lessons._checks import (
    LAYOUTS,
    Layout,
    check_base,
    check_even_dim,
    check_features,
    check_fraction,
    check_layout,
    check_not_overridden,
    check_positions,
    check_theta,
)

__all__ = [
    "LAYOUTS",
    "Layout",
    "Rope",
    "apply_rope",
    "apply_rope_complex",
    "apply_rope_loop",
    "block_rotation",
    "cos_sin",
    "frequencies",
    "layout_permutation",
    "read_pairs",
    "resolve_theta",
    "rotate",
    "rotate_complex",
    "rotating_pairs",
    "rotation_angles",
    "rotation_matrix",
    "score_at_distance",
    "split_pairs",
    "turn",
    "write_pairs",
]


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


def _theta_key(dim: int, base: float, p: float, theta: torch.Tensor | None) -> tuple[float, ...]:
    """A hashable copy of the frequency vector, the key of the table caches; ``base`` and
    ``p`` checked (and refused beside ``theta`` unless they keep their defaults)."""
    if theta is None:
        if all(type(value) in (int, float) for value in (dim, base, p)):
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


def _result_dtype(*tensors: torch.Tensor) -> torch.dtype:
    """The dtype PyTorch's arithmetic gives floating tensors: 0-d ones yield to the others."""
    dimensioned = [t.dtype for t in tensors if t.ndim > 0] or [t.dtype for t in tensors]
    return functools.reduce(torch.promote_types, dimensioned)


def _broadcast_shape(*shapes: torch.Size) -> tuple[int, ...]:
    """``torch.broadcast_shapes``, without its overhead (microseconds count on short inputs)."""
    result = [1] * max(len(shape) for shape in shapes)
    for shape in shapes:
        for i, size in enumerate(shape, len(result) - len(shape)):
            if size != 1:
                if result[i] not in (1, size):
                    torch.broadcast_shapes(*shapes)  # raises, naming the shapes
                result[i] = size
    return tuple(result)


def _turn_into(
    x1: torch.Tensor,
    x2: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    out1: torch.Tensor,
    out2: torch.Tensor,
) -> None:
    r"""The rotation formula, written once: :math:`(x_1\cos - x_2\sin,\; x_1\sin + x_2\cos)`.

    Writes into ``out1`` and ``out2`` (preallocated, not aliasing the inputs):
    a product with ``out=`` and an in-place ``addcmul_`` per output, so no
    temporary is made. Each product is rounded, then the sum, as in
    ``x1 * cos - x2 * sin``.
    """
    torch.mul(x1, cos, out=out1).addcmul_(x2, sin, value=-1)
    torch.mul(x1, sin, out=out2).addcmul_(x2, cos)


def _turned_pairs(
    x1: torch.Tensor, x2: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> torch.Tensor:
    """:func:`_turn_into` into a fresh buffer ``(..., 2, n)``: first members, then second ones.

    ``(..., n)`` is the broadcast shape of the four inputs (``(2,)`` for 0-d
    inputs). Flattening the last two dimensions gives the half layout.
    """
    shape = _broadcast_shape(x1.shape, x2.shape, cos.shape, sin.shape)
    pairs = torch.empty(
        (*shape[:-1], 2, *shape[-1:]), dtype=_result_dtype(x1, x2, cos, sin), device=x1.device
    )
    axis = max(len(shape) - 1, 0)
    _turn_into(x1, x2, cos, sin, pairs.select(axis, 0), pairs.select(axis, 1))
    return pairs


class _Turn(torch.autograd.Function):
    r""":func:`_turned_pairs` with a backward pass, itself made of turns.

    The forward writes into its own buffer with ``out=`` ops, which autograd
    cannot trace, so the gradients are given here: the rotation is linear in
    ``(x1, x2)`` with transpose :math:`R^\top`, a turn by ``(cos, -sin)``, and
    linear in ``(cos, sin)`` with gradients :math:`(g_1x_1 + g_2x_2,\;
    g_2x_1 - g_1x_2)`, a turn of ``(g1, g2)`` by ``(x1, -x2)``.
    """

    @staticmethod
    def forward(
        ctx: Any, x1: torch.Tensor, x2: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> torch.Tensor:
        angle_grad = ctx.needs_input_grad[2] or ctx.needs_input_grad[3]
        ctx.shapes = (x1.shape, x2.shape, cos.shape, sin.shape)
        ctx.dtypes = (x1.dtype, x2.dtype, cos.dtype, sin.dtype)
        ctx.save_for_backward(*((x1, x2) if angle_grad else (None, None)), cos, sin)
        return _turned_pairs(x1, x2, cos, sin)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x1, x2, cos, sin = ctx.saved_tensors
        g1, g2 = grad.unbind(max(grad.ndim - 2, 0))
        grads: list[torch.Tensor | None] = [None] * 4
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            grads[0], grads[1] = turn(g1, g2, cos, -sin)
        if ctx.needs_input_grad[2] or ctx.needs_input_grad[3]:
            grads[2], grads[3] = turn(g1, g2, x1, -x2)
        return tuple(
            None if g is None or not needed else g.sum_to_size(shape).to(dtype)
            for g, needed, shape, dtype in zip(
                grads, ctx.needs_input_grad, ctx.shapes, ctx.dtypes, strict=True
            )
        )


def _turn_stacked(
    x1: torch.Tensor, x2: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> torch.Tensor:
    """The fast core: :func:`_turned_pairs`, through :class:`_Turn` when a gradient is wanted."""
    if torch.is_grad_enabled() and any(t.requires_grad for t in (x1, x2, cos, sin)):
        result: torch.Tensor = _Turn.apply(x1, x2, cos, sin)  # type: ignore[no-untyped-call]
        return result
    return _turned_pairs(x1, x2, cos, sin)


def turn(
    x1: torch.Tensor, x2: torch.Tensor, cos: torch.Tensor | float, sin: torch.Tensor | float
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The rotation kernel: :math:`(x_1, x_2) \mapsto (x_1\cos - x_2\sin,\; x_1\sin + x_2\cos)`.

    Every real form of RoPE (elementwise, loop, matrix, and :func:`apply_rope`
    in the half layout) turns its pairs here. Works on tensors of any
    broadcastable shapes, with autograd; the angle may be a Python float. The
    two results are views of one buffer ``(..., 2, n)``, written without
    temporaries (see ``_turn_into``).
    """
    dtype = _result_dtype(x1, x2)
    cos_t = (
        cos if isinstance(cos, torch.Tensor) else torch.tensor(cos, dtype=dtype, device=x1.device)
    )
    sin_t = (
        sin if isinstance(sin, torch.Tensor) else torch.tensor(sin, dtype=dtype, device=x1.device)
    )
    pairs = _turn_stacked(x1, x2, cos_t, sin_t)
    first, second = pairs.unbind(max(pairs.ndim - 2, 0))
    return first, second


def split_pairs(x: torch.Tensor, layout: Layout) -> tuple[torch.Tensor, torch.Tensor]:
    """The two coordinates of every rotary pair of ``x``: the one place that knows the layouts.

    Pair ``k`` is coordinates ``(2k, 2k+1)`` in the interleaved layout and
    ``(k, k + d/2)`` in the half layout, so that it turns at :math:`\theta_k` in both.

    Args:
        x: ``(..., d)``, ``d`` even (not checked here: callers have checked it).
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        Two views ``(..., d/2)``: the first and the second coordinate of every pair.
    """
    if layout == "interleaved":
        return x[..., 0::2], x[..., 1::2]
    first, second = x.chunk(2, dim=-1)
    return first, second


def read_pairs(x: torch.Tensor, layout: Layout = "interleaved") -> torch.Tensor:
    r"""Pair ``k`` of ``x`` as the complex number :math:`z_k = x_a + i\,x_b`
    (:func:`split_pairs`); RoPE multiplies it by :math:`e^{i m\theta_k}`.

    Args:
        x: real features ``(..., d)``, float32 or float64, ``d`` even.
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        Complex tensor ``(..., d/2)``.
    """
    if not isinstance(x, torch.Tensor) or x.dtype not in (torch.float32, torch.float64):
        found = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"x must be a float32 or float64 tensor to read as complex, got {found}")
    check_even_dim(x.shape[-1] if x.ndim else 0, "the last dimension of x")
    return torch.complex(*split_pairs(x, check_layout(layout)))


def write_pairs(z: torch.Tensor, layout: Layout = "interleaved") -> torch.Tensor:
    """The inverse of :func:`read_pairs`: ``(..., d/2)`` complex -> ``(..., d)`` real."""
    if not isinstance(z, torch.Tensor) or not z.is_complex():
        raise TypeError(f"z must be a complex torch.Tensor, got {type(z).__name__}")
    layout = check_layout(layout)
    parts = torch.view_as_real(z)  # (..., d/2, 2)
    if layout == "interleaved":
        return parts.flatten(-2)
    return parts.transpose(-1, -2).flatten(-2)


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
    x = check_features(x)
    layout = check_layout(layout)
    half = x.shape[-1] // 2
    if cos.shape[-1] != half or sin.shape[-1] != half:
        raise ValueError(
            f"cos and sin must have d/2 = {half} entries in their last dimension, "
            f"got cos {tuple(cos.shape)} and sin {tuple(sin.shape)}"
        )
    pairs = _turn_stacked(*split_pairs(x, layout), cos, sin)  # (..., T, 2, d/2)
    if layout == "interleaved":
        return pairs.transpose(-1, -2).flatten(-2)  # (..., T, d): x1', x2', x1', ...
    return pairs.flatten(-2)  # (..., T, d)


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
    pairs = x.view(*x.shape[:-1], -1, 2) if x.is_contiguous() else x.unflatten(-1, (-1, 2))
    viewable = pairs.storage_offset() % 2 == 0 and (
        x.is_contiguous() or all(s % 2 == 0 for s in pairs.stride()[:-1])
    )  # (..., T, d/2, 2)
    if not viewable:  # view_as_complex needs even strides and offset
        pairs = pairs.clone(memory_format=torch.contiguous_format)
    return torch.view_as_real(torch.view_as_complex(pairs) * phase).flatten(-2)


def _cos_sin_from_angles(
    angles: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of float64 (or float32 on MPS) angles, rounded only at the end."""
    return angles.cos().to(dtype), angles.sin().to(dtype)


@lru_cache(maxsize=64)
def _cached_cos_sin(
    seq_len: int, theta_key: tuple[float, ...], device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables ``(T, d/2)`` for positions ``0 .. T-1``, built once.

    Never handed to callers: :func:`cos_sin` returns copies, so no caller can
    write into the cache. The tables are built outside inference mode and
    without autograd, whatever mode the first caller is in: a table made under
    ``torch.inference_mode()`` would be an inference tensor, and a later call
    with gradients could not save it for backward.
    """
    with torch.inference_mode(False), torch.no_grad():
        theta = torch.tensor(theta_key, dtype=_angle_dtype(device), device=device)
        positions = torch.arange(seq_len, device=device, dtype=theta.dtype)
        return _cos_sin_from_angles(positions.unsqueeze(-1) * theta, dtype)


@lru_cache(maxsize=64)
def _cached_phase(
    seq_len: int, theta_key: tuple[float, ...], device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    r"""The complex table :math:`e^{i m\theta_k}`, ``(T, d/2)``, built once, as above."""
    with torch.inference_mode(False), torch.no_grad():
        return torch.complex(*_cached_cos_sin(seq_len, theta_key, device, dtype))


def cos_sin(
    leading_shape: torch.Size | tuple[int, ...],
    dim: int,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    p: float = 1.0,
    theta: torch.Tensor | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosine and sine tables for features whose shape is ``leading_shape + (d,)``.

    With ``positions=None`` the positions are ``0 .. T-1`` and the tables come
    from a cache (this function returns copies of them). Explicit positions
    are computed afresh. Angles are formed in float64 (float32 on MPS) and only
    then rounded to ``dtype``.

    Explicit positions follow :func:`apply_rope`'s rule: a 2-D tensor for a
    3-D ``leading_shape`` ``(B, H, T)`` is read as ``(B, T)``.

    Returns:
        ``(cos, sin)``, each of shape ``(T, d/2)`` or ``(..., T, d/2)``.
    """
    dim = check_even_dim(dim)
    device = torch.device(device)
    if positions is None:
        key = _theta_key(dim, base, p, theta)
        cos, sin = _cached_cos_sin(int(leading_shape[-1]), key, device, dtype)
        return cos.clone(), sin.clone()
    positions = check_positions(positions, torch.Size(leading_shape)).to(device)
    angles = rotation_angles(positions, dim, base, p=p, theta=theta, dtype=_angle_dtype(device))
    return _cos_sin_from_angles(angles, dtype)


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    """float64 for float64 input, float32 for every narrower float."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    p: float = 1.0,
    theta: torch.Tensor | None = None,
    seq_dim: int = -2,
) -> torch.Tensor:
    r"""Rotate the last dimension of ``x`` by :math:`R_m` at each position ``m``.

    Args:
        x: features of shape ``(..., T, d)``, ``d`` even, any floating dtype.
        positions: integer tensor broadcastable to ``(..., T)``; defaults to
            ``arange(T)``. Negative positions are allowed: ``R_{-m} = R_m^T``.
            For ``(B, H, T, d)`` input a 2-D tensor is read as ``(B, T)``
            (per batch element, shared by the heads), even when ``B == H``;
            per-head positions are 3-D ``(1, H, T)``. See the module's
            "Positions and axes", which also says what ``(B, T, H, D)`` does.
        base: frequency base (10000 by default), > 1.
        layout: ``"interleaved"`` (pairs ``2k, 2k+1``) or ``"half"`` (pairs
            ``k, k + d/2``).
        p: fraction of the highest frequencies that rotate (p-RoPE); the other
            pairs pass through unchanged. ``p=1`` is plain RoPE.
        theta: custom per-pair frequencies ``(d/2,)`` (see :func:`resolve_theta`);
            overrides ``base`` and ``p``, which must then keep their defaults
            (another value is refused, not ignored).
        seq_dim: the axis of the positions, ``-2`` by default; ``1`` for
            ``(B, T, H, d)`` features (Hugging Face's projections before their
            transpose, xformers' BMHK), which are then rotated in place of
            transposing them; ``positions`` are as for ``(B, H, T, d)``.

    Returns:
        Tensor of the shape and dtype of ``x``. The angles are formed in
        float64, the rotation runs in float32 (float64 when ``x`` is float64)
        whatever the dtype of ``x``, and only the result is rounded to it.
    """
    x = check_features(x)
    layout = check_layout(layout)
    key = _theta_key(x.shape[-1], base, p, theta)
    return _along(x, seq_dim, lambda seq_last: _checked_kernel(seq_last, positions, key, layout))


def _checked_kernel(
    x: torch.Tensor, positions: torch.Tensor | None, theta_key: tuple[float, ...], layout: Layout
) -> torch.Tensor:
    """:func:`_rope_kernel` after checking ``positions`` against ``x`` ``(..., T, d)``."""
    if positions is not None:
        positions = check_positions(positions, x.shape[:-1])
    return _rope_kernel(x, positions, theta_key, layout)


def _along(
    x: torch.Tensor, seq_dim: int, rotate_seq_last: Callable[[torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    """``rotate_seq_last`` applied with the sequence on axis ``seq_dim`` of ``x`` moved
    next to the features, and moved back."""
    if isinstance(seq_dim, bool) or not isinstance(seq_dim, int):
        raise TypeError(f"seq_dim must be an int, got {seq_dim!r}")
    if not -x.ndim <= seq_dim < x.ndim:
        raise ValueError(f"seq_dim = {seq_dim} is not an axis of x {tuple(x.shape)}")
    axis = seq_dim % x.ndim
    if axis == x.ndim - 1:
        raise ValueError("seq_dim cannot be the last axis: it holds the features")
    if axis == x.ndim - 2:
        return rotate_seq_last(x)
    return rotate_seq_last(x.movedim(axis, -2)).movedim(-2, axis)


def _rope_kernel(
    x: torch.Tensor, positions: torch.Tensor | None, theta_key: tuple[float, ...], layout: Layout
) -> torch.Tensor:
    """:func:`apply_rope` without its checks, for callers that have made them once.

    Args:
        x: floating features ``(..., T, d)``, ``d`` even.
        positions: None for ``arange(T)`` (cached tables), or int64 positions
            as :func:`~rope_lessons._checks.check_positions` returns them for
            ``x.shape[:-1]``.
        theta_key: the ``d/2`` frequencies as a tuple (the key of the caches).
        layout: a checked layout.

    Returns:
        Tensor of the shape and dtype of ``x``.
    """
    compute_dtype = _compute_dtype(x)
    x_compute = x if x.dtype == compute_dtype else x.to(compute_dtype)
    if positions is None:
        if layout == "interleaved":
            phase = _cached_phase(x.shape[-2], theta_key, x.device, compute_dtype)
            return _as_dtype(rotate_complex(x_compute, phase), x.dtype)
        cos, sin = _cached_cos_sin(x.shape[-2], theta_key, x.device, compute_dtype)
    else:
        angle_dtype = _angle_dtype(x.device)
        theta = torch.tensor(theta_key, dtype=angle_dtype, device=x.device)  # (d/2,)
        angles = positions.to(x.device, angle_dtype).unsqueeze(-1) * theta  # (..., T, d/2)
        cos, sin = _cos_sin_from_angles(angles, compute_dtype)
    if layout == "interleaved":
        return _as_dtype(rotate_complex(x_compute, torch.complex(cos, sin)), x.dtype)
    x1, x2 = split_pairs(x_compute, layout)  # (..., T, d/2) each
    if torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad):
        pairs = _turn_stacked(x1, x2, cos, sin)  # (..., T, 2, d/2), with a backward
        return _as_dtype(pairs.flatten(-2), x.dtype)
    # the positions broadcast to x's (checked): one buffer of x's shape, written in place
    # by the kernel, its halves the two members of every pair; no cat, no temporaries
    turned = torch.empty(x_compute.shape, dtype=compute_dtype, device=x.device)
    first, second = turned.chunk(2, dim=-1)
    _turn_into(x1, x2, cos, sin, first, second)
    return _as_dtype(turned, x.dtype)


def _as_dtype(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` in ``dtype``, without a call when it is in it already (microseconds count)."""
    return x if x.dtype == dtype else x.to(dtype)


def score_at_distance(
    q: torch.Tensor,
    k: torch.Tensor,
    distances: torch.Tensor,
    *,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    p: float = 1.0,
    theta: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""The rotary score of a query and a key ``r`` positions before it, for every ``r``.

    :math:`\langle R_m q, R_{m-r} k\rangle = q^\top R_{-r} k` does not depend
    on ``m``. Reading pair ``j`` as complex numbers :math:`z^q_j, z^k_j`, it is
    :math:`\sum_j \operatorname{Re}\big(z^q_j \overline{z^k_j} e^{i r\theta_j}\big)
    = \sum_j A_j \cos r\theta_j - B_j \sin r\theta_j`, with
    :math:`A_j = q_1k_1 + q_2k_2` and :math:`B_j = q_2k_1 - q_1k_2`. It is
    computed in float64 (exact for ``r`` up to 1e6 and beyond); there is no
    :math:`1/\sqrt d` scale.

    Args:
        q, k: queries and keys ``(..., d)``, broadcastable against each other.
        distances: integer tensor ``(R,)`` of distances ``r >= 0``.
        base, layout, p, theta: as in :func:`apply_rope`.

    Returns:
        float64 tensor ``(..., R)``.
    """
    q = check_features(q.unsqueeze(-2) if isinstance(q, torch.Tensor) else q, "q")
    k = check_features(k.unsqueeze(-2) if isinstance(k, torch.Tensor) else k, "k")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dimension, got {q.shape[-1]} and {k.shape[-1]}"
        )
    layout = check_layout(layout)
    distances = check_positions(distances, name="distances")
    if distances.ndim != 1:
        raise ValueError(f"distances must be 1-D (R,), got shape {tuple(distances.shape)}")
    if bool((distances < 0).any()):
        raise ValueError("distances must be >= 0 (the key r positions before the query)")
    dim = q.shape[-1]
    q, k = q[..., 0, :].double(), k[..., 0, :].double()  # (..., d)
    (q1, q2), (k1, k2) = split_pairs(q, layout), split_pairs(k, layout)  # (..., d/2) each
    real = q1 * k1 + q2 * k2  # (..., d/2)
    imag = q2 * k1 - q1 * k2  # (..., d/2)
    angles = rotation_angles(distances.to(q.device), dim, base, p=p, theta=theta)  # (R, d/2)
    return real @ angles.cos().T - imag @ angles.sin().T  # (..., R)


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
    :func:`turn` applied to the unit vectors. Meant for teaching and testing:
    applying it costs ``O(d^2)`` against ``O(d)`` for :func:`apply_rope`.

    Returns:
        Tensor of shape ``(d, d)``.
    """
    if isinstance(position, bool) or not isinstance(position, int):
        raise TypeError(f"position must be an int, got {type(position).__name__}")
    angles = rotation_angles(torch.tensor(position), dim, base, p=p, theta=theta)  # (d/2,)
    return block_rotation(angles).to(dtype)


def block_rotation(angles: torch.Tensor) -> torch.Tensor:
    r"""Block-diagonal matrix turning pair ``j`` (coordinates ``2j, 2j+1``) by ``angles[j]``.

    The columns of each block are :func:`turn` applied to the unit vectors.
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
    :func:`apply_rope` for the cached path).

    Args, Returns: as :func:`apply_rope` with ``layout="interleaved"``.
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
    turned by the same :func:`turn`, in Python floats (float64). It exists to be
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


class Rope:
    r"""One RoPE setting, validated once: the per-pair frequencies :math:`\theta`, the
    layout and the attention factor.

    ``Rope(dim, base=10000.0, layout="interleaved", p=1.0)`` builds RoFormer's
    ladder :math:`\theta_k = b^{-2k/d}` (p-RoPE keeps the fastest fraction ``p``
    of the pairs); :meth:`from_theta` takes any frequency vector, e.g. a
    context-extension table. The object is immutable and hashable; two specs
    are equal when their frequencies, layout, attention factor and (for partial
    rotary) rotated slice are.

    **Partial rotary is not p-RoPE.** With ``rotary_dim=r < dim`` only ``r`` of
    the head's ``d`` features rotate (Hugging Face's ``partial_rotary_factor``:
    GPT-NeoX, Phi, Qwen3-Next; DeepSeek's ``[nope | rope]`` heads), on a ladder
    recomputed for ``r``, :math:`b^{-2k/r}`, and the other ``d - r`` pass
    through; ``rotary_slice`` says where the rotating features sit,
    ``"leading"`` (``x[..., :r]``, Hugging Face) or ``"trailing"``
    (``x[..., d-r:]``, DeepSeek). p-RoPE (``p < 1``) keeps the full-head
    ladder :math:`b^{-2k/d}` and sets its slowest pairs to frequency 0.

    Attributes:
        dim: the head dimension ``d`` the spec applies to.
        rotary_dim: how many of its features rotate, ``2 * len(theta)``; ``dim``
            unless partial.
        rotary_slice: ``"leading"`` or ``"trailing"``: where those features sit
            (``"leading"`` when every feature rotates).
        layout: ``"interleaved"`` or ``"half"`` (see :func:`split_pairs`), within
            the rotating features.
        attention_factor: the factor by which queries and keys are scaled
            (YaRN's and LongRoPE's temperature); 1 for plain RoPE. :meth:`apply`
            and :meth:`cos_sin` multiply it in, as transformers' tables do
            (``apply(x, scale=False)`` is the rotation alone); with partial
            rotary, into the rotating features only, as transformers applies it.
        base, p: the ladder it was built from, or None for :meth:`from_theta`.
    """

    __slots__ = (
        "_theta",
        "_values",
        "attention_factor",
        "base",
        "dim",
        "layout",
        "p",
        "rotary_dim",
        "rotary_slice",
    )

    _theta: torch.Tensor
    _values: tuple[float, ...]
    attention_factor: float
    base: float | None
    dim: int
    layout: Layout
    p: float | None
    rotary_dim: int
    rotary_slice: RotarySlice

    def __init__(
        self,
        dim: int,
        base: float = 10000.0,
        layout: Layout = "interleaved",
        p: float = 1.0,
        *,
        attention_factor: float = 1.0,
        rotary_dim: int | None = None,
        rotary_slice: RotarySlice = "leading",
    ) -> None:
        head_dim = check_even_dim(dim)
        rotating = head_dim if rotary_dim is None else _rotary_dim(rotary_dim, head_dim)
        theta = frequencies(rotating, base, p=p)
        self._settle(theta, layout, attention_factor, float(base), float(p), head_dim, rotary_slice)

    @classmethod
    def from_theta(
        cls,
        theta: torch.Tensor | Sequence[float],
        layout: Layout = "interleaved",
        *,
        attention_factor: float = 1.0,
        head_dim: int | None = None,
        rotary_slice: RotarySlice = "leading",
    ) -> Rope:
        """A spec for any per-pair frequency vector ``(r/2,)`` (a tensor, list or tuple):
        finite, >= 0, in the order of :func:`frequencies` (pair 0 first). ``head_dim``
        (default ``r``) larger than ``r`` makes it partial rotary (see the class)."""
        if not isinstance(theta, torch.Tensor):
            if not isinstance(theta, (list, tuple)) or not theta:
                raise TypeError(
                    f"theta must be a tensor, list or tuple of frequencies, got {theta!r}"
                )
            theta = torch.tensor([float(value) for value in theta], dtype=torch.float64)
        if theta.ndim != 1 or theta.numel() == 0:
            raise ValueError(f"theta must have shape (d/2,), got {tuple(theta.shape)}")
        spec = cls.__new__(cls)
        checked = check_theta(theta, 2 * theta.numel()).detach().to("cpu", torch.float64)
        rotating = 2 * theta.numel()
        dim = rotating if head_dim is None else check_even_dim(head_dim)
        _rotary_dim(rotating, dim)
        spec._settle(checked, layout, attention_factor, None, None, dim, rotary_slice)
        return spec

    @classmethod
    def from_hf(
        cls,
        config: Any,
        layer_type: str | None = None,
        *,
        seq_len: int | None = None,
        layout: Layout = "half",
        rotary_slice: RotarySlice = "leading",
    ) -> Rope:
        """The spec of a Hugging Face configuration (object or dict): transformers'
        frequencies and attention factor for its ``rope_type``, in the half layout
        by default, partial rotary where the configuration says so. See
        :func:`rope_lessons.hf.rope_from_hf`."""
        from rope_lessons.hf import rope_from_hf  # imported here: hf builds on this module

        return rope_from_hf(
            config, layer_type, seq_len=seq_len, layout=layout, rotary_slice=rotary_slice
        )

    def to_hf(self) -> dict[str, Any]:
        """``rope_parameters`` for this spec where the map is one-to-one (RoPE's ladder:
        ``"default"``, or ``"proportional"`` for p-RoPE); see
        :func:`rope_lessons.hf.rope_to_hf`."""
        from rope_lessons.hf import rope_to_hf  # imported here: hf builds on this module

        return rope_to_hf(self)

    def _settle(
        self,
        theta: torch.Tensor,
        layout: Layout,
        attention_factor: float,
        base: float | None,
        p: float | None,
        dim: int | None = None,
        rotary_slice: RotarySlice = "leading",
    ) -> None:
        if rotary_slice not in ROTARY_SLICES:
            raise ValueError(f"rotary_slice must be one of {ROTARY_SLICES}, got {rotary_slice!r}")
        if (
            isinstance(attention_factor, bool)
            or not isinstance(attention_factor, (int, float))
            or not math.isfinite(attention_factor)
            or attention_factor <= 0
        ):
            raise ValueError(
                f"attention_factor must be a finite number > 0, got {attention_factor!r}"
            )
        values = tuple(theta.tolist())
        rotating = 2 * len(values)
        head_dim = rotating if dim is None else dim
        for name, value in (
            ("_theta", torch.tensor(values, dtype=torch.float64)),
            ("_values", values),
            ("attention_factor", float(attention_factor)),
            ("base", base),
            ("dim", head_dim),
            ("layout", check_layout(layout)),
            ("p", p),
            ("rotary_dim", rotating),
            ("rotary_slice", rotary_slice if rotating < head_dim else "leading"),
        ):
            object.__setattr__(self, name, value)

    @property
    def partial(self) -> bool:
        """Whether only some of the head's features rotate (:attr:`rotary_dim` < :attr:`dim`)."""
        return self.rotary_dim < self.dim

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Rope is immutable: build a new one instead of setting {name!r}")

    def __copy__(self) -> Rope:
        return self  # immutable: a copy would be indistinguishable

    def __deepcopy__(self, memo: dict[int, object]) -> Rope:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by value (the frozen attributes cannot be set one by one)."""
        return (_rebuilt_rope, self._state(self.layout))

    def _state(self, layout: Layout) -> tuple[Any, ...]:
        """The arguments of ``_rebuilt_rope`` for this spec in ``layout``."""
        return (
            self._values,
            layout,
            self.attention_factor,
            self.base,
            self.p,
            self.dim,
            self.rotary_slice,
        )

    @property
    def theta(self) -> torch.Tensor:
        """The frequencies, float64 ``(r/2,)`` for the :attr:`rotary_dim` ``r`` rotating
        features (a copy: the spec cannot be changed)."""
        return self._theta.clone()

    def apply(
        self,
        x: torch.Tensor,
        positions: torch.Tensor | None = None,
        *,
        seq_dim: int = -2,
        scale: bool = True,
    ) -> torch.Tensor:
        """:math:`a R_m x` at every position: what transformers' ``apply_rotary_pos_emb``
        gives for the same configuration (:meth:`from_hf`), the attention factor ``a``
        included.

        Args:
            x: ``(..., T, d)`` with ``d`` equal to :attr:`dim`.
            positions: integer positions broadcastable to ``(..., T)``; default ``arange(T)``.
            seq_dim: the axis of the positions; ``1`` for ``(B, T, H, d)`` features
                (see :func:`apply_rope`).
            scale: multiply the rotated features by :attr:`attention_factor` (YaRN's
                and LongRoPE's; 1 for RoPE's ladder, where the flag changes nothing).
                ``False`` gives the rotation :math:`R_m x` alone, which is
                :func:`apply_rope` with this spec.
        """
        x = check_features(x)
        self.check_dim(x.shape[-1], "the last dimension of x", partial_ok=True)
        if not isinstance(scale, bool):
            raise TypeError(f"scale must be True or False, got {scale!r}")

        def rotate_seq_last(seq_last: torch.Tensor) -> torch.Tensor:
            if positions is None:
                return self._rotate(seq_last, None, scale=scale)
            checked = check_positions(positions, seq_last.shape[:-1])
            return self._rotate(seq_last, checked, scale=scale)

        return _along(x, seq_dim, rotate_seq_last)

    def check_dim(self, dim: int, what: str, *, partial_ok: bool = False) -> None:
        """Refuse vectors whose dimension ``dim`` (named ``what``) is not :attr:`dim`, and,
        unless ``partial_ok``, a partial-rotary spec: the functions that read every pair of
        a head (scores by distance, norms by pair, bounds) need a head that rotates whole."""
        if dim != self.dim:
            raise ValueError(
                f"this spec rotates d = {self.dim} dimensions ({self.dim // 2} pairs), "
                f"but {what} is {dim}: build Rope({dim}, ...) for them"
            )
        if self.partial and not partial_ok:
            raise ValueError(
                f"this spec rotates only {self.rotary_dim} of its {self.dim} features "
                "(partial rotary), and this function reads every pair of a fully rotating "
                f"head: pass it the {self.rotary_slice} {self.rotary_dim} features with "
                "the spec of those alone, Rope.from_theta(spec.theta, spec.layout)"
            )

    def _rotate(
        self, x: torch.Tensor, positions: torch.Tensor | None, *, scale: bool = False
    ) -> torch.Tensor:
        """:meth:`apply` without its checks: ``x`` ``(..., T, d)`` with ``d`` = :attr:`dim`,
        ``positions`` None or as :func:`~rope_lessons._checks.check_positions` returns them.
        With ``scale`` the rotated features are also multiplied by the attention factor
        (all of them; with partial rotary, the rotating ones only)."""
        factor = self.attention_factor if scale else 1.0
        if not self.partial:
            turned = _rope_kernel(x, positions, self._values, self.layout)
            return turned if factor == 1.0 else turned * factor
        r = self.rotary_dim
        if self.rotary_slice == "leading":
            rotating, passing = x[..., :r], x[..., r:]
        else:
            passing, rotating = x[..., : self.dim - r], x[..., self.dim - r :]
        turned = _rope_kernel(rotating, positions, self._values, self.layout)
        if factor != 1.0:
            turned = turned * factor
        parts = (turned, passing) if self.rotary_slice == "leading" else (passing, turned)
        return torch.cat(parts, -1)

    def cos_sin(
        self,
        positions: torch.Tensor,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Hugging Face-shaped tables: ``cos`` and ``sin`` of shape ``(..., r)``.

        What a transformers rotary embedding returns for ``position_ids`` of the
        same shape (``(B, T)`` there), so that the spec can stand in for one: each
        pair's angle :math:`m\theta_k` written to both of its features (the half
        layout concatenates the ``r/2`` angles twice, the interleaved layout
        repeats each one), and the attention factor multiplied in, as transformers
        multiplies it in (so that ``q * cos + rotate_half(q) * sin`` scales the
        queries by it, as :meth:`apply` does).

        The angles are formed in float64 and rounded once, to ``dtype``.
        transformers forms them in float32 (``inv_freq`` and ``inv_freq @
        position_ids``), so its tables differ from these by a few float32
        spacings of the angle, which grow with the position: measured against a
        Llama rotary embedding (bases 1e4 to 1e6, ``d = 128``), about 4e-4 for
        positions below 5000 and 6e-3 below 80,000 (kernels differ in the last
        bits). A port test at ``atol=1e-5`` sees that difference; these tables
        are the accurate ones.

        Args:
            positions: integer tensor of any shape, e.g. ``(T,)`` or ``(B, T)``.
            dtype: the tables' dtype.
            device: default that of ``positions``.

        Returns:
            ``(cos, sin)``, each ``positions.shape + (r,)`` for the :attr:`rotary_dim`
            ``r`` (the head dimension unless partial rotary, where transformers'
            tables also cover the rotating features only).
        """
        if not isinstance(positions, torch.Tensor) or positions.is_floating_point():
            raise TypeError("positions must be an integer tensor")
        device = positions.device if device is None else torch.device(device)
        angles = self.angles(positions.to(device))  # (..., r/2)
        if self.layout == "half":
            angles = torch.cat((angles, angles), -1)
        else:
            angles = angles.repeat_interleave(2, -1)
        factor = self.attention_factor
        return (angles.cos() * factor).to(dtype), (angles.sin() * factor).to(dtype)

    def angles(self, positions: torch.Tensor) -> torch.Tensor:
        r"""The angles :math:`m\theta_k`, float64 ``(..., r/2)``, for integer positions."""
        return rotation_angles(positions, self.rotary_dim, theta=self._theta)

    def pairs(self, x: torch.Tensor) -> torch.Tensor:
        """Pair ``k`` of ``x`` as a complex number, in this spec's layout (:func:`read_pairs`);
        a fully rotating spec only (see :meth:`check_dim`)."""
        self.check_dim(x.shape[-1], "the last dimension of x")
        return read_pairs(x, self.layout)

    def score_at_distance(
        self, q: torch.Tensor, k: torch.Tensor, distances: torch.Tensor
    ) -> torch.Tensor:
        """:func:`score_at_distance` with this spec: float64 ``(..., R)``; a fully rotating
        spec only (see :meth:`check_dim`)."""
        self.check_dim(q.shape[-1], "the last dimension of q")
        return score_at_distance(q, k, distances, layout=self.layout, theta=self._theta)

    def describe(self) -> str:
        """One line for a reader: dimension, where the frequencies come from, layout, factor."""
        rotating = sum(value > 0 for value in self._values)
        origin = (
            f"base {self.base:g}, p = {self.p:g}"
            if self.base is not None
            else f"custom frequencies {self._values[0]:.3g} to {self._values[-1]:.3g}"
        )
        partial = (
            f", partial rotary: the {self.rotary_slice} {self.rotary_dim} features"
            if self.partial
            else ""
        )
        return (
            f"RoPE, d = {self.dim}{partial}, {origin} ({rotating} of {self.dim // 2} pairs "
            f"rotate), {self.layout} layout, attention factor {self.attention_factor:g}"
        )

    def with_layout(self, layout: Layout) -> Rope:
        """The same frequencies and attention factor in ``layout``."""
        return _rebuilt_rope(*self._state(layout))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values: the frequencies, layout and attention factor that define
        the spec, and the ladder it was built from (``base``, ``p``; None for
        :meth:`from_theta`; with partial rotary, ``rotary_dim`` and
        ``rotary_slice`` too). Stored sweeps describe their models with it."""
        values: dict[str, Any] = {
            "dim": self.dim,
            "base": self.base,
            "p": self.p,
            "theta": list(self._values),
            "layout": self.layout,
            "attention_factor": self.attention_factor,
        }
        if self.partial:
            values |= {"rotary_dim": self.rotary_dim, "rotary_slice": self.rotary_slice}
        return values

    def _identity(self) -> tuple[tuple[float, ...], str, float, int, str]:
        return self._values, self.layout, self.attention_factor, self.dim, self.rotary_slice

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rope) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        partial = (
            f", rotary_dim={self.rotary_dim}, rotary_slice={self.rotary_slice!r}"
            if self.partial
            else ""
        )
        if self.base is not None:
            return (
                f"Rope({self.dim}, base={self.base:g}, layout={self.layout!r}, p={self.p:g}, "
                f"attention_factor={self.attention_factor:g}{partial})"
            )
        head = f", head_dim={self.dim}, rotary_slice={self.rotary_slice!r}" if self.partial else ""
        return (
            f"Rope.from_theta({list(self._values)!r}, layout={self.layout!r}, "
            f"attention_factor={self.attention_factor:g}{head})"
        )


def _rebuilt_rope(
    values: tuple[float, ...],
    layout: Layout,
    attention_factor: float,
    base: float | None,
    p: float | None,
    dim: int | None = None,
    rotary_slice: RotarySlice = "leading",
) -> Rope:
    """A :class:`Rope` from its pickled state (see ``Rope.__reduce__``)."""
    spec = Rope.__new__(Rope)
    theta = torch.tensor(values, dtype=torch.float64)
    spec._settle(theta, layout, attention_factor, base, p, dim, rotary_slice)
    return spec


RotarySlice = Literal["leading", "trailing"]
ROTARY_SLICES: tuple[RotarySlice, ...] = ("leading", "trailing")


def _rotary_dim(rotary_dim: object, head_dim: int) -> int:
    """``rotary_dim`` if it is an even int in ``2 .. head_dim``."""
    if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int):
        raise TypeError(f"rotary_dim must be an int, got {rotary_dim!r}")
    if rotary_dim % 2 or not 2 <= rotary_dim <= head_dim:
        raise ValueError(
            f"rotary_dim must be even and in 2 .. {head_dim} (the head dimension), got {rotary_dim}"
        )
    return rotary_dim
