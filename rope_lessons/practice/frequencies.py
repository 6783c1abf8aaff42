r"""Chapter 5's exercises: a head's pair frequencies and turning features from a configuration.

Hugging Face's ``rope_parameters`` use one field, ``partial_rotary_factor``, for
two different tables (chapter 5, :doc:`p-RoPE and partial rotary
</book/05_frequencies_prope>`):

* ``rope_type="proportional"`` (Gemma 4's p-RoPE, Barbero et al.): the head
  keeps RoPE's own ladder :math:`\theta_k = b^{-2k/d}` for its fastest
  :math:`\lfloor p\,d/2 \rfloor` pairs and stops the slowest ones (frequency 0);
* ``rope_type="default"`` with ``partial_rotary_factor`` ``f`` (GPT-NeoX's
  ``rotary_pct``, Phi, Qwen3-Next): the leading :math:`r = \lfloor f\,d \rfloor`
  features rotate on a ladder recomputed over them, :math:`b^{-2k/r}` for
  :math:`k < r/2`, and the other features pass through.

The reader writes ``fn(rope_parameters, head_dim)`` returning the frequency of
every pair of the head, ``(head_dim // 2,)``, pair ``k`` in the order of
:func:`~rope_lessons.rope.ladder.frequencies` (pair 0 first; for partial rotary
the pairs of the leading features come first), 0 for a pair that does not
turn. :func:`check_pair_frequencies` runs it on configurations of both kinds
(p-RoPE with kept counts that need rounding, ``p = 0``, Gemma 4's full
layers; partial rotary as GPT-NeoX's; a plain ladder without the optional
field; several bases) and compares it with the chapter's tables,
:func:`~rope_lessons.chapters.spectrum.prope_theta` and
:func:`~rope_lessons.chapters.spectrum.partial_rotary_theta`. When they differ,
it looks for the bug among wrong readings of the configuration, each written
with the package's own functions: the slowest pairs kept in place of the
fastest, the kept count rounded to nearest or up, ``p`` read as the fraction
stopped, the factor ignored, one rope type read as the other (p-RoPE built on a
ladder recomputed over the kept features, or partial rotary built as p-RoPE
on the head's ladder), the rotating pairs placed last, and ``rope_theta``
ignored.

The second exercise asks where those pairs sit: ``fn(rope_parameters,
head_dim, layout)`` returns which features of the head turn, a bool
mask ``(head_dim,)``. p-RoPE's kept pairs sit where the layout puts pair
``k``, ``(k, k + d/2)`` in the half layout and ``(2k, 2k + 1)`` in the
interleaved one; Hugging Face's partial rotary turns the leading ``r``
features in either layout. :func:`check_turning_features` runs ``fn`` on the
same configurations in both layouts, compares it with the features a
:class:`~rope_lessons.rope.spec.Rope` built by :meth:`~rope_lessons.rope.spec.Rope.from_hf`
turns, and names the bug: p-RoPE's pairs placed as the other layout places
them (or as a leading block, or the layout ignored), one kind read as the
other, partial rotary's pairs spread over the head as if ``rotate_half`` split
the whole head, its features placed last (DeepSeek's slice), and the kept-pair
bugs of the first exercise.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch

from rope_lessons._checks import LAYOUTS, Layout
from rope_lessons._grading import Report, raised, unrecognised
from rope_lessons.chapters.spectrum import pair_dims, partial_rotary_theta, prope_theta
from rope_lessons.rope.hf_config import hf_rope
from rope_lessons.rope.ladder import frequencies, rotating_pairs
from rope_lessons.rope.spec import Rope

__all__ = ["check_pair_frequencies", "check_turning_features"]

PairFrequencies = Callable[[dict[str, Any], int], torch.Tensor]
"""``fn(rope_parameters, head_dim) -> (head_dim // 2,)`` per-pair frequencies."""

_TOLERANCE = 1e-5  # relative: float32 ladders (transformers' inv_freq) pass, nothing wrong does
_DEFAULT_BASE = 10000.0

# Each case is a head dimension and its rope_parameters: plain RoPE without the optional field,
# then both kinds side by side with the same count (8 of 32 pairs), then counts that need
# rounding, other bases, p = 0, GPT-NeoX's and Gemma 4's settings.
_CONFIGS: tuple[tuple[int, dict[str, Any]], ...] = (
    (64, {"rope_type": "default", "rope_theta": 10000.0}),
    (64, {"rope_type": "proportional", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}),
    (64, {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}),
    (64, {"rope_type": "proportional", "rope_theta": 500.0, "partial_rotary_factor": 0.3}),
    (64, {"rope_type": "proportional", "rope_theta": 10000.0, "partial_rotary_factor": 0.1}),
    (128, {"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 0.5}),
    (128, {"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.3}),
    (128, {"rope_type": "proportional", "rope_theta": 1000000.0, "partial_rotary_factor": 0.75}),
    (32, {"rope_type": "proportional", "rope_theta": 10000.0, "partial_rotary_factor": 0.0}),
    (96, {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}),
    (512, {"rope_type": "proportional", "rope_theta": 1000000.0, "partial_rotary_factor": 0.25}),
)


@dataclass(frozen=True)
class _Case:
    name: str
    head_dim: int
    parameters: dict[str, Any]
    reference: torch.Tensor  # float64 (head_dim // 2,)

    @property
    def rope_type(self) -> str:
        return str(self.parameters["rope_type"])

    @property
    def base(self) -> float:
        return float(self.parameters["rope_theta"])

    @property
    def factor(self) -> float:
        return float(self.parameters.get("partial_rotary_factor", 1.0))


def _reference(head_dim: int, parameters: Mapping[str, Any]) -> torch.Tensor:
    """The chapter's table for the configuration: p-RoPE or partial rotary, ``(d/2,)``."""
    base = float(parameters["rope_theta"])
    factor = float(parameters.get("partial_rotary_factor", 1.0))
    if parameters["rope_type"] == "proportional":
        return prope_theta(head_dim, factor, base)
    return partial_rotary_theta(head_dim, factor, base)


def _cases() -> list[_Case]:
    return [
        _Case(f"head_dim={dim}, rope_parameters={params}", dim, params, _reference(dim, params))
        for dim, params in _CONFIGS
    ]


def _error(output: torch.Tensor, reference: torch.Tensor) -> float:
    """The largest difference, relative to each pair's reference frequency (to the slowest
    kept one where the reference is 0, to 1 where every pair is stopped)."""
    kept = reference[reference > 0]
    floor = float(kept.min()) if kept.numel() else 1.0
    scale = reference.clamp(min=floor)
    error = float(((output - reference).abs() / scale).max())
    return error if math.isfinite(error) else math.inf


# How a wrong reading keeps pairs of a 'proportional' configuration (d, p): the count.
_COUNTS: dict[str, Callable[[int, float], int]] = {
    "floor": lambda d, p: rotating_pairs(d, p),
    "round": lambda d, p: min(d // 2, round(p * d / 2)),
    "ceil": lambda d, p: min(d // 2, math.ceil(p * d / 2)),
    "stopped": lambda d, p: rotating_pairs(d, 1.0 - p),
    "all": lambda d, p: d // 2,
}


@dataclass(frozen=True)
class _Candidate:
    """A reading of the configurations with up to four bugs; none makes it the reference."""

    count: str = "floor"  # one of _COUNTS, or "partial": 'proportional' read as partial rotary
    slowest: bool = False  # p-RoPE keeps the slowest pairs
    default: str = "right"  # "prope", "last" or "ignored": how 'default' + factor is read
    fixed_base: bool = False  # rope_theta ignored: 10000

    def table(self, case: _Case) -> torch.Tensor:
        base = _DEFAULT_BASE if self.fixed_base else case.base
        dim, factor = case.head_dim, case.factor
        if case.rope_type == "proportional":
            return self._proportional(dim, factor, base)
        if self.default == "prope":  # read as a 'proportional' configuration
            if self.count == "partial":  # the two branches swapped
                return prope_theta(dim, factor, base)
            return self._proportional(dim, factor, base)
        if self.default == "ignored":
            return frequencies(dim, base)
        theta = partial_rotary_theta(dim, factor, base)
        if self.default == "last":
            return theta.roll(int((theta == 0).sum()))  # the zeros first
        return theta

    def _proportional(self, dim: int, p: float, base: float) -> torch.Tensor:
        if self.count == "partial":  # transformers' 'default' reading of the same factor
            theta = torch.zeros(dim // 2, dtype=torch.float64)
            if p > 0:
                rotating = hf_rope(
                    {
                        "head_dim": dim,
                        "rope_parameters": {
                            "rope_type": "default",
                            "rope_theta": base,
                            "partial_rotary_factor": p,
                        },
                    }
                ).theta
                theta[: rotating.numel()] = rotating
            return theta
        kept = _COUNTS[self.count](dim, p)
        theta = frequencies(dim, base)
        if self.slowest:
            theta[: dim // 2 - kept] = 0.0
        else:
            theta[kept:] = 0.0
        return theta

    def bugs(self) -> list[str]:
        """The messages of the candidate's bugs, in the reader's terms."""
        bugs = []
        if self.slowest:
            bugs.append(
                "p-RoPE keeps the slowest pairs: for rope_type 'proportional' fn stops the "
                "fastest pairs and keeps the slowest ones turning, where p-RoPE keeps the fastest "
                "pairs, k = 0, 1, ... (θ_k = base^(-2k/d), pair 0 turns at 1 radian per "
                "position), and sets the slowest to 0"
            )
        if self.count in ("round", "ceil"):
            how, kept = ("to nearest", "round") if self.count == "round" else ("up", "ceil")
            bugs.append(
                f"kept count rounded {how}: fn keeps {kept}(p·d/2) pairs turning, where p-RoPE "
                "keeps int(p·d/2) = floor(p·d/2), as "
                "transformers' 'proportional' and Gemma's rope_proportion do (p = 0.3 of "
                "32 pairs keeps 9, not 10)"
            )
        elif self.count == "stopped":
            bugs.append(
                "p read as the fraction stopped: fn keeps floor((1 - p)·d/2) pairs, but "
                "partial_rotary_factor of 'proportional' (Gemma's rope_proportion) is the "
                "fraction of pairs that keep turning, so p = 1 is RoPE and p = 0 is NoPE"
            )
        elif self.count == "all":
            bugs.append(
                "partial_rotary_factor ignored for 'proportional': every pair of the head "
                "turns, where p-RoPE keeps the fastest floor(p·d/2) pairs and sets the others to 0"
            )
        elif self.count == "partial":
            bugs.append(
                "p-RoPE built as partial rotary: for rope_type 'proportional' fn recomputes "
                "the ladder over the int(p·d) kept features, base^(-2k/(p·d)), as 'default' "
                "does with partial_rotary_factor, where p-RoPE keeps the head's own ladder, "
                "base^(-2k/d), for its first floor(p·d/2) pairs, so its slowest kept pair "
                "turns much faster than RoPE's slowest"
            )
        if self.default == "prope":
            bugs.append(
                "partial rotary built as p-RoPE: for rope_type 'default' with "
                "partial_rotary_factor f, fn keeps the head's ladder base^(-2k/d) and stops "
                "its slowest pairs, where Hugging Face rotates the leading r = int(f·d) features "
                "on a ladder recomputed over them, base^(-2k/r) for k < r/2, which still reaches "
                "down to base^(-(r-2)/r), nearly as slow as RoPE's slowest pair"
            )
        elif self.default == "last":
            bugs.append(
                "partial rotary's pairs placed last: fn puts the ladder over r = int(f·d) "
                "features on the last r/2 pairs and 0 on the first, where Hugging Face rotates the "
                "leading features, x[..., :r], whose pairs come first (pair 0 turns at 1 "
                "radian per position)"
            )
        elif self.default == "ignored":
            bugs.append(
                "partial_rotary_factor ignored for 'default': every pair turns on RoPE's "
                "ladder, where Hugging Face rotates only the leading r = int(f·d) features, on the "
                "ladder base^(-2k/r), and passes the other pairs through (frequency 0)"
            )
        if self.fixed_base:
            bugs.append(
                "rope_theta ignored: fn builds every ladder with base 10000: read the base "
                "from rope_parameters['rope_theta'] (500 and 1e6 among the cases)"
            )
        return bugs


def _candidates() -> list[_Candidate]:
    """Every wrong reading, those with fewer bugs first."""
    readings = [
        _Candidate(count, slowest, default, fixed_base)
        for count, slowest, default, fixed_base in itertools.product(
            (*_COUNTS, "partial"),
            (False, True),
            ("right", "prope", "last", "ignored"),
            (False, True),
        )
        if not (slowest and count in ("all", "partial"))
        and not (count == "all" and default == "prope")  # that is the factor ignored twice
    ]
    wrong = [c for c in readings if c.bugs()]
    return sorted(wrong, key=lambda c: len(c.bugs()))


_CANDIDATES = _candidates()


def _raised_hint(error: Exception, case: _Case) -> str:
    """A likely cause of an exception raised on ``case``, or an empty string."""
    if isinstance(error, KeyError) and "partial_rotary_factor" not in case.parameters:
        return (
            "; partial_rotary_factor is optional: transformers reads "
            "rope_parameters.get('partial_rotary_factor', 1.0)"
        )
    if isinstance(error, ZeroDivisionError) and case.factor == 0.0:
        return "; p = 0 keeps no pair turning: NoPE, every frequency 0"
    return ""


def _call(
    fn: Callable[..., object], args: tuple[Any, ...], name: str, case: _Case, names: tuple[str, ...]
) -> object:
    """``fn(*args)``, or the report of what it raised on the case ``name`` (of the
    configuration ``case``)."""
    try:
        return fn(*args)
    except Exception as error:  # the reader's code may raise anything; a stub, too
        return raised(error, "fn", name, names, hint=_raised_hint(error, case))


def _shape_problem(output: torch.Tensor, case: _Case) -> str:
    expected = case.head_dim // 2
    shape = tuple(output.shape)
    text = (
        f"wrong output shape: fn returned {shape} on {case.name}, where the head has "
        f"{expected} pairs and needs ({expected},), one frequency per pair"
    )
    turning = int((case.reference > 0).sum())
    if shape == (turning,) and turning < expected:
        text += (
            f": only the {turning} turning pairs, as transformers' inv_freq for partial "
            "rotary; pad with 0 for the pairs that do not turn"
        )
    elif shape == (case.head_dim,):
        text += ": one per feature; each pair's two features share one frequency"
    return text


def check_pair_frequencies(fn: PairFrequencies) -> Report:
    r"""Check that ``fn`` reads p-RoPE and partial rotary from a configuration, and name the bug.

    ``fn(rope_parameters, head_dim)`` gets a Hugging Face ``rope_parameters``
    dict and the head dimension ``d`` (an even int). The dict holds
    ``rope_type`` (``"default"`` or ``"proportional"``), ``rope_theta`` (the base
    :math:`b`) and, optionally, ``partial_rotary_factor`` (default 1.0). It
    returns a floating tensor of shape ``(d/2,)``: the frequency
    :math:`\theta_k` of every pair ``k`` of the head, in the order of
    :func:`~rope_lessons.rope.ladder.frequencies` (pair 0 first), 0 for a pair
    that does not turn:

    * ``"proportional"`` with factor ``p`` (p-RoPE): :math:`b^{-2k/d}` for
      :math:`k < \lfloor p\,d/2 \rfloor`, 0 beyond
      (:func:`~rope_lessons.chapters.spectrum.prope_theta`);
    * ``"default"`` with factor ``f`` (Hugging Face's partial rotary): with
      :math:`r = \lfloor f\,d \rfloor`, :math:`b^{-2k/r}` for :math:`k < r/2`, 0
      beyond (:func:`~rope_lessons.chapters.spectrum.partial_rotary_theta`); the
      leading ``r`` features hold the first ``r/2`` pairs.

    The cases, in order: RoPE (``"default"`` without the factor, ``d = 64``);
    p-RoPE and partial rotary with the same count, 8 of 32 pairs; p-RoPE with
    ``p = 0.3`` (9.6 pairs, base 500) and ``p = 0.1`` (3.2 pairs); partial
    rotary with ``f = 0.5`` (base :math:`10^6`) and ``f = 0.3`` (38.4 features,
    base 500) at ``d = 128``; p-RoPE with ``p = 0.75`` (``d = 128``, base
    :math:`10^6`) and ``p = 0`` (NoPE); GPT-NeoX's ``f = 0.25`` at ``d = 96``;
    Gemma 4's full layers, ``p = 0.25``, ``d = 512``, base :math:`10^6`. Each call
    gets a fresh copy of the dict.

    The diagnosis starts with one of these phrases (the messages of several bugs
    that one wrong reading reproduces are joined by ``"; "``):

    * ``"correct"``: every case matched;
    * ``"p-RoPE keeps the slowest pairs"``;
    * ``"kept count rounded to nearest"``, ``"kept count rounded up"``;
    * ``"p read as the fraction stopped"``;
    * ``"partial_rotary_factor ignored for 'proportional'"``,
      ``"partial_rotary_factor ignored for 'default'"``;
    * ``"p-RoPE built as partial rotary"``: a ladder recomputed over the kept
      features for ``"proportional"``;
    * ``"partial rotary built as p-RoPE"``: the head's ladder with its slowest
      pairs stopped for ``"default"``;
    * ``"partial rotary's pairs placed last"``;
    * ``"rope_theta ignored"``;
    * ``"not written yet"`` (``fn`` raised ``NotImplementedError``), ``"fn
      raised"`` (with a hint for a missing optional field or ``p = 0``), ``"fn
      did not return a tensor"``, ``"wrong output dtype"``, ``"wrong output
      shape"``;
    * ``"unrecognised difference"``: none of the above reproduces ``fn``.

    Args:
        fn: the function to check, ``(rope_parameters, head_dim) -> (head_dim // 2,)``.

    Returns:
        A :class:`~rope_lessons._grading.Report`; ``max_error`` is the largest
        difference relative to each pair's frequency (to the slowest kept
        frequency of the case for a pair that must not turn). The tolerance,
        1e-5, lets a ladder computed in float32, as transformers computes it,
        pass.

    Raises:
        TypeError: if ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(
            f"fn must be callable, fn(rope_parameters, head_dim) -> frequencies; got {fn!r}"
        )
    cases = _cases()
    names = tuple(case.name for case in cases)
    outputs: list[torch.Tensor] = []
    errors: list[float] = []
    with torch.no_grad():
        for case in cases:
            out = _call(fn, (copy.deepcopy(case.parameters), case.head_dim), case.name, case, names)
            if isinstance(out, Report):
                return out
            problem = None
            if not isinstance(out, torch.Tensor):
                problem = (
                    f"fn did not return a tensor: got {type(out).__name__} on {case.name}; "
                    "return torch.tensor(..., dtype=torch.float64) of shape (head_dim // 2,)"
                )
            elif not out.is_floating_point():
                problem = (
                    f"wrong output dtype: fn returned {out.dtype} on {case.name}; frequencies "
                    "are fractions: build them in floating point (float64 or float32)"
                )
            elif out.dtype in (torch.float16, torch.bfloat16):
                problem = (
                    f"wrong output dtype: fn returned {out.dtype} on {case.name}; half "
                    "precision rounds a frequency by up to a few parts in 1e3, a whole radian "
                    "by position 2000 or so: build them in float32 or float64"
                )
            elif tuple(out.shape) != (case.head_dim // 2,):
                problem = _shape_problem(out, case)
            if problem is not None:
                return Report(False, problem, math.inf, names, (case.name,))
            assert isinstance(out, torch.Tensor)
            output = out.detach().to("cpu", torch.float64)
            outputs.append(output)
            errors.append(_error(output, case.reference))
    failed = tuple(
        case.name for case, error in zip(cases, errors, strict=True) if error > _TOLERANCE
    )
    max_error = max(errors)
    if not failed:
        correct = (
            f"correct: fn matches the chapter's tables on all {len(cases)} cases (p-RoPE, "
            "prope_theta, for 'proportional'; partial rotary, partial_rotary_theta, for "
            "'default'; head_dim 32 to 512; bases 500, 1e4, 1e6)"
        )
        return Report(True, correct, max_error, names, ())
    for candidate in _CANDIDATES:
        if all(
            _error(output, candidate.table(case)) <= _TOLERANCE
            for case, output in zip(cases, outputs, strict=True)
        ):
            return Report(False, "; ".join(candidate.bugs()), max_error, names, failed)
    advice = (
        "Print fn(rope_parameters, head_dim) beside "
        "rope_lessons.chapters.spectrum.prope_theta(head_dim, p, base) for 'proportional', "
        "or partial_rotary_theta(head_dim, f, base) for 'default', on that case"
    )
    return Report(False, unrecognised(failed[0], max_error, advice), max_error, names, failed)


# --- The second exercise: which features of the head turn, in either layout ----------------

TurningFeatures = Callable[[dict[str, Any], int, str], torch.Tensor]
"""``fn(rope_parameters, head_dim, layout) -> (head_dim,)`` bool: the features that turn."""

_OTHER: dict[str, Layout] = {"half": "interleaved", "interleaved": "half"}


@dataclass(frozen=True)
class _FeatureCase:
    name: str
    pairs: _Case  # the configuration, as the first exercise reads it
    layout: Layout
    reference: torch.Tensor  # bool (head_dim,)


def _turning_features(spec: Rope) -> torch.Tensor:
    """The features of a head that ``spec`` turns: bool ``(spec.dim,)``."""
    rotating = Rope.from_theta(spec.theta, spec.layout)  # the rotating features alone
    features = pair_dims(rotating)[rotating.theta > 0].flatten()  # within the rotating slice
    if spec.rotary_slice == "trailing":
        features = features + spec.dim - spec.rotary_dim
    mask = torch.zeros(spec.dim, dtype=torch.bool)
    mask[features] = True
    return mask


def _feature_cases() -> list[_FeatureCase]:
    cases = []
    for case in _cases():
        for layout in LAYOUTS:
            config = {"head_dim": case.head_dim, "rope_parameters": case.parameters}
            spec = Rope.from_hf(config, layout=layout)
            cases.append(
                _FeatureCase(
                    f"{case.name}, layout={layout!r}", case, layout, _turning_features(spec)
                )
            )
    return cases


@lru_cache(maxsize=64)
def _pair_features(dim: int, layout: Layout) -> torch.Tensor:
    """The two features of every pair of a head of ``dim`` in ``layout``, ``(d/2, 2)``."""
    return pair_dims(Rope(dim, layout=layout))


_PROPE_PLACES = ("right", "swapped", "half", "interleaved", "partial")
_PARTIAL_PLACES = ("leading", "trailing", "spread", "prope")


@dataclass(frozen=True)
class _Placement:
    """A wrong answer to which features turn: which pairs are kept (read from the
    configuration) and where their features are put."""

    count: str = "floor"  # one of _COUNTS, for 'proportional'
    slowest: bool = False  # p-RoPE keeps the slowest pairs
    ignored: bool = False  # partial_rotary_factor ignored for 'default': every feature turns
    prope: str = "right"  # one of _PROPE_PLACES: where p-RoPE's kept pairs are put
    partial: str = "leading"  # one of _PARTIAL_PLACES: where partial rotary's features are

    def mask(self, case: _FeatureCase) -> torch.Tensor:
        dim, factor = case.pairs.head_dim, case.pairs.factor
        mask = torch.zeros(dim, dtype=torch.bool)
        if case.pairs.rope_type == "proportional" or self.partial == "prope":
            if self.prope == "partial" and case.pairs.rope_type == "proportional":
                mask[: int(dim * factor)] = True  # as partial rotary's leading features
                return mask
            kept = self._kept(dim, factor)
            layout: Layout = {
                "right": case.layout,
                "swapped": _OTHER[case.layout],
                "half": "half",
                "interleaved": "interleaved",
            }.get(self.prope, case.layout)
            mask[_pair_features(dim, layout)[kept].flatten()] = True
            return mask
        rotary = dim if self.ignored else int(dim * factor)
        if self.partial == "trailing":
            mask[dim - rotary :] = True
        elif self.partial == "spread":  # pairs (k, k + d/2) over the whole head
            mask[_pair_features(dim, "half")[: rotary // 2].flatten()] = True
        else:
            mask[:rotary] = True
        return mask

    def _kept(self, dim: int, p: float) -> torch.Tensor:
        """The kept pairs of a p-RoPE reading, bool ``(d/2,)``."""
        count = _COUNTS[self.count](dim, p)
        kept = torch.zeros(dim // 2, dtype=torch.bool)
        if self.slowest:
            kept[dim // 2 - count :] = True
        else:
            kept[:count] = True
        return kept

    def bugs(self) -> list[str]:
        """The messages of the placement's bugs, in the reader's terms."""
        reading = _Candidate(count=self.count, slowest=self.slowest)
        bugs = [] if self.prope == "partial" else reading.bugs()
        if self.prope == "swapped":
            bugs.append(
                "p-RoPE's pairs placed as in the other layout: fn marks the features of the "
                "kept pairs k < K as the other layout places them, where pair k is features "
                "(2k, 2k + 1) in the interleaved layout, the leading 2K features, and "
                "(k, k + d/2) in the half layout, features [0, K) and [d/2, d/2 + K)"
            )
        elif self.prope == "interleaved":
            bugs.append(
                "p-RoPE's kept pairs marked as a leading block: fn marks the leading 2K "
                "features whatever the layout, which is right in the interleaved layout "
                "only: in the half layout pair k is features (k, k + d/2), so the kept "
                "features are [0, K) and [d/2, d/2 + K)"
            )
        elif self.prope == "half":
            bugs.append(
                "layout ignored for p-RoPE: fn marks features (k, k + d/2) of the kept pairs "
                "whatever the layout, which is right in the half layout only: in the "
                "interleaved layout pair k is features (2k, 2k + 1)"
            )
        elif self.prope == "partial":
            bugs.append(
                "p-RoPE read as partial rotary: for rope_type 'proportional' fn marks the "
                "leading int(p·d) features, where p-RoPE keeps pairs k < floor(p·d/2) of the "
                "whole head turning, wherever the layout puts them"
            )
        if self.ignored:
            bugs.append(
                "partial_rotary_factor ignored for 'default': every feature turns, where "
                "Hugging Face rotates only the leading r = int(f·d) features and passes the "
                "others through"
            )
        if self.partial == "trailing":
            bugs.append(
                "partial rotary's features placed last: fn marks the last r = int(f·d) "
                "features, as DeepSeek's [nope | rope] heads do, where Hugging Face rotates "
                "the leading ones, x[..., :r]"
            )
        elif self.partial == "spread":
            bugs.append(
                "partial rotary's pairs spread over the head: fn marks features (k, k + d/2) "
                "for k < r/2, as if rotate_half split the whole head, where Hugging Face's "
                "apply_rotary_pos_emb rotates x[..., :r] and rotate_half splits that slice: "
                "the leading r features turn in either layout"
            )
        elif self.partial == "prope":
            bugs.append(
                "partial rotary read as p-RoPE: for rope_type 'default' fn marks the "
                "features of pairs k < r/2 of the whole head, as for p-RoPE (in the half "
                "layout (k, k + d/2)), where Hugging Face rotates the leading r = int(f·d) "
                "features, x[..., :r], in either layout"
            )
        return bugs


def _placements() -> list[_Placement]:
    """Every wrong answer, those with fewer bugs first."""
    answers = [
        _Placement(count, slowest, ignored, prope, partial)
        for count, slowest, ignored, prope, partial in itertools.product(
            _COUNTS, (False, True), (False, True), _PROPE_PLACES, _PARTIAL_PLACES
        )
        if not (slowest and count == "all")
        and not (prope == "partial" and (count != "floor" or slowest))  # no count read
        and not (ignored and partial != "leading")  # every feature turns, wherever put
        and not (count == "all" and (prope != "right" or partial == "prope"))  # the same
        and not (  # with p-RoPE's pairs counted right, the same as another reading
            count == "floor"
            and not slowest
            and (prope, partial) in (("half", "spread"), ("interleaved", "prope"))
        )
    ]
    wrong = sorted(
        (answer for answer in answers if answer.bugs()), key=lambda answer: len(answer.bugs())
    )
    cases = _feature_cases()
    distinct: list[_Placement] = []
    seen: set[tuple[bytes, ...]] = set()
    for answer in wrong:  # the first of those no case tells apart
        key = tuple(answer.mask(case).numpy().tobytes() for case in cases)
        if key not in seen:
            seen.add(key)
            distinct.append(answer)
    return distinct


@lru_cache(maxsize=1)
def _distinct_placements() -> tuple[_Placement, ...]:
    return tuple(_placements())


def _feature_problem(out: object, case: _FeatureCase) -> str | None:
    """Why ``out`` cannot be compared with the reference mask, or None."""
    dim = case.pairs.head_dim
    if not isinstance(out, torch.Tensor):
        return (
            f"fn did not return a tensor: got {type(out).__name__} on {case.name}; return a "
            "bool tensor of shape (head_dim,), True where the feature turns"
        )
    if out.dtype != torch.bool and not bool(((out == 0) | (out == 1)).all()):
        return (
            f"wrong output dtype: fn returned {out.dtype} with values other than 0 and 1 on "
            f"{case.name}; return a bool mask, True where the feature turns (frequencies > 0 "
            "says which pairs turn: then put each pair on its two features)"
        )
    shape = tuple(out.shape)
    if shape == (dim,):
        return None
    text = (
        f"wrong output shape: fn returned {shape} on {case.name}, where the head has "
        f"{dim} features and needs ({dim},), one entry per feature"
    )
    if shape == (dim // 2,):
        text += (
            ": one per pair; put each pair's mark on both of its features, (2k, 2k + 1) in "
            "the interleaved layout, (k, k + d/2) in the half layout"
        )
    return text


def check_turning_features(fn: TurningFeatures) -> Report:
    r"""Check that ``fn`` says which features of a head turn, in either layout, and name the bug.

    ``fn(rope_parameters, head_dim, layout)`` gets a Hugging Face
    ``rope_parameters`` dict as :func:`check_pair_frequencies` describes it, the
    head dimension ``d``, and the layout, ``"half"`` (pair ``k`` is features
    ``(k, k + d/2)``) or ``"interleaved"`` (features ``(2k, 2k+1)``). It returns
    a bool tensor ``(d,)``: True for each feature that turns (an integer or
    float tensor of 0s and 1s is read as one):

    * p-RoPE (``"proportional"``): the two features of every kept pair
      :math:`k < \lfloor p\,d/2 \rfloor`, where the layout puts them: the
      leading ``2K`` features in the interleaved layout, features ``[0, K)``
      and ``[d/2, d/2 + K)`` in the half layout;
    * partial rotary (``"default"`` with factor ``f``): the leading
      :math:`r = \lfloor f\,d \rfloor` features in either layout (transformers'
      ``apply_rotary_pos_emb`` rotates ``x[..., :r]``, and ``rotate_half``
      splits that slice).

    The reference is the spec :meth:`Rope.from_hf
    <rope_lessons.rope.spec.Rope.from_hf>` builds in that layout, read with
    :func:`~rope_lessons.chapters.spectrum.pair_dims`. The cases are the 11
    configurations of :func:`check_pair_frequencies`, each in the half and in
    the interleaved layout (22 in all). Each call gets a fresh copy of the dict.

    The diagnosis starts with one of these phrases (the messages of several bugs
    that one wrong answer reproduces are joined by ``"; "``):

    * ``"correct"``: every case matched;
    * ``"p-RoPE's pairs placed as in the other layout"``;
    * ``"p-RoPE's kept pairs marked as a leading block"`` (right in the
      interleaved layout only);
    * ``"layout ignored for p-RoPE"`` (the half layout's places in both);
    * ``"p-RoPE read as partial rotary"``: the leading ``int(p·d)`` features;
    * ``"partial rotary read as p-RoPE"``: the features of pairs ``k < r/2``
      of the whole head, in the layout;
    * ``"partial rotary's pairs spread over the head"``: features ``(k, k +
      d/2)`` in both layouts;
    * ``"partial rotary's features placed last"``;
    * the kept-pair bugs of :func:`check_pair_frequencies`: ``"p-RoPE keeps
      the slowest pairs"``, ``"kept count rounded to nearest"``, ``"kept count
      rounded up"``, ``"p read as the fraction stopped"``,
      ``"partial_rotary_factor ignored for 'proportional'"`` and ``"... for
      'default'"``;
    * ``"not written yet"``, ``"fn raised"``, ``"fn did not return a
      tensor"``, ``"wrong output dtype"``, ``"wrong output shape"``;
    * ``"unrecognised difference"``: none of the above reproduces ``fn``.

    Args:
        fn: the function to check, ``(rope_parameters, head_dim, layout) -> (head_dim,)``.

    Returns:
        A :class:`~rope_lessons._grading.Report`; ``max_error`` is the largest
        number of features marked wrongly in one case.

    Raises:
        TypeError: if ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(
            f"fn must be callable, fn(rope_parameters, head_dim, layout) -> bool mask; got {fn!r}"
        )
    cases = _feature_cases()
    names = tuple(case.name for case in cases)
    outputs: list[torch.Tensor] = []
    with torch.no_grad():
        for case in cases:
            args = (copy.deepcopy(case.pairs.parameters), case.pairs.head_dim, case.layout)
            out = _call(fn, args, case.name, case.pairs, names)
            if isinstance(out, Report):
                return out
            problem = _feature_problem(out, case)
            if problem is not None:
                return Report(False, problem, math.inf, names, (case.name,))
            assert isinstance(out, torch.Tensor)
            outputs.append(out.detach().to("cpu").bool())
    wrong = [int((out != case.reference).sum()) for case, out in zip(cases, outputs, strict=True)]
    failed = tuple(case.name for case, count in zip(cases, wrong, strict=True) if count)
    max_error = float(max(wrong))
    if not failed:
        correct = (
            f"correct: fn marks the turning features of all {len(cases)} cases (11 "
            "configurations, p-RoPE and partial rotary, each in the half and the "
            "interleaved layout)"
        )
        return Report(True, correct, max_error, names, ())
    for answer in _distinct_placements():
        if all(
            bool(answer.mask(case).equal(out)) for case, out in zip(cases, outputs, strict=True)
        ):
            return Report(False, "; ".join(answer.bugs()), max_error, names, failed)
    advice = (
        "Print fn(rope_parameters, head_dim, layout).nonzero() beside the features of the "
        "turning pairs on that case (pair k is features (k, k + d/2) in the half layout, "
        "(2k, 2k + 1) in the interleaved one; partial rotary turns x[..., :r])"
    )
    return Report(False, unrecognised(failed[0], max_error, advice), max_error, names, failed)
