"""attention takes a placement and a Rope spec: the spec's settings, its attention
factor, and the refusals (a placement passed as ``rope``, a spec of the wrong size)."""

from __future__ import annotations

import importlib
import math

import pytest
import torch
from helpers import random_features
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons import _checks as checks
from rope_lessons._checks import Layout
from rope_lessons.rope.kernels import apply_rope
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import (
    PLACEMENTS,
    Placement,
    attention,
    rotate_inputs,
    rotate_output,
)

B, H, T, D = 2, 3, 7, 8

# the package exports functions named like these modules, so import the modules by name
attention_module = importlib.import_module("rope_lessons.toy.rotary_attention")
# The modules of the rope layer whose names attention's kernel calls.
rope_modules = [
    importlib.import_module(f"rope_lessons.rope.{name}") for name in ("kernels", "ladder", "spec")
]

layouts = st.sampled_from(["interleaved", "half"])
factors = st.floats(0.25, 4.0)


def qkv(seed: int = 0, value_dim: int = D) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q, k = random_features(2, B, H, T, D, seed=seed)
    v = random_features(B, H, T, value_dim, seed=seed + 1)
    return q, k, v


def causal_weights(logits: torch.Tensor) -> torch.Tensor:
    """Softmax over keys of ``(..., T, T)`` logits, future keys masked."""
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return logits.masked_fill(future, float("-inf")).softmax(-1)


# ---------------------------------------------------------------- the spec's settings


@given(layout=layouts, base=st.sampled_from([10000.0, 500.0, 1e6]), p=st.sampled_from([1.0, 0.5]))
def test_the_spec_sets_frequencies_and_layout(layout: Layout, base: float, p: float) -> None:
    q, k, v = qkv()
    spec = Rope(D, base, layout, p)
    _, weights = attention(q, k, v, rope=spec, return_weights=True)
    rotated_q = apply_rope(q, base=base, layout=layout, p=p)
    rotated_k = apply_rope(k, base=base, layout=layout, p=p)
    expected = causal_weights(rotated_q @ rotated_k.transpose(-2, -1) / math.sqrt(D))
    torch.testing.assert_close(weights, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_no_spec_is_roformers_defaults(placement: Placement) -> None:
    q, k, v = qkv()
    torch.testing.assert_close(
        attention(q, k, v, placement=placement),
        attention(q, k, v, placement=placement, rope=Rope(D)),
        rtol=0,
        atol=0,
    )


@pytest.mark.parametrize("placement", ["v", "o", "vo"])
def test_no_spec_rotates_values_at_their_own_dimension(placement: Placement) -> None:
    q, k, v = qkv(value_dim=6)
    out = attention(q, k, v, placement=placement)
    assert out.shape == (B, H, T, 6)
    torch.testing.assert_close(
        out, attention(q, k, v, placement=placement, rope=Rope(6)), rtol=0, atol=0
    )


# ---------------------------------------------------------------- the attention factor


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_a_factor_of_one_changes_no_bit(placement: Placement) -> None:
    q, k, v = qkv()
    theta = frequencies(D, 321.0)
    plain = Rope.from_theta(theta)
    factored = Rope.from_theta(theta, attention_factor=1.0)
    fused = attention(q, k, v, placement=placement, rope=plain)
    assert torch.equal(attention(q, k, v, placement=placement, rope=factored), fused)
    out, weights = attention(q, k, v, placement=placement, rope=plain, return_weights=True)
    out_1, weights_1 = attention(q, k, v, placement=placement, rope=factored, return_weights=True)
    assert torch.equal(out, out_1) and torch.equal(weights, weights_1)


@given(factor=factors, layout=layouts, seed=st.integers(0, 2**16))
def test_the_factor_scales_qk_logits_by_its_square(
    factor: float, layout: Layout, seed: int
) -> None:
    """As transformers applies YaRN's attention_scaling: cos and sin times a, so
    <a R_m q, a R_n k> = a^2 <R_m q, R_n k>."""
    q, k, v = qkv(seed)
    spec = Rope(D, layout=layout, attention_factor=factor)
    out, weights = attention(q, k, v, rope=spec, return_weights=True)
    plain = Rope(D, layout=layout)
    logits = plain.apply(q) @ plain.apply(k).transpose(-2, -1) / math.sqrt(D)
    torch.testing.assert_close(weights, causal_weights(factor**2 * logits))
    torch.testing.assert_close(out, causal_weights(factor**2 * logits) @ v)
    fused = attention(q, k, v, rope=spec)
    torch.testing.assert_close(fused, out)
    # the same as scaling the inputs: queries and keys each by a
    torch.testing.assert_close(fused, attention(q * factor, k * factor, v, rope=plain))


@pytest.mark.parametrize(("placement", "power"), [("q", 1), ("k", 1), ("qkv", 2), ("qkvo", 2)])
def test_the_factor_scales_each_rotated_query_and_key(placement: Placement, power: int) -> None:
    q, k, v = qkv()
    spec = Rope(D, attention_factor=1.5)
    _, weights = attention(q, k, v, placement=placement, rope=spec, return_weights=True)
    scaled_q = q * 1.5 if "q" in placement else q
    scaled_k = k * 1.5 if "k" in placement else k
    _, expected = attention(scaled_q, scaled_k, v, placement=placement, return_weights=True)
    torch.testing.assert_close(weights, expected)
    rq, rk, rv = rotate_inputs(q, k, v, placement=placement, rope=spec)
    logits = (rq @ rk.transpose(-2, -1)) / math.sqrt(D)
    plain_q, plain_k, _ = rotate_inputs(q, k, v, placement=placement)
    torch.testing.assert_close(logits, 1.5**power * plain_q @ plain_k.transpose(-2, -1) / 8**0.5)
    torch.testing.assert_close(rv, rotate_inputs(q, k, v, placement=placement)[2], rtol=0, atol=0)


@pytest.mark.parametrize("placement", ["nope", "v", "o", "vo"])
def test_a_factor_that_nothing_would_apply_is_refused(placement: Placement) -> None:
    q, k, v = qkv()
    with pytest.raises(ValueError, match=f"placement '{placement}' rotates neither"):
        attention(q, k, v, placement=placement, rope=Rope(D, attention_factor=1.2))


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_a_placement_passed_as_rope_is_refused(placement: Placement) -> None:
    q, k, v = qkv()
    message = f"placement is now given as placement='{placement}'"
    with pytest.raises(TypeError, match=message):
        attention(q, k, v, rope=placement)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=message):
        rotate_inputs(q, k, v, rope=placement)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=message):
        rotate_output(v, rope=placement)  # type: ignore[arg-type]


@given(wrong=st.integers(1, 12).map(lambda half: 2 * half).filter(lambda d: d != D))
def test_a_spec_of_another_head_dimension_is_refused_with_both_sizes(wrong: int) -> None:
    q, k, v = qkv()
    placements: tuple[Placement, ...] = ("q", "k", "qk", "qkv", "qkvo")
    for placement in placements:
        with pytest.raises(ValueError, match=rf"rope.dim = {wrong} .* head dimension D .* {D}"):
            attention(q, k, v, placement=placement, rope=Rope(wrong))


def test_a_spec_of_another_value_dimension_is_refused_with_both_sizes() -> None:
    q, k, v = qkv(value_dim=6)
    placements: tuple[Placement, ...] = ("v", "o", "vo")
    for placement in placements:
        with pytest.raises(ValueError, match=r"rope.dim = 8 .* value dimension Dv .* = 6"):
            attention(q, k, v, placement=placement, rope=Rope(D))
    with pytest.raises(ValueError, match=r"rope.dim = 8 .* value dimension Dv .* = 6"):
        rotate_output(v, placement="o", rope=Rope(D))
    with pytest.raises(ValueError, match="needs D == Dv"):
        attention(q, k, v, placement="qkvo")
    # a placement that does not rotate the values never looks at their dimension
    attention(q, k, v, placement="qk", rope=Rope(D))


# ---------------------------------------------------------------- checked once


def test_positions_and_frequencies_are_checked_once_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """attention checks each positions tensor once and never re-validates the spec's θ."""
    calls: list[str] = []
    check_positions = checks.check_positions

    def counted(*args: object, **kwargs: object) -> torch.Tensor:
        calls.append(str(kwargs.get("name", "positions")))
        return check_positions(*args, **kwargs)  # type: ignore[arg-type]

    def refused(*args: object, **kwargs: object) -> torch.Tensor:
        raise AssertionError("the spec's frequencies were checked again")

    monkeypatch.setattr(attention_module, "check_positions", counted)
    for module in rope_modules:
        if hasattr(module, "check_positions"):
            monkeypatch.setattr(module, "check_positions", counted)
        for name in ("check_theta", "resolve_theta"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, refused)
    q, k, v = qkv()
    spec = Rope(D, layout="half")
    attention(q, k, v, placement="qkvo", rope=spec, positions=torch.arange(T) + 3)
    assert calls == ["positions"]
    calls.clear()
    attention(
        q, k, v, placement="qkvo", rope=spec,
        q_positions=torch.arange(T), k_positions=torch.arange(T),
    )  # fmt: skip
    assert calls == ["q_positions", "k_positions"]
