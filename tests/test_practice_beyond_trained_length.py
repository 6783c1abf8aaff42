"""check_yarn and check_llama3: right implementations pass, and each planted bug is named.

The implementations are written as a reader would write them, in plain torch and
float32 as transformers' ``ROPE_INIT_FUNCTIONS`` are (``yarn`` and ``llama3``,
with knobs into which the bugs are planted), and differently: in float64 with
a loop over the pairs, and as transformers' own functions. The checkers'
reference, the package's reader of the configuration, is compared with
transformers on every configuration the checkers try.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytest
import torch
from helpers import HF_RTOL
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons._grading import Report
from rope_lessons.practice import beyond_trained_length as practice
from rope_lessons.practice.beyond_trained_length import (
    ScaledFrequencies,
    check_llama3,
    check_yarn,
)

Out = tuple[torch.Tensor, float]


def yarn(
    p: dict[str, Any],
    d: int,
    *,
    blend_swapped: bool = False,
    interpolate: str = "divide",  # "divide", "multiply", "all" or "none"
    length_factor: float = 1.0,
    truncate: bool | None = None,  # None: as rope_parameters says
    ramp_in_turns: bool = False,
    default_betas: bool = False,
    base: float | None = None,
    attention: str = "right",
    log: Any = math.log,
    coefficient: float = 0.1,
    one: float = 1.0,
    two_pi: float = 2 * math.pi,
) -> Out:
    """transformers' YaRN, float32, with the knobs the bugs turn."""
    base = p["rope_theta"] if base is None else base
    s = p["factor"]
    length = int(length_factor * p["original_max_position_embeddings"])
    beta_fast = 32 if default_betas else p.get("beta_fast") or 32
    beta_slow = 1 if default_betas else p.get("beta_slow") or 1

    def get(scale: float, mscale: float = 1.0) -> float:
        return 1.0 if scale <= 1 else coefficient * mscale * log(scale) + one

    factor = p.get("attention_factor")
    mscale, all_dim = p.get("mscale"), p.get("mscale_all_dim")
    if attention == "inverted":
        mscale, all_dim = all_dim, mscale
    if factor is None or attention == "explicit ignored":
        if mscale and all_dim and attention != "mscale ignored":
            factor = get(s, mscale) / get(s, all_dim)
        else:
            factor = get(s)
        if attention == "squared":
            factor = factor**2
        elif attention == "sqrt":
            factor = math.sqrt(factor)
    if attention == "missing":
        factor = 1.0
    elif attention == "factor":
        factor = s

    pos_freqs = base ** (torch.arange(0, d, 2).float() / d)
    extrapolation = 1.0 / pos_freqs
    interpolation = {
        "divide": 1.0 / (s * pos_freqs),
        "multiply": s / pos_freqs,
        "all": 1.0 / (s * pos_freqs),
        "none": 1.0 / pos_freqs,
    }[interpolate]
    if interpolate in ("all", "none"):
        return interpolation, factor
    if ramp_in_turns:  # Peng et al.'s gamma(r), linear in the turns r = L / lambda
        turns = length / (two_pi * pos_freqs)
        keep = ((turns - beta_slow) / (beta_fast - beta_slow)).clamp(0, 1)
        ramp = 1 - keep
    else:

        def pair(turns: float) -> float:
            return d * math.log(length / (turns * two_pi)) / (2 * math.log(base))

        low, high = pair(beta_fast), pair(beta_slow)
        if p.get("truncate", True) if truncate is None else truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, d - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(d // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    if blend_swapped:
        return interpolation * (1 - ramp) + extrapolation * ramp, factor
    return interpolation * ramp + extrapolation * (1 - ramp), factor


def llama3(
    p: dict[str, Any],
    d: int,
    *,
    regions_swapped: bool = False,
    band_swapped: bool = False,
    bounds_swapped: bool = False,
    interpolate: str = "divide",
    length_factor: float = 1.0,
    meta_bounds: bool = False,
    base: float | None = None,
    attention: float | None = 1.0,  # None: YaRN's 0.1 ln s + 1
    two_pi: float = 2 * math.pi,
) -> Out:
    """transformers' (and Meta's) Llama 3 scaling, float32, with the knobs the bugs turn."""
    base = p["rope_theta"] if base is None else base
    s = p["factor"]
    length = length_factor * p["original_max_position_embeddings"]
    low, high = (1.0, 4.0) if meta_bounds else (p["low_freq_factor"], p["high_freq_factor"])
    factor = 0.1 * math.log(s) + 1.0 if attention is None else attention
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2).float() / d))
    if interpolate == "all":
        return inv_freq / s, factor
    if interpolate == "none":
        return inv_freq, factor
    scaled = inv_freq / s if interpolate == "divide" else inv_freq * s
    low_wavelength, high_wavelength = length / low, length / high
    if bounds_swapped:
        low_wavelength, high_wavelength = high_wavelength, low_wavelength
    wavelength = two_pi / inv_freq
    if regions_swapped:
        out = torch.where(wavelength < high_wavelength, scaled, inv_freq)
        out = torch.where(wavelength > low_wavelength, inv_freq, out)
    else:
        out = torch.where(wavelength > low_wavelength, scaled, inv_freq)
    smooth = (length / wavelength - low) / (high - low)
    if band_swapped:
        smoothed = smooth * scaled + (1 - smooth) * inv_freq
    else:
        smoothed = (1 - smooth) * scaled + smooth * inv_freq
    medium = ~(wavelength < high_wavelength) & ~(wavelength > low_wavelength)
    return torch.where(medium, smoothed, out), factor


def yarn_loop(p: dict[str, Any], d: int) -> Out:
    """YaRN pair by pair in float64, the paper's turns counted per pair."""
    base, s = float(p["rope_theta"]), float(p["factor"])
    length = p["original_max_position_embeddings"]
    beta_fast, beta_slow = p.get("beta_fast") or 32.0, p.get("beta_slow") or 1.0
    # the fractional index of the pair that turns r times within the trained length
    ends = [
        d / 2 * math.log(length / (2 * math.pi * r)) / math.log(base)
        for r in (beta_fast, beta_slow)
    ]
    if p.get("truncate", True):
        ends = [math.floor(ends[0]), math.ceil(ends[1])]
    start, end = max(ends[0], 0.0), min(ends[1], d - 1.0)
    if start == end:
        end += 0.001
    theta = []
    for k in range(d // 2):
        old = base ** (-2.0 * k / d)
        share = min(max((k - start) / (end - start), 0.0), 1.0)  # the share divided
        theta.append(old * (1 - share) + old / s * share)
    if p.get("attention_factor") is not None:
        factor = float(p["attention_factor"])
    elif p.get("mscale") and p.get("mscale_all_dim"):
        factor = (1 + 0.1 * p["mscale"] * math.log(s)) / (
            1 + 0.1 * p["mscale_all_dim"] * math.log(s)
        )
    else:
        factor = 1 + 0.1 * math.log(s)
    return torch.tensor(theta, dtype=torch.float64), factor


def llama3_loop(p: dict[str, Any], d: int) -> Out:
    """Meta's apply_scaling: a loop over the pairs, in float64."""
    base, s = float(p["rope_theta"]), float(p["factor"])
    length = p["original_max_position_embeddings"]
    low, high = p["low_freq_factor"], p["high_freq_factor"]
    theta = []
    for k in range(d // 2):
        freq = base ** (-2.0 * k / d)
        wavelength = 2 * math.pi / freq
        if wavelength < length / high:
            theta.append(freq)
        elif wavelength > length / low:
            theta.append(freq / s)
        else:
            smooth = (length / wavelength - low) / (high - low)
            theta.append((1 - smooth) * freq / s + smooth * freq)
    return torch.tensor(theta, dtype=torch.float64), 1.0


CASES = {"yarn": practice._YARN_CASES, "llama3": practice._LLAMA3_CASES}
CHECKS = {"yarn": check_yarn, "llama3": check_llama3}


@pytest.mark.parametrize(
    ("method", "fn"),
    [("yarn", yarn), ("yarn", yarn_loop), ("llama3", llama3), ("llama3", llama3_loop)],
    ids=["yarn-float32", "yarn-loop", "llama3-float32", "llama3-loop"],
)
def test_a_right_implementation_passes(method: str, fn: ScaledFrequencies) -> None:
    report = CHECKS[method](fn)
    assert report.ok, report.diagnosis
    assert report.diagnosis.startswith("correct: inv_freq and the attention factor match")
    assert len(report.cases) == len(CASES[method]) and not report.failed
    assert report.max_error < 1e-5


def test_a_right_implementation_may_return_a_tensor_factor_and_float64() -> None:
    def tensors(p: dict[str, Any], d: int) -> Out:
        theta, factor = yarn(p, d)
        return theta.double(), torch.tensor(factor)  # type: ignore[return-value]

    assert check_yarn(tensors).ok


def transformers_fn(p: dict[str, Any], d: int) -> Out:
    """transformers' own function, from a Llama configuration with these parameters."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.LlamaConfig(
            hidden_size=2 * d,
            num_attention_heads=2,
            head_dim=d,
            max_position_embeddings=int(p["factor"] * p["original_max_position_embeddings"]),
            rope_parameters=p,
        )
    inv_freq, factor = ROPE_INIT_FUNCTIONS[p["rope_type"]](config, "cpu")
    return inv_freq, float(factor)


@pytest.mark.parametrize("method", ["yarn", "llama3"])
def test_transformers_passes_and_agrees_with_the_reference_on_every_case(method: str) -> None:
    """The checkers' reference (rope.hf_config's reader) is transformers' table, case by case."""
    for _, head_dim, parameters in CASES[method]:
        theirs, their_factor = transformers_fn(dict(parameters), head_dim)
        ours, our_factor = practice._read(parameters, head_dim)
        torch.testing.assert_close(theirs.double(), ours, rtol=HF_RTOL, atol=0.0)
        assert our_factor == pytest.approx(their_factor, rel=1e-12)
    assert CHECKS[method](transformers_fn).ok


def test_the_cases_cover_what_the_exercise_claims() -> None:
    yarn_fields = [set(p) for _, _, p in practice._YARN_CASES]
    assert any("beta_fast" not in f and "truncate" not in f for f in yarn_fields)  # defaults
    for field in ("truncate", "mscale", "mscale_all_dim", "attention_factor"):
        assert any(field in f for f in yarn_fields), field
    assert any(p.get("beta_fast") not in (None, 32.0) for _, _, p in practice._YARN_CASES)
    for cases in CASES.values():
        assert len({d for _, d, _ in cases}) >= 3
        assert len({p["rope_theta"] for _, _, p in cases}) >= 2
        assert len({p["original_max_position_embeddings"] for _, _, p in cases}) >= 3
        assert any(not float(p["factor"]).is_integer() for _, _, p in cases)
    bounds = {(p["low_freq_factor"], p["high_freq_factor"]) for _, _, p in practice._LLAMA3_CASES}
    assert {(1.0, 4.0), (1.0, 1.0)} < bounds


@pytest.mark.parametrize("method", ["yarn", "llama3"])
def test_every_known_bug_differs_from_the_reference_and_from_the_bugs_before_it(
    method: str,
) -> None:
    """Otherwise a bug could never be named (or would be named as an earlier one)."""
    cases = practice._cases(method)  # type: ignore[arg-type]
    for kind in ("theta", "attention_factor"):
        bugs = (
            practice._frequency_bugs(method)  # type: ignore[arg-type]
            if kind == "theta"
            else practice._attention_bugs(method)  # type: ignore[arg-type]
        )
        seen: list[list[torch.Tensor]] = [
            [
                c.theta
                if kind == "theta"
                else torch.tensor(c.attention_factor, dtype=torch.float64)
                for c in cases
            ]
        ]
        for bug in bugs:
            value = getattr(bug, kind)
            outputs = [torch.as_tensor(value(c), dtype=torch.float64) for c in cases]
            for earlier in seen:
                assert any(
                    not torch.allclose(a, b, rtol=1e-3, atol=0.0)
                    for a, b in zip(outputs, earlier, strict=True)
                ), bug.message
            seen.append(outputs)


YARN_BUGS: dict[str, tuple[ScaledFrequencies, str]] = {
    "blend-swapped": (lambda p, d: yarn(p, d, blend_swapped=True), "ramp reversed"),
    "position-interpolation": (
        lambda p, d: yarn(p, d, interpolate="all"),
        "every pair divided by factor",
    ),
    "not-scaled": (lambda p, d: yarn(p, d, interpolate="none"), "frequencies not scaled"),
    "multiplied": (
        lambda p, d: yarn(p, d, interpolate="multiply"),
        "frequencies multiplied by factor",
    ),
    "extended-length": (
        lambda p, d: yarn(p, d, length_factor=p["factor"]),
        "wrong original length",
    ),
    "always-truncated": (lambda p, d: yarn(p, d, truncate=True), "truncate ignored"),
    "never-truncated": (lambda p, d: yarn(p, d, truncate=False), "ramp ends not truncated"),
    "ramp-in-turns": (lambda p, d: yarn(p, d, ramp_in_turns=True), "the paper's ramp"),
    "default-betas": (
        lambda p, d: yarn(p, d, default_betas=True),
        "beta_fast and beta_slow ignored",
    ),
    "base-10000": (lambda p, d: yarn(p, d, base=10000.0), "rope_theta ignored"),
    "factor-missing": (lambda p, d: yarn(p, d, attention="missing"), "attention factor missing"),
    "factor-squared": (
        lambda p, d: yarn(p, d, attention="squared"),
        "attention factor squared",
    ),
    "factor-sqrt": (
        lambda p, d: yarn(p, d, attention="sqrt"),
        "square root of the attention factor",
    ),
    "mscale-ignored": (
        lambda p, d: yarn(p, d, attention="mscale ignored"),
        "mscale and mscale_all_dim ignored",
    ),
    "mscale-inverted": (
        lambda p, d: yarn(p, d, attention="inverted"),
        "mscale ratio inverted",
    ),
    "explicit-ignored": (
        lambda p, d: yarn(p, d, attention="explicit ignored"),
        "attention_factor ignored",
    ),
    "log10": (
        lambda p, d: yarn(p, d, log=math.log10),
        "wrong attention factor formula: fn uses log10(s)",
    ),
    "log2": (
        lambda p, d: yarn(p, d, log=math.log2),
        "wrong attention factor formula: fn uses log2(s)",
    ),
    "no-0.1": (
        lambda p, d: yarn(p, d, coefficient=1.0),
        "wrong attention factor formula: fn returns ln s + 1",
    ),
    "no-plus-one": (
        lambda p, d: yarn(p, d, one=0.0),
        "wrong attention factor formula: fn returns 0.1 ln s,",
    ),
    "factor-is-s": (lambda p, d: yarn(p, d, attention="factor"), "attention factor = factor"),
    "no-2-pi": (lambda p, d: yarn(p, d, two_pi=1.0), "unrecognised difference"),
}

LLAMA3_BUGS: dict[str, tuple[ScaledFrequencies, str]] = {
    "regions-and-band-swapped": (
        lambda p, d: llama3(p, d, regions_swapped=True, band_swapped=True),
        "ramp reversed",
    ),
    "band-swapped": (
        lambda p, d: llama3(p, d, band_swapped=True),
        "blend reversed inside the band",
    ),
    "position-interpolation": (
        lambda p, d: llama3(p, d, interpolate="all"),
        "every pair divided by factor",
    ),
    "not-scaled": (lambda p, d: llama3(p, d, interpolate="none"), "frequencies not scaled"),
    "multiplied": (
        lambda p, d: llama3(p, d, interpolate="multiply"),
        "frequencies multiplied by factor",
    ),
    "extended-length": (
        lambda p, d: llama3(p, d, length_factor=p["factor"]),
        "wrong original length",
    ),
    "bounds-swapped": (
        lambda p, d: llama3(p, d, bounds_swapped=True),
        "wavelength bounds swapped",
    ),
    "meta-bounds": (
        lambda p, d: llama3(p, d, meta_bounds=True),
        "low_freq_factor and high_freq_factor ignored",
    ),
    "base-10000": (lambda p, d: llama3(p, d, base=10000.0), "rope_theta ignored"),
    "yarn-factor": (lambda p, d: llama3(p, d, attention=None), "YaRN's attention factor"),
    "factor-is-s": (
        lambda p, d: llama3(p, d, attention=p["factor"]),
        "attention factor = factor",
    ),
    "no-2-pi": (lambda p, d: llama3(p, d, two_pi=1.0), "unrecognised difference"),
}


def messages(method: Any) -> list[str]:
    """Every bug message of the checker of ``method``."""
    bugs = practice._frequency_bugs(method) + practice._attention_bugs(method)
    return [bug.message for bug in bugs]


PLANTED = [("yarn", bug, *YARN_BUGS[bug]) for bug in YARN_BUGS] + [
    ("llama3", bug, *LLAMA3_BUGS[bug]) for bug in LLAMA3_BUGS
]


@pytest.mark.parametrize(
    ("method", "bug", "fn", "phrase"), PLANTED, ids=[f"{m}-{b}" for m, b, _, _ in PLANTED]
)
def test_a_planted_bug_is_named(method: str, bug: str, fn: ScaledFrequencies, phrase: str) -> None:
    report = CHECKS[method](fn)
    assert not report.ok
    assert report.diagnosis.startswith(phrase), report.diagnosis
    if phrase != "unrecognised difference":  # one bug, named alone
        assert report.diagnosis in messages(method)
    assert report.failed and set(report.failed) <= set(report.cases)
    assert report.first_failure is not None and report.first_failure in str(report)
    assert math.isfinite(report.max_error) and report.max_error > 1e-3


def test_every_verdict_of_the_docstrings_is_planted() -> None:
    """Each bug message is produced by one of the planted implementations."""
    planted = {phrase for _, _, _, phrase in PLANTED}
    for method in ("yarn", "llama3"):
        for message in messages(method):
            assert any(message.startswith(phrase) for phrase in planted), message
            verdict = message.split(":")[0]
            doc = " ".join(str(CHECKS[method].__doc__).split())
            assert f'``"{verdict}' in doc, verdict


def test_unrecognised_differences_give_the_case_the_error_and_the_pair() -> None:
    report = check_llama3(LLAMA3_BUGS["no-2-pi"][0])
    assert report.diagnosis.startswith("unrecognised difference: largest error")
    assert "first on Llama 3.1's: head_dim=128" in report.diagnosis
    assert "inv_freq differs first at pair k = " in report.diagnosis
    assert math.isfinite(report.max_error)

    def odd_factor(p: dict[str, Any], d: int) -> Out:
        return yarn(p, d)[0], 1.5

    odd = check_yarn(odd_factor)
    assert odd.diagnosis.startswith("unrecognised difference: largest error")
    assert "The attention factor is 1.5 there where it should be 1.208" in odd.diagnosis


def test_a_wrong_frequency_and_a_wrong_factor_are_named_together() -> None:
    report = check_yarn(lambda p, d: yarn(p, d, blend_swapped=True, attention="missing"))
    bugs = [part.split(":")[0] for part in report.diagnosis.split("; ")]
    assert bugs == ["ramp reversed", "attention factor missing"]


def test_a_stub_is_not_written_yet() -> None:
    def stub(p: dict[str, Any], d: int) -> Out:
        raise NotImplementedError("write YaRN")

    for check in CHECKS.values():
        report = check(stub)
        assert report.diagnosis.startswith("not written yet"), report.diagnosis
        assert report.max_error == math.inf and len(report.failed) == 1


def test_a_missing_optional_field_is_reported_with_a_hint() -> None:
    def strict(p: dict[str, Any], d: int) -> Out:
        p["beta_fast"], p["beta_slow"]  # read as required
        return yarn(p, d)

    report = check_yarn(strict)
    assert report.diagnosis.startswith("fn raised KeyError: 'beta_fast'")
    assert "Qwen2.5's, optional fields left out" in report.diagnosis
    assert "read them with .get and transformers' defaults" in report.diagnosis


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        (lambda p, d: yarn(p, d)[0], "fn did not return (inv_freq, attention_factor)"),
        (lambda p, d: (*yarn(p, d), 0), "fn did not return (inv_freq, attention_factor)"),
        (lambda p, d: (yarn(p, d)[0].tolist(), 1.0), "inv_freq is not a tensor"),
        (lambda p, d: (yarn(p, d)[0].half(), 1.0), "wrong inv_freq dtype"),
        (lambda p, d: ((1e6 * yarn(p, d)[0]).long(), 1.0), "wrong inv_freq dtype"),
        (
            lambda p, d: (yarn(p, d)[0].repeat(2), 1.0),
            "wrong inv_freq shape: fn returned (128,) for head_dim=128",
        ),
        (lambda p, d: (yarn(p, d)[0][None], 1.0), "wrong inv_freq shape"),
        (lambda p, d: (yarn(p, d)[0], "1.2"), "attention factor is not a number"),
        (lambda p, d: (yarn(p, d)[0], True), "attention factor is not a number"),
    ],
    ids=["no-pair", "triple", "list", "float16", "int64", "doubled", "2-d", "str", "bool"],
)
def test_an_output_of_the_wrong_kind_is_named(fn: ScaledFrequencies, phrase: str) -> None:
    report = check_yarn(fn)
    assert not report.ok
    assert report.diagnosis.startswith(phrase), report.diagnosis
    assert report.max_error == math.inf


def test_the_input_given_to_fn_cannot_corrupt_the_check() -> None:
    def destructive(p: dict[str, Any], d: int) -> Out:
        out = yarn(p, d)
        p["factor"] = 1.0
        p.clear()
        return out

    assert check_yarn(destructive).ok and check_yarn(destructive).ok


@pytest.mark.parametrize("check", [check_yarn, check_llama3])
def test_a_non_callable_is_refused(check: Any) -> None:
    with pytest.raises(TypeError, match="fn must be callable"):
        check("yarn")


@settings(max_examples=25, deadline=None)
@given(
    case=st.integers(0, len(practice._YARN_CASES) - 1),
    pair=st.floats(0.0, 1.0, exclude_max=True),
    change=st.floats(2e-4, 0.5) | st.floats(-0.5, -2e-4),
)
def test_a_single_pair_moved_beyond_the_tolerance_always_fails(
    case: int, pair: float, change: float
) -> None:
    """Any one frequency off by more than the tolerance, on any one case, is caught there."""
    target = practice._YARN_CASES[case][0]

    def moved(p: dict[str, Any], d: int) -> Out:
        theta, factor = yarn(p, d)
        if p == practice._YARN_CASES[case][2]:
            theta = theta.double()
            theta[int(pair * (d // 2))] *= 1 + change
        return theta, factor

    report: Report = check_yarn(moved)
    assert not report.ok
    assert report.failed == (next(n for n in report.cases if n.startswith(target)),)
    assert report.max_error >= 1e-4
