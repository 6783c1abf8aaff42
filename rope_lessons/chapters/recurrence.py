r"""Linear recurrences with real and complex decay, and the road to them from VO-RoPE.

The recurrence :math:`s_t = \lambda\, s_{t-1} + x_t` with :math:`s_{-1} = 0` has
the closed form :math:`s_t = \sum_{u \le t} \lambda^{t-u} x_u`: a causal
"attention" whose weights depend on the distance ``t - u`` alone. Chapter 7
computes it both ways (:func:`linear_recurrence` step by step in ``O(T)``,
:func:`linear_recurrence_parallel` as one ``T x T`` weighted sum in
``O(T^2)``; :mod:`rope_lessons.chapters.scan` adds the associative scan and the FFT
convolution that models train with, and times all four), shows that VO-RoPE
with the causal weights :math:`a_{mn} = \gamma^{m-n}` is this recurrence with
the complex decay :math:`\gamma e^{-i\theta_k}` on pair ``k`` read as a
complex number (J. Su, kexue.fm/archives/10862, 2025), and that with content weights
:math:`(q_m \cdot k_n)\gamma^{m-n}` it is a recurrence with a matrix state
whose complex decay sits on the value index (:func:`vo_rope_linear_attention`).
Retention's fixed decays read the same way (:func:`retnet_effective_decays`),
and :func:`delay_readout` asks how well a set of decays can hold a delay line.
The small sequence models that the chapter trains on these recurrences are in
:mod:`rope_lessons.chapters.recurrent_models`.

Shapes: ``...`` any leading dimensions, ``T`` sequence length, ``n`` channels
of the recurrence, ``d`` an even feature dimension (``d/2`` pairs), ``B``
batch, ``H`` heads, ``D`` head dimension.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rope_lessons._checks import (
    check_base,
    check_positive_int,
    check_positive_number,
)
from rope_lessons.rope.kernels import read_pairs, write_pairs
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import rotate_inputs, rotate_output

# --- the two forms of the recurrence -------------------------------------------------


def _check_recurrence_args(x: object, decay: object) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` as a tensor ``(..., T, n)`` and ``decay`` as a 0-d or ``(n,)`` tensor on its device."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not (x.is_floating_point() or x.is_complex()):
        raise TypeError(f"x must have a floating or complex dtype, got {x.dtype}")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., seq, channels), got {tuple(x.shape)}")
    if x.shape[-2] == 0:
        raise ValueError("x must have at least one step: its sequence dimension (-2) is empty")
    if isinstance(decay, bool) or not isinstance(decay, (int, float, complex, torch.Tensor)):
        raise TypeError(f"decay must be a number or a torch.Tensor, got {type(decay).__name__}")
    if isinstance(decay, torch.Tensor):
        decay = decay.to(x.device)
        if not (decay.is_floating_point() or decay.is_complex()):
            decay = decay.to(torch.get_default_dtype())
    else:  # a Python number: at the precision of x, never through the default float32
        dtype = x.real.dtype if x.is_complex() else x.dtype
        if isinstance(decay, complex):
            dtype = torch.promote_types(dtype, torch.complex64)  # complex128 for float64
        decay = torch.tensor(decay, dtype=dtype, device=x.device)
    if decay.ndim > 1 or (decay.ndim == 1 and decay.shape[0] != x.shape[-1]):
        raise ValueError(
            f"decay must be a scalar or have shape (channels,) = ({x.shape[-1]},), "
            f"got {tuple(decay.shape)}"
        )
    if not bool(torch.isfinite(decay).all()):
        raise ValueError("decay must be finite")
    dtype = torch.promote_types(x.dtype, decay.dtype)
    return x.to(dtype), decay.to(dtype)


def linear_recurrence(x: torch.Tensor, decay: torch.Tensor | complex) -> torch.Tensor:
    r"""The states :math:`s_t = \lambda\, s_{t-1} + x_t` with :math:`s_{-1} = 0`, step by step.

    ``O(T)`` sequential steps, each an elementwise product: how an RNN runs at
    inference, one token at a time.

    Args:
        x: inputs ``(..., T, n)``, real or complex, ``T >= 1``.
        decay: :math:`\lambda`, a number or a tensor of shape ``()`` or
            ``(n,)`` (one decay per channel), real or complex. A Python number
            is taken at the precision of ``x`` (float64 input, float64 decay).

    Returns:
        The states ``(..., T, n)``, in the dtype of ``x`` and ``decay`` promoted
        together.

    Raises:
        TypeError: ``x`` not a float or complex tensor, ``decay`` not a number or tensor.
        ValueError: ``x`` with fewer than two dimensions or no step, ``decay``
            of the wrong shape or not finite.
    """
    x, decay = _check_recurrence_args(x, decay)
    state = torch.zeros_like(x[..., 0, :])  # (..., n)
    states = []
    for t in range(x.shape[-2]):
        state = decay * state + x[..., t, :]
        states.append(state)
    return torch.stack(states, dim=-2)  # (..., T, n)


def decay_kernel(decay: torch.Tensor, seq_len: int) -> torch.Tensor:
    r"""The impulse response :math:`\lambda^d` for ``d = 0 .. T-1``: the one formula of the powers.

    Each power is formed from ``d`` directly, as :math:`|\lambda|^d e^{i d
    \arg\lambda}` (complex) or :math:`\lambda^d` (real, exact sign for a
    negative decay: the exponent is whole): never by repeated multiplication
    and never as a quotient :math:`\lambda^t \lambda^{-u}`, whose second
    factor overflows for :math:`|\lambda| < 1` long before ``T`` is large.
    ``0^0 = 1``, so a zero decay answers only at ``d = 0``.

    Args:
        decay: tensor of any shape ``(...,)``, real or complex.
        seq_len: ``T``.

    Returns:
        Tensor ``(..., T)`` in the dtype of ``decay``.
    """
    if not isinstance(decay, torch.Tensor):
        raise TypeError(f"decay must be a torch.Tensor, got {type(decay).__name__}")
    seq_len = check_positive_int(seq_len, "seq_len")
    real_dtype = decay.real.dtype if decay.is_complex() else decay.dtype
    distance = torch.arange(seq_len, device=decay.device).to(real_dtype)  # (T,)
    decay = decay[..., None]
    if decay.is_complex():
        return torch.polar(decay.abs() ** distance, decay.angle() * distance)
    return decay**distance  # (..., T)


def decay_powers(decay: torch.Tensor, seq_len: int) -> torch.Tensor:
    r"""The causal weights :math:`\lambda^{t-u}` for ``u <= t``, zero above the diagonal.

    Entry ``(t, u)`` is :func:`decay_kernel` at the distance ``t - u``: the
    matrix is Toeplitz (constant along each diagonal), which is what lets the
    FFT form of :mod:`rope_lessons.chapters.scan` compute its product in
    ``O(T log T)``.

    Args:
        decay: tensor of any shape ``(...,)``, real or complex.
        seq_len: ``T``.

    Returns:
        Tensor ``(..., T, T)`` in the dtype of ``decay``: row ``t``, column ``u``.
    """
    kernel = decay_kernel(decay, seq_len)  # (..., T)
    steps = torch.arange(seq_len, device=decay.device)
    distance = steps[:, None] - steps[None, :]  # (T, T): t - u
    return kernel[..., distance.clamp(min=0)] * (distance >= 0)  # (..., T, T)


def linear_recurrence_parallel(x: torch.Tensor, decay: torch.Tensor | complex) -> torch.Tensor:
    r"""The states of :func:`linear_recurrence` from :math:`s_t = \sum_{u \le t} \lambda^{t-u} x_u`.

    One ``T x T`` causal weighted sum per channel (:func:`decay_powers`): the
    attention-like form, ``O(T^2 n)`` work but no sequential loop, which is how
    such models are trained. Equal to the recurrent form to float tolerance
    for :math:`|\lambda| \le 1`.

    Args, Returns: as :func:`linear_recurrence`.
    """
    x, decay = _check_recurrence_args(x, decay)
    kernel = decay_powers(decay, x.shape[-2])  # (T, T) or (n, T, T)
    if decay.ndim == 0:
        return kernel @ x  # (..., T, n)
    return torch.einsum("ntu,...un->...tn", kernel, x)


# --- VO-RoPE and complex numbers -----------------------------------------------------


def vo_rope_decay(gamma: float, dim: int, base: float = 10000.0) -> torch.Tensor:
    r"""Per pair, the complex decay :math:`\gamma e^{-i\theta_k}` of VO-RoPE with weights γ^(m-n).

    From :math:`o_m = \sum_{n \le m} \gamma^{m-n} R_{n-m} v_n` and
    :math:`R_{n-m} = e^{i(n-m)\theta_k}` on pair ``k``:
    :math:`o_m = \sum_{n \le m} (\gamma e^{-i\theta_k})^{m-n} v_n`.

    Args:
        gamma: the real decay, in ``(0, 1]``.
        dim: the feature dimension ``d`` (even).
        base: RoPE's base.

    Returns:
        Complex128 tensor ``(d/2,)``.
    """
    gamma = check_positive_number(gamma, "gamma")
    if gamma > 1:
        raise ValueError(f"gamma must lie in (0, 1], got {gamma}")
    theta = frequencies(dim, check_base(base))  # (d/2,) float64
    return torch.polar(torch.full_like(theta, gamma), -theta)


def vo_rope_weighted_sum(
    v: torch.Tensor, weights: torch.Tensor, *, rope: Rope | None = None
) -> torch.Tensor:
    r"""VO-RoPE with given weights: :math:`o_m = R_m^\top \sum_n a_{mn} R_n v_n`.

    The rotations are those of :func:`~rope_lessons.toy.rotary_attention.attention` with
    ``placement="vo"`` (:func:`~rope_lessons.toy.rotary_attention.rotate_inputs` and
    :func:`~rope_lessons.toy.rotary_attention.rotate_output`, positions ``0 .. T-1``)
    around any weight matrix: e.g. the causal :math:`a_{mn} = \gamma^{m-n}` of
    :func:`decay_powers` in place of softmax.

    Args:
        v: values ``(B, H, T, D)``, ``D`` even.
        weights: ``(B, H, T, T)`` or broadcastable to it, row ``m`` the
            weights of query ``m``.
        rope: the spec, ``dim == D``; default ``Rope(D)``.

    Returns:
        Outputs ``(B, H, T, D)``.
    """
    if not isinstance(v, torch.Tensor) or v.ndim != 4:
        raise ValueError("v must be a (batch, heads, seq, head_dim) tensor")
    if not isinstance(weights, torch.Tensor) or weights.shape[-2:] != (v.shape[-2],) * 2:
        raise ValueError(f"weights must be a (..., T, T) tensor with T = {v.shape[-2]}")
    rotated = rotate_inputs(v, v, v, placement="vo", rope=rope)[2]  # R_n v_n
    return rotate_output(weights.to(v.dtype) @ rotated, placement="vo", rope=rope)  # R_m^T (...)


def vo_rope_linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gamma: float, base: float = 10000.0
) -> torch.Tensor:
    r"""Decayed linear attention with VO-RoPE, run as an RNN with a matrix state.

    With the content weights :math:`a_{mn} = (q_m \cdot k_n)\, \gamma^{m-n}` for
    :math:`n \le m` (no softmax; VO-RoPE leaves queries and keys unrotated),

    .. math::
        o_m = R_m^\top \sum_{n \le m} a_{mn} R_n v_n
            = \Big(\sum_{n \le m} \gamma^{m-n} R_{n-m}\, v_n k_n^\top\Big) q_m
            = S_m q_m,
        \qquad S_m = \gamma R_{-1} S_{m-1} + v_m k_m^\top, \quad S_{-1} = 0,

    since :math:`R_m^\top R_n = R_{n-m}` and :math:`R_{-1} R_{n-m+1} = R_{n-m}`.
    :math:`R_{-1}` acts on the rows of the ``D x D_k`` state, the value index:
    read as complex numbers (pair ``p`` of each column), row pair ``p`` decays by
    :math:`\gamma e^{-i\theta_p}` (:func:`vo_rope_decay`), so each column ``j``
    is the vector recurrence of :func:`vo_rope_decay` driven by
    :math:`k_m[j]\, v_m`. That is how it is computed here: one
    :func:`linear_recurrence` over ``D_k * D/2`` complex channels. It is the
    mirror image of retention
    (:class:`~rope_lessons.chapters.recurrent_models.RetentionMixer`). Retention's state
    :math:`S_t = \sum_{u \le t} \gamma^{t-u} (R_u k_u) v_u^\top = \gamma S_{t-1} +
    (R_t k_t) v_t^\top` decays by the real :math:`\gamma` and is read by
    :math:`R_t q_t`; in the query's frame, :math:`P_t = R_t^\top S_t = \gamma R_{-1}
    P_{t-1} + k_t v_t^\top`, the complex decay sits on the *key* index (Sun et al.
    2023 derive retention from exactly such a diagonalised complex recurrence).

    Args:
        q: queries ``(B, H, T, D_k)``.
        k: keys ``(B, H, T, D_k)``.
        v: values ``(B, H, T, D)``, ``D`` even.
        gamma: the real decay, in ``(0, 1]``.
        base: RoPE's base (interleaved layout, the course's convention).

    Returns:
        Outputs ``(B, H, T, D)``, complex arithmetic in the precision of the inputs.

    Raises:
        TypeError: a tensor not of a real floating dtype, or ``q``, ``k`` and
            ``v`` of different dtypes.
        ValueError: tensors not 4-D, shapes that do not match, ``D`` odd;
            ``gamma`` or ``base`` out of range (:func:`vo_rope_decay`).
    """
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor) or tensor.ndim != 4:
            raise ValueError(f"{name} must be a (batch, heads, seq, dim) tensor")
        if not tensor.is_floating_point():
            raise TypeError(f"{name} must have a real floating dtype, got {tensor.dtype}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    if q.shape != k.shape or v.shape[:3] != q.shape[:3] or v.shape[-1] % 2:
        raise ValueError(
            f"need q and k (B, H, T, D_k) and v (B, H, T, D) with D even, got "
            f"{tuple(q.shape)}, {tuple(k.shape)} and {tuple(v.shape)}"
        )
    dim, key_dim = v.shape[-1], k.shape[-1]
    outer = v.unsqueeze(-1) * k.unsqueeze(-2)  # (B, H, T, D, D_k): v_m k_m^T
    pairs = read_pairs(outer.transpose(-1, -2))  # (B, H, T, D_k, D/2): row pairs, per column
    decay = vo_rope_decay(gamma, dim, base).to(pairs.dtype).repeat(key_dim)  # (D_k * D/2,)
    states = linear_recurrence(pairs.flatten(-2), decay).unflatten(-1, (key_dim, dim // 2))
    state = write_pairs(states).transpose(-1, -2)  # (B, H, T, D, D_k): S_m
    return (state @ q.unsqueeze(-1)).squeeze(-1)  # (B, H, T, D): S_m q_m


# --- why complex decays can hold a delay line ---------------------------------------


@dataclass(frozen=True)
class DelayFit:
    """The best linear readout of a delay line: its RMS error, the size of its weights, h(d).

    ``response`` is :math:`h(d)` for ``d = 0 .. horizon - 1``.
    """

    error: float
    weight_norm: float
    response: tuple[float, ...]


def delay_readout(
    decays: torch.Tensor, lag: int, horizon: int, *, budget: float | None = None
) -> DelayFit:
    r"""How well a linear readout of the states can pick out the input ``lag`` steps back.

    A recurrence with decays :math:`\lambda_j` and readout weights ``c`` answers
    an impulse ``d`` steps ago with :math:`h(d) = \mathrm{Re} \sum_j c_j \lambda_j^d`.
    A delay line needs :math:`h(d) = 1` at ``d = lag`` and ``0`` elsewhere. This
    fits ``c`` by least squares over ``d = 0 .. horizon - 1`` and reports the
    root-mean-square error, the Euclidean norm of ``c`` and :math:`h` itself.
    The trivial readout ``c = 0`` scores ``1/sqrt(horizon)`` (``budget=0``);
    an error is only as good as its distance below that. Real decays get real
    ``c``, complex ones complex ``c``, so ``n`` complex decays have as many free
    numbers as ``2n`` real ones.

    Without ``budget``, ``c`` is LAPACK's minimum-norm least-squares solution
    (``gelsd`` through ``torch.linalg.lstsq``, whose default cutoff drops the
    singular values below :math:`\varepsilon \max(m, n)` times the largest,
    :math:`\varepsilon \approx 2.2 \cdot 10^{-16}` the float64 epsilon, for the
    ``m x n`` matrix of powers: ``horizon`` rows, one column per real decay
    or two per complex one): a small error may then be bought with enormous,
    cancelling weights, out of reach of training and of float32. With
    ``budget``, ``c`` is the best readout with :math:`\lVert c \rVert \le`
    ``budget``: ridge regression, :math:`\min \lVert Pc - e \rVert^2 + \alpha
    \lVert c \rVert^2`, with :math:`\alpha \ge 0` found by bisection so that the
    norm meets the budget (the Lagrange form of the constrained problem, so
    the answer is its exact optimum); that compares decay sets on equal terms.

    Only decays in the closed unit disc :math:`|\lambda_j| \le 1` are accepted:
    they are the stable recurrences this chapter is about (LRU's
    parameterisation keeps :math:`|\lambda| < 1`, VO-RoPE's
    :math:`\gamma e^{-i\theta}` has :math:`\gamma \le 1`). A decay outside it
    makes the state grow without bound, so it is no memory of the past at all;
    and its powers, up to :math:`|\lambda|^{horizon-1}`, swamp the least-squares
    fit, which then answers with tiny weights and an error at or near that of the
    trivial readout ``c = 0`` (``1/sqrt(horizon)``): a number that would look like
    a finding and means nothing.

    Args:
        decays: ``(n,)`` real or complex, finite, :math:`|\lambda_j| \le 1`.
        lag: the delay to reproduce, ``0 <= lag < horizon``.
        horizon: how many distances are scored.
        budget: the largest norm of ``c`` allowed, ``>= 0``; None for the
            minimum-norm least-squares solution.

    Raises:
        TypeError: ``decays`` not a 1-D float or complex tensor.
        ValueError: a decay not finite or outside the unit disc; ``lag`` out of
            range; ``budget`` negative or not finite.
    """
    if (
        not isinstance(decays, torch.Tensor)
        or decays.ndim != 1
        or not (decays.is_floating_point() or decays.is_complex())
    ):
        raise TypeError("decays must be a 1-D float or complex torch.Tensor")
    horizon = check_positive_int(horizon, "horizon")
    if isinstance(lag, bool) or not isinstance(lag, int) or not 0 <= lag < horizon:
        raise ValueError(f"lag must be an int in [0, horizon={horizon}), got {lag!r}")
    decays = decays.to(torch.complex128 if decays.is_complex() else torch.float64)
    if not bool(torch.isfinite(decays).all()):
        raise ValueError(f"decays must be finite, got {decays.tolist()}")
    outside = decays.abs() > 1.0
    if bool(outside.any()):
        raise ValueError(
            "decays must lie in the closed unit disc |decay| <= 1 (a stable recurrence), "
            f"got moduli {decays.abs()[outside].tolist()}"
        )
    powers = decay_powers(decays, horizon)[:, :, 0].T  # (horizon, n): lambda_j^d
    if decays.is_complex():  # Re(c lambda^d) = Re c Re lambda^d - Im c Im lambda^d
        powers = torch.cat((powers.real, -powers.imag), dim=-1)  # (horizon, 2n)
    target = torch.zeros(horizon, 1, dtype=torch.float64)
    target[lag] = 1.0
    if budget is None:
        weights = torch.linalg.lstsq(powers, target, driver="gelsd").solution
    else:
        weights = _ridge_within_budget(powers, target, budget)
    response = (powers @ weights)[:, 0]  # (horizon,): h(d)
    error = float((response - target[:, 0]).square().mean().sqrt())
    return DelayFit(
        error=error, weight_norm=float(weights.norm()), response=tuple(response.tolist())
    )


def _ridge_within_budget(powers: torch.Tensor, target: torch.Tensor, budget: float) -> torch.Tensor:
    r"""The least-squares ``c`` with :math:`\lVert c \rVert \le` ``budget``, ``(m, 1)`` float64.

    From the SVD :math:`P = U S V^\top`, ridge gives
    :math:`c(\alpha) = V \,\mathrm{diag}(s / (s^2 + \alpha))\, U^\top e`, whose norm
    falls as :math:`\alpha` grows. If the minimum-norm solution (``alpha = 0``,
    singular values dropped below the cutoff of ``torch.linalg.lstsq``) fits the budget it
    is the answer; otherwise :math:`\alpha` is bisected on a log scale until
    the norm equals the budget.
    """
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise TypeError(f"budget must be a number, got {type(budget).__name__}")
    if not (math.isfinite(budget) and budget >= 0):
        raise ValueError(f"budget must be finite and >= 0, got {budget}")
    if budget == 0:
        return torch.zeros(powers.shape[1], 1, dtype=powers.dtype)
    u, s, vh = torch.linalg.svd(powers, full_matrices=False)
    projected = (u.transpose(0, 1) @ target)[:, 0]  # (r,)
    kept = s > s.max() * torch.finfo(s.dtype).eps * max(powers.shape)  # lstsq's default cutoff

    def coefficients(alpha: float) -> torch.Tensor:
        ratio: torch.Tensor = torch.where(kept, s / (s.square() + alpha), 0.0) * projected
        return ratio  # (r,)

    if float(coefficients(0.0).norm()) > budget:
        low, high = 1e-300, float(projected.norm() * s.max()) / budget  # norm(high) <= budget
        for _ in range(200):
            middle = math.sqrt(low * high)
            if float(coefficients(middle).norm()) > budget:
                low = middle
            else:
                high = middle
        alpha = high
    else:
        alpha = 0.0
    weights: torch.Tensor = vh.transpose(0, 1) @ coefficients(alpha)[:, None]
    return weights  # (m, 1)


# --- retention's decays -----------------------------------------------------------


def retnet_decays(n_heads: int) -> torch.Tensor:
    r"""RetNet's fixed decay per head, :math:`\gamma_h = 1 - 2^{-5-h}`, ``(H,)`` float32."""
    n_heads = check_positive_int(n_heads, "n_heads")
    return 1 - 2.0 ** (-5 - torch.arange(n_heads, dtype=torch.float32))


def retnet_effective_decays(n_heads: int, head_dim: int, base: float = 10000.0) -> torch.Tensor:
    r"""Retention read as complex decays: :math:`\gamma_h e^{-i\theta_k}` for every head and pair.

    In complex form (pair ``k`` of a query or key as one complex number), the
    score of retention is :math:`\mathrm{Re}(\bar q_t k_u\, \gamma_h^{t-u}
    e^{-i(t-u)\theta_k})` summed over pairs: each (head, pair) is a complex
    decay with RetNet's real modulus and RoPE's fixed angle, the same decay
    :func:`vo_rope_decay` finds for VO-RoPE.

    Returns:
        Complex128 tensor ``(H * D/2,)``, head by head.
    """
    gammas = retnet_decays(n_heads).double()  # (H,)
    phase = vo_rope_decay(1.0, head_dim, base)  # e^{-i theta_k}, (D/2,)
    return (gammas[:, None] * phase).flatten()  # (H * D/2,)
