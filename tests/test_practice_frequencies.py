"""check_pair_frequencies: right readings pass, and each planted bug is named.

The readings are written as a reader would write them, in plain torch or plain
Python: transformers' float32 ``inv_freq`` formulas, a loop over the pairs, and
one parametrised function into which the bugs are planted. The checker's
reference is compared with transformers itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons._grading import Report, relative_error_text
from rope_lessons.practice.frequencies import _CONFIGS, _reference, check_pair_frequencies
from rope_lessons.rope.spec import Rope

Fn = Callable[[dict[str, Any], int], torch.Tensor]


def inv_freq(dim: int, base: float, over: int | None = None) -> torch.Tensor:
    """transformers' ladder, float32: ``1 / base ** (arange(0, dim, 2) / over)``."""
    over = dim if over is None else over
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / over))


def reader(
    params: dict[str, Any],
    head_dim: int,
    *,
    count: str = "floor",
    slowest: bool = False,
    prope_as_partial: bool = False,
    default: str = "right",
    fixed_base: bool = False,
) -> torch.Tensor:
    """A reader's function, right by default, with the knobs the bugs turn."""
    base = 10000.0 if fixed_base else params["rope_theta"]
    factor = params.get("partial_rotary_factor", 1.0)
    pairs = head_dim // 2
    theta = torch.zeros(pairs)
    if params["rope_type"] == "proportional" or default == "prope":
        if prope_as_partial and params["rope_type"] == "proportional":
            rotary = int(head_dim * factor)
            ladder = inv_freq(rotary, base)
            theta[: len(ladder)] = ladder
            return theta
        kept = {
            "floor": int(factor * head_dim // 2),
            "round": round(factor * pairs),
            "ceil": math.ceil(factor * pairs),
            "stopped": int((1 - factor) * head_dim // 2),
            "all": pairs,
        }[count]
        ladder = inv_freq(head_dim, base)
        if slowest:
            theta[pairs - kept :] = ladder[pairs - kept :]
        else:
            theta[:kept] = ladder[:kept]
        return theta
    if default == "ignored":
        return inv_freq(head_dim, base)
    rotary = int(head_dim * factor)
    ladder = inv_freq(rotary, base)
    if default == "last":
        theta[pairs - len(ladder) :] = ladder
    else:
        theta[: len(ladder)] = ladder
    return theta


def loop_reader(params: dict[str, Any], head_dim: int) -> torch.Tensor:
    """Right, written pair by pair in float64 with math.exp (pops the optional field)."""
    base = params.pop("rope_theta")
    factor = params.pop("partial_rotary_factor", 1.0)
    if params["rope_type"] == "proportional":
        kept, over = math.floor(factor * head_dim / 2), head_dim
    else:
        over = int(head_dim * factor)
        kept = over // 2
    return torch.tensor(
        [
            math.exp(-2 * k / over * math.log(base)) if k < kept else 0.0
            for k in range(head_dim // 2)
        ],
        dtype=torch.float64,
    )


def spec_reader(params: dict[str, Any], head_dim: int) -> torch.Tensor:
    """Right, through the package's reading of the configuration, padded to every pair."""
    spec = Rope.from_hf({"head_dim": head_dim, "rope_parameters": params})
    theta = torch.zeros(head_dim // 2, dtype=torch.float64)
    theta[: spec.theta.numel()] = spec.theta
    return theta


def planted(**knobs: Any) -> Fn:
    def fn(params: dict[str, Any], head_dim: int) -> torch.Tensor:
        return reader(params, head_dim, **knobs)

    return fn


def test_right_readings_pass() -> None:
    for fn in (planted(), loop_reader, spec_reader):
        report = check_pair_frequencies(fn)
        assert report.ok, report.diagnosis
        assert report.diagnosis.startswith("correct") and not report.failed
        assert len(report.cases) == len(_CONFIGS) and report.max_error < 1e-5


@pytest.mark.parametrize(
    ("knobs", "verdicts"),
    [
        ({"slowest": True}, ["p-RoPE keeps the slowest pairs"]),
        ({"count": "round"}, ["kept count rounded to nearest"]),
        ({"count": "ceil"}, ["kept count rounded up"]),
        ({"count": "stopped"}, ["p read as the fraction stopped"]),
        ({"count": "all"}, ["partial_rotary_factor ignored for 'proportional'"]),
        ({"default": "ignored"}, ["partial_rotary_factor ignored for 'default'"]),
        ({"prope_as_partial": True}, ["p-RoPE built as partial rotary"]),
        ({"default": "prope"}, ["partial rotary built as p-RoPE"]),
        ({"default": "last"}, ["partial rotary's pairs placed last"]),
        ({"fixed_base": True}, ["rope_theta ignored"]),
        (  # the branches swapped
            {"prope_as_partial": True, "default": "prope"},
            ["p-RoPE built as partial rotary", "partial rotary built as p-RoPE"],
        ),
        (  # every config read as p-RoPE, keeping the slowest pairs
            {"default": "prope", "slowest": True},
            ["p-RoPE keeps the slowest pairs", "partial rotary built as p-RoPE"],
        ),
        (
            {"count": "all", "default": "ignored"},
            [
                "partial_rotary_factor ignored for 'proportional'",
                "partial_rotary_factor ignored for 'default'",
            ],
        ),
        ({"count": "ceil", "fixed_base": True}, ["kept count rounded up", "rope_theta ignored"]),
    ],
)
def test_each_planted_bug_is_named(knobs: dict[str, Any], verdicts: list[str]) -> None:
    report = check_pair_frequencies(planted(**knobs))
    assert not report.ok and report.failed
    messages = report.diagnosis.split("; ")
    assert report.diagnosis.startswith(verdicts[0])
    for verdict in verdicts:
        assert any(message.startswith(verdict) for message in messages), report.diagnosis
    assert math.isfinite(report.max_error) and report.max_error > 1e-5


KNOBS = st.fixed_dictionaries(
    {
        "count": st.sampled_from(["floor", "round", "ceil", "stopped", "all"]),
        "slowest": st.booleans(),
        "default": st.sampled_from(["right", "prope", "last", "ignored"]),
        "fixed_base": st.booleans(),
    }
)


@settings(max_examples=30, deadline=None)
@given(KNOBS)
def test_every_combination_of_bugs_is_named_or_passes(knobs: dict[str, Any]) -> None:
    """Each planted bug is named; none is named that was not planted (but a bug no case can
    show: the slowest pairs kept when every pair is)."""
    report = check_pair_frequencies(planted(**knobs))
    expected = set()
    if knobs["slowest"] and knobs["count"] != "all":
        expected.add("p-RoPE keeps the slowest pairs")
    expected |= {
        "round": {"kept count rounded to nearest"},
        "ceil": {"kept count rounded up"},
        "stopped": {"p read as the fraction stopped"},
        "all": {"partial_rotary_factor ignored for 'proportional'"},
        "floor": set(),
    }[knobs["count"]]
    if knobs["default"] == "prope":
        if knobs["count"] == "all":  # the factor ignored for both types
            expected.add("partial_rotary_factor ignored for 'default'")
        else:
            expected.add("partial rotary built as p-RoPE")
    expected |= {
        "last": {"partial rotary's pairs placed last"},
        "ignored": {"partial_rotary_factor ignored for 'default'"},
    }.get(knobs["default"], set())
    if knobs["fixed_base"]:
        expected.add("rope_theta ignored")
    assert report.ok == (not expected)
    if report.ok:
        assert report.diagnosis.startswith("correct")
    else:
        named = {message.split(":")[0] for message in report.diagnosis.split("; ")}
        assert named == expected, report.diagnosis


def test_stub_is_not_written_yet() -> None:
    def stub(params: dict[str, Any], head_dim: int) -> torch.Tensor:
        raise NotImplementedError("write pair_frequencies")

    report = check_pair_frequencies(stub)
    assert not report.ok and report.diagnosis.startswith("not written yet")
    assert report.first_failure == report.cases[0] and math.isinf(report.max_error)


def test_raised_gives_the_case_and_a_hint() -> None:
    def no_default(params: dict[str, Any], head_dim: int) -> torch.Tensor:
        params["partial_rotary_factor"]  # the optional field read as required
        return reader(params, head_dim)

    report = check_pair_frequencies(no_default)
    assert report.diagnosis.startswith("fn raised KeyError")
    assert "rope_parameters.get('partial_rotary_factor', 1.0)" in report.diagnosis
    assert report.first_failure == report.cases[0]

    def divides_by_kept(params: dict[str, Any], head_dim: int) -> torch.Tensor:
        factor = params.get("partial_rotary_factor", 1.0)
        kept = int(factor * head_dim // 2)
        if params["rope_type"] == "proportional":
            1 / kept  # a step that fails with no pair kept
        return reader(params, head_dim)

    report = check_pair_frequencies(divides_by_kept)
    assert report.diagnosis.startswith("fn raised ZeroDivisionError")
    assert "NoPE" in report.diagnosis and "'partial_rotary_factor': 0.0" in str(
        report.first_failure
    )


def test_wrong_output_types_and_shapes() -> None:
    def as_list(params: dict[str, Any], head_dim: int) -> Any:
        return reader(params, head_dim).tolist()

    def as_int(params: dict[str, Any], head_dim: int) -> torch.Tensor:
        return reader(params, head_dim).long()

    def turning_only(params: dict[str, Any], head_dim: int) -> torch.Tensor:
        theta = reader(params, head_dim)
        return theta[theta > 0] if params.get("partial_rotary_factor", 1.0) < 1 else theta

    def per_feature(params: dict[str, Any], head_dim: int) -> torch.Tensor:
        return reader(params, head_dim).repeat_interleave(2)

    expected = {
        as_list: "fn did not return a tensor",
        as_int: "wrong output dtype",
        turning_only: "wrong output shape",
        per_feature: "wrong output shape",
    }
    for fn, verdict in expected.items():
        report = check_pair_frequencies(fn)
        assert not report.ok and report.diagnosis.startswith(verdict), report.diagnosis
    assert "only the 8 turning pairs" in check_pair_frequencies(turning_only).diagnosis
    assert "one per feature" in check_pair_frequencies(per_feature).diagnosis


def test_unrecognised_gives_the_case_and_a_finite_error() -> None:
    def wrong_exponent(params: dict[str, Any], head_dim: int) -> torch.Tensor:
        theta = reader(params, head_dim)
        return torch.where(theta > 0, theta.sqrt(), theta)  # base^(-k/d) in place of -2k/d

    report = check_pair_frequencies(wrong_exponent)
    assert report.diagnosis.startswith("unrecognised difference")
    assert report.first_failure == report.cases[0] and report.first_failure in report.diagnosis
    assert math.isfinite(report.max_error) and report.max_error > 0.1
    assert f"largest error: {relative_error_text(report.max_error)}" in str(report)


def test_bad_argument_raises() -> None:
    with pytest.raises(TypeError, match="callable"):
        check_pair_frequencies(3)  # type: ignore[arg-type]


def test_report_prints_stably() -> None:
    report = check_pair_frequencies(planted(slowest=True))
    assert isinstance(report, Report)
    text = str(report)
    assert text.startswith("ok: False\n  p-RoPE keeps the slowest pairs")
    assert "largest error" in text


@pytest.mark.parametrize(("head_dim", "params"), _CONFIGS)
def test_reference_is_transformers_table(head_dim: int, params: dict[str, Any]) -> None:
    """The checker's tables are transformers 5's: ``"proportional"`` from
    ``ROPE_INIT_FUNCTIONS``, ``"default"`` with ``partial_rotary_factor`` from GPT-NeoX's
    rotary embedding (``inv_freq`` over the rotating features, padded with 0)."""
    pytest.importorskip("transformers")
    import transformers
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding

    # transformers' default factor is 1.0, but GPT-NeoX's configuration sets 0.25 where it is absent
    rope: Any = {"partial_rotary_factor": 1.0, **params}
    config = transformers.GPTNeoXConfig(
        hidden_size=2 * head_dim, num_attention_heads=2, rope_parameters=rope
    )
    if params["rope_type"] == "proportional":
        theirs, _ = ROPE_INIT_FUNCTIONS["proportional"](config, "cpu")
    else:
        theirs, _ = GPTNeoXRotaryEmbedding.compute_default_rope_parameters(config)
    padded = torch.zeros(head_dim // 2, dtype=torch.float64)
    padded[: theirs.numel()] = theirs.double()
    torch.testing.assert_close(_reference(head_dim, params), padded, rtol=1e-6, atol=0.0)


# --- check_turning_features --------------------------------------------------------------


def feature_reader(
    params: dict[str, Any],
    head_dim: int,
    layout: str,
    *,
    count: str = "floor",
    slowest: bool = False,
    ignored: bool = False,
    prope: str = "right",
    partial: str = "leading",
) -> torch.Tensor:
    """A reader's mask of the turning features, right by default, with the knobs bugs turn."""
    factor = params.get("partial_rotary_factor", 1.0)
    pairs = head_dim // 2
    mask = torch.zeros(head_dim, dtype=torch.bool)
    if params["rope_type"] == "proportional" or partial == "prope":
        if prope == "partial" and params["rope_type"] == "proportional":
            mask[: int(head_dim * factor)] = True
            return mask
        kept = {
            "floor": int(factor * head_dim // 2),
            "round": round(factor * pairs),
            "ceil": math.ceil(factor * pairs),
            "stopped": int((1 - factor) * head_dim // 2),
            "all": pairs,
        }[count]
        ks = range(pairs - kept, pairs) if slowest else range(kept)
        placed = {"swapped": {"half": "interleaved", "interleaved": "half"}[layout]}.get(
            prope, prope if prope in ("half", "interleaved") else layout
        )
        for k in ks:
            if placed == "half":
                mask[k] = mask[k + pairs] = True
            else:
                mask[2 * k] = mask[2 * k + 1] = True
        return mask
    rotary = head_dim if ignored else int(head_dim * factor)
    if partial == "trailing":
        mask[head_dim - rotary :] = True
    elif partial == "spread":
        mask[: rotary // 2] = True
        mask[pairs : pairs + rotary // 2] = True
    else:
        mask[:rotary] = True
    return mask


def planted_features(**knobs: Any) -> Callable[[dict[str, Any], int, str], torch.Tensor]:
    def fn(params: dict[str, Any], head_dim: int, layout: str) -> torch.Tensor:
        return feature_reader(params, head_dim, layout, **knobs)

    return fn


def features_from_frequencies(params: dict[str, Any], head_dim: int, layout: str) -> Any:
    """Right, another way: from the turning pairs of loop_reader, as 0/1 floats, with the
    half layout's places read off torch.arange(d).chunk(2)."""
    turning = loop_reader(dict(params), head_dim) > 0
    if params["rope_type"] == "default":
        return (torch.arange(head_dim) < 2 * int(turning.sum())).double()
    first, second = (
        torch.arange(head_dim).chunk(2)
        if layout == "half"
        else (torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2))
    )
    mask = torch.zeros(head_dim)
    mask[first[turning]] = 1.0
    mask[second[turning]] = 1.0
    return mask


def test_right_feature_masks_pass() -> None:
    from rope_lessons.practice.frequencies import check_turning_features

    for fn in (planted_features(), features_from_frequencies):
        report = check_turning_features(fn)
        assert report.ok, report.diagnosis
        assert report.diagnosis.startswith("correct") and len(report.cases) == 2 * len(_CONFIGS)
        assert report.max_error == 0.0


@pytest.mark.parametrize(
    ("knobs", "verdicts"),
    [
        ({"prope": "swapped"}, ["p-RoPE's pairs placed as in the other layout"]),
        ({"prope": "interleaved"}, ["p-RoPE's kept pairs marked as a leading block"]),
        ({"prope": "half"}, ["layout ignored for p-RoPE"]),
        ({"prope": "partial"}, ["p-RoPE read as partial rotary"]),
        ({"partial": "prope"}, ["partial rotary read as p-RoPE"]),
        ({"partial": "spread"}, ["partial rotary's pairs spread over the head"]),
        ({"partial": "trailing"}, ["partial rotary's features placed last"]),
        ({"slowest": True}, ["p-RoPE keeps the slowest pairs"]),
        ({"count": "round"}, ["kept count rounded to nearest"]),
        ({"count": "ceil"}, ["kept count rounded up"]),
        ({"count": "stopped"}, ["p read as the fraction stopped"]),
        ({"count": "all"}, ["partial_rotary_factor ignored for 'proportional'"]),
        ({"ignored": True}, ["partial_rotary_factor ignored for 'default'"]),
        (  # one half-layout code for everything
            {"prope": "half", "partial": "prope"},
            ["layout ignored for p-RoPE", "partial rotary read as p-RoPE"],
        ),
        (  # the two kinds swapped
            {"prope": "partial", "partial": "prope"},
            ["p-RoPE read as partial rotary", "partial rotary read as p-RoPE"],
        ),
        (
            {"slowest": True, "prope": "swapped", "partial": "trailing"},
            [
                "p-RoPE keeps the slowest pairs",
                "p-RoPE's pairs placed as in the other layout",
                "partial rotary's features placed last",
            ],
        ),
    ],
)
def test_each_planted_feature_bug_is_named(knobs: dict[str, Any], verdicts: list[str]) -> None:
    from rope_lessons.practice.frequencies import check_turning_features

    report = check_turning_features(planted_features(**knobs))
    assert not report.ok and report.failed
    named = [message.split(":")[0] for message in report.diagnosis.split("; ")]
    assert named == verdicts, report.diagnosis
    assert math.isfinite(report.max_error) and report.max_error >= 1


def test_feature_checker_failures() -> None:
    from rope_lessons.practice.frequencies import check_turning_features

    def stub(params: dict[str, Any], head_dim: int, layout: str) -> torch.Tensor:
        raise NotImplementedError

    report = check_turning_features(stub)
    assert report.diagnosis.startswith("not written yet") and "layout=" in report.diagnosis

    def raises(params: dict[str, Any], head_dim: int, layout: str) -> torch.Tensor:
        params["partial_rotary_factor"]
        return feature_reader(params, head_dim, layout)

    report = check_turning_features(raises)
    assert report.diagnosis.startswith("fn raised KeyError")
    assert "optional" in report.diagnosis

    def per_pair(params: dict[str, Any], head_dim: int, layout: str) -> torch.Tensor:
        return loop_reader(params, head_dim) > 0

    def as_list(params: dict[str, Any], head_dim: int, layout: str) -> Any:
        return feature_reader(params, head_dim, layout).tolist()

    def frequencies_per_feature(params: dict[str, Any], head_dim: int, layout: str) -> Any:
        return loop_reader(params, head_dim).repeat(2)

    report = check_turning_features(per_pair)
    assert report.diagnosis.startswith("wrong output shape") and "one per pair" in report.diagnosis
    report = check_turning_features(as_list)
    assert report.diagnosis.startswith("fn did not return a tensor")
    report = check_turning_features(frequencies_per_feature)
    assert report.diagnosis.startswith("wrong output dtype")

    def off_by_one(params: dict[str, Any], head_dim: int, layout: str) -> torch.Tensor:
        mask = feature_reader(params, head_dim, layout)
        mask[-1] = True  # the last feature always marked
        return mask

    report = check_turning_features(off_by_one)
    assert report.diagnosis.startswith("unrecognised difference")
    assert report.first_failure is not None and report.first_failure in report.diagnosis
    assert report.max_error == 1.0 and "largest error: 1" in str(report)
    with pytest.raises(TypeError, match="callable"):
        check_turning_features("mask")  # type: ignore[arg-type]


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["right", "swapped", "half", "interleaved"]),
    st.sampled_from(["leading", "trailing", "spread", "prope"]),
    st.booleans(),
)
def test_feature_bugs_are_named_or_pass(prope: str, partial: str, slowest: bool) -> None:
    """Every planted placement is named, alone or with the others; the right one passes."""
    from rope_lessons.practice.frequencies import check_turning_features

    report = check_turning_features(planted_features(prope=prope, partial=partial, slowest=slowest))
    planted = prope != "right" or partial != "leading" or slowest
    assert report.ok == (not planted), report.diagnosis
    if planted:
        assert not report.diagnosis.startswith("unrecognised"), report.diagnosis
    if slowest:
        assert "p-RoPE keeps the slowest pairs" in report.diagnosis


@pytest.mark.parametrize(("head_dim", "params"), _CONFIGS)
def test_feature_reference_is_what_transformers_turns(
    head_dim: int, params: dict[str, Any]
) -> None:
    """In the half layout, the features the checker calls turning are those transformers'
    GPT-NeoX rotary embedding and apply_rotary_pos_emb change at position 4096 (where
    the slowest kept pair, 1e6^(-62/64), has turned by 6e-3 rad)."""
    pytest.importorskip("transformers")
    import transformers
    from transformers.models.gpt_neox import modeling_gpt_neox as neox

    from rope_lessons.practice.frequencies import _feature_cases

    rope: Any = {"partial_rotary_factor": 1.0, **params}
    config = transformers.GPTNeoXConfig(
        hidden_size=2 * head_dim, num_attention_heads=2, rope_parameters=rope
    )
    x = torch.randn(1, 1, 2, head_dim, generator=torch.Generator().manual_seed(0))
    cos, sin = neox.GPTNeoXRotaryEmbedding(config)(x, torch.tensor([[0, 4096]]))
    turned, _ = neox.apply_rotary_pos_emb(x, x, cos, sin)
    changed = (turned[0, 0, 1] - x[0, 0, 1]).abs() > 1e-6  # at position 4096
    (case,) = (
        c
        for c in _feature_cases()
        if c.layout == "half" and c.pairs.head_dim == head_dim and c.pairs.parameters == params
    )
    assert changed.equal(case.reference)
