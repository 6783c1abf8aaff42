"""The API the later chapters build on: frequency vectors, scores at a distance,
the rotary placement apart from softmax, a model's unrotated q/k/v, and the
guardrails (positions of every integer dtype, cached tables, bad settings)."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import random_features
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_lessons
from rope_lessons._checks import Layout
from rope_lessons.rope.forms import apply_rope_complex, apply_rope_loop, rotation_matrix
from rope_lessons.rope.kernels import apply_rope, cos_sin, rotate, score_at_distance
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.model import ModelConfig, TinyTransformer
from rope_lessons.toy.rotary_attention import (
    PLACEMENTS,
    Placement,
    attention,
    rotate_inputs,
    rotate_output,
)

layouts = st.sampled_from(["interleaved", "half"])


def score_by_rotation(
    q: torch.Tensor, k: torch.Tensor, m: int, r: int, *, layout: Layout
) -> torch.Tensor:
    """<R_m q, R_{m-r} k> from apply_rope itself, q and k of shape (d,)."""
    rq = apply_rope(q[None], torch.tensor([m]), layout=layout)[0]
    rk = apply_rope(k[None], torch.tensor([m - r]), layout=layout)[0]
    return rq @ rk


@given(
    half=st.integers(1, 16),
    m=st.integers(-1000, 1000),
    r=st.integers(0, 100_000),
    layout=layouts,
    seed=st.integers(0, 2**16),
)
def test_score_at_distance_is_the_rotated_dot_product(
    half: int, m: int, r: int, layout: Layout, seed: int
) -> None:
    q, k = random_features(2, 2 * half, seed=seed)
    got = score_at_distance(q, k, torch.tensor([r]), layout=layout)
    expected = score_by_rotation(q, k, m, r, layout=layout)
    assert math.isclose(float(got[0]), float(expected), rel_tol=1e-8, abs_tol=1e-8 * half)


def test_score_at_distance_golden_values_and_shape() -> None:
    # d = 2, theta_0 = 1: q = (1, 0), k = (1, 0) gives cos(r); k = (0, 1) gives sin(r).
    q = torch.tensor([1.0, 0.0], dtype=torch.float64)
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    r = torch.tensor([0, 1, 2, 1_000_000])
    got = score_at_distance(q, k, r)
    assert got.shape == (2, 4) and got.dtype == torch.float64
    angles = torch.tensor([0.0, 1.0, 2.0, 1e6], dtype=torch.float64)
    torch.testing.assert_close(got[0], angles.cos(), rtol=0, atol=1e-12)
    torch.testing.assert_close(got[1], angles.sin(), rtol=0, atol=1e-12)


def test_score_at_distance_with_theta_and_p() -> None:
    q, k = random_features(2, 16, seed=3)
    r = torch.arange(0, 50)
    p_form = score_at_distance(q, k, r, p=0.5, base=100.0)
    theta_form = score_at_distance(q, k, r, theta=frequencies(16, 100.0, p=0.5))
    torch.testing.assert_close(p_form, theta_form, rtol=0, atol=0)
    # With every frequency zero nothing turns: the score is the plain dot product.
    flat = score_at_distance(q, k, r, theta=torch.zeros(8, dtype=torch.float64))
    torch.testing.assert_close(flat, (q @ k).expand(50), rtol=1e-12, atol=1e-12)


ONES = torch.ones(4)


@pytest.mark.parametrize(
    ("q", "k", "distances", "error", "match"),
    [
        (ONES, ONES, torch.tensor([-1]), ValueError, ">= 0"),
        (ONES, ONES, torch.tensor([1.0]), TypeError, "distances"),
        (ONES, ONES, torch.ones(2, 2, dtype=torch.long), ValueError, "1-D"),
        (ONES, torch.ones(6), torch.tensor([1]), ValueError, "same last dimension"),
        (torch.ones(3), torch.ones(3), torch.tensor([1]), ValueError, "even"),
    ],
)
def test_score_at_distance_refuses_bad_input(
    q: torch.Tensor, k: torch.Tensor, distances: torch.Tensor, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        score_at_distance(q, k, distances)


@given(half=st.integers(1, 16), p=st.sampled_from([0.0, 0.25, 0.5, 1.0]), layout=layouts)
@settings(max_examples=30)
def test_theta_argument_equals_base_and_p(half: int, p: float, layout: Layout) -> None:
    x = random_features(3, 5, 2 * half, seed=half)
    positions = torch.tensor([0, 7, -3, 100, 65_000])
    theta = frequencies(2 * half, 500.0, p=p)
    for pos in (None, positions):
        torch.testing.assert_close(
            apply_rope(x, pos, theta=theta, layout=layout),
            apply_rope(x, pos, base=500.0, p=p, layout=layout),
            rtol=0,
            atol=0,
        )


def test_a_zero_frequency_leaves_its_pair_unrotated() -> None:
    x = random_features(6, 8, seed=1)
    theta = torch.tensor([1.0, 0.0, 0.3, 0.0], dtype=torch.float64)
    out = apply_rope(x, theta=theta)
    torch.testing.assert_close(out[:, [2, 3, 6, 7]], x[:, [2, 3, 6, 7]], rtol=0, atol=0)
    assert not torch.allclose(out[1:, :2], x[1:, :2])


@pytest.mark.parametrize(
    ("theta", "error", "match"),
    [
        (torch.ones(3), ValueError, r"shape \(d/2,\)"),
        (torch.tensor([1.0, -0.1]), ValueError, ">= 0"),
        (torch.tensor([1.0, float("nan")]), ValueError, "finite"),
        (torch.tensor([1, 0]), TypeError, "floating"),
        ([1.0, 0.5], TypeError, "torch.Tensor"),
    ],
)
def test_bad_theta_is_refused(theta: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        apply_rope(torch.ones(3, 4), theta=theta)  # type: ignore[arg-type]


def test_every_teaching_form_agrees_in_float32_at_a_million() -> None:
    """The forms share one angle table (float64): none loses digits at large positions."""
    x = random_features(4, 16, seed=5).float()
    positions = torch.tensor([999_997, 999_998, 999_999, 1_000_000])
    reference = apply_rope(x.double(), positions)  # float64 throughout
    cos, sin = cos_sin(x.shape[:-1], 16, positions, dtype=torch.float32)
    forms = {
        "apply_rope": apply_rope(x, positions),
        "complex": apply_rope_complex(x, positions),
        "loop": apply_rope_loop(x, positions),
        "elementwise": rotate(x, cos, sin, "interleaved"),
        "matrix": torch.stack(
            [rotation_matrix(int(m), 16).float() @ row for m, row in zip(positions, x, strict=True)]
        ),
    }
    for name, out in forms.items():
        error = (out.double() - reference).abs().max().item()
        assert error < 2e-6, f"{name}: {error}"


INTEGER_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]


@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
def test_every_integer_dtype_gives_the_int64_result(dtype: torch.dtype) -> None:
    x = random_features(2, 3, 6, 8, seed=2)  # (B, H, T, D)
    positions = torch.tensor([0, 1, 2, 3, 100, 127])
    narrow = positions.to(dtype)
    torch.testing.assert_close(apply_rope(x, narrow), apply_rope(x, positions), rtol=0, atol=0)
    d = torch.tensor([1, 50, 127])
    q, k = random_features(2, 8, seed=4)
    torch.testing.assert_close(
        score_at_distance(q, k, d.to(dtype)), score_at_distance(q, k, d), rtol=0, atol=0
    )
    for rope in PLACEMENTS:  # "o" negates the positions: that must not wrap around
        wide = attention(x, x, x, placement=rope, positions=positions)
        torch.testing.assert_close(attention(x, x, x, placement=rope, positions=narrow), wide)


def test_bool_positions_are_refused_everywhere() -> None:
    x = torch.ones(1, 1, 2, 4)
    flags = torch.tensor([True, False])
    with pytest.raises(TypeError, match="bool"):
        apply_rope(x, flags)
    with pytest.raises(TypeError, match="bool"):
        attention(x, x, x, positions=flags)
    with pytest.raises(TypeError, match="bool"):
        score_at_distance(torch.ones(4), torch.ones(4), flags)


def test_cached_tables_cannot_be_corrupted_by_a_caller() -> None:
    x = random_features(5, 8, seed=0).float()
    before = apply_rope(x, layout="half")
    cos, sin = cos_sin((5,), 8)
    cos.fill_(0.0), sin.fill_(7.0)
    again_cos, _ = cos_sin((5,), 8)
    assert float(again_cos[0, 0]) == 1.0
    torch.testing.assert_close(apply_rope(x, layout="half"), before, rtol=0, atol=0)


def test_rotate_refuses_an_unknown_layout_and_base_must_exceed_one() -> None:
    x = torch.ones(2, 4)
    cos, sin = cos_sin((2,), 4)
    with pytest.raises(ValueError, match="layout"):
        rotate(x, cos, sin, "halves")  # type: ignore[arg-type]
    for base in (1.0, 0.5):
        with pytest.raises(ValueError, match="base must be > 1"):
            apply_rope(x, base=base)


@pytest.mark.parametrize("rope", PLACEMENTS)
def test_rotate_inputs_and_output_rebuild_attention(rope: Placement) -> None:
    q, k, v = random_features(3, 2, 2, 7, 8, seed=9)
    q2, k2, v2 = rotate_inputs(q, k, v, placement=rope)
    weights = (
        (q2 @ k2.transpose(-2, -1) / math.sqrt(8))
        .masked_fill(torch.ones(7, 7, dtype=torch.bool).triu(1), float("-inf"))
        .softmax(-1)
    )
    # A kernel of our own (plain matrix products) between the shared rotations:
    out = rotate_output(weights @ v2, placement=rope)
    torch.testing.assert_close(out, attention(q, k, v, placement=rope), rtol=1e-9, atol=1e-9)


def test_vo_placement_is_the_relative_sum() -> None:
    """o_m = sum_n a_mn R_{n-m} v_n, with a from the unrotated q, k."""
    q, k, v = random_features(3, 1, 1, 6, 4, seed=11)
    out, weights = attention(q, k, v, placement="vo", return_weights=True)
    expected = torch.zeros_like(out)
    for m in range(6):
        for n in range(6):
            shifted = apply_rope(v[0, 0, n][None], torch.tensor([n - m]))[0]
            expected[0, 0, m] += weights[0, 0, m, n] * shifted
    torch.testing.assert_close(out, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"position": "sinusoidal", "placement": "vo"}, "placement only apply"),
        ({"position": "none", "rope": Rope(16)}, "rope only apply"),
        ({"position": "learned", "rope": Rope(16, 500.0)}, "rope only apply"),
        ({"position": "rope", "rope": Rope.from_theta((1.0, 0.5))}, r"dimension 4.*D = .* = 16"),
        ({"position": "rope", "nope_layers": (2,)}, "nope_layers"),
    ],
)  # fmt: skip
def test_contradictory_configs_are_refused(fields: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ModelConfig(vocab_size=10, dim=32, n_heads=2, **fields)  # type: ignore[arg-type]


def test_layer_qkv_rebuilds_each_layers_attention() -> None:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=11, dim=32, n_heads=2, n_layers=2, placement="qkvo")
    model = TinyTransformer(config).eval()
    tokens = torch.randint(0, 11, (3, 9))
    _, maps = model.attention_maps(tokens)
    layers = model.layer_qkv(tokens)
    assert len(layers) == 2 and layers[0].q.shape == (3, 2, 9, 16)
    for layer, weights in zip(layers, maps, strict=True):
        q, k, _ = rotate_inputs(*layer, placement="qkvo")
        scores = q @ k.transpose(-2, -1) / 4.0
        scores = scores.masked_fill(torch.ones(9, 9, dtype=torch.bool).triu(1), float("-inf"))
        torch.testing.assert_close(scores.softmax(-1), weights, rtol=1e-5, atol=1e-6)


def test_theta_and_nope_layers_reach_the_model() -> None:
    torch.manual_seed(0)
    tokens = torch.randint(0, 11, (2, 8))
    theta = tuple(frequencies(16, 100.0, p=0.5).tolist())
    by_theta = TinyTransformer(
        ModelConfig(vocab_size=11, dim=32, n_heads=2, rope=Rope.from_theta(theta))
    )
    by_fields = TinyTransformer(
        ModelConfig(vocab_size=11, dim=32, n_heads=2, rope=Rope(16, 100.0, p=0.5))
    )
    by_fields.load_state_dict(by_theta.state_dict())
    torch.testing.assert_close(by_theta(tokens), by_fields(tokens))
    nope = TinyTransformer(
        ModelConfig(vocab_size=11, dim=32, n_heads=2, n_layers=1, position="none")
    )
    no_rope_layer = TinyTransformer(
        ModelConfig(vocab_size=11, dim=32, n_heads=2, n_layers=1, nope_layers=(0,))
    )
    no_rope_layer.load_state_dict(nope.state_dict())
    torch.testing.assert_close(no_rope_layer(tokens), nope(tokens))
    rope = TinyTransformer(ModelConfig(vocab_size=11, dim=32, n_heads=2, n_layers=1))
    rope.load_state_dict(nope.state_dict())
    assert not torch.allclose(rope(tokens), nope(tokens))  # fmt: skip


def test_model_position_errors_name_the_callers_shape() -> None:
    model = TinyTransformer(ModelConfig(vocab_size=5, dim=16, n_heads=2))
    tokens = torch.zeros(2, 7, dtype=torch.long)
    with pytest.raises(ValueError, match=r"positions of shape \(5,\)"):
        model(tokens, torch.arange(5))
    with pytest.raises(ValueError, match=r"positions of shape \(3, 7\)"):
        model(tokens, torch.zeros(3, 7, dtype=torch.long))
    with pytest.raises(ValueError, match="vocab_size=5"):
        model(torch.full((1, 3), 5))


def test_main_names_are_importable_from_the_top_level() -> None:
    for name in ("apply_rope", "attention", "score_at_distance", "ModelConfig", "TinyTransformer"):
        assert getattr(rope_lessons, name) is not None
    assert rope_lessons.apply_rope is apply_rope
