"""The RoPE kernel: pairs read and written in either layout, cached cos/sin
tables, :func:`apply_rope` and the score of two rotated vectors at a distance.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import torch

from rope_lessons._checks import (
    Layout,
    check_even_dim,
    check_features,
    check_layout,
    check_positions,
)
from rope_lessons.rope.ladder import _angle_dtype, _theta_key, rotation_angles


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


_PAIR_DTYPES = {torch.float32: torch.complex64, torch.float64: torch.complex128}
"""The complex dtype whose numbers are two of a real dtype's, side by side."""


def rotate_complex(x: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
    r"""Interleaved RoPE as one complex multiplication: :math:`z_k \mapsto z_k e^{i m\theta_k}`.

    Pair ``k`` of ``x`` is read in place as :math:`z_k = x_{2k} + i\,x_{2k+1}`.
    The same arithmetic as :func:`rotate` with ``layout="interleaved"``, done
    by one fused kernel instead of six, which is why :func:`apply_rope` uses it.

    Args:
        x: features ``(..., T, d)``, float32 or float64.
        phase: unit complex numbers :math:`e^{i m\theta_k}`, ``(..., T, d/2)``,
            complex64 for float32 ``x`` and complex128 for float64 (the fast
            path); another complex dtype promotes as PyTorch's products do.

    Returns:
        Tensor ``(..., T, d)``: in the dtype of ``x`` when ``phase`` is of its
        precision, else in the promoted real dtype.
    """
    gradient = torch.is_grad_enabled() and (x.requires_grad or phase.requires_grad)
    if gradient or phase.dtype != _PAIR_DTYPES.get(x.dtype):
        # a dtype view has no gradient (x.view(dtype) would cut the graph silently), and
        # it reads x only as pairs of its own precision; here the products promote
        return torch.view_as_real(torch.view_as_complex(_complex_pairs(x)) * phase).flatten(-2)
    try:
        pairs = x.view(phase.dtype)  # (..., T, d/2): one call, the cheapest way in
    except RuntimeError:  # odd strides or offset: reading pairs in place needs them even
        pairs = torch.view_as_complex(_complex_pairs(x))
    return (pairs * phase).view(x.dtype)


def _complex_pairs(x: torch.Tensor) -> torch.Tensor:
    """``x`` ``(..., d)`` as ``(..., d/2, 2)``, copied when ``torch.view_as_complex``
    could not read it in place (it needs even strides and offset)."""
    pairs = x.view(*x.shape[:-1], -1, 2) if x.is_contiguous() else x.unflatten(-1, (-1, 2))
    viewable = pairs.storage_offset() % 2 == 0 and (
        x.is_contiguous() or all(s % 2 == 0 for s in pairs.stride()[:-1])
    )  # (..., T, d/2, 2)
    return pairs if viewable else pairs.clone(memory_format=torch.contiguous_format)


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
            per-head positions are 3-D ``(1, H, T)``. See :mod:`rope_lessons.rope`'s
            "Positions and axes", which also says what ``(B, T, H, D)`` does.
        base: frequency base (10000 by default), > 1.
        layout: ``"interleaved"`` (pairs ``2k, 2k+1``) or ``"half"`` (pairs
            ``k, k + d/2``).
        p: fraction of the highest frequencies that rotate (p-RoPE); the other
            pairs pass through unchanged. ``p=1`` is plain RoPE.
        theta: custom per-pair frequencies ``(d/2,)`` (see :func:`~.resolve_theta`);
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
    if seq_dim == -2 and type(seq_dim) is int:  # the usual axis, without the checks below
        return rotate_seq_last(x)
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
