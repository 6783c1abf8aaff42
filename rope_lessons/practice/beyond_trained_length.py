r"""Chapter 8's exercises: YaRN's and Llama 3's frequencies from a Hugging Face configuration.

A model extended past its trained length says so in its ``rope_parameters``
(chapter 8, :doc:`the extension methods </book/08_beyond_trained_length_methods>`).
The reader writes ``fn(rope_parameters, head_dim)`` returning what transformers'
``ROPE_INIT_FUNCTIONS[rope_type]`` returns for it: the inverse frequencies, one
per pair, ``(head_dim // 2,)`` with pair 0 fastest, and the attention factor
that multiplies cos and sin.

* :func:`check_yarn` (``rope_type="yarn"``): pairs that turn more than
  ``beta_fast`` times within ``original_max_position_embeddings`` keep their
  frequency, pairs that turn fewer than ``beta_slow`` times are divided by
  ``factor``, and a ramp, linear in the pair index and truncated to whole
  pairs unless ``truncate`` is false, blends the two in between; the attention
  factor is ``attention_factor`` if given, else :math:`0.1 \ln s + 1`, or
  DeepSeek's ratio when ``mscale`` and ``mscale_all_dim`` are both given.
* :func:`check_llama3` (``rope_type="llama3"``): pairs whose wavelength is
  shorter than ``L / high_freq_factor`` are kept, those longer than
  ``L / low_freq_factor`` divided by ``factor``, and the frequencies in between
  blended; the attention factor is 1.

Each checker runs ``fn`` on published and synthetic configurations (several
head dimensions, bases, factors, trained lengths; for YaRN, optional fields
left out, other betas, ``truncate`` off, ``mscale`` and an explicit attention
factor; for Llama 3, a band of other bounds and Llama 4 Scout's step) and
compares it with :func:`~rope_lessons.rope.hf_config.hf_rope`, the package's
reader of the same configuration, whose tables the tests show equal
transformers' own to float32 rounding. When they differ, it looks for the bug
among wrong implementations, each written with the package's own functions:
the ramp reversed (fast pairs divided, slow ones kept), every pair divided
(position interpolation), none divided, the frequencies multiplied, the
extended length in place of the trained one, ``truncate`` ignored or never
applied, the paper's ramp in turns, ``rope_theta``, the betas or Llama 3's
bounds ignored, Llama 3's bounds swapped or its blend reversed; and, for the
attention factor, 1, the factor squared or square-rooted, ``mscale``
ignored or inverted, ``attention_factor`` ignored, the logarithm's base or
its 0.1 wrong, the ``+ 1`` left out, ``factor`` itself, and YaRN's factor given
to Llama 3.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch

from rope_lessons._grading import Report, raised, unrecognised
from rope_lessons.rope.hf_config import hf_rope
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.scaling import scaled_theta, yarn_attention_factor

__all__ = ["check_llama3", "check_yarn"]

ScaledFrequencies = Callable[[dict[str, Any], int], tuple[torch.Tensor, float]]
"""``fn(rope_parameters, head_dim) -> (inv_freq (head_dim // 2,), attention_factor)``."""

Method = Literal["yarn", "llama3"]

# Relative to each pair's frequency: transformers' float32 tables differ from float64 ones by
# up to about 1.4e-5 on the pairs YaRN and Llama 3 blend at large factors; every bug below
# moves some pair by far more.
_TOLERANCE = 1e-4
_FACTOR_TOLERANCE = 1e-6  # relative, for the attention factor (a Python float in transformers)

# (what the configuration is, head_dim, rope_parameters)
_YARN_CASES: tuple[tuple[str, int, dict[str, Any]], ...] = (
    (
        "Llama 2 read 8 times further",
        128,
        {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 8.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
        },
    ),
    (
        "Qwen2.5's, optional fields left out",
        128,
        {
            "rope_type": "yarn",
            "rope_theta": 1000000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
        },
    ),
    (
        "gpt-oss's, truncate off",
        64,
        {
            "rope_type": "yarn",
            "rope_theta": 150000.0,
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
        },
    ),
    (
        "DeepSeek's mscale fields",
        64,
        {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 0.5,
        },
    ),
    (
        "other betas, a factor of 2.5",
        32,
        {
            "rope_type": "yarn",
            "rope_theta": 500000.0,
            "factor": 2.5,
            "original_max_position_embeddings": 2048,
            "beta_fast": 16.0,
            "beta_slow": 2.0,
        },
    ),
    (
        "an explicit attention_factor",
        64,
        {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 16.0,
            "original_max_position_embeddings": 8192,
            "attention_factor": 1.2,
        },
    ),
)

_LLAMA3_CASES: tuple[tuple[str, int, dict[str, Any]], ...] = (
    (
        "Llama 3.1's",
        128,
        {
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    ),
    (
        "Llama 3.2 1B's",
        64,
        {
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    ),
    (
        "Llama 4 Scout's step, low = high",
        128,
        {
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 16.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 1.0,
            "original_max_position_embeddings": 8192,
        },
    ),
    (
        "a band from 2 to 8, a small head",
        32,
        {
            "rope_type": "llama3",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "low_freq_factor": 2.0,
            "high_freq_factor": 8.0,
            "original_max_position_embeddings": 1024,
        },
    ),
    (
        "base 1e6, a factor of 2.5",
        64,
        {
            "rope_type": "llama3",
            "rope_theta": 1000000.0,
            "factor": 2.5,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 4096,
        },
    ),
)

_FIELDS = {
    "yarn": (
        "rope_parameters may leave out the optional fields: read them with .get and "
        "transformers' defaults (beta_fast 32, beta_slow 1, truncate True; attention_factor, "
        "mscale and mscale_all_dim None)"
    ),
    "llama3": (
        "rope_parameters holds rope_theta, factor, low_freq_factor, high_freq_factor and "
        "original_max_position_embeddings"
    ),
}
_NAMES = {"yarn": "YaRN", "llama3": "Llama 3's scaling"}


@dataclass(frozen=True, eq=False)
class _Case:
    """One configuration and what ``fn`` must return for it."""

    name: str
    head_dim: int
    parameters: dict[str, Any]
    theta: torch.Tensor  # (head_dim/2,) float64, pair 0 fastest
    attention_factor: float

    @property
    def base(self) -> float:
        return float(self.parameters["rope_theta"])

    @property
    def factor(self) -> float:
        return float(self.parameters["factor"])

    @property
    def ladder(self) -> torch.Tensor:
        """RoPE's own frequencies, before any scaling: ``(head_dim/2,)``."""
        return frequencies(self.head_dim, self.base)

    @property
    def explicit_factor(self) -> bool:
        return self.parameters.get("attention_factor") is not None


@dataclass(frozen=True, eq=False)
class _Result:
    case: _Case
    theta: torch.Tensor  # fn's inverse frequencies, float64
    attention_factor: float
    theta_error: float  # max over pairs of |fn - reference| / reference
    factor_error: float  # |fn - reference| / reference

    @property
    def theta_passed(self) -> bool:
        return self.theta_error <= _TOLERANCE

    @property
    def factor_passed(self) -> bool:
        return self.factor_error <= _FACTOR_TOLERANCE


@dataclass(frozen=True)
class _Bug:
    """A wrong implementation: its message, and what it returns for a case."""

    message: str
    theta: Callable[[_Case], torch.Tensor] | None = None
    attention_factor: Callable[[_Case], float] | None = None


def _read(parameters: Mapping[str, Any], head_dim: int) -> tuple[torch.Tensor, float]:
    """The package's reading of a configuration: frequencies (float64) and attention factor."""
    read = hf_rope({"head_dim": head_dim, "rope_parameters": dict(parameters)})
    return read.theta, read.attention_factor


def _changed(case: _Case, **fields: Any) -> tuple[torch.Tensor, float]:
    """:func:`_read` of the case's configuration with ``fields`` changed (None: left out)."""
    parameters = {**case.parameters, **fields}
    return _read({k: v for k, v in parameters.items() if v is not None}, case.head_dim)


def _cases(method: Method) -> list[_Case]:
    cases = []
    for what, head_dim, parameters in _YARN_CASES if method == "yarn" else _LLAMA3_CASES:
        theta, attention_factor = _read(parameters, head_dim)
        name = f"{what}: head_dim={head_dim}, rope_parameters={parameters}"
        cases.append(_Case(name, head_dim, dict(parameters), theta, attention_factor))
    return cases


# The wrong frequencies. With theta the ladder, s the factor and the reference
# (1 - w) theta / s + w theta (w = 1 kept, 0 divided), reversing the blend gives
# theta + theta / s - reference, and multiplying by s in place of dividing gives
# theta + s (theta - reference).


def _reversed(case: _Case) -> torch.Tensor:
    return case.ladder + case.ladder / case.factor - case.theta


def _reversed_in_band(case: _Case) -> torch.Tensor:
    """The blend's two terms swapped on the pairs Llama 3 blends, the others as they were."""
    ladder = case.ladder
    kept = (case.theta - ladder).abs() <= 1e-9 * ladder
    divided = (case.theta - ladder / case.factor).abs() <= 1e-9 * ladder
    return torch.where(kept | divided, case.theta, _reversed(case))


def _paper_ramp(case: _Case) -> torch.Tensor:
    parameters = case.parameters
    theta, _ = scaled_theta(
        case.head_dim,
        "yarn",
        factor=case.factor,
        original_length=int(parameters["original_max_position_embeddings"]),
        base=case.base,
        beta_fast=float(parameters.get("beta_fast") or 32.0),
        beta_slow=float(parameters.get("beta_slow") or 1.0),
        ramp="turns",
    )
    return theta


def _extended_length(case: _Case) -> torch.Tensor:
    length = case.parameters["original_max_position_embeddings"]
    return _changed(case, original_max_position_embeddings=round(case.factor * length))[0]


def _frequency_bugs(method: Method) -> list[_Bug]:
    """The usual wrong frequencies of ``method``, the likeliest first."""
    keep, divide = (
        ("pairs that turn many times within the trained length", "those that turn few times")
        if method == "yarn"
        else ("pairs of short wavelength", "those of long wavelength")
    )
    bugs = [
        _Bug(
            "ramp reversed: fn divides the fast pairs by factor and keeps the slow ones, where "
            f"{_NAMES[method]} keeps the {keep} (pair 0 first) and divides {divide}: the "
            "weights of the two terms of the blend are swapped (the ramp gives the share of "
            "a pair that is divided, 1 - ramp the share that keeps its frequency)",
            theta=_reversed,
        ),
    ]
    if method == "llama3":
        bugs.append(
            _Bug(
                "blend reversed inside the band: the pairs between the two wavelength bounds "
                "get smooth·θ/s + (1 - smooth)·θ where Llama 3 gives (1 - smooth)·θ/s + "
                "smooth·θ, with smooth = (L/λ - low_freq_factor) / (high_freq_factor - "
                "low_freq_factor): a pair nearer the fast side must keep more of its frequency",
                theta=_reversed_in_band,
            )
        )
    bugs += [
        _Bug(
            "every pair divided by factor: fn returns θ/s for all pairs, which is position "
            f"interpolation (rope_type 'linear'), not {_NAMES[method]}: the fast pairs must "
            "keep their frequency, and only the slow ones be divided",
            theta=lambda case: _changed(case, rope_type="linear", **_unused(case))[0],
        ),
        _Bug(
            "frequencies not scaled: fn returns RoPE's own ladder base^(-2k/d); divide the "
            "slow pairs by factor and blend the pairs in between",
            theta=lambda case: case.ladder,
        ),
        _Bug(
            "frequencies multiplied by factor: the pairs to interpolate get θ·s where they "
            "need θ/s (inv_freq / factor, or 1 / (factor · base^(2k/d)))",
            theta=lambda case: case.ladder + case.factor * (case.ladder - case.theta),
        ),
        _Bug(
            "wrong original length: fn measures each pair's turns (or wavelength) against "
            "factor × original_max_position_embeddings, the extended length "
            "(max_position_embeddings), where the method measures them against the length "
            "the model was trained on, original_max_position_embeddings",
            theta=_extended_length,
        ),
    ]
    if method == "yarn":
        bugs += [
            _Bug(
                "truncate ignored: fn floors and ceils the ramp's ends even when "
                "rope_parameters says truncate=False; keep them fractional then",
                theta=lambda case: _changed(case, truncate=True)[0],
            ),
            _Bug(
                "ramp ends not truncated: fn keeps the fractional pair indices where the ramp "
                "starts and ends, where transformers floors the start and ceils the end "
                "(truncate defaults to True; only truncate=False keeps them fractional)",
                theta=lambda case: _changed(case, truncate=False)[0],
            ),
            _Bug(
                "the paper's ramp: fn ramps linearly in the number of turns L/λ_k between "
                "beta_slow and beta_fast, as Peng et al.'s γ(r) does, where transformers (and "
                "YaRN's reference code) ramp linearly in the pair index, between the pairs that "
                "turn beta_fast and beta_slow times",
                theta=_paper_ramp,
            ),
            _Bug(
                "beta_fast and beta_slow ignored: fn uses 32 and 1 even when rope_parameters "
                "gives other values; read them with .get('beta_fast') or 32 (and 1)",
                theta=lambda case: _changed(case, beta_fast=32.0, beta_slow=1.0)[0],
            ),
        ]
    else:
        bugs += [
            _Bug(
                "wavelength bounds swapped: fn divides every pair whose wavelength exceeds "
                "L / high_freq_factor and blends none, as when the low and high bounds are "
                "exchanged; pairs with wavelength above L / low_freq_factor are divided, "
                "below L / high_freq_factor kept, and those in between blended",
                theta=lambda case: _changed(
                    case, low_freq_factor=case.parameters["high_freq_factor"]
                )[0],
            ),
            _Bug(
                "low_freq_factor and high_freq_factor ignored: fn uses Meta's 1 and 4 even "
                "when rope_parameters gives other bounds; read them from rope_parameters",
                theta=lambda case: _changed(case, low_freq_factor=1.0, high_freq_factor=4.0)[0],
            ),
        ]
    bugs.append(
        _Bug(
            "rope_theta ignored: fn scales the ladder of base 10000 whatever rope_theta says; "
            "build θ_k = rope_theta^(-2k/d)",
            theta=lambda case: _changed(case, rope_theta=10000.0)[0],
        )
    )
    return bugs


def _unused(case: _Case) -> dict[str, None]:
    """The fields of the case that position interpolation does not read, to leave out."""
    reads = {"rope_type", "rope_theta", "factor"}
    return {field: None for field in case.parameters if field not in reads}


def _formula(case: _Case, factor: float) -> float:
    """The attention factor of the case with ``factor`` in place of s (a field given
    explicitly still wins): how a wrong logarithm is written with the package's formula."""
    return _changed(case, factor=factor)[1]


def _attention_bugs(method: Method) -> list[_Bug]:
    """The usual wrong attention factors of ``method``, the likeliest first."""
    if method == "llama3":
        return [
            _Bug(
                "YaRN's attention factor: fn returns 0.1 ln s + 1, but Llama 3's scaling "
                "leaves the logits alone: its attention factor is 1.0",
                attention_factor=lambda case: yarn_attention_factor(case.factor),
            ),
            _Bug(
                "attention factor = factor: fn returns the extension factor s; Llama 3's "
                "attention factor is 1.0",
                attention_factor=lambda case: case.factor,
            ),
        ]

    def computed(value: Callable[[_Case], float]) -> Callable[[_Case], float]:
        """A wrong formula, where the attention factor is not given explicitly."""
        return lambda case: case.attention_factor if case.explicit_factor else value(case)

    def without_one(case: _Case) -> float:
        mscale, all_dim = case.parameters.get("mscale"), case.parameters.get("mscale_all_dim")
        if mscale and all_dim:  # (0.1 mscale ln s) / (0.1 mscale_all_dim ln s)
            return float(mscale) / float(all_dim)
        return yarn_attention_factor(case.factor) - 1.0

    return [
        _Bug(
            "attention factor missing: fn returns 1.0, where YaRN multiplies cos and sin (so "
            "queries and keys) by attention_factor, or 0.1 ln s + 1 when it is not given",
            attention_factor=lambda case: 1.0,
        ),
        _Bug(
            "attention factor squared: fn returns (0.1 ln s + 1)², the factor on the logits "
            "(Peng et al.'s 1/t); transformers multiplies cos and sin by its square root, "
            "0.1 ln s + 1, so that queries and keys each carry one factor",
            attention_factor=computed(lambda case: case.attention_factor**2),
        ),
        _Bug(
            "square root of the attention factor: fn returns √(0.1 ln s + 1), but "
            "0.1 ln s + 1 is already √(1/t), the factor on queries and keys (cos and sin)",
            attention_factor=computed(lambda case: math.sqrt(case.attention_factor)),
        ),
        _Bug(
            "mscale and mscale_all_dim ignored: fn returns 0.1 ln s + 1 where both are "
            "given; transformers then returns (0.1·mscale·ln s + 1) / "
            "(0.1·mscale_all_dim·ln s + 1)",
            attention_factor=computed(
                lambda case: _changed(case, mscale=None, mscale_all_dim=None)[1]
            ),
        ),
        _Bug(
            "mscale ratio inverted: fn divides by the mscale term, (0.1·mscale_all_dim·ln s "
            "+ 1) / (0.1·mscale·ln s + 1); mscale goes in the numerator",
            attention_factor=computed(
                lambda case: _changed(
                    case,
                    mscale=case.parameters.get("mscale_all_dim"),
                    mscale_all_dim=case.parameters.get("mscale"),
                )[1]
            ),
        ),
        _Bug(
            "attention_factor ignored: fn computes the factor from factor (0.1 ln s + 1) even "
            "when rope_parameters gives attention_factor, which transformers returns as it is",
            attention_factor=lambda case: _changed(case, attention_factor=None)[1],
        ),
        _Bug(
            "wrong attention factor formula: fn uses log10(s) where YaRN's 0.1 ln s + 1 takes "
            "the natural logarithm (math.log)",
            attention_factor=computed(
                lambda case: _formula(case, case.factor ** (1 / math.log(10)))
            ),
        ),
        _Bug(
            "wrong attention factor formula: fn uses log2(s) where YaRN's 0.1 ln s + 1 takes "
            "the natural logarithm (math.log)",
            attention_factor=computed(
                lambda case: _formula(case, case.factor ** (1 / math.log(2)))
            ),
        ),
        _Bug(
            "wrong attention factor formula: fn returns ln s + 1, without the 0.1 of YaRN's "
            "0.1 ln s + 1",
            attention_factor=computed(lambda case: _formula(case, case.factor**10)),
        ),
        _Bug(
            "wrong attention factor formula: fn returns 0.1 ln s, without the + 1 of YaRN's "
            "0.1 ln s + 1 (which is 1 at s = 1: no extension, no change)",
            attention_factor=computed(without_one),
        ),
        _Bug(
            "attention factor = factor: fn returns the extension factor s, where YaRN's "
            "attention factor is 0.1 ln s + 1 (or the attention_factor given)",
            attention_factor=lambda case: case.factor,
        ),
    ]


def check_yarn(fn: ScaledFrequencies) -> Report:
    r"""Check that ``fn`` computes YaRN's frequencies and attention factor, and name the bug.

    ``fn(rope_parameters, head_dim)`` gets a Hugging Face ``rope_parameters``
    dict with ``rope_type="yarn"``, ``rope_theta`` (the base :math:`b`),
    ``factor`` (:math:`s`), ``original_max_position_embeddings`` (the trained
    length :math:`L`) and, optionally, ``beta_fast`` (default 32), ``beta_slow``
    (1), ``truncate`` (True), ``attention_factor``, ``mscale`` and
    ``mscale_all_dim``; and the head dimension ``d``, an even int (every feature
    rotates). It returns ``(inv_freq, attention_factor)``: a float32 or float64
    tensor ``(d/2,)``, pair 0 fastest, and a number, as transformers'
    ``ROPE_INIT_FUNCTIONS["yarn"]`` computes them:

    * pair ``k`` of RoPE's ladder :math:`\theta_k = b^{-2k/d}` turns
      :math:`L\theta_k / 2\pi` times within :math:`L`; the fractional pair
      index that turns ``beta`` times is
      :math:`d \ln(L / (2\pi\,\text{beta})) / (2 \ln b)`;
    * the ramp rises linearly in ``k`` from 0 at the pair that turns
      ``beta_fast`` times (floored, with ``truncate``) to 1 at the pair that
      turns ``beta_slow`` times (ceiled), clipped to [0, 1] (and its ends to
      ``[0, d - 1]``);
    * :math:`\theta'_k = \theta_k / s \cdot \text{ramp}_k + \theta_k (1 - \text{ramp}_k)`;
    * the attention factor is ``attention_factor`` if given, else
      :math:`(0.1\,\text{mscale} \ln s + 1) / (0.1\,\text{mscale\_all\_dim} \ln s + 1)`
      if both ``mscale`` and ``mscale_all_dim`` are given (and not 0), else
      :math:`0.1 \ln s + 1`.

    The cases, each on a fresh copy of its dict: Llama 2's head (``d = 128``,
    base :math:`10^4`) read 8 times past 4096; Qwen2.5's (base :math:`10^6`,
    :math:`s = 4` past 32768) with the optional fields left out; gpt-oss's
    (``d = 64``, base 150000, :math:`s = 32`, ``truncate=False``); DeepSeek's
    ``mscale`` fields (:math:`s = 40`, ``mscale`` 1 and ``mscale_all_dim``
    0.5); betas 16 and 2 with :math:`s = 2.5` at ``d = 32``, base
    :math:`5 \times 10^5`; and an explicit ``attention_factor`` of 1.2.

    The diagnosis starts with one of these phrases (a wrong frequency and a
    wrong attention factor are named together, joined by ``"; "``):

    * ``"correct"``: every case matched;
    * on the frequencies: ``"ramp reversed"`` (fast pairs divided, slow ones
      kept), ``"every pair divided by factor"`` (position interpolation),
      ``"frequencies not scaled"``, ``"frequencies multiplied by factor"``,
      ``"wrong original length"`` (the extended length, ``factor`` ×
      ``original_max_position_embeddings``, in place of the trained one),
      ``"truncate ignored"``, ``"ramp ends not truncated"``, ``"the paper's
      ramp"`` (linear in turns), ``"beta_fast and beta_slow ignored"``,
      ``"rope_theta ignored"``;
    * on the attention factor: ``"attention factor missing"`` (1.0),
      ``"attention factor squared"``, ``"square root of the attention
      factor"``, ``"mscale and mscale_all_dim ignored"``, ``"mscale ratio
      inverted"``, ``"attention_factor ignored"``, ``"wrong attention factor
      formula"`` (log10, log2, no 0.1, no + 1), ``"attention factor = factor"``;
    * ``"not written yet"`` (``fn`` raised ``NotImplementedError``), ``"fn
      raised"`` (with a hint on the optional fields for a ``KeyError``),
      ``"fn did not return (inv_freq, attention_factor)"``, ``"inv_freq is not a
      tensor"``, ``"wrong inv_freq dtype"``, ``"wrong inv_freq shape"``,
      ``"attention factor is not a number"``;
    * ``"unrecognised difference"``: none of the above reproduces ``fn``; the
      message gives the first pair that differs.

    Args:
        fn: the function to check, ``(rope_parameters, head_dim) -> (inv_freq,
            attention_factor)``.

    Returns:
        A :class:`~rope_lessons._grading.Report`; ``max_error`` is the largest
        difference relative to the reference, over the pairs' frequencies and
        the attention factor. The tolerances, 1e-4 on each frequency and 1e-6
        on the attention factor, let tables computed in float32, as transformers
        computes them, pass.

    Raises:
        TypeError: if ``fn`` is not callable.
    """
    return _check(fn, "yarn")


def check_llama3(fn: ScaledFrequencies) -> Report:
    r"""Check that ``fn`` computes Llama 3's scaled frequencies, and name the bug.

    ``fn(rope_parameters, head_dim)`` gets a Hugging Face ``rope_parameters``
    dict with ``rope_type="llama3"``, ``rope_theta`` (the base :math:`b`),
    ``factor`` (:math:`s`), ``low_freq_factor``, ``high_freq_factor`` and
    ``original_max_position_embeddings`` (the trained length :math:`L`); and
    the head dimension ``d``, an even int. It returns ``(inv_freq,
    attention_factor)``: a float32 or float64 tensor ``(d/2,)``, pair 0
    fastest, and a number, as transformers' ``ROPE_INIT_FUNCTIONS["llama3"]``
    (Meta's ``apply_scaling``) computes them:

    * pair ``k`` of RoPE's ladder :math:`\theta_k = b^{-2k/d}` has the
      wavelength :math:`\lambda_k = 2\pi/\theta_k`;
    * pairs with :math:`\lambda_k < L / \text{high\_freq\_factor}` keep
      :math:`\theta_k`; pairs with :math:`\lambda_k > L / \text{low\_freq\_factor}`
      get :math:`\theta_k / s`;
    * in between, with :math:`\text{smooth} = (L/\lambda_k -
      \text{low\_freq\_factor}) / (\text{high\_freq\_factor} - \text{low\_freq\_factor})`,
      :math:`(1 - \text{smooth})\,\theta_k / s + \text{smooth}\,\theta_k`;
    * the attention factor is 1.0.

    The cases, each on a fresh copy of its dict: Llama 3.1's (``d = 128``, base
    :math:`5 \times 10^5`, :math:`s = 8`, bounds 1 and 4, :math:`L = 8192`),
    Llama 3.2 1B's (``d = 64``, :math:`s = 32`), Llama 4 Scout's step (bounds 1
    and 1: no band), a band from 2 to 8 at ``d = 32`` (base :math:`10^4`,
    :math:`L = 1024`, :math:`s = 4`), and base :math:`10^6` with :math:`s = 2.5`
    at ``d = 64``.

    The diagnosis starts with one of these phrases (a wrong frequency and a
    wrong attention factor are named together, joined by ``"; "``):

    * ``"correct"``: every case matched;
    * on the frequencies: ``"ramp reversed"`` (fast pairs divided, slow ones
      kept), ``"blend reversed inside the band"``, ``"every pair divided by
      factor"`` (position interpolation), ``"frequencies not scaled"``,
      ``"frequencies multiplied by factor"``, ``"wrong original length"``,
      ``"wavelength bounds swapped"``, ``"low_freq_factor and high_freq_factor
      ignored"``, ``"rope_theta ignored"``;
    * on the attention factor: ``"YaRN's attention factor"``, ``"attention
      factor = factor"``;
    * ``"not written yet"``, ``"fn raised"``, ``"fn did not return (inv_freq,
      attention_factor)"``, ``"inv_freq is not a tensor"``, ``"wrong inv_freq
      dtype"``, ``"wrong inv_freq shape"``, ``"attention factor is not a
      number"``;
    * ``"unrecognised difference"``: none of the above reproduces ``fn``; the
      message gives the first pair that differs.

    Args:
        fn: the function to check, ``(rope_parameters, head_dim) -> (inv_freq,
            attention_factor)``.

    Returns:
        A :class:`~rope_lessons._grading.Report`, as :func:`check_yarn`'s.

    Raises:
        TypeError: if ``fn`` is not callable.
    """
    return _check(fn, "llama3")


def _check(fn: ScaledFrequencies, method: Method) -> Report:
    if not callable(fn):
        raise TypeError(
            f"fn must be callable, fn(rope_parameters, head_dim) -> (inv_freq, "
            f"attention_factor); got {fn!r}"
        )
    cases = _cases(method)
    names = tuple(case.name for case in cases)
    results = []
    with torch.no_grad():
        for case in cases:
            try:
                out: object = fn(copy.deepcopy(case.parameters), case.head_dim)
            except Exception as failure:  # the reader's code may raise anything; a stub, too
                hint = f"; {_FIELDS[method]}" if isinstance(failure, KeyError) else ""
                return raised(failure, "fn", case.name, names, hint=hint)
            checked = _checked_output(out, case)
            if isinstance(checked, str):
                return Report(False, checked, math.inf, names, (case.name,))
            results.append(_result(case, *checked))
    failed = tuple(r.case.name for r in results if not (r.theta_passed and r.factor_passed))
    max_error = max(max(r.theta_error, r.factor_error) for r in results)
    if failed:
        return Report(False, _diagnose(results, method), max_error, names, failed)
    dims = ", ".join(str(d) for d in sorted({case.head_dim for case in cases}))
    factors = ", ".join(f"{s:g}" for s in sorted({case.factor for case in cases}))
    diagnosis = (
        f"correct: inv_freq and the attention factor match {_NAMES[method]} as transformers "
        f"computes it (ROPE_INIT_FUNCTIONS[{method!r}]) on all {len(cases)} configurations "
        f"(head_dim {dims}; factor {factors})"
    )
    return Report(True, diagnosis, max_error, names, ())


def _checked_output(out: object, case: _Case) -> tuple[torch.Tensor, float] | str:
    """``fn``'s inverse frequencies and attention factor if they can be compared, else why not."""
    pairs = case.head_dim // 2
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        return (
            f"fn did not return (inv_freq, attention_factor): it returned "
            f"{type(out).__name__}{_length(out)} ({case.name}); return a pair, as "
            "transformers' ROPE_INIT_FUNCTIONS do"
        )
    theta, factor = out
    if not isinstance(theta, torch.Tensor):
        return (
            f"inv_freq is not a tensor: fn returned {type(theta).__name__} as inv_freq "
            f"({case.name}); return a torch tensor of shape ({pairs},)"
        )
    if not theta.is_floating_point() or theta.dtype in (torch.float16, torch.bfloat16):
        return (
            f"wrong inv_freq dtype: fn returned {theta.dtype} ({case.name}); return float32 "
            "(as transformers does) or float64: half precision rounds each frequency by up "
            "to 0.4%, and integers hold none"
        )
    if tuple(theta.shape) != (pairs,):
        doubled = (
            ": one frequency per pair, not the cos/sin table's d columns"
            if tuple(theta.shape) == (case.head_dim,)
            else ""
        )
        return (
            f"wrong inv_freq shape: fn returned {tuple(theta.shape)} for head_dim="
            f"{case.head_dim} ({case.name}); return (head_dim // 2,) = ({pairs},){doubled}"
        )
    if isinstance(factor, torch.Tensor) and factor.numel() == 1 and factor.is_floating_point():
        factor = float(factor)
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real):
        return (
            f"attention factor is not a number: fn returned {type(factor).__name__} "
            f"({case.name}); return a float (1.0 where the method has none)"
        )
    return theta, float(factor)


def _length(out: object) -> str:
    return f" of length {len(out)}" if isinstance(out, (tuple, list)) else ""


def _result(case: _Case, theta: torch.Tensor, factor: float) -> _Result:
    output = theta.detach().to(device="cpu", dtype=torch.float64)
    theta_error = _relative(output, case.theta)
    factor_error = abs(factor - case.attention_factor) / case.attention_factor
    if not math.isfinite(factor_error):
        factor_error = math.inf
    return _Result(case, output, factor, theta_error, factor_error)


def _relative(output: torch.Tensor, reference: torch.Tensor) -> float:
    """The largest difference per pair, relative to ``reference`` (positive); inf for NaN."""
    error = float(((output - reference).abs() / reference.abs()).max())
    return error if math.isfinite(error) else math.inf


def _diagnose(results: list[_Result], method: Method) -> str:
    """Name the bugs of an ``fn`` that failed some case: frequencies first, then the factor."""
    parts = []
    if not all(r.theta_passed for r in results):
        parts.append(_frequency_diagnosis(results, method))
    if not all(r.factor_passed for r in results):
        parts.append(_factor_diagnosis(results, method))
    return "; ".join(parts)


def _frequency_diagnosis(results: list[_Result], method: Method) -> str:
    ordered = sorted(results, key=lambda r: r.theta_passed)  # failures first: they rule out most
    for bug in _frequency_bugs(method):
        assert bug.theta is not None
        theta = bug.theta
        if all(_relative(r.theta, theta(r.case)) <= _TOLERANCE for r in ordered):
            return bug.message
    first = next(r for r in results if not r.theta_passed)
    worst = max(r.theta_error for r in results)
    tolerance = _TOLERANCE * first.case.theta.abs()
    differing = (first.theta - first.case.theta).abs() > tolerance
    pair = int(differing.nonzero()[0]) if bool(differing.any()) else 0
    return unrecognised(
        first.case.name,
        worst,
        f"inv_freq differs first at pair k = {pair} there. Print inv_freq · "
        "rope_theta^(2k/d), the share each pair keeps of its own frequency: 1 on the "
        "pairs kept, 1/factor on those divided, in between on those blended; see where "
        "yours leaves 1 and where it reaches 1/factor",
    )


def _factor_diagnosis(results: list[_Result], method: Method) -> str:
    ordered = sorted(results, key=lambda r: r.factor_passed)
    for bug in _attention_bugs(method):
        assert bug.attention_factor is not None
        value = bug.attention_factor
        if all(
            abs(r.attention_factor - value(r.case)) <= _FACTOR_TOLERANCE * abs(value(r.case))
            for r in ordered
        ):
            return bug.message
    first = next(r for r in results if not r.factor_passed)
    worst = max(r.factor_error for r in results)
    expected = (
        "attention_factor when given, else the mscale ratio when mscale and mscale_all_dim "
        "are both given, else 0.1 ln s + 1"
        if method == "yarn"
        else "Llama 3's scaling has no attention factor"
    )
    return unrecognised(
        first.case.name,
        worst,
        f"The attention factor is {first.attention_factor:.4g} there where it should be "
        f"{first.case.attention_factor:.4g} ({expected})",
    )
