"""Chapter 8: NTK with a free alpha, dynamic NTK, YaRN's two ramps and attention factor,
safe distances, and the refusals of bad input."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from helpers import HF_BASES, HF_RTOL, attention_of
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons.chapters.extension import extended
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.scaled_specs import safe_distances, scaled_frequencies
from rope_lessons.rope.scaling import (
    EXTENSION_METHODS,
    Ramp,
    aggregation_sum,
    base_lower_bound,
    critical_pair,
    dynamic_ntk_alpha,
    llama3_weight,
    log_length_scale,
    yarn_attention_factor,
    yarn_ramp,
)
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.model import ModelConfig, TinyTransformer
from rope_lessons.toy.rotary_attention import attention

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402


def hugging_face(
    rope_type: str,
    d: int,
    max_positions: int,
    params: dict[str, object],
    seq_len: int | None = None,
    base: float = 10000.0,
) -> tuple[torch.Tensor, float]:
    """transformers' initialisation of ``rope_type`` from a Llama config with ``params``."""
    config = transformers.LlamaConfig(
        hidden_size=2 * d,
        num_attention_heads=2,
        head_dim=d,
        max_position_embeddings=max_positions,
        rope_parameters={"rope_type": rope_type, "rope_theta": base, **params},
    )
    function = ROPE_INIT_FUNCTIONS[rope_type]
    if seq_len is None:
        inv_freq, scale = function(config, "cpu")
    else:
        inv_freq, scale = function(config, "cpu", seq_len=seq_len)
    return inv_freq.double(), float(scale)


# (d, original length, factor, sequence length): below, at and past L, up to and past s L
DYNAMIC_CASES = [
    (32, 64, 8.0, 32),
    (32, 64, 8.0, 64),
    (32, 64, 8.0, 100),
    (32, 64, 8.0, 512),
    (128, 4096, 4.0, 16384),
    (128, 4096, 2.0, 40000),
    (64, 1000, 3.5, 1001),
]


@pytest.mark.parametrize("base", HF_BASES)
@pytest.mark.parametrize(("d", "length", "factor", "seq_len"), DYNAMIC_CASES)
def test_dynamic_matches_hugging_face(
    d: int, length: int, factor: float, seq_len: int, base: float
) -> None:
    theirs, their_scale = hugging_face("dynamic", d, length, {"factor": factor}, seq_len, base)
    spec = scaled_frequencies(
        d, "dynamic", factor=factor, original_length=length, length=seq_len, base=base
    )
    torch.testing.assert_close(spec.theta, theirs, rtol=HF_RTOL, atol=0.0)
    assert spec.attention_factor == their_scale == 1.0


def test_dynamic_is_plain_up_to_the_trained_length_and_ntk_past_it() -> None:
    for seq_len in (1, 63, 64):
        spec = scaled_frequencies(32, "dynamic", factor=8.0, original_length=64, length=seq_len)
        assert spec == Rope(32)
    alpha = dynamic_ntk_alpha(8.0, 64, 512)
    assert alpha == 8 * 8 - 8 + 1  # s^2 - s + 1 at the target length
    dynamic = scaled_frequencies(32, "dynamic", factor=8.0, original_length=64, length=512)
    ntk = scaled_frequencies(32, "ntk", factor=8.0, original_length=64, alpha=alpha)
    assert dynamic == ntk
    # the comparison can fail: one position further gives another table
    longer = scaled_frequencies(32, "dynamic", factor=8.0, original_length=64, length=513)
    assert longer != dynamic


@pytest.mark.parametrize("alpha", [1.0, 2.5, 8.0, 16.0, 64.0])
def test_ntk_alpha_divides_the_slowest_pair_by_alpha(alpha: float) -> None:
    d = 32
    spec = scaled_frequencies(d, "ntk", factor=8.0, original_length=64, alpha=alpha)
    ratio = spec.theta / frequencies(d)
    assert ratio[0] == 1.0
    assert float(ratio[-1]) == pytest.approx(1.0 / alpha, rel=1e-12)
    # pair k is divided by alpha ** (2k / (d - 2)): geometric in k
    k = torch.arange(d // 2, dtype=torch.float64)
    torch.testing.assert_close(ratio, alpha ** (-2.0 * k / (d - 2)))


def test_ntk_alpha_defaults_to_the_factor() -> None:
    default = scaled_frequencies(32, "ntk", factor=8.0, original_length=64)
    assert default == scaled_frequencies(32, "ntk", factor=8.0, original_length=64, alpha=8.0)
    assert default != scaled_frequencies(32, "ntk", factor=8.0, original_length=64, alpha=16.0)


YARN_CASES = [
    (32, 64, 8.0, {}),
    (128, 4096, 16.0, {}),
    (128, 8192, 8.0, {"beta_fast": 16.0, "beta_slow": 2.0}),
    (64, 1000, 3.5, {}),
]


@pytest.mark.parametrize("base", HF_BASES)
@pytest.mark.parametrize(("d", "length", "factor", "extra"), YARN_CASES)
@pytest.mark.parametrize("truncate", [True, False])
def test_yarn_truncate_matches_hugging_face(
    d: int, length: int, factor: float, extra: dict[str, Any], truncate: bool, base: float
) -> None:
    params: dict[str, object] = {
        "factor": factor,
        "original_max_position_embeddings": length,
        "truncate": truncate,
        **extra,
    }
    theirs, their_scale = hugging_face("yarn", d, int(length * factor), params, base=base)
    spec = scaled_frequencies(
        d, "yarn", factor=factor, original_length=length, truncate=truncate, base=base, **extra
    )
    torch.testing.assert_close(spec.theta, theirs, rtol=HF_RTOL, atol=0.0)
    assert spec.attention_factor == pytest.approx(their_scale, rel=1e-12)


def test_yarn_truncate_changes_the_table() -> None:
    """The comparison above can fail: in the toy the two ramps differ."""
    kept = scaled_frequencies(32, "yarn", factor=8.0, original_length=64)
    loose = scaled_frequencies(32, "yarn", factor=8.0, original_length=64, truncate=False)
    assert not torch.allclose(kept.theta, loose.theta)


@pytest.mark.parametrize(
    "params",
    [
        {"mscale": 1.0, "mscale_all_dim": 1.0},
        {"mscale": 0.707, "mscale_all_dim": 0.707},
        {"mscale": 1.0, "mscale_all_dim": 0.5},
        {"attention_factor": 1.0},
        {"attention_factor": 1.7},
    ],
)
def test_yarn_attention_factor_matches_hugging_face(params: dict[str, Any]) -> None:
    hf: dict[str, object] = {"factor": 40.0, "original_max_position_embeddings": 4096, **params}
    theirs, their_scale = hugging_face("yarn", 64, 4096 * 40, hf)
    spec = scaled_frequencies(64, "yarn", factor=40.0, original_length=4096, **params)
    torch.testing.assert_close(spec.theta, theirs, rtol=HF_RTOL, atol=0.0)
    assert spec.attention_factor == pytest.approx(their_scale, rel=1e-12)


def test_yarn_mscale_formula() -> None:
    s = 40.0
    expected = (0.1 * 1.0 * math.log(s) + 1) / (0.1 * 0.5 * math.log(s) + 1)
    assert yarn_attention_factor(s, 1.0, 0.5) == pytest.approx(expected)
    assert yarn_attention_factor(s, 0.8, 0.8) == 1.0
    assert yarn_attention_factor(1.0, 1.0, 0.5) == 1.0  # no extension, no factor
    with pytest.raises(ValueError, match="together"):
        yarn_attention_factor(s, 1.0)


def test_yarn_paper_ramp_is_linear_in_turns() -> None:
    """Peng et al.'s gamma: in the toy (d = 32, L = 64, s = 8) pair 0 turns
    64 / 2 pi = 10.19 times, so gamma = (10.19 - 1) / 31 and its ratio is 0.384."""
    spec = scaled_frequencies(32, "yarn", factor=8.0, original_length=64, ramp="turns")
    ratio = spec.theta / frequencies(32)
    gamma = (64 / (2 * math.pi) - 1) / 31
    assert float(ratio[0]) == pytest.approx(1 / 8 + gamma * 7 / 8, rel=1e-12)
    assert round(float(ratio[0]), 3) == 0.384
    code = scaled_frequencies(32, "yarn", factor=8.0, original_length=64)
    assert float((code.theta / frequencies(32))[0]) == 1.0
    assert spec.attention_factor == code.attention_factor


@settings(max_examples=40, deadline=None)
@given(
    half=st.integers(2, 64),
    length=st.integers(8, 10**5),
    beta_slow=st.floats(0.25, 4.0),
    width=st.floats(1.0, 64.0),
)
def test_paper_ramp_by_hand(half: int, length: int, beta_slow: float, width: float) -> None:
    d, beta_fast = 2 * half, beta_slow + width
    weight = yarn_ramp(d, 1e4, length, beta_fast, beta_slow, ramp="turns")
    for k in range(half):
        turns = length / (2 * math.pi * 1e4 ** (2 * k / d))
        if turns >= beta_fast:
            expected = 0.0
        elif turns <= beta_slow:
            expected = 1.0
        else:
            expected = 1.0 - (turns - beta_slow) / (beta_fast - beta_slow)
        assert float(weight[k]) == pytest.approx(expected, abs=1e-12)
    assert bool((weight[1:] >= weight[:-1]).all())


@pytest.mark.parametrize("ramp", ["pairs", "turns"])
def test_yarn_ramp_refuses_a_decreasing_ramp_and_a_flat_ladder(ramp: Ramp) -> None:
    assert yarn_ramp(32, 1e4, 64, 32.0, 1.0, ramp=ramp).shape == (16,)
    for beta_fast, beta_slow in [(1.0, 32.0), (4.0, 4.0)]:
        with pytest.raises(ValueError, match="beta_fast must exceed beta_slow"):
            yarn_ramp(32, 1e4, 64, beta_fast, beta_slow, ramp=ramp)
    with pytest.raises(ValueError, match="base must be > 1"):
        yarn_ramp(32, 1.0, 64, 32.0, 1.0, ramp=ramp)
    with pytest.raises(ValueError, match="beta_slow must be finite and > 0"):
        yarn_ramp(32, 1e4, 64, 32.0, 0.0, ramp=ramp)


def test_llama3_weight_refuses_bounds_out_of_order() -> None:
    assert llama3_weight(32, 1e4, 64, 1.0, 4.0).shape == (16,)
    with pytest.raises(ValueError, match="low_freq_factor must not exceed high_freq_factor"):
        llama3_weight(32, 1e4, 64, 4.0, 1.0)
    with pytest.raises(ValueError, match="low_freq_factor must be finite and > 0"):
        llama3_weight(32, 1e4, 64, 0.0, 4.0)


def test_llama3_weight_with_equal_factors_is_a_step_at_the_critical_pair() -> None:
    """Llama 4 Scout publishes low_freq_factor = high_freq_factor = 1: pairs that turn
    fully within L are kept, the others divided, as transformers computes it."""
    weight = llama3_weight(64, 5e5, 8192, 1.0, 1.0)
    critical = critical_pair(64, 8192, 5e5)
    assert torch.equal(weight, (torch.arange(32) >= critical).double())
    assert 0 < critical < 32  # both kinds of pair exist, so the step is checked
    # the step is the limit of the blend as the band closes
    narrow = llama3_weight(64, 5e5, 8192, 1.0, 1.0 + 1e-9)
    assert torch.equal(narrow, weight)


def test_dynamic_ntk_alpha_refuses_a_factor_below_one() -> None:
    assert dynamic_ntk_alpha(1.0, 64, 512) == 8.0  # s = 1: alpha = l / L
    with pytest.raises(ValueError, match="factor must be >= 1"):
        dynamic_ntk_alpha(0.5, 64, 512)
    with pytest.raises(ValueError, match="factor must be >= 1"):
        dynamic_ntk_alpha(0.5, 64, 32)  # refused below the trained length too


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"method": "linear", "alpha": 16.0}, ValueError, "alpha is a parameter of ntk only"),
        ({"method": "ntk", "alpha": 0.5}, ValueError, "alpha must be >= 1"),
        ({"method": "ntk", "alpha": float("inf")}, ValueError, "alpha"),
        ({"method": "dynamic"}, ValueError, "needs length"),
        ({"method": "ntk", "length": 512}, ValueError, "length is a parameter of dynamic"),
        ({"method": "dynamic", "length": 0}, ValueError, "length"),
        ({"method": "llama3", "ramp": "turns"}, ValueError, "ramp is a parameter of yarn"),
        ({"method": "yarn", "ramp": "index"}, ValueError, "ramp"),
        ({"method": "yarn", "ramp": "turns", "truncate": False}, ValueError, "truncate"),
        ({"method": "yarn", "truncate": 0}, TypeError, "truncate must be a bool"),
        ({"method": "ntk", "truncate": False}, ValueError, "truncate is a parameter of yarn"),
        ({"method": "yarn", "mscale": 1.0}, ValueError, "together"),
        ({"method": "linear", "attention_factor": 1.2}, ValueError, "attention_factor is a"),
        ({"method": "yarn", "attention_factor": 0.0}, ValueError, "attention_factor"),
        (
            {"method": "yarn", "attention_factor": 1.2, "mscale": 1.0, "mscale_all_dim": 1.0},
            ValueError,
            "not both",
        ),
        ({"method": "linear", "factor": 1e308}, ValueError, "too large"),
        ({"method": "yarn", "factor": 1e308}, ValueError, "too large"),
        ({"method": "ntk", "factor": 1e300}, ValueError, "overflows"),
        ({"method": "dynamic", "factor": 1e300, "length": 512}, ValueError, "overflows"),
        ({"method": "linear", "factor": True}, TypeError, "factor"),
        ({"method": "linear", "beta_fast": 16.0}, ValueError, "beta_fast is a parameter of yarn"),
        ({"method": "ntk", "beta_slow": 2.0}, ValueError, "beta_slow is a parameter of yarn"),
        (
            {"method": "yarn", "low_freq_factor": 2.0},
            ValueError,
            "low_freq_factor is a parameter of llama3",
        ),
        (
            {"method": "dynamic", "length": 512, "high_freq_factor": 8.0},
            ValueError,
            "high_freq_factor is a parameter of llama3",
        ),
    ],
)
def test_bad_input(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    arguments: dict[str, Any] = {"factor": 8.0, "original_length": 64, **kwargs}
    method = arguments.pop("method")
    with pytest.raises(error, match=match):
        scaled_frequencies(32, method, **arguments)


def test_numpy_integers_are_accepted() -> None:
    d, length = np.int64(32), np.int32(64)
    for method in EXTENSION_METHODS:
        extra: dict[str, Any] = {"length": np.int64(512)} if method == "dynamic" else {}
        ours = scaled_frequencies(
            d,  # type: ignore[arg-type]
            method,
            factor=np.int64(8),  # type: ignore[arg-type]
            original_length=length,  # type: ignore[arg-type]
            **extra,
        )
        plain_extra: dict[str, Any] = {"length": 512} if extra else {}
        python = scaled_frequencies(32, method, factor=8.0, original_length=64, **plain_extra)
        assert ours == python
    assert critical_pair(np.int64(32), np.int64(64)) == critical_pair(32, 64)  # type: ignore[arg-type]
    torch.testing.assert_close(
        log_length_scale(np.int64(100), np.int16(64)),  # type: ignore[arg-type]
        log_length_scale(100, 64),
    )
    torch.testing.assert_close(
        aggregation_sum(np.int64(32), np.int64(10), 1e4),  # type: ignore[arg-type]
        aggregation_sum(32, 10, 1e4),
    )
    with pytest.raises(TypeError, match="int"):
        critical_pair(32, np.bool_(True))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="int"):
        critical_pair(32, 64.0)  # type: ignore[arg-type]


def test_log_length_scale_refuses_a_trained_length_of_one() -> None:
    with pytest.raises(ValueError, match="original_length must be >= 2"):
        log_length_scale(10, 1)
    assert float(log_length_scale(10, 2)[-1]) == pytest.approx(math.log(10) / math.log(2))


def test_base_lower_bound_refuses_bad_grids() -> None:
    with pytest.raises(ValueError, match="low must not exceed high"):
        base_lower_bound(64, 32, low=1000.0, high=500.0)
    bound = base_lower_bound(64, 32)
    with pytest.raises(ValueError, match="already keeps"):
        base_lower_bound(64, 32, low=bound, high=10 * bound)
    # a grid starting just below the bound finds it again
    assert base_lower_bound(64, 32, low=bound / 1.001, high=10 * bound) == pytest.approx(
        bound, rel=1e-3
    )


def test_partial_rotation_keeps_the_aggregation_sum_positive() -> None:
    """With a quarter of the pairs turning (d = 32: 4 pairs), the other 12 add 12
    at every distance, so B >= 12 - 4 = 8 for any base; full RoPE goes negative."""
    for base in (10.0, 1e4, 1e6):
        assert float(aggregation_sum(32, 5000, base, p=0.25).min()) >= 8.0
    assert float(aggregation_sum(32, 5000, 1e4).min()) < 0.0


def rope_nope_model() -> TinyTransformer:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=11, dim=32, n_heads=2, n_layers=2, nope_layers=(1,))
    return TinyTransformer(config).eval()


def test_attention_factor_reaches_the_rotary_layers_only() -> None:
    model = rope_nope_model()
    spec = scaled_frequencies(16, "yarn", factor=8.0, original_length=8)
    assert spec.attention_factor > 1.0
    wider = extended(model, spec)
    tokens = torch.randint(0, 11, (2, 20))
    (q0, k0, v0), (q1, k1, v1) = wider.layer_qkv(tokens)
    _, maps = wider.attention_maps(tokens)
    _, rotary = attention(q0, k0, v0, rope=spec, return_weights=True)
    _, nope = attention(q1, k1, v1, placement="nope", return_weights=True)
    torch.testing.assert_close(maps[0], rotary)
    torch.testing.assert_close(maps[1], nope)
    # the factor did act on layer 0: without it the map differs
    _, unscaled = attention(q0, k0, v0, rope=Rope.from_theta(spec.theta), return_weights=True)
    assert not torch.allclose(maps[0], unscaled)
    nope_spec = attention_of(wider, 1).config.rope
    assert nope_spec is not None and nope_spec.attention_factor == 1.0
    assert wider.config.rope == spec


def test_safe_distances_by_hand() -> None:
    # trained: theta = (1, 0.1) at L = 8. Pair 0 turns fully (wavelength 6.28 <= 8);
    # pair 1 saw the arc [0, 0.7].
    trained = Rope.from_theta([1.0, 0.1])
    assert safe_distances(trained, trained, 8).tolist() == [math.inf, 7.0]
    for slow, expected in [(0.05, 14.0), (0.03, 23.0), (0.1 / 3, 21.0), (0.0, math.inf)]:
        new = Rope.from_theta([0.5, slow])
        assert safe_distances(new, trained, 8).tolist() == [math.inf, expected]
    # faster than trained but no jump over the unseen arc: floor(0.7 / 0.2) = 3
    assert safe_distances(Rope.from_theta([1.0, 0.2]), trained, 8).tolist() == [math.inf, 3.0]
    # a step of 6 rad jumps over the unseen arc (2 pi - 0.7 = 5.58 wide)
    with pytest.raises(ValueError, match="jump"):
        safe_distances(Rope.from_theta([1.0, 6.0]), trained, 8)
    # a pair that never turned in training (p-RoPE's cut) is safe only at distance 0
    cut = Rope.from_theta([1.0, 0.0])
    assert safe_distances(Rope.from_theta([1.0, 0.1]), cut, 8).tolist() == [math.inf, 0.0]


def test_safe_distances_of_the_toy() -> None:
    plain = Rope(32)
    critical = critical_pair(32, 64)
    for spec, slow in [
        (plain, 63.0),
        (scaled_frequencies(32, "linear", factor=8.0, original_length=64), 504.0),
    ]:
        safe = safe_distances(spec, plain, 64)
        assert bool(torch.isinf(safe[:critical]).all()) and bool((safe[critical:] == slow).all())
    ntk = safe_distances(scaled_frequencies(32, "ntk", factor=8.0, original_length=64), plain, 64)
    assert ntk[5] == 126.0  # NTK divides pair 5 by 8 ** (10 / 30) = 2 only


def test_safe_distances_refuse_bad_input() -> None:
    with pytest.raises(TypeError, match="Rope spec"):
        safe_distances(frequencies(32), Rope(32), 64)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="build Rope"):
        safe_distances(Rope(16), Rope(32), 64)
    with pytest.raises(ValueError, match="original_length"):
        safe_distances(Rope(32), Rope(32), 0)


@settings(max_examples=60, deadline=None)
@given(
    length=st.integers(2, 4000),
    theta=st.floats(1e-4, 10.0),
    ratio=st.floats(1e-3, 1.0),
)
def test_safe_distance_is_where_the_angle_first_leaves_the_arc(
    length: int, theta: float, ratio: float
) -> None:
    """Walk the angles m * theta' mod 2 pi: all of 0..D lie on the trained arc, D + 1 does not."""
    trained, new = Rope.from_theta([theta]), Rope.from_theta([theta * ratio])
    safe = float(safe_distances(new, trained, length)[0])
    if 2 * math.pi / theta <= length:
        assert safe == math.inf
        return
    arc, step = (length - 1) * theta, theta * ratio
    distances = np.arange(int(safe) + 2, dtype=np.float64)
    angles = np.mod(distances * step, 2 * math.pi)
    slack = 1e-9 * arc + 1e-12
    assert bool((angles[:-1] <= arc + slack).all())
    assert angles[-1] > arc - slack


def test_the_rounding_grows_with_yarns_factor() -> None:
    """Chapter 8 states the match to transformers as a relative 5e-6 and names where it is
    loosest among its factors: YaRN without truncate at s = 40, d = 128, about 2.4e-6."""
    params: dict[str, object] = {
        "factor": 40.0,
        "original_max_position_embeddings": 4096,
        "truncate": False,
    }
    theirs, _ = hugging_face("yarn", 128, 4096 * 40, params)
    ours = scaled_frequencies(128, "yarn", factor=40.0, original_length=4096, truncate=False)
    relative = float(((ours.theta - theirs).abs() / theirs).max())
    assert 1e-6 < relative < HF_RTOL
    assert relative == pytest.approx(2.4e-6, abs=3e-7)  # the number the page states
