r"""Beyond the trained length: RoPE's frequencies rescaled for longer contexts, and their tests.

Chapter 8 asks what happens when a RoPE model trained on sequences of
``original_length`` tokens reads longer ones, and what the published fixes
change. Every fix here is a new per-pair frequency vector (and, for YaRN, an
attention scale), a :class:`~rope_lessons.rope.Rope` spec, so a trained model
is extended by handing it that spec:

* :func:`scaled_frequencies`: position interpolation ("linear", Chen et al.
  2023), NTK-aware scaling ("ntk", bloc97 2023), YaRN ("yarn", Peng et al.
  2023) and Llama 3's scaling ("llama3"), with the conventions of Hugging Face
  transformers' ``ROPE_INIT_FUNCTIONS`` (pair 0 fastest);
* :func:`critical_pair` and :func:`base_lower_bound`: which pairs see every
  angle during training (Liu et al. 2023), and the smallest base for which
  RoPE's "semantic aggregation" sum stays non-negative over a context (Men et
  al. 2024, with Su's brute-force search);
* :func:`extended`: a copy of a trained model with a new spec (frequencies
  and attention factor: YaRN's, on queries and keys as Hugging Face applies
  it) and optionally Su's log-length scaling of the queries;
* :func:`band_losses` and :func:`attention_entropy`: held-out loss per
  position band and the entropy of each layer's attention rows.

Shapes: ``d`` head dimension (even), ``d/2`` rotary pairs, ``B`` batch, ``T``
sequence length, ``H`` heads, ``C`` model width.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import nn

from rope_lessons._checks import (
    check_base,
    check_choice,
    check_even_dim,
    check_positive_int,
    check_positive_number,
)
from rope_lessons.model import SelfAttention, TinyTransformer
from rope_lessons.rope import Layout, Rope, frequencies
from rope_lessons.spectrum import wavelengths
from rope_lessons.synthetic import Batch, Task, batch_sampler
from rope_lessons.training import train

Method = Literal["linear", "ntk", "yarn", "llama3"]
METHODS: tuple[Method, ...] = get_args(Method)


def yarn_attention_factor(factor: float) -> float:
    r"""YaRN's factor on queries and keys: :math:`0.1 \ln s + 1` for ``s > 1``, else 1.

    Hugging Face multiplies the cosines and sines by it, so the queries and
    the keys both grow by it and the attention logits by its square: Peng et
    al.'s :math:`1/t` with :math:`\sqrt{1/t} = 0.1 \ln s + 1`.
    """
    factor = check_positive_number(factor, "factor")
    return 1.0 if factor <= 1.0 else 0.1 * math.log(factor) + 1.0


def yarn_ramp(
    dim: int, base: float, original_length: int, beta_fast: float, beta_slow: float
) -> torch.Tensor:
    r"""YaRN's interpolation weight per pair: 0 keeps the pair, 1 divides its frequency by ``s``.

    Pair ``k`` turns :math:`L/\lambda_k` times over the original length
    ``L``. Pairs turning more than ``beta_fast`` times are kept, pairs turning
    fewer than ``beta_slow`` times are interpolated, and the weight ramps
    linearly in between. As in Hugging Face (``truncate=True``, the paper's
    choice), the ramp's ends are the fractional pair indices of those turn
    counts, floored and ceiled and clipped to ``[0, d - 1]``.

    Returns:
        float64 tensor ``(d/2,)`` with values in [0, 1], non-decreasing.
    """

    def pair_turning(turns: float) -> float:
        # the (fractional) pair index k whose wavelength fits `turns` times into L
        return dim * math.log(original_length / (turns * 2.0 * math.pi)) / (2.0 * math.log(base))

    low = max(math.floor(pair_turning(beta_fast)), 0)
    high = float(min(math.ceil(pair_turning(beta_slow)), dim - 1))
    if low == high:
        high += 0.001  # Hugging Face's guard against a zero-width ramp
    k = torch.arange(dim // 2, dtype=torch.float64)
    return ((k - low) / (high - low)).clamp(0.0, 1.0)


def llama3_weight(
    dim: int, base: float, original_length: int, low_freq_factor: float, high_freq_factor: float
) -> torch.Tensor:
    r"""Llama 3's interpolation weight of each pair: 0 keeps the pair, 1 divides by ``s``.

    Pairs whose wavelength is shorter than ``L / high_freq_factor`` are kept,
    those longer than ``L / low_freq_factor`` are interpolated, and in
    between the *frequency* is blended as :math:`(1-w)\,\theta/s + w\,\theta`
    with :math:`w = (L/\lambda - \text{low}) / (\text{high} - \text{low})`;
    this returns ``1 - w`` there.

    Returns:
        float64 tensor ``(d/2,)`` with values in [0, 1].
    """
    wavelength = wavelengths(dim, base)
    smooth = (original_length / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    weight = 1.0 - smooth
    weight = torch.where(wavelength < original_length / high_freq_factor, 0.0, weight)
    return torch.where(wavelength > original_length / low_freq_factor, 1.0, weight)


def scaled_frequencies(
    d: int,
    method: Method,
    *,
    factor: float,
    original_length: int,
    base: float = 10000.0,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    layout: Layout = "interleaved",
) -> Rope:
    r"""The spec of a context-extension method: its per-pair frequencies and attention factor.

    With :math:`\theta_k = b^{-2k/d}` (:func:`rope_lessons.rope.frequencies`)
    and the extension factor :math:`s` (new length over ``original_length``):

    * ``"linear"`` (position interpolation): :math:`\theta_k / s`, every pair.
    * ``"ntk"`` (NTK-aware): a new base :math:`b\,s^{d/(d-2)}`, so pair 0 is
      unchanged and the slowest pair is divided by exactly :math:`s`.
    * ``"yarn"``: :math:`(1-\gamma_k)\,\theta_k + \gamma_k\,\theta_k/s` with
      :func:`yarn_ramp`'s :math:`\gamma_k`, and the factor
      :func:`yarn_attention_factor`.
    * ``"llama3"``: the same blend with :func:`llama3_weight`.

    The attention factor multiplies queries and keys (Hugging Face multiplies
    cos and sin by it); it is 1 for every method but YaRN. ``linear``,
    ``yarn`` and ``llama3`` equal transformers' ``_compute_linear_scaling_rope_parameters``,
    ``_compute_yarn_parameters`` and ``_compute_llama3_parameters`` (tested).

    Args:
        d: head dimension (even).
        method: one of :data:`METHODS`.
        factor: the extension factor :math:`s \ge 1`.
        original_length: the trained context length ``L`` (yarn, llama3).
        base: RoPE's base :math:`b`.
        beta_fast, beta_slow: YaRN's turn counts (``beta_fast > beta_slow > 0``).
        low_freq_factor, high_freq_factor: Llama 3's wavelength bounds
            (``0 < low_freq_factor < high_freq_factor``).
        layout: the layout of the spec (that of the model it extends).

    Returns:
        A :class:`~rope_lessons.rope.Rope` of dimension ``d`` whose ``theta``
        (float64 ``(d/2,)``, pair 0 fastest) is the method's table and whose
        ``attention_factor`` is YaRN's for ``"yarn"`` and 1 otherwise; pass it
        to :func:`~rope_lessons.attention.attention` as ``rope=``, to
        :meth:`~rope_lessons.rope.Rope.apply` or to :func:`extended`.
    """
    d = check_even_dim(d, "d")
    method = check_choice(method, "method", METHODS)
    factor = check_positive_number(factor, "factor")
    if factor < 1.0:
        raise ValueError(f"factor must be >= 1 (an extension, not a compression), got {factor}")
    original_length = check_positive_int(original_length, "original_length")
    base = check_base(base)
    theta = frequencies(d, base)
    if method == "linear":
        return Rope.from_theta(theta / factor, layout)
    if method == "ntk":
        if d < 4:
            raise ValueError(f"d must be >= 4 for NTK-aware scaling (exponent d/(d-2)), got {d}")
        return Rope.from_theta(frequencies(d, base * factor ** (d / (d - 2))), layout)
    if method == "yarn":
        beta_fast = check_positive_number(beta_fast, "beta_fast")
        beta_slow = check_positive_number(beta_slow, "beta_slow")
        if beta_fast <= beta_slow:
            raise ValueError(
                f"beta_fast must exceed beta_slow (pairs turning more than beta_fast times are "
                f"kept), got beta_fast={beta_fast}, beta_slow={beta_slow}"
            )
        weight = yarn_ramp(d, base, original_length, beta_fast, beta_slow)
        return Rope.from_theta(
            (1.0 - weight) * theta + weight * theta / factor,
            layout,
            attention_factor=yarn_attention_factor(factor),
        )
    low_freq_factor = check_positive_number(low_freq_factor, "low_freq_factor")
    high_freq_factor = check_positive_number(high_freq_factor, "high_freq_factor")
    if low_freq_factor >= high_freq_factor:
        raise ValueError(
            f"low_freq_factor must be below high_freq_factor, got low_freq_factor="
            f"{low_freq_factor}, high_freq_factor={high_freq_factor}"
        )
    weight = llama3_weight(d, base, original_length, low_freq_factor, high_freq_factor)
    return Rope.from_theta((1.0 - weight) * theta + weight * theta / factor, layout)


def critical_pair(d: int, original_length: int, base: float = 10000.0) -> int:
    r"""The first pair whose wavelength exceeds the trained length (Liu et al. 2023).

    Pairs ``0 .. critical - 1`` complete at least one turn within
    ``original_length`` positions, so training shows them every angle; the
    pairs from this one on meet angles past the trained length that they never
    saw. Liu et al.'s critical dimension is twice this:
    :math:`2\lceil (d/2) \log_b(L / 2\pi) \rceil` when that is not an integer.

    Returns:
        an int in ``[0, d/2]`` (``d/2``: every pair turns fully).
    """
    d = check_even_dim(d, "d")
    original_length = check_positive_int(original_length, "original_length")
    return int((wavelengths(d, check_base(base)) <= original_length).sum())


def aggregation_sum(d: int, length: int, base: float) -> torch.Tensor:
    r"""Men et al.'s :math:`B_b(m) = \sum_k \cos(m\,\theta_k)` for distances ``m < length``.

    For a query with i.i.d. entries of variance :math:`\sigma^2`, the expected
    score of a key similar to it beats that of a random key by
    :math:`2\sigma^2 B_b(m)`; a negative value means RoPE prefers the random key.

    Returns:
        float64 tensor ``(length,)``.
    """
    m = torch.arange(check_positive_int(length, "length"), dtype=torch.float64)
    theta = frequencies(check_even_dim(d, "d"), base)
    return torch.cos(m[:, None] * theta).sum(-1)


def base_lower_bound(
    length: int,
    d: int = 128,
    *,
    low: float | None = None,
    high: float | None = None,
    per_decade: int = 2000,
) -> float:
    r"""The smallest base on a fine log grid with :math:`B_b(m) \ge 0` for all ``m < length``.

    Men et al. 2024 define the bound as the infimum of such bases. The set
    is not an interval: near the bound it holds in narrow windows (at 4096
    tokens, :math:`b = 26953` passes while :math:`26926` does not), so a
    coarse grid overshoots. Like Su's brute-force search, this scans a
    geometric grid of ``per_decade`` bases per decade from ``low`` (default:
    ``length``) up to ``high`` (default: ``1000 * length``) and returns the
    first base that passes; a window narrower than one grid step can still
    be missed, so a finer grid can only lower the answer.

    Raises:
        ValueError: if no base on the grid passes.
    """
    length = check_positive_int(length, "length")
    d = check_even_dim(d, "d")
    per_decade = check_positive_int(per_decade, "per_decade")
    low = check_base(float(length) if low is None else low)
    high = check_positive_number(1000.0 * length if high is None else high, "high")
    steps = math.ceil((math.log10(high) - math.log10(low)) * per_decade) + 1
    grid = torch.logspace(math.log10(low), math.log10(high), steps, dtype=torch.float64)
    m = torch.arange(length, dtype=torch.float64)
    block, chunk = 128, 512
    for start in range(0, steps, block):
        bases = grid[start : start + block]  # (n,)
        alive = torch.ones(len(bases), dtype=torch.bool)
        theta = torch.stack([frequencies(d, base) for base in bases.tolist()])  # (n, d/2)
        # the sum tends to dip lowest at the longest distances: test those first
        for first in reversed(range(0, length, chunk)):
            angles = m[first : first + chunk, None, None] * theta[alive]  # (M, n', d/2)
            passing = torch.cos(angles).sum(-1).min(0).values >= 0.0  # (n',)
            alive[alive.clone()] = passing
            if not bool(alive.any()):
                break
        if bool(alive.any()):
            return float(bases[alive][0])
    raise ValueError(f"no base in [{low}, {high}] keeps B(m) >= 0 for every m < {length}")


def extended(
    model: TinyTransformer,
    rope: Rope | None = None,
    *,
    log_scale_from: int | None = None,
) -> TinyTransformer:
    r"""A copy of a trained RoPE model with a new spec and attention scaling.

    Args:
        model: a trained :class:`~rope_lessons.model.TinyTransformer` with
            ``position="rope"`` (left unchanged).
        rope: the new spec (e.g. from :func:`scaled_frequencies`), of the
            model's head dimension and layout; None keeps the model's. Its
            frequencies replace the model's whole ladder (p-RoPE's cut
            included), and its attention factor multiplies every layer's
            queries and keys (so the logits by its square), as Hugging Face
            applies YaRN's factor.
        log_scale_from: if given (the trained length ``L``), the query at
            position ``m`` is also multiplied by
            :math:`\max(1, \log(m+1)/\log L)`: Su's log-length scaling, which
            keeps the attention's entropy from growing with the number of keys.

    Returns:
        a new model in eval mode. The attention factor acts through the spec
        in its config; the log-length scale is a forward hook on each layer's
        query-key-value projection. Both also act while fine-tuning.
    """
    if not isinstance(model, TinyTransformer) or model.config.position != "rope":
        raise TypeError("model must be a TinyTransformer with position='rope'")
    if rope is not None and not isinstance(rope, Rope):
        raise TypeError(f"rope must be a Rope spec or None, got {type(rope).__name__}")
    if log_scale_from is not None:
        log_scale_from = check_positive_int(log_scale_from, "log_scale_from")
        if log_scale_from < 2:
            raise ValueError(
                f"log_scale_from must be >= 2 (log of it divides), got {log_scale_from}"
            )
    config = model.config
    if rope is not None:
        rope.check_dim(config.head_dim, "the model's head dimension")
        layout = "interleaved" if config.rope is None else config.rope.layout
        if rope.layout != layout:
            raise ValueError(
                f"the spec's layout is {rope.layout!r} and the model's {layout!r}: "
                "its trained weights pair their dimensions in the model's layout; build the "
                "spec in it (or convert the model with rope_lessons.layouts.convert_layout)"
            )
        # the new frequencies replace the whole ladder, p-RoPE's cut included
        config = dataclasses.replace(config, rope=rope)
    copy = TinyTransformer(config).to(next(model.parameters()).device)
    copy.load_state_dict(model.state_dict())
    copy.eval()
    if log_scale_from is not None:
        hook = _query_log_scaling(config.dim, log_scale_from)
        for module in copy.modules():
            if isinstance(module, SelfAttention):
                module.qkv.register_forward_hook(hook)
    return copy


def log_length_scale(length: int, original_length: int) -> torch.Tensor:
    r"""Su's query scale at each position: :math:`\max(1, \log(m+1) / \log L)`.

    A causal query at position ``m`` sees ``m + 1`` keys; multiplying its
    logits by :math:`\log(m+1)/\log L` keeps the entropy of its attention
    roughly what it was at the trained length ``L`` (Su 2021, kexue.fm 8823).

    Returns:
        float64 tensor ``(length,)``, 1 up to position ``L - 1``.
    """
    m = torch.arange(check_positive_int(length, "length"), dtype=torch.float64)
    scale = torch.log(m + 1.0) / math.log(check_positive_int(original_length, "original_length"))
    return scale.clamp(min=1.0)


def _query_log_scaling(
    dim: int, log_scale_from: int
) -> Callable[[nn.Module, tuple[torch.Tensor, ...], torch.Tensor], torch.Tensor]:
    """A forward hook on a ``(B, T, 3C)`` query-key-value projection that multiplies the
    query at position ``m`` by :func:`log_length_scale` (the keys and values pass)."""

    def hook(
        module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor
    ) -> torch.Tensor:
        q, kv = output.split((dim, 2 * dim), dim=-1)  # (B, T, C), (B, T, 2C)
        scale = log_length_scale(output.shape[-2], log_scale_from)  # (T,)
        return torch.cat([q * scale.to(q.device, q.dtype)[:, None], kv], dim=-1)

    return hook


def token_losses(model: nn.Module, batches: Sequence[Batch]) -> torch.Tensor:
    """Mean cross-entropy at each position over ``batches`` of ``(tokens, targets)``.

    Returns:
        float64 tensor ``(T,)``: the loss at position ``t`` averaged over all
        sequences (every target scored: a corpus has no ignored positions).
    """
    model.eval()
    total: torch.Tensor | None = None
    count = 0
    with torch.no_grad():
        for tokens, targets in batches:
            logits = model(tokens)  # (B, T, V)
            loss = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, T)
            summed = loss.double().sum(0).cpu()
            total = summed if total is None else total + summed
            count += tokens.shape[0]
    if total is None:
        raise ValueError("batches must hold at least one batch")
    return total / count


def band_edges(original_length: int, factor: int) -> list[tuple[int, int]]:
    """Position bands ``[0, L), [L, 2L), [2L, 4L), ...`` up to ``factor * L``.

    ``factor`` must be a power of two, e.g. 8: four bands, trained range, 2x, 4x, 8x.
    """
    original_length = check_positive_int(original_length, "original_length")
    factor = check_positive_int(factor, "factor")
    if factor & (factor - 1):
        raise ValueError(f"factor must be a power of two, got {factor}")
    edges = [0] + [original_length * 2**i for i in range(int(math.log2(factor)) + 1)]
    return list(itertools.pairwise(edges))


def band_losses(per_position: torch.Tensor, bands: Sequence[tuple[int, int]]) -> list[float]:
    """The mean of ``per_position`` ``(T,)`` over each band ``[start, stop)``."""
    for start, stop in bands:
        if not 0 <= start < stop <= per_position.shape[-1]:
            raise ValueError(
                f"band [{start}, {stop}) does not fit {per_position.shape[-1]} positions"
            )
    return [float(per_position[start:stop].mean()) for start, stop in bands]


def attention_entropy(model: TinyTransformer, tokens: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of every attention row, averaged over batch, heads and layers.

    Args:
        tokens: ``(B, T)`` token ids.

    Returns:
        float64 tensor ``(T,)``: the mean entropy of the query at each position.
    """
    with torch.no_grad():
        _, maps = model.attention_maps(tokens)  # each (B, H, T, T)
    entropies = [
        -(w.double() * torch.log(w.double().clamp_min(1e-30))).sum(-1).mean((0, 1)) for w in maps
    ]
    return torch.stack(entropies).mean(0).cpu()


def fine_tune(
    model: TinyTransformer,
    data: Task,
    *,
    length: int,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
) -> TinyTransformer:
    """Train ``model`` further, in place, on ``data``'s training split at ``length``.

    The short fine-tune of the extension papers: the model keeps its (new)
    frequencies and hooks and sees sequences longer than it was trained on.

    Returns:
        the same model, in eval mode.
    """
    sampler = batch_sampler(
        data, batch_size, length, seed=seed, device=next(model.parameters()).device
    )
    train(model, sampler, steps=steps, lr=lr, progress=False)
    return model
