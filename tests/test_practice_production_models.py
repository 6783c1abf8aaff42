"""Chapter 10's checker: each planted misreading of a published configuration is named."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_lessons.practice.production_models as pm
from rope_lessons.practice.production_models import (
    CASES,
    LayerDesign,
    check_layer_designs,
    layer_designs,
    published_fields,
)
from rope_lessons.real.published import published_config
from rope_lessons.toy.rotary_attention import Local


def reader(bug: str | None = None) -> Callable[[dict[str, Any]], list[LayerDesign]]:
    """A reading of a published configuration written from its fields, with one bug."""

    def read(config: dict[str, Any]) -> list[LayerDesign]:
        n = config["num_hidden_layers"]
        types = list(config.get("layer_types") or ["full_attention"] * n)
        flags = list(config.get("no_rope_layers") or [1] * n)
        if bug == "nope_shift":  # NoPE where (i % 4 == 0) instead of (i + 1) % 4 == 0
            flags = [flags[i - 1] for i in range(n)]
        if bug == "types_shift":  # 1-based: layer_types[i - 1]
            types = [types[i - 1] for i in range(n)]
        if "rope_parameters" in config:
            parameters = config["rope_parameters"]
        else:
            scaling = config.get("rope_scaling") or {}
            if bug == "scaling":
                scaling = {}
            parameters = {"rope_theta": config["rope_theta"], **scaling}
        head = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]

        def local_of(kind: str) -> Local | None:
            if kind == "sliding_attention" and config.get("use_sliding_window", True):
                return Local(config["sliding_window"], "window")
            if kind == "chunked_attention":
                if bug == "chunk_window":
                    return Local(config["attention_chunk_size"], "window")
                return Local(config["attention_chunk_size"], "chunk")
            return None

        designs = []
        for i, kind in enumerate(types):
            local = local_of(kind)
            if bug == "no_windows":
                local = None
            if bug == "swap":  # the model's window (or chunk) on its global layers
                seen = next((w for w in map(local_of, types) if w is not None), None)
                local = seen if local is None else None
            linear = kind == "linear_attention" and bug != "linear"
            nope = not flags[i] and bug != "nope_missed"
            if linear or nope:
                designs.append(LayerDesign(None, None, 0, 0, local))
                continue
            key = {"global_theta": "full_attention", "local_theta": "sliding_attention"}.get(
                bug or "", kind
            )
            p = parameters.get(key, parameters)
            d = head
            if kind == "full_attention" and bug != "global_head_dim":
                d = config.get("global_head_dim", head)
            factor = p.get("partial_rotary_factor", 1.0)
            if bug == "factor":
                factor = 1.0
            rope_type = p.get("rope_type", p.get("type", "default"))
            proportional = rope_type == "proportional"
            if bug == "prope_as_partial":
                proportional = False
            if bug == "partial_as_prope":
                proportional = True
            if proportional:
                ladder, turning = d, int(factor * d) // 2
            else:
                ladder = int(factor * d)
                turning = ladder // 2
            designs.append(LayerDesign(float(p["rope_theta"]), rope_type, turning, ladder, local))
        return designs

    return read


def looped(config: dict[str, Any]) -> list[LayerDesign]:
    """The same reading written from transformers' configuration object instead."""
    name = next(n for n in CASES if published_fields(n) == config)
    designs: list[LayerDesign] = layer_designs(published_config(name))
    return designs


def test_correct_readings_pass() -> None:
    for fn in (reader(), looped):
        report = check_layer_designs(fn)
        assert report.ok, report.diagnosis
        assert report.diagnosis.startswith("correct")
        assert len(report.cases) == len(CASES) and not report.failed


@pytest.mark.parametrize(
    ("bug", "verdict"),
    [
        ("nope_missed", "NoPE layers missed"),
        ("nope_shift", "NoPE layers shifted by one layer"),
        ("linear", "linear-attention layers given RoPE"),
        ("types_shift", "layer types read one layer off"),
        ("global_theta", "global base used for the local layers"),
        ("local_theta", "local base used for the global layers"),
        ("factor", "partial_rotary_factor ignored"),
        ("prope_as_partial", "p-RoPE read as partial rotary"),
        ("partial_as_prope", "partial rotary read as p-RoPE"),
        ("scaling", "scaling ignored"),
        ("global_head_dim", "the full layers' head dimension missed"),
        ("no_windows", "local layers missed"),
        ("swap", "local and global layers swapped"),
        ("chunk_window", "chunks read as windows"),
    ],
)
def test_planted_bugs_are_named(bug: str, verdict: str) -> None:
    report = check_layer_designs(reader(bug))
    assert not report.ok
    assert report.diagnosis.startswith(verdict), report.diagnosis
    assert report.failed and math.isfinite(report.max_error) and report.max_error >= 1


def test_every_layer_local_and_windows_shifted() -> None:
    def everywhere(config: dict[str, Any]) -> list[LayerDesign]:
        designs = reader()(config)
        local = next((d.local for d in designs if d.local is not None), None)
        return [d._replace(local=local) for d in designs]

    def windows_late(config: dict[str, Any]) -> list[LayerDesign]:
        designs = reader()(config)
        return [d._replace(local=designs[i - 1].local) for i, d in enumerate(designs)]

    assert check_layer_designs(everywhere).diagnosis.startswith("every layer made local")
    assert check_layer_designs(windows_late).diagnosis.startswith(
        "local layers shifted by one layer"
    )


def test_two_bugs_are_both_named() -> None:
    def both(config: dict[str, Any]) -> list[LayerDesign]:
        return [d._replace(local=None) for d in reader("nope_missed")(config)]

    diagnosis = check_layer_designs(both).diagnosis
    assert diagnosis.startswith("NoPE layers missed") and "; local layers missed" in diagnosis


def test_stub_unrecognised_and_shapes() -> None:
    def stub(config: dict[str, Any]) -> list[LayerDesign]:
        raise NotImplementedError

    def odd(config: dict[str, Any]) -> list[LayerDesign]:
        designs = reader()(config)
        return [designs[0]._replace(turning=designs[0].turning + 1), *designs[1:]]

    assert check_layer_designs(stub).diagnosis.startswith("not written yet")
    report = check_layer_designs(odd)
    assert report.diagnosis.startswith("unrecognised difference")
    assert report.first_failure is not None and report.first_failure.startswith("smollm2_135m")
    assert report.max_error == 1.0 and "Layer 0" in report.diagnosis
    assert check_layer_designs(lambda c: None).diagnosis.startswith("fn did not return a list")  # type: ignore[arg-type,return-value]
    assert check_layer_designs(lambda c: reader()(c)[1:]).diagnosis.startswith(
        "wrong number of layers"
    )
    ints: Any = lambda c: [1] * c["num_hidden_layers"]  # noqa: E731
    assert check_layer_designs(ints).diagnosis.startswith("wrong entry type")
    missing = check_layer_designs(lambda c: c["no such field"]).diagnosis
    assert missing.startswith("fn raised KeyError") and "config.get" in missing


def test_bad_arguments() -> None:
    with pytest.raises(TypeError):
        check_layer_designs("not a function")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        check_layer_designs(reader(), names="gemma4_31b")
    with pytest.raises(ValueError, match="at least one"):
        check_layer_designs(reader(), names=())
    with pytest.raises(ValueError, match="unknown"):
        check_layer_designs(reader(), names=("deepseek_v4_flash",))


def test_fn_gets_fresh_copies() -> None:
    def spoiling(config: dict[str, Any]) -> list[LayerDesign]:
        designs = reader()(config)
        config.clear()
        return designs

    assert check_layer_designs(spoiling).ok
    assert check_layer_designs(reader()).ok


@settings(max_examples=10, deadline=None)
@given(st.lists(st.sampled_from(CASES), min_size=1, max_size=3, unique=True))
def test_any_subset_accepts_the_reading(names: list[str]) -> None:
    report = check_layer_designs(reader(), names)
    assert report.ok and len(report.cases) == len(names)


def test_the_bug_free_candidate_is_the_reading() -> None:
    for name in CASES:
        case = pm._case(name)
        assert pm._Candidate().designs(case) == case.reference
