"""Chapter 8: extension tables against Hugging Face transformers, bounds, extended models."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from helpers import HF_BASES, HF_RTOL, attention_of
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons._checks import Layout
from rope_lessons.chapters.extension import (
    attention_entropy,
    band_edges,
    band_losses,
    extended,
    fine_tune,
    token_losses,
)
from rope_lessons.evidence.training import evaluate, fixed_batches
from rope_lessons.rope.kernels import apply_rope
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.scaled_specs import scaled_frequencies
from rope_lessons.rope.scaling import (
    METHODS,
    Method,
    aggregation_sum,
    base_lower_bound,
    critical_pair,
    log_length_scale,
    yarn_attention_factor,
)
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.corpus import CharCorpus
from rope_lessons.toy.model import ModelConfig, TinyTransformer
from rope_lessons.toy.rotary_attention import attention
from rope_lessons.toy.synthetic import batch_sampler

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

# (d, original length, factor, extra parameters): small and Llama-sized heads,
# factors from 1 to 32, non-default YaRN betas and Llama 3 wavelength bounds.
HF_CASES = [
    (32, 64, 8.0, {}),
    (128, 4096, 16.0, {}),
    (64, 8192, 4.0, {}),
    (128, 8192, 8.0, {}),
    (128, 2048, 1.0, {}),
    (128, 4096, 32.0, {"beta_fast": 16.0, "beta_slow": 2.0}),
    (96, 1000, 3.5, {"low_freq_factor": 2.0, "high_freq_factor": 8.0}),
    (16, 32, 2.0, {"beta_fast": 8.0, "beta_slow": 0.5, "low_freq_factor": 0.5}),
]
KEYS = {
    "linear": (),
    "yarn": ("beta_fast", "beta_slow"),
    "llama3": ("low_freq_factor", "high_freq_factor"),
}
DEFAULTS = {"beta_fast": 32.0, "beta_slow": 1.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}


def hugging_face(
    method: Method,
    d: int,
    length: int,
    factor: float,
    extra: dict[str, float],
    base: float = 10000.0,
) -> tuple[torch.Tensor, float]:
    """transformers' own initialisation function for ``method``, from a Llama config."""
    params: dict[str, object] = {"rope_type": method, "rope_theta": base, "factor": factor}
    if method != "linear":
        params["original_max_position_embeddings"] = length
    for key in KEYS[method]:
        params[key] = extra.get(key, DEFAULTS[key])
    config = transformers.LlamaConfig(
        hidden_size=2 * d,
        num_attention_heads=2,
        head_dim=d,
        max_position_embeddings=max(int(length * factor), length),
        rope_parameters=params,
    )
    inv_freq, scale = ROPE_INIT_FUNCTIONS[method](config, "cpu")
    return inv_freq.double(), float(scale)


@pytest.mark.parametrize("base", HF_BASES)
@pytest.mark.parametrize("method", ["linear", "yarn", "llama3"])
@pytest.mark.parametrize(("d", "length", "factor", "extra"), HF_CASES)
def test_matches_hugging_face(
    method: Method, d: int, length: int, factor: float, extra: dict[str, Any], base: float
) -> None:
    theirs, their_scale = hugging_face(method, d, length, factor, extra, base)
    # each method takes its own parameters only (the others are refused)
    own = {key: extra[key] for key in KEYS[method] if key in extra}
    spec = scaled_frequencies(d, method, factor=factor, original_length=length, base=base, **own)
    ours, our_scale = spec.theta, spec.attention_factor
    assert spec.dim == d and spec.layout == "interleaved"
    assert ours.shape == (d // 2,) and ours.dtype == torch.float64
    # transformers works in float32: agreement to float32 rounding, relative (see HF_RTOL)
    torch.testing.assert_close(ours, theirs, rtol=HF_RTOL, atol=0.0)
    assert our_scale == pytest.approx(their_scale, rel=1e-12)


def test_hugging_face_differs_when_we_change_a_parameter() -> None:
    """The comparison can fail: another beta_fast gives other YaRN frequencies."""
    theirs, _ = hugging_face("yarn", 128, 4096, 16.0, {})
    ours = scaled_frequencies(128, "yarn", factor=16.0, original_length=4096, beta_fast=16.0)
    assert not torch.allclose(ours.theta, theirs, rtol=HF_RTOL, atol=0.0)


def test_ntk_is_a_new_base() -> None:
    d, factor = 64, 8.0
    spec = scaled_frequencies(d, "ntk", factor=factor, original_length=64)
    theta, plain = spec.theta, frequencies(d)
    assert spec.attention_factor == 1.0
    assert theta[0] == plain[0] == 1.0  # the fastest pair is untouched
    torch.testing.assert_close(theta[-1], plain[-1] / factor)  # the slowest divided by s
    torch.testing.assert_close(theta, frequencies(d, 10000.0 * factor ** (d / (d - 2))))


@settings(max_examples=40, deadline=None)
@given(
    half=st.integers(2, 64),
    length=st.integers(8, 10**5),
    factor=st.floats(1.0, 64.0),
    method=st.sampled_from(METHODS),
)
def test_every_pair_lies_between_plain_and_interpolated(
    half: int, length: int, factor: float, method: Method
) -> None:
    d = 2 * half
    spec = scaled_frequencies(d, method, factor=factor, original_length=length)
    ratio = spec.theta / frequencies(d)
    assert bool((ratio <= 1.0 + 1e-12).all()) and bool((ratio >= 1.0 / factor - 1e-12).all())
    # the slower the pair, the more it is interpolated
    assert bool((ratio[1:] <= ratio[:-1] + 1e-12).all())
    assert spec.attention_factor >= 1.0


@pytest.mark.parametrize("method", METHODS)
def test_factor_one_is_plain_rope(method: Method) -> None:
    spec = scaled_frequencies(64, method, factor=1.0, original_length=128)
    torch.testing.assert_close(spec.theta, frequencies(64))
    assert spec == Rope(64)  # the same frequencies, layout and attention factor 1


def test_yarn_attention_factor() -> None:
    assert yarn_attention_factor(1.0) == 1.0
    assert yarn_attention_factor(math.e) == pytest.approx(1.1)
    spec = scaled_frequencies(32, "yarn", factor=8.0, original_length=64)
    assert spec.attention_factor == pytest.approx(0.1 * math.log(8.0) + 1.0)
    for method in ("linear", "ntk", "llama3"):
        other = scaled_frequencies(32, method, factor=8.0, original_length=64)
        assert other.attention_factor == 1.0


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_the_spec_goes_straight_to_attention_and_apply(method: Method, layout: Layout) -> None:
    """scaled_frequencies' spec is what attention and Rope.apply take: its frequencies
    turn the vectors, its attention factor scales the rotated queries and keys."""
    spec = scaled_frequencies(16, method, factor=4.0, original_length=16, layout=layout)
    assert spec.layout == layout
    q, k, v = torch.randn(3, 1, 2, 10, 16, dtype=torch.float64)
    rotated = apply_rope(q, layout=layout, theta=spec.theta)
    torch.testing.assert_close(spec.apply(q, scale=False), rotated, rtol=0, atol=0)
    a = spec.attention_factor
    torch.testing.assert_close(spec.apply(q), a * rotated)  # as transformers' q_embed
    _, weights = attention(q, k, v, rope=spec, return_weights=True)
    plain = Rope.from_theta(spec.theta, layout)
    _, expected = attention(q * a, k * a, v, rope=plain, return_weights=True)
    torch.testing.assert_close(weights, expected)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"method": "cubic"}, ValueError, "method"),
        ({"factor": 0.5}, ValueError, "factor"),
        ({"factor": float("nan")}, ValueError, "factor"),
        ({"original_length": 0}, ValueError, "original_length"),
        ({"original_length": 64.0}, TypeError, "original_length"),
        ({"d": 33}, ValueError, "d"),
        ({"base": 1.0}, ValueError, "base"),
        ({"method": "llama3", "low_freq_factor": 5.0}, ValueError, "low_freq_factor"),
        ({"method": "llama3", "high_freq_factor": -1.0}, ValueError, "high_freq_factor"),
        ({"method": "yarn", "beta_fast": 1.0}, ValueError, "beta_fast"),
        ({"method": "yarn", "beta_slow": 0.0}, ValueError, "beta_slow"),
        ({"method": "ntk", "d": 2}, ValueError, "d"),
    ],
)
def test_bad_input(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    arguments: dict[str, Any] = {  # good and deliberately bad values
        "d": 32,
        "method": "linear",
        "factor": 4.0,
        "original_length": 64,
    }
    arguments.update(kwargs)
    d, method = arguments.pop("d"), arguments.pop("method")
    with pytest.raises(error, match=match):
        scaled_frequencies(d, method, **arguments)


@pytest.mark.parametrize(("d", "length"), [(128, 4096), (128, 2048), (64, 1000), (32, 64)])
def test_critical_pair_is_liu_et_al_formula(d: int, length: int) -> None:
    """Liu et al.'s critical dimension 2 ceil((d/2) log_b(L / 2 pi)) is twice our pair."""
    exponent = (d / 2) * math.log(length / (2 * math.pi)) / math.log(10000.0)
    assert 2 * critical_pair(d, length) == 2 * math.ceil(exponent)


def test_critical_pair_llama2() -> None:
    assert 2 * critical_pair(128, 4096) == 92


def test_aggregation_sum_starts_at_d_over_2() -> None:
    values = aggregation_sum(128, 10, 10000.0)
    assert values[0] == 64.0
    assert bool((values[1:] < 64.0).all())


def test_base_lower_bound_1k_matches_su_and_men() -> None:
    """Men et al. and Su both give 4.3e3 for 1k tokens at d = 128."""
    bound = base_lower_bound(1024)
    assert 4.25e3 <= bound <= 4.35e3
    assert float(aggregation_sum(128, 1024, bound).min()) >= 0.0
    assert float(aggregation_sum(128, 1024, bound / 1.01).min()) < 0.0


def test_base_lower_bound_refuses_an_empty_grid() -> None:
    with pytest.raises(ValueError, match="no base"):
        base_lower_bound(1024, low=100.0, high=200.0)


def test_log_length_scale() -> None:
    scale = log_length_scale(200, 64)
    assert bool((scale[:64] == 1.0).all())
    torch.testing.assert_close(scale[127], torch.tensor(math.log(128) / math.log(64)).double())


def test_band_edges_and_losses() -> None:
    assert band_edges(64, 8) == [(0, 64), (64, 128), (128, 256), (256, 512)]
    with pytest.raises(ValueError, match="power of two"):
        band_edges(64, 6)
    values = torch.arange(8, dtype=torch.float64)
    assert band_losses(values, band_edges(2, 4)) == [0.5, 2.5, 5.5]
    with pytest.raises(ValueError, match="band"):
        band_losses(values, [(0, 9)])


def test_band_edges_take_numpy_integers_but_not_bools_or_floats() -> None:
    assert band_edges(np.int64(64), np.int32(8)) == band_edges(64, 8)  # type: ignore[arg-type]
    for bad in (True, np.bool_(True), 8.0, np.float64(8.0)):
        with pytest.raises(TypeError, match="factor must be an int"):
            band_edges(64, bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="original_length must be an int"):
        band_edges(64.0, 8)  # type: ignore[arg-type]


def small_model(seed: int = 0) -> TinyTransformer:
    torch.manual_seed(seed)
    return TinyTransformer(ModelConfig(vocab_size=11, dim=32, n_heads=2, n_layers=2)).eval()


def test_extended_attention_factor_scales_queries_and_keys() -> None:
    model = small_model()
    tokens = torch.randint(0, 11, (2, 20))
    spec = scaled_frequencies(16, "yarn", factor=8.0, original_length=8)
    wider = extended(model, spec, log_scale_from=8)
    q, k, v = model.layer_qkv(tokens)[0]
    scale = log_length_scale(20, 8).float()[:, None]
    # the spec's attention factor: as attention applies it, on the rotated q and k
    _, expected = attention(q * scale, k, v, rope=spec, return_weights=True)
    _, maps = wider.attention_maps(tokens)
    torch.testing.assert_close(maps[0], expected)
    # and the original model is untouched: its own map differs
    _, original = model.attention_maps(tokens)
    assert not torch.allclose(original[0], expected)


@pytest.mark.parametrize(
    "fields",
    [{"kv_heads": 1}, {"shared_kv": True}, {"kv_heads": 1, "shared_kv": True}],
)
def test_extended_log_scaling_with_grouped_or_shared_keys(fields: dict[str, Any]) -> None:
    """The log-length scale acts on the queries alone, whatever the key-value widths:
    with one key-value head (16 columns instead of 32) or one shared key-value block."""
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=11, dim=32, n_heads=2, n_layers=2, **fields)
    model = TinyTransformer(config).eval()
    tokens = torch.randint(0, 11, (2, 20))
    spec = scaled_frequencies(16, "yarn", factor=8.0, original_length=8)
    wider = extended(model, spec, log_scale_from=8)
    (q, k, v), *_ = model.layer_qkv(tokens)
    (scaled_q, same_k, same_v), *_ = wider.layer_qkv(tokens)
    scale = log_length_scale(20, 8).float()[:, None]
    torch.testing.assert_close(scaled_q, q * scale)
    torch.testing.assert_close(same_k, k, rtol=0, atol=0)
    torch.testing.assert_close(same_v, v, rtol=0, atol=0)
    _, expected = attention(q * scale, k, v, rope=spec, return_weights=True)
    _, maps = wider.attention_maps(tokens)
    torch.testing.assert_close(maps[0], expected)
    # up to position L - 1 the scale is 1: the same logits as without it
    with torch.no_grad():
        torch.testing.assert_close(wider(tokens)[:, :8], extended(model, spec)(tokens)[:, :8])


def test_extended_without_changes_is_the_same_model() -> None:
    model = small_model()
    tokens = torch.randint(0, 11, (2, 30))
    torch.testing.assert_close(extended(model)(tokens), model(tokens))


def test_extended_refuses_models_without_rope() -> None:
    model = TinyTransformer(ModelConfig(vocab_size=11, position="none"))
    with pytest.raises(TypeError, match="rope"):
        extended(model)
    with pytest.raises(ValueError, match="log_scale_from"):
        extended(small_model(), log_scale_from=1)


def test_extended_refuses_a_spec_that_does_not_fit_the_model() -> None:
    model = small_model()  # head dimension 16, interleaved
    with pytest.raises(TypeError, match="Rope spec"):
        extended(model, frequencies(16))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="build Rope\\(16"):
        extended(model, Rope(32))
    with pytest.raises(ValueError, match="layout is 'half' and the model's 'interleaved'"):
        extended(model, Rope(16, layout="half"))


def test_token_losses_average_to_evaluate() -> None:
    corpus = CharCorpus(text="the quick brown fox jumps over the lazy dog. " * 40)
    model = TinyTransformer(ModelConfig(vocab_size=corpus.vocab_size, dim=32, n_layers=1))
    batches = fixed_batches(batch_sampler(corpus, 4, 24, seed=0, split="val"), 3)
    per_position = token_losses(model, batches)
    iterator = iter(batches)
    expected = evaluate(model, lambda: next(iterator), batches=3).loss
    assert per_position.shape == (24,)
    assert float(per_position.mean()) == pytest.approx(expected, rel=1e-5)


def test_attention_entropy_of_uniform_attention_is_log_of_keys() -> None:
    model = small_model()
    with torch.no_grad():
        for layer in range(len(model.blocks)):
            attention_of(model, layer).qkv.weight[
                :32
            ].zero_()  # queries 0: every causal row uniform
    entropy = attention_entropy(model, torch.randint(0, 11, (2, 16)))
    torch.testing.assert_close(entropy, torch.log(torch.arange(1, 17, dtype=torch.float64)))


def test_fine_tune_changes_weights_and_keeps_frequencies() -> None:
    corpus = CharCorpus(text="abcdefgh " * 200)
    torch.manual_seed(0)
    model = TinyTransformer(
        ModelConfig(vocab_size=corpus.vocab_size, dim=32, n_heads=2, n_layers=1)
    )
    spec = scaled_frequencies(16, "linear", factor=2.0, original_length=8)
    wider = extended(model, spec)
    before = wider.head.weight.clone()
    fine_tune(wider, corpus, length=16, steps=3, batch_size=2, lr=1e-3, seed=0)
    assert not torch.equal(before, wider.head.weight)
    assert wider.config.rope == spec
    assert not wider.training


@pytest.mark.parametrize(
    ("d", "length", "base"),
    [
        (32, 64, 1e4),  # chapter 8's toy
        (64, 64, 100.0),  # chapter 5's p-RoPE sweep
        (32, 64, 100.0),
        (16, 64, 1e4),
        (128, 4096, 1e4),  # Llama 2
        (64, 8192, 1e5),  # SmolLM2-135M
        (128, 8192, 5e5),  # Llama 3.1
    ],
)
def test_the_two_counting_conventions_agree_on_the_course_models(
    d: int, length: int, base: float
) -> None:
    """Liu et al.'s boundary (wavelength <= L) and the exact one (the pair turns fully over
    the largest trained distance, L - 1) differ only for a wavelength in (L - 1, L]."""
    full_over_largest_distance = int(((length - 1) * frequencies(d, base) >= 2 * math.pi).sum())
    assert critical_pair(d, length, base) == full_over_largest_distance
