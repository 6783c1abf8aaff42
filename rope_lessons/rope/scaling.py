r"""Beyond the trained length: the formulas that rescale RoPE's frequencies (chapter 8).

Chapter 8 asks what happens when a RoPE model trained on sequences of
``original_length`` tokens reads longer ones, and what the published fixes
change. Every fix is a new per-pair frequency vector (and, for YaRN, an
attention factor); this module computes them as plain tensors, and
:mod:`rope_lessons.rope.scaled_specs` makes them a
:class:`~rope_lessons.rope.spec.Rope`:

* :func:`scaled_theta`: position interpolation ("linear", Chen et al.
  2023), NTK-aware scaling ("ntk", bloc97 2023, with its factor
  :math:`\alpha` free), dynamic NTK ("dynamic", a new base for each sequence
  length, :func:`dynamic_ntk_alpha`), YaRN ("yarn", Peng et al. 2023, with the
  ramp of the reference code or of the paper: :func:`yarn_ramp`,
  :func:`yarn_attention_factor`) and Llama 3's scaling ("llama3",
  :func:`llama3_weight`), with the conventions of Hugging Face transformers'
  ``ROPE_INIT_FUNCTIONS`` (pair 0 fastest);
* :func:`critical_pair` and :func:`base_lower_bound`: which pairs see every
  angle during training (Liu et al. 2023), and the smallest base for which
  RoPE's "semantic aggregation" sum (:func:`aggregation_sum`) stays
  non-negative over a context (Men et al. 2024, with Su's brute-force search);
* :func:`log_length_scale`: Su's log-length scaling of the queries.

Shapes: ``d`` head dimension (even), ``d/2`` rotary pairs.
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import Literal, get_args

import torch

from rope_lessons._checks import (
    check_base,
    check_choice,
    check_even_dim,
    check_positive_int,
    check_positive_number,
)
from rope_lessons.rope.ladder import frequencies, wavelengths

Method = Literal["linear", "ntk", "yarn", "llama3"]
"""The four static tables of chapter 8's stored sweep (one table per factor)."""
METHODS: tuple[Method, ...] = get_args(Method)
ExtensionMethod = Literal["linear", "ntk", "dynamic", "yarn", "llama3"]
"""Every method :func:`~.scaled_frequencies` builds: :data:`METHODS` and dynamic NTK."""
EXTENSION_METHODS: tuple[ExtensionMethod, ...] = get_args(ExtensionMethod)
Ramp = Literal["pairs", "turns"]
"""YaRN's ramp: linear in the pair index (reference code, transformers) or in the turns."""
RAMPS: tuple[Ramp, ...] = get_args(Ramp)

_TINY = torch.finfo(torch.float64).tiny  # the smallest normal float64
_LOG_MAX = math.log(torch.finfo(torch.float64).max)


def _integer(value: object, name: str) -> int:
    """``value`` as an int >= 1; NumPy's integers are accepted like Python's (not bools)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = operator.index(value)
    return check_positive_int(value, name)


def _number(value: object, name: str) -> float:
    """``value`` as a finite float > 0; NumPy's integers and floats are accepted."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = float(value)
    return check_positive_number(value, name)


def _even_dim(value: object, name: str) -> int:
    """``value`` as a positive even int; NumPy's integers are accepted."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = operator.index(value)
    return check_even_dim(value, name)


def _factor(value: object) -> float:
    """``value`` as an extension factor: a finite float >= 1."""
    factor = _number(value, "factor")
    if factor < 1.0:
        raise ValueError(f"factor must be >= 1 (an extension, not a compression), got {factor}")
    return factor


def yarn_attention_factor(
    factor: float, mscale: float | None = None, mscale_all_dim: float | None = None
) -> float:
    r"""YaRN's factor on queries and keys: :math:`0.1 \ln s + 1` for ``s > 1``, else 1.

    Hugging Face multiplies the cosines and sines by it, so the queries and
    the keys both grow by it and the attention logits by its square: Peng et
    al.'s :math:`1/t` with :math:`\sqrt{1/t} = 0.1 \ln s + 1`.

    With ``mscale`` and ``mscale_all_dim`` (DeepSeek's parameters, as
    transformers reads them) it is instead
    :math:`(0.1\,\text{mscale}\ln s + 1)/(0.1\,\text{mscale\_all\_dim}\ln s + 1)`;
    transformers ignores either of them without the other, so this function
    refuses one alone.
    """
    factor = _number(factor, "factor")
    if (mscale is None) != (mscale_all_dim is None):
        raise ValueError(
            "give mscale and mscale_all_dim together (transformers ignores either one alone "
            f"and uses 0.1 ln s + 1), got mscale={mscale}, mscale_all_dim={mscale_all_dim}"
        )

    def get(scale: float) -> float:
        return 1.0 if factor <= 1.0 else 0.1 * scale * math.log(factor) + 1.0

    if mscale is None or mscale_all_dim is None:
        return get(1.0)
    return get(_number(mscale, "mscale")) / get(_number(mscale_all_dim, "mscale_all_dim"))


def yarn_ramp(
    dim: int,
    base: float,
    original_length: int,
    beta_fast: float,
    beta_slow: float,
    *,
    ramp: Ramp = "pairs",
    truncate: bool = True,
) -> torch.Tensor:
    r"""YaRN's interpolation weight per pair: 0 keeps the pair, 1 divides its frequency by ``s``.

    Pair ``k`` turns :math:`r_k = L/\lambda_k` times over the original length
    ``L``. Pairs turning more than ``beta_fast`` times are kept, pairs turning
    fewer than ``beta_slow`` times are interpolated. In between, two ramps are
    in use:

    * ``ramp="turns"``: Peng et al.'s :math:`\gamma(r)`, linear in
      :math:`r_k`; the weight is :math:`1 - \mathrm{clip}(g_k, 0, 1)` with
      :math:`g_k = (r_k - \beta_\text{slow})/(\beta_\text{fast} - \beta_\text{slow})`.
    * ``ramp="pairs"`` (the default): the reference code's and transformers'
      ramp, linear in the pair index ``k`` between the fractional indices of
      the pairs turning ``beta_fast`` and ``beta_slow`` times; with
      ``truncate`` (transformers' default) these ends are floored and ceiled,
      and in every case clipped to ``[0, d - 1]``.

    Returns:
        float64 tensor ``(d/2,)`` with values in [0, 1], non-decreasing in ``k``.

    Raises:
        ValueError: if ``beta_fast <= beta_slow`` (the ramp would fall, or have no
            width), if either is not finite and positive, or if ``base <= 1``.
    """
    dim = _even_dim(dim, "dim")
    base = check_base(_number(base, "base"))
    original_length = _integer(original_length, "original_length")
    beta_fast, beta_slow = _number(beta_fast, "beta_fast"), _number(beta_slow, "beta_slow")
    if beta_fast <= beta_slow:
        raise ValueError(
            f"beta_fast must exceed beta_slow (pairs turning more than beta_fast times are "
            f"kept), got beta_fast={beta_fast}, beta_slow={beta_slow}"
        )
    ramp = check_choice(ramp, "ramp", RAMPS)
    if not isinstance(truncate, bool):
        raise TypeError(f"truncate must be a bool, got {type(truncate).__name__}")
    if ramp == "turns":
        if not truncate:
            raise ValueError("truncate applies to the ramp in pairs only (ramp='pairs')")
        turns = original_length / wavelengths(dim, base)  # (d/2,)
        return 1.0 - ((turns - beta_slow) / (beta_fast - beta_slow)).clamp(0.0, 1.0)

    def pair_turning(turns: float) -> float:
        # the (fractional) pair index k whose wavelength fits `turns` times into L
        return dim * math.log(original_length / (turns * 2.0 * math.pi)) / (2.0 * math.log(base))

    low, high = pair_turning(beta_fast), pair_turning(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
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
    this returns ``1 - w`` there (Meta's ``apply_scaling``, as transformers
    implements it). With ``low_freq_factor == high_freq_factor`` the band is
    empty and the weight is a step: pairs whose wavelength exceeds
    ``L / low_freq_factor`` are divided, the rest kept (Llama 4 Scout's
    published configuration, factors 1 and 1: Liu et al.'s critical pair).

    Returns:
        float64 tensor ``(d/2,)`` with values in [0, 1].

    Raises:
        ValueError: unless ``0 < low_freq_factor <= high_freq_factor`` (both finite).
    """
    low_freq_factor = _number(low_freq_factor, "low_freq_factor")
    high_freq_factor = _number(high_freq_factor, "high_freq_factor")
    if low_freq_factor > high_freq_factor:
        raise ValueError(
            f"low_freq_factor must not exceed high_freq_factor, got low_freq_factor="
            f"{low_freq_factor}, high_freq_factor={high_freq_factor}"
        )
    original_length = _integer(original_length, "original_length")
    wavelength = wavelengths(_even_dim(dim, "dim"), check_base(_number(base, "base")))
    divided = wavelength > original_length / low_freq_factor
    if low_freq_factor == high_freq_factor:  # no band to blend in: a step
        return divided.to(torch.float64)
    smooth = (original_length / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    weight = 1.0 - smooth
    weight = torch.where(wavelength < original_length / high_freq_factor, 0.0, weight)
    return torch.where(divided, 1.0, weight)


def dynamic_ntk_alpha(factor: float, original_length: int, length: int) -> float:
    r"""Dynamic NTK's :math:`\alpha` at sequence length :math:`\ell`: :math:`s\ell/L - (s - 1)`,
    or 1 for :math:`\ell \le L`.

    It is 1 at :math:`\ell = L` and grows linearly with :math:`\ell`; at the
    target length :math:`sL` it reaches :math:`s^2 - s + 1`, well above
    :math:`s`.

    Raises:
        ValueError: if ``factor < 1``: :math:`s` is an extension factor, which
            :func:`~.scaled_frequencies` also refuses below 1 (a compression).
    """
    factor = _factor(factor)
    original_length = _integer(original_length, "original_length")
    length = _integer(length, "length")
    if length <= original_length:
        return 1.0
    return factor * length / original_length - (factor - 1.0)


def _ntk_base(d: int, base: float, alpha: float) -> float:
    """NTK-aware scaling's new base ``base * alpha ** (d / (d - 2))``, refused if it overflows."""
    if d < 4:
        raise ValueError(f"d must be >= 4 for NTK-aware scaling (exponent d/(d-2)), got {d}")
    exponent = d / (d - 2)
    if math.log(base) + exponent * math.log(alpha) >= _LOG_MAX:
        raise ValueError(
            f"alpha = {alpha:g} is too large: the new base {base:g} * alpha ** {exponent:.4g} "
            "overflows float64"
        )
    return float(base * alpha**exponent)


def scaled_theta(
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
) -> tuple[torch.Tensor, float]:
    r"""A context-extension method's per-pair frequencies and attention factor.

    With :math:`\theta_k = b^{-2k/d}` (:func:`rope_lessons.rope.ladder.frequencies`)
    and the extension factor :math:`s` (new length over ``original_length``):

    * ``"linear"`` (position interpolation): :math:`\theta_k / s`, every pair.
    * ``"ntk"`` (NTK-aware): a new base :math:`b\,\alpha^{d/(d-2)}`, so pair 0
      is unchanged and the slowest pair is divided by exactly :math:`\alpha`
      (default :math:`\alpha = s`; Peng et al. note that in practice it must
      be set above :math:`s`).
    * ``"dynamic"`` (dynamic NTK): ``"ntk"`` with
      :math:`\alpha = s\ell/L - (s-1)` for the sequence length :math:`\ell`
      (``length``, :func:`dynamic_ntk_alpha`), plain RoPE for :math:`\ell \le L`.
    * ``"yarn"``: :math:`(1-w_k)\,\theta_k + w_k\,\theta_k/s` with
      :func:`yarn_ramp`'s weight :math:`w_k` (``ramp``, ``truncate``), and an
      attention factor: ``attention_factor`` if given, else
      :func:`yarn_attention_factor` (with ``mscale``, ``mscale_all_dim``).
    * ``"llama3"``: the same blend with :func:`llama3_weight`.

    The attention factor multiplies queries and keys (Hugging Face multiplies
    cos and sin by it); it is 1 for every method but YaRN. Every method gives
    the tables of transformers' ``ROPE_INIT_FUNCTIONS`` (``dynamic`` at
    sequence length ``length``), except YaRN's ``ramp="turns"``, which
    transformers does not have: the attention factor to float64 rounding, the
    frequencies to transformers' float32 rounding (tested at bases 1e4, 5e5
    and 1e6 to a relative 5e-6). On the pairs that YaRN and Llama 3 blend,
    that rounding grows with the factor: up to about 1.4e-5 relative at
    ``factor=64`` with a narrow Llama 3 band. NumPy integers and floats are
    accepted where ints and floats are.

    Args:
        d: head dimension (even).
        method: one of :data:`EXTENSION_METHODS`.
        factor: the extension factor :math:`s \ge 1`.
        original_length: the trained context length ``L``.
        base: RoPE's base :math:`b`.
        alpha: NTK-aware's :math:`\alpha \ge 1` (``"ntk"`` only; default ``factor``).
        length: the sequence length :math:`\ell` (``"dynamic"`` only, required).
        beta_fast, beta_slow: YaRN's turn counts (``beta_fast > beta_slow > 0``).
        ramp, truncate: YaRN's ramp (see :func:`yarn_ramp`).
        mscale, mscale_all_dim: YaRN's attention-factor parameters, together.
        attention_factor: YaRN's attention factor, given explicitly (> 0).
        low_freq_factor, high_freq_factor: Llama 3's wavelength bounds
            (``0 < low_freq_factor < high_freq_factor``).
        layout: the layout of the spec (that of the model it extends).

    Returns:
        ``(theta, attention_factor)``: the method's table, float64 ``(d/2,)``
        with pair 0 fastest, and YaRN's attention factor for ``"yarn"``, 1
        otherwise. :func:`~rope_lessons.rope.scaled_specs.scaled_frequencies`
        makes the two a spec.

    Raises:
        ValueError: on a parameter given to a method that does not use it, or
            a factor so large that a frequency underflows float64.
    """
    d = _even_dim(d, "d")
    method = check_choice(method, "method", EXTENSION_METHODS)
    factor = _factor(factor)
    original_length = _integer(original_length, "original_length")
    base = check_base(_number(base, "base"))
    _refuse_unused(
        method,
        {
            "alpha": (alpha is not None, ("ntk",)),
            "length": (length is not None, ("dynamic",)),
            "ramp": (ramp != "pairs", ("yarn",)),
            "truncate": (truncate is not True, ("yarn",)),
            "mscale": (mscale is not None, ("yarn",)),
            "mscale_all_dim": (mscale_all_dim is not None, ("yarn",)),
            "attention_factor": (attention_factor is not None, ("yarn",)),
            "beta_fast": (beta_fast != 32.0, ("yarn",)),
            "beta_slow": (beta_slow != 1.0, ("yarn",)),
            "low_freq_factor": (low_freq_factor != 1.0, ("llama3",)),
            "high_freq_factor": (high_freq_factor != 4.0, ("llama3",)),
        },
    )
    theta = frequencies(d, base)
    scale = 1.0
    if method == "linear":
        new = theta / factor
    elif method in ("ntk", "dynamic"):
        if method == "ntk":
            alpha = factor if alpha is None else _number(alpha, "alpha")
            if alpha < 1.0:
                raise ValueError(f"alpha must be >= 1, got {alpha}")
        else:
            if length is None:
                raise ValueError("method 'dynamic' needs length= (the sequence length read)")
            alpha = dynamic_ntk_alpha(factor, original_length, length)
        new = theta if alpha == 1.0 else frequencies(d, _ntk_base(d, base, alpha))
    elif method == "yarn":
        if attention_factor is not None:
            if mscale is not None or mscale_all_dim is not None:
                raise ValueError("give attention_factor or mscale and mscale_all_dim, not both")
            scale = _number(attention_factor, "attention_factor")
        else:
            scale = yarn_attention_factor(factor, mscale, mscale_all_dim)
        weight = yarn_ramp(
            d, base, original_length, beta_fast, beta_slow, ramp=ramp, truncate=truncate
        )
        new = (1.0 - weight) * theta + weight * theta / factor
    else:
        weight = llama3_weight(d, base, original_length, low_freq_factor, high_freq_factor)
        new = (1.0 - weight) * theta + weight * theta / factor
    if not bool((new >= _TINY).all()):
        raise ValueError(
            f"factor = {factor:g} is too large: the slowest frequency of {method!r} falls below "
            "the smallest normal float64"
        )
    return new, scale


def _refuse_unused(method: str, given: dict[str, tuple[bool, tuple[str, ...]]]) -> None:
    """Refuse a parameter set away from its default for a method that does not read it."""
    for name, (is_set, users) in given.items():
        if is_set and method not in users:
            raise ValueError(
                f"{name} is a parameter of {' and '.join(users)} only, not of method {method!r}"
            )


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
    d = _even_dim(d, "d")
    original_length = _integer(original_length, "original_length")
    return int((wavelengths(d, check_base(_number(base, "base"))) <= original_length).sum())


def aggregation_sum(d: int, length: int, base: float, *, p: float = 1.0) -> torch.Tensor:
    r"""Men et al.'s :math:`B_b(m) = \sum_k \cos(m\,\theta_k)` for distances ``m < length``.

    For a query with i.i.d. entries of variance :math:`\sigma^2`, the expected
    score of a key similar to it beats that of a random key by
    :math:`2\sigma^2 B_b(m)`; a negative value means RoPE prefers the random key.
    With partial rotation (``p < 1``, :func:`~rope_lessons.rope.ladder.frequencies`)
    the pairs that do not turn add 1 each at every distance.

    Returns:
        float64 tensor ``(length,)``.
    """
    m = torch.arange(_integer(length, "length"), dtype=torch.float64)
    theta = frequencies(_even_dim(d, "d"), base, p=p)
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
    be missed, so a finer grid can only lower the answer. Men et al. present
    the bound as a necessary condition for the context; it is a property of
    random queries, not a measured cliff.

    Raises:
        ValueError: if ``low > high``, if no base on the grid passes, or if
            the first base of the grid (``low``) already passes (the bound
            may then lie below the grid: lower ``low``).
    """
    length = _integer(length, "length")
    d = _even_dim(d, "d")
    per_decade = _integer(per_decade, "per_decade")
    low = check_base(_number(float(length) if low is None else low, "low"))
    high = _number(1000.0 * length if high is None else high, "high")
    if low > high:
        raise ValueError(f"low must not exceed high, got low={low:g}, high={high:g}")
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
            first = int(torch.nonzero(alive)[0]) + start
            if first == 0:
                raise ValueError(
                    f"the first base of the grid, low={low:g}, already keeps B(m) >= 0 for "
                    f"every m < {length}: the bound may lie below it; lower low"
                )
            return float(grid[first])
    raise ValueError(f"no base in [{low}, {high}] keeps B(m) >= 0 for every m < {length}")


def log_length_scale(length: int, original_length: int) -> torch.Tensor:
    r"""Su's query scale at each position: :math:`\max(1, \log(m+1) / \log L)`.

    A causal query at position ``m`` sees ``m + 1`` keys; multiplying its
    logits by :math:`\log(m+1)/\log L` keeps the entropy of its attention
    roughly what it was at the trained length ``L``. Su (2021, kexue.fm 8823)
    proposes training with a :math:`\log_{512} n` factor; applying it only
    past the trained length, clamped at 1 as here, is the inference-time
    variant (Qwen's "LogN-Scaling").

    Returns:
        float64 tensor ``(length,)``, 1 up to position ``L - 1``.

    Raises:
        ValueError: if ``original_length < 2`` (its logarithm divides).
    """
    m = torch.arange(_integer(length, "length"), dtype=torch.float64)
    original_length = _integer(original_length, "original_length")
    if original_length < 2:
        raise ValueError(f"original_length must be >= 2 (log of it divides), got {original_length}")
    scale = torch.log(m + 1.0) / math.log(original_length)
    return scale.clamp(min=1.0)
