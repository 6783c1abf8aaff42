"""RoPE: the identities the book derives, the equivalent forms, and bad input."""

from __future__ import annotations

import copy
import json
import math
import pickle
from collections.abc import Callable

import pytest
import torch
from helpers import random_features
from hypothesis import given
from hypothesis import strategies as st

import rope_lessons.rope.kernels as kernels_module
from rope_lessons._checks import Layout
from rope_lessons.rope.forms import (
    apply_rope_complex,
    apply_rope_loop,
    layout_permutation,
    rotation_matrix,
)
from rope_lessons.rope.kernels import (
    apply_rope,
    cos_sin,
    read_pairs,
    rotate,
    rotate_complex,
    score_at_distance,
    turn,
    write_pairs,
)
from rope_lessons.rope.ladder import (
    base_from_slowest,
    frequencies,
    rotating_pairs,
    rotation_angles,
)
from rope_lessons.rope.spec import Rope

dims = st.integers(1, 32).map(lambda half: 2 * half)
positions = st.integers(-100_000, 100_000)
bases = st.sampled_from([10.0, 100.0, 10_000.0, 500_000.0])
layouts = st.sampled_from(["interleaved", "half"])
seeds = st.integers(0, 2**16)


def at(
    x: torch.Tensor, position: int, *, base: float = 10000.0, layout: Layout = "interleaved"
) -> torch.Tensor:
    """Rotate a single vector ``x`` of shape ``(d,)`` as if it stood at ``position``."""
    return apply_rope(x[None], torch.tensor([position]), base=base, layout=layout)[0]


def test_frequencies_follow_the_formula() -> None:
    theta = frequencies(8, base=10_000.0)
    expected = torch.tensor([10_000.0 ** (-2 * k / 8) for k in range(4)], dtype=torch.float64)
    torch.testing.assert_close(theta, expected, rtol=1e-15, atol=0)
    assert theta[0] == 1.0 and theta.shape == (4,)


@given(
    dim=st.integers(2, 512).map(lambda half: 2 * half),
    base=st.floats(2.0, 1e7, allow_nan=False, allow_infinity=False),
)
def test_base_from_slowest_inverts_the_ladder(dim: int, base: float) -> None:
    fitted = base_from_slowest(float(frequencies(dim, base)[-1]), dim)
    assert fitted is not None
    assert fitted == pytest.approx(base, rel=1e-9)


def test_base_from_slowest_without_a_base() -> None:
    assert base_from_slowest(10_000.0 ** (-6 / 8), 8) == pytest.approx(10_000.0, rel=1e-12)
    for slowest in (0.0, 1.0, 1.5, -0.1, math.nan, 1e-300):
        assert base_from_slowest(slowest, 8) is None  # no angle in (0, 1), or base overflows
    with pytest.raises(ValueError, match="d = 2"):
        base_from_slowest(0.5, 2)
    with pytest.raises(ValueError, match="even"):
        base_from_slowest(0.5, 7)


@given(dim=dims, m=positions, n=positions, base=bases, layout=layouts, seed=seeds)
def test_score_depends_only_on_relative_position(
    dim: int, m: int, n: int, base: float, layout: Layout, seed: int
) -> None:
    """<R_m q, R_n k> = <q, R_{n-m} k>."""
    q, k = random_features(2, dim, seed=seed)
    lhs = at(q, m, base=base, layout=layout) @ at(k, n, base=base, layout=layout)
    rhs = q @ at(k, n - m, base=base, layout=layout)
    assert math.isclose(lhs, rhs, rel_tol=1e-9, abs_tol=1e-9 * dim)


@given(dim=dims, m=positions, n=positions, shift=positions, layout=layouts, seed=seeds)
def test_score_is_invariant_to_a_common_shift(
    dim: int, m: int, n: int, shift: int, layout: Layout, seed: int
) -> None:
    q, k = random_features(2, dim, seed=seed)
    before = at(q, m, layout=layout) @ at(k, n, layout=layout)
    after = at(q, m + shift, layout=layout) @ at(k, n + shift, layout=layout)
    assert math.isclose(before, after, rel_tol=1e-9, abs_tol=1e-9 * dim)


@given(dim=dims, m=st.integers(-(10**9), 10**9), layout=layouts, seed=seeds)
def test_rotation_preserves_the_norm(dim: int, m: int, layout: Layout, seed: int) -> None:
    x = random_features(dim, seed=seed)
    assert math.isclose(at(x, m, layout=layout).norm(), x.norm(), rel_tol=1e-12)


@given(dim=dims, m=positions, base=bases, seed=seeds)
def test_matrix_form_equals_interleaved_elementwise_form(
    dim: int, m: int, base: float, seed: int
) -> None:
    x = random_features(dim, seed=seed)
    torch.testing.assert_close(
        rotation_matrix(m, dim, base) @ x, at(x, m, base=base), rtol=1e-10, atol=1e-10
    )


@given(dim=dims, m=positions, base=bases, seed=seeds)
def test_half_layout_is_the_interleaved_layout_permuted(
    dim: int, m: int, base: float, seed: int
) -> None:
    x = random_features(dim, seed=seed)
    perm = layout_permutation(dim)
    torch.testing.assert_close(
        at(x, m, base=base, layout="interleaved")[perm],
        at(x[perm], m, base=base, layout="half"),
        rtol=1e-12,
        atol=1e-12,
    )


def test_layout_permutation_is_evens_then_odds() -> None:
    assert layout_permutation(8).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]


@given(dim=dims, shift=st.integers(0, 10**6), base=bases, seed=seeds)
def test_complex_form_equals_interleaved_form(dim: int, shift: int, base: float, seed: int) -> None:
    x = random_features(2, 3, 5, dim, seed=seed)
    pos = torch.arange(5) + shift
    torch.testing.assert_close(
        apply_rope_complex(x, pos, base=base), apply_rope(x, pos, base=base), rtol=1e-9, atol=1e-9
    )


def _awkward_views(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Views of ``(B, H, T, d)`` features that the complex form cannot read in place."""
    wide = torch.cat((x[..., :1], x, x[..., :1]), dim=-1)  # (B, H, T, d + 2)
    return {
        "odd offset": wide[..., 1:-1],
        "contiguous at an odd offset": torch.cat((x.flatten()[:1], x.flatten()))[1:].view(x.shape),
        "odd row stride": torch.cat((x, x[..., :1]), dim=-1)[..., :-1],
        "features not last in memory": x.transpose(-1, -2).contiguous().transpose(-1, -2),
        "heads and positions swapped": x.transpose(1, 2).contiguous().transpose(1, 2),
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_complex_form_reads_any_strides(dtype: torch.dtype) -> None:
    x = random_features(2, 3, 7, 8, dtype=dtype, seed=4)
    cos, sin = cos_sin(x.shape[:-1], 8, dtype=dtype)
    phase = torch.complex(cos, sin)  # (T, d/2)
    expected = rotate(x, cos, sin, "interleaved")
    for name, view in _awkward_views(x).items():
        assert torch.equal(view, x), name
        for turned in (rotate_complex(view, phase), apply_rope(view)):
            assert turned.dtype == dtype and turned.shape == x.shape, name
            torch.testing.assert_close(turned, expected, msg=name)


def test_complex_form_promotes_a_phase_of_another_precision() -> None:
    x = random_features(2, 5, 8, dtype=torch.float64, seed=7)
    cos, sin = cos_sin(x.shape[:-1], 8, dtype=torch.float64)
    expected = rotate(x, cos, sin, "interleaved")
    phase = torch.complex(cos, sin)  # complex128
    from_single = rotate_complex(x.float(), phase)  # float32 pairs, complex128 products
    assert from_single.dtype == torch.float64 and from_single.shape == x.shape
    torch.testing.assert_close(from_single, rotate(x.float().double(), cos, sin, "interleaved"))
    to_single_phase = rotate_complex(x, phase.to(torch.complex64))
    assert to_single_phase.dtype == torch.float64
    torch.testing.assert_close(to_single_phase, expected, rtol=1e-6, atol=1e-6)


def test_complex_form_keeps_the_gradients_of_features_and_phase() -> None:
    x = random_features(2, 5, 8, dtype=torch.float64, seed=5)
    angles = rotation_angles(torch.arange(5), 8)
    weights = random_features(2, 5, 8, dtype=torch.float64, seed=6)  # a loss that sees angles
    for x_grad, phase_grad in ((True, False), (False, True), (True, True)):
        leaf_x = x.clone().requires_grad_(x_grad)
        leaf_angles = angles.clone().requires_grad_(phase_grad)
        turned = rotate_complex(leaf_x, torch.polar(torch.ones_like(angles), leaf_angles))
        assert turned.requires_grad
        (turned * weights).sum().backward()
        ref_x = x.clone().requires_grad_(x_grad)
        ref_angles = angles.clone().requires_grad_(phase_grad)
        reference = rotate(ref_x, ref_angles.cos(), ref_angles.sin(), "interleaved")
        (reference * weights).sum().backward()
        for leaf, ref in ((leaf_x, ref_x), (leaf_angles, ref_angles)):
            if leaf.requires_grad:
                assert leaf.grad is not None and ref.grad is not None
                torch.testing.assert_close(leaf.grad, ref.grad)


def test_loop_form_equals_interleaved_form() -> None:
    x = random_features(2, 3, 6, 8)
    pos = torch.tensor([0, 5, 17, 1000, -3, 12345])
    torch.testing.assert_close(apply_rope_loop(x, pos), apply_rope(x, pos), rtol=1e-12, atol=1e-12)


@given(dim=dims, m=positions, n=positions)
def test_rotation_matrices_compose_relatively(dim: int, m: int, n: int) -> None:
    """R_m^T R_n = R_{n-m}, and every R_m is orthogonal."""
    r_m, r_n = rotation_matrix(m, dim), rotation_matrix(n, dim)
    torch.testing.assert_close(r_m.T @ r_n, rotation_matrix(n - m, dim), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(r_m.T @ r_m, torch.eye(dim, dtype=torch.float64), atol=1e-12, rtol=0)


def test_matches_published_golden_values() -> None:
    """Gemma's positional-embedding test: ones(4), position 1, base 100, half layout."""
    out = apply_rope(torch.ones(1, 4), torch.tensor([1]), base=100.0, layout="half")
    expected = torch.tensor([[-0.30116868, 0.89517075, 1.3817732, 1.0948375]])
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(apply_rope(torch.ones(1, 4), base=100.0), torch.ones(1, 4))


def test_position_zero_is_the_identity() -> None:
    x = random_features(3, 7, 16)
    torch.testing.assert_close(apply_rope(x, torch.zeros(7, dtype=torch.long)), x)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_default_positions_are_arange_and_cached_tables_agree(layout: Layout) -> None:
    """The cached path (no positions) against the matrix form, built afresh and from the cache."""
    x = random_features(2, 4, 9, 12)
    perm = layout_permutation(12) if layout == "half" else torch.arange(12)
    matrices = torch.stack([rotation_matrix(m, 12)[perm][:, perm] for m in range(9)])  # (T, d, d)
    expected = (matrices @ x.unsqueeze(-1)).squeeze(-1)
    kernels_module._cached_cos_sin.cache_clear()
    kernels_module._cached_phase.cache_clear()
    for _ in ("built", "cached"):
        out = apply_rope(x, layout=layout)
        torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("first", ["inference", "grad"])
def test_cached_tables_serve_inference_mode_and_autograd_in_either_order(
    layout: Layout, first: str
) -> None:
    """A table first built under inference_mode must not break a later backward, and back."""
    kernels_module._cached_cos_sin.cache_clear()
    kernels_module._cached_phase.cache_clear()
    x = random_features(1, 2, 5, 8).float()

    def with_grad() -> None:
        leaf = x.clone().requires_grad_(True)
        apply_rope(leaf, layout=layout).square().sum().backward()
        assert leaf.grad is not None and leaf.grad.isfinite().all()

    def in_inference() -> None:
        with torch.inference_mode():
            out = apply_rope(x, layout=layout)
        torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))

    order = (in_inference, with_grad) if first == "inference" else (with_grad, in_inference)
    for step in order + order:
        step()


def test_positions_broadcast_over_batch_and_heads() -> None:
    x = random_features(2, 3, 5, 8)
    per_row = torch.tensor([[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]])[:, None, :]  # (2, 1, 5)
    out = apply_rope(x, per_row)
    torch.testing.assert_close(out[1], apply_rope(x[1], torch.arange(10, 15)))


@given(dim=dims, m=positions, layout=layouts, seed=seeds)
def test_negative_position_undoes_the_rotation(dim: int, m: int, layout: Layout, seed: int) -> None:
    """R_{-m} = R_m^T = R_m^{-1}."""
    x = random_features(dim, seed=seed)
    torch.testing.assert_close(at(at(x, m, layout=layout), -m, layout=layout), x)


@pytest.mark.parametrize("p", [0.0, 0.25, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_p_rope_keeps_the_highest_frequencies_rotating(p: float, layout: Layout) -> None:
    dim, kept = 16, rotating_pairs(16, p)
    assert kept == int(p * 8)
    theta = frequencies(dim, p=p)
    assert (theta[:kept] > 0).all() and (theta[kept:] == 0).all()
    x = random_features(1, dim)
    out = apply_rope(x, torch.tensor([7]), layout=layout, p=p)
    pairs = torch.arange(dim // 2)
    first = 2 * pairs if layout == "interleaved" else pairs
    second = first + 1 if layout == "interleaved" else pairs + dim // 2
    frozen = torch.cat((first[kept:], second[kept:]))
    moving = torch.cat((first[:kept], second[:kept]))
    torch.testing.assert_close(out[:, frozen], x[:, frozen], rtol=0, atol=0)
    assert not torch.allclose(out[:, moving], x[:, moving]) or kept == 0


def test_rotating_pairs_rounds_down() -> None:
    assert rotating_pairs(10, 0.3) == 1  # 0.3 * 5 = 1.5 -> 1
    assert rotating_pairs(64, 0.25) == 8


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_low_precision_input_keeps_dtype_and_float32_angles(dtype: torch.dtype) -> None:
    """At position 10^5 bfloat16 angles would be off by whole radians; ours are not."""
    x = random_features(1, 64).to(dtype)
    pos = torch.tensor([100_000])
    out = apply_rope(x, pos)
    assert out.dtype == dtype
    reference = apply_rope(x.double(), pos)  # exact rotation of the same rounded input
    error = (out.double() - reference).abs().max().item()
    assert error <= 4 * torch.finfo(dtype).eps * x.double().abs().max().item()


def test_angles_in_the_requested_dtype_lose_precision() -> None:
    """rotation_angles(dtype=bfloat16) really rounds: position 257 becomes 256."""
    angle = rotation_angles(torch.tensor([257]), 2, dtype=torch.bfloat16)
    assert angle.item() == 256.0


def test_matches_hugging_face_llama_rotary_functions() -> None:
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import (
        LlamaRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=2, rope_theta=500.0)
    q, k = random_features(2, 1, 2, 11, 32, dtype=torch.float32)
    pos = torch.arange(11)[None] + 20
    cos, sin = LlamaRotaryEmbedding(config=config)(q, pos)
    hf_q, hf_k = apply_rotary_pos_emb(q, k, cos, sin)
    ours_q = apply_rope(q, pos[0], base=500.0, layout="half")
    ours_k = apply_rope(k, pos[0], base=500.0, layout="half")
    # HF forms its angles in float32 and ours in float64; at positions near 30 the
    # float32 rounding of an angle is about 2e-6 rad, hence the tolerance.
    torch.testing.assert_close(ours_q, hf_q, rtol=1e-5, atol=2e-5)
    torch.testing.assert_close(ours_k, hf_k, rtol=1e-5, atol=2e-5)


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0) -> torch.Tensor:
    """Meta's Llama way of building the table: unit complex numbers ``(end, dim/2)``.

    Written out here (not imported) to pin our interleaved layout to the form
    used by Meta's reference code: float32 frequencies, an outer product with
    the positions, then ``torch.polar``.
    """
    inverse_frequencies = 1.0 / theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim)
    angles = torch.outer(torch.arange(end, dtype=torch.float32), inverse_frequencies)
    return torch.polar(torch.ones_like(angles), angles)  # complex64 (end, dim/2)


def apply_rotary_emb(
    xq: torch.Tensor, xk: torch.Tensor, freqs_cis: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Meta's Llama rotation: queries and keys ``(batch, seq, heads, head_dim)``.

    Consecutive coordinates ``(2k, 2k+1)`` are read as one complex number and
    multiplied by the table, broadcast over batch and heads.
    """
    xq_complex = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_complex = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    table = freqs_cis[None, :, None, :]  # (1, seq, 1, head_dim/2)
    xq_out = torch.view_as_real(xq_complex * table).flatten(3)
    xk_out = torch.view_as_real(xk_complex * table).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def test_matches_meta_llama_complex_form() -> None:
    """Meta's layout (batch, seq, heads, dim) and complex form = our interleaved layout."""
    q, k = random_features(2, 2, 40, 3, 64, dtype=torch.float32)  # (B, T, H, D) each
    meta_q, meta_k = apply_rotary_emb(q, k, precompute_freqs_cis(64, 40, theta=500.0))
    ours_q = apply_rope(q.transpose(1, 2), base=500.0).transpose(1, 2)  # ours is (B, H, T, D)
    ours_k = apply_rope(k.transpose(1, 2), base=500.0, layout="interleaved").transpose(1, 2)
    # Meta forms angles in float32 (rounding up to about 2e-6 rad at position 39).
    torch.testing.assert_close(ours_q, meta_q, rtol=1e-5, atol=2e-5)
    torch.testing.assert_close(ours_k, meta_k, rtol=1e-5, atol=2e-5)
    # and the half layout is the same rotation only after the permutation:
    perm = layout_permutation(64)
    ours_half = apply_rope(q.transpose(1, 2)[..., perm], base=500.0, layout="half")
    torch.testing.assert_close(ours_half.transpose(1, 2), meta_q[..., perm], rtol=1e-5, atol=2e-5)


LARGE_POSITIONS = [0, 1, 7, 1000, 123_456, 10**6, 10**9]


@pytest.mark.parametrize("position", LARGE_POSITIONS)
def test_every_form_equals_the_matrix_form_in_both_layouts(position: int) -> None:
    """Matrix = complex = elementwise (eq. 34, both layouts) = loop, up to 10**9.

    In the half layout the matrix is the interleaved one with its rows and
    columns permuted: P R_m P^T.
    """
    dim = 16
    x = random_features(3, dim, seed=position % 97)  # (T=3, d)
    pos = torch.full((3,), position)
    expected = x @ rotation_matrix(position, dim).T  # (T, d): R_m x for every row
    perm = layout_permutation(dim)
    cos, sin = cos_sin(x.shape[:-1], dim, pos, dtype=torch.float64)
    forms = {
        "apply_rope interleaved": apply_rope(x, pos),
        "complex (Meta) form": apply_rope_complex(x, pos),
        "elementwise interleaved": rotate(x, cos, sin, "interleaved"),
        "elementwise half, unpermuted": rotate(x[:, perm], cos, sin, "half")[
            :, torch.argsort(perm)
        ],
        "apply_rope half, unpermuted": apply_rope(x[:, perm], pos, layout="half")[
            :, torch.argsort(perm)
        ],
        "per-pair loop": apply_rope_loop(x, pos),
    }
    # angles of size m carry float64 rounding of about m * 1e-16 radians
    tolerance = 1e-12 + 1e-15 * position
    for name, value in forms.items():
        torch.testing.assert_close(value, expected, rtol=tolerance, atol=tolerance, msg=name)


def test_half_layout_matrix_is_the_permuted_interleaved_matrix() -> None:
    """Rotating pair (k, k + d/2): the matrix P R_m P^T acting on half-layout vectors."""
    dim, m = 8, 5
    perm = layout_permutation(dim)
    half_matrix = rotation_matrix(m, dim)[perm][:, perm]
    x = random_features(dim)
    torch.testing.assert_close(half_matrix @ x, at(x, m, layout="half"), rtol=1e-12, atol=1e-12)


# --- the half layout's fast kernel -----------------------------------------------


def half_matrices(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """P R_m P^T for every position, ``positions.shape + (d, d)``, float64."""
    perm = layout_permutation(dim)
    flat = [rotation_matrix(int(m), dim)[perm][:, perm] for m in positions.flatten()]
    return torch.stack(flat).reshape(*positions.shape, dim, dim)


def plain_half_rope(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """The half layout written out with out-of-place ops and cat: autograd traces it."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    cos, sin = angles.cos(), angles.sin()
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("explicit", [False, True])
def test_half_fast_path_equals_matrix_and_permuted_interleaved_forms(
    dtype: torch.dtype, explicit: bool
) -> None:
    """(B, H, T, D) input, default positions or per-batch positions broadcast over heads."""
    dim = 16
    x = random_features(2, 3, 7, dim, dtype=dtype)
    if explicit:
        positions = torch.tensor([[0, 5, 9, 100, 1000, 4, 2], [3, 3, 70000, 1, 0, 12, 8]])[:, None]
    else:
        positions = torch.arange(7)
    out = apply_rope(x, positions if explicit else None, layout="half")
    assert out.dtype == dtype and out.shape == x.shape and out.is_contiguous()
    matrices = half_matrices(positions, dim)  # (2, 1, 7, d, d) or (7, d, d)
    expected = (matrices @ x.double().unsqueeze(-1)).squeeze(-1)
    tolerance = 1e-12 if dtype == torch.float64 else 4e-6
    torch.testing.assert_close(out.double(), expected, rtol=tolerance, atol=tolerance)
    perm = layout_permutation(dim)
    back = torch.argsort(perm)
    interleaved = apply_rope(x[..., back], positions if explicit else None)[..., perm]
    torch.testing.assert_close(out, interleaved, rtol=tolerance, atol=tolerance)


def test_half_fast_path_rounds_bfloat16_once() -> None:
    """bfloat16 in, bfloat16 out: the float32 rotation of the same input, rounded once."""
    x = random_features(2, 4, 33, 64).to(torch.bfloat16)
    for positions in (None, torch.arange(33) * 1000):
        out = apply_rope(x, positions, layout="half")
        assert out.dtype == torch.bfloat16
        in_float32 = apply_rope(x.float(), positions, layout="half")
        torch.testing.assert_close(out, in_float32.to(torch.bfloat16), rtol=0, atol=0)


def test_half_fast_path_makes_no_cat(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two halves are written into one buffer: no torch.cat on the way."""
    x = random_features(1, 2, 5, 8)
    expected = plain_half_rope(x, rotation_angles(torch.arange(5), 8))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("torch.cat called")

    monkeypatch.setattr(torch, "cat", refuse)
    for positions in (None, torch.arange(5)):
        out = apply_rope(x, positions, layout="half")
        torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("explicit", [False, True])
def test_half_fast_path_gradients(explicit: bool) -> None:
    """gradcheck (and gradgradcheck) in float64, and the gradient of the written-out form."""
    x = random_features(2, 2, 5, 8).requires_grad_(True)
    positions = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])[:, None] if explicit else None

    def rope(features: torch.Tensor) -> torch.Tensor:
        return apply_rope(features, positions, base=100.0, layout="half")

    assert torch.autograd.gradcheck(rope, (x,))
    assert torch.autograd.gradgradcheck(rope, (x,))
    weights = random_features(2, 2, 5, 8, seed=1)
    (rope(x) * weights).sum().backward()
    assert x.grad is not None
    reference = x.detach().clone().requires_grad_(True)
    angles = rotation_angles(torch.arange(5) if positions is None else positions, 8, 100.0)
    (plain_half_rope(reference, angles) * weights).sum().backward()
    torch.testing.assert_close(x.grad, reference.grad, rtol=1e-12, atol=1e-12)


def test_half_fast_path_float32_backward_and_inference() -> None:
    """Training in float32: the gradient is the rotation by -m; no_grad skips autograd."""
    x = random_features(3, 6, 16, dtype=torch.float32).requires_grad_(True)
    weights = random_features(3, 6, 16, seed=2, dtype=torch.float32)
    (apply_rope(x, layout="half") * weights).sum().backward()
    assert x.grad is not None
    undo = apply_rope(weights.double(), -torch.arange(6), layout="half")  # R_m^T w
    torch.testing.assert_close(x.grad.double(), undo, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        assert apply_rope(x, layout="half").grad_fn is None


def test_turn_gradients_in_every_argument() -> None:
    """turn's backward (a turn itself) for x1, x2, cos and sin, broadcast and 0-d."""
    x1, x2 = random_features(2, 3, 4, seed=3).unbind(0)
    angles = random_features(4, seed=4)
    cos, sin = angles.cos().requires_grad_(True), angles.sin().requires_grad_(True)
    x1.requires_grad_(True)
    x2.requires_grad_(True)

    def stacked(*args: torch.Tensor) -> torch.Tensor:
        return torch.stack(turn(*args))

    assert torch.autograd.gradcheck(stacked, (x1, x2, cos, sin))
    assert torch.autograd.gradgradcheck(stacked, (x1, x2, cos, sin))
    zero_d = (torch.tensor(0.3, dtype=torch.float64, requires_grad=True),) * 2
    assert torch.autograd.gradcheck(stacked, (*zero_d, cos[0], sin[0]))


def test_turn_matches_the_formula_with_floats_and_tensors() -> None:
    x1, x2 = random_features(2, 3, 4, seed=5).unbind(0)
    c, s = math.cos(0.7), math.sin(0.7)
    first, second = turn(x1, x2, c, s)
    torch.testing.assert_close(first, x1 * c - x2 * s, rtol=1e-15, atol=1e-15)
    torch.testing.assert_close(second, x1 * s + x2 * c, rtol=1e-15, atol=1e-15)
    assert first.dtype == torch.float64
    one, zero = turn(torch.tensor(1.0), torch.tensor(0.0), c, s)
    assert one.shape == () and float(one) == pytest.approx(c) and float(zero) == pytest.approx(s)
    narrow = turn(x1.float(), x2.float(), torch.tensor(c, dtype=torch.float64), s)[0]
    assert narrow.dtype == torch.float32  # a 0-d angle does not promote, as in x1 * cos


# --- bad input ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "word"),
    [
        (lambda: apply_rope(torch.zeros(3, 7)), ValueError, "last dimension of x"),
        (lambda: apply_rope(torch.zeros(8)), ValueError, "x must have shape"),
        (lambda: apply_rope(torch.zeros(3, 8, dtype=torch.long)), TypeError, "floating"),
        # deliberately ill-typed: the runtime check is under test
        (lambda: apply_rope([[0.0, 1.0]]), TypeError, "x must be a torch.Tensor"),  # type: ignore[arg-type]
        # deliberately ill-typed: the runtime check is under test
        (lambda: apply_rope(torch.zeros(3, 8), layout="neox"), ValueError, "layout"),  # type: ignore[arg-type]
        (lambda: apply_rope(torch.zeros(3, 8), p=1.5), ValueError, "p must lie in"),
        (lambda: apply_rope(torch.zeros(3, 8), p=-0.1), ValueError, "p must lie in"),
        (lambda: apply_rope(torch.zeros(3, 8), base=0.0), ValueError, "base"),
        (lambda: apply_rope(torch.zeros(3, 8), torch.zeros(3)), TypeError, "integer dtype"),
        (lambda: apply_rope(torch.zeros(3, 8), torch.arange(4)), ValueError, "do not broadcast"),
        (
            lambda: apply_rope(torch.zeros(2, 3, 8), torch.zeros(2, 1, 1, 3, dtype=torch.long)),
            ValueError,
            "do not broadcast",
        ),
        # deliberately ill-typed: the runtime check is under test
        (lambda: apply_rope(torch.zeros(3, 8), [0, 1, 2]), TypeError, "positions must be"),  # type: ignore[arg-type]
        (lambda: frequencies(7), ValueError, "dim must be a positive even"),
        # deliberately ill-typed: the runtime check is under test
        (lambda: frequencies(8.0), TypeError, "dim must be an int"),  # type: ignore[arg-type]
        # deliberately ill-typed: the runtime check is under test
        (lambda: rotation_matrix(1.5, 8), TypeError, "position must be an int"),  # type: ignore[arg-type]
        (lambda: layout_permutation(0), ValueError, "dim"),
        (lambda: apply_rope_complex(torch.zeros(3, 5)), ValueError, "last dimension"),
    ],
)
def test_bad_input_names_the_argument(
    call: Callable[[], object], error: type[Exception], word: str
) -> None:
    with pytest.raises(error, match=word):
        call()


THETA = frequencies(8, p=0.5)


@pytest.mark.parametrize(
    ("call", "word"),
    [
        (lambda: apply_rope(torch.zeros(3, 8), base=500.0, theta=THETA), "base=500.0"),
        (lambda: apply_rope(torch.zeros(3, 8), p=0.5, theta=THETA), "p=0.5"),
        (lambda: apply_rope(torch.zeros(3, 8), torch.arange(3), base=500, theta=THETA), "base"),
        (lambda: apply_rope(torch.zeros(3, 8), layout="half", p=0.25, theta=THETA), "p=0.25"),
        (lambda: apply_rope_complex(torch.zeros(3, 8), base=500.0, theta=THETA), "base"),
        (lambda: apply_rope_loop(torch.zeros(3, 8), p=0.5, theta=THETA), "p=0.5"),
        (lambda: rotation_angles(torch.arange(3), 8, 500.0, theta=THETA), "base"),
        (lambda: rotation_matrix(2, 8, 500.0, theta=THETA), "base"),
        (lambda: cos_sin((3,), 8, base=500.0, theta=THETA), "base"),
    ],
)
def test_a_base_or_p_that_theta_overrides_is_refused(call: Callable[[], object], word: str) -> None:
    # theta replaces the ladder: a base or p beside it used to be accepted and ignored
    with pytest.raises(ValueError, match=rf"{word}.*theta.*overrides"):
        call()


def test_default_base_and_p_are_accepted_with_theta() -> None:
    x = torch.randn(3, 8)
    expected = apply_rope(x, theta=THETA)
    explicit = apply_rope(x, base=10_000, p=1, theta=THETA)
    torch.testing.assert_close(explicit, expected, rtol=0, atol=0)
    torch.testing.assert_close(apply_rope(x, p=0.5), expected, rtol=0, atol=0)


@given(half_dim=st.integers(1, 8), seed=st.integers(0, 10_000))
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_the_pair_reader_follows_the_layout_and_round_trips(
    layout: Layout, half_dim: int, seed: int
) -> None:
    dim = 2 * half_dim
    x = torch.randn(3, dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    z = read_pairs(x, layout)
    assert z.shape == (3, half_dim) and z.dtype == torch.complex128
    first, second = (2 * torch.arange(half_dim), 2 * torch.arange(half_dim) + 1)
    if layout == "half":
        first, second = torch.arange(half_dim), torch.arange(half_dim) + half_dim
    assert torch.equal(z.real, x[:, first]) and torch.equal(z.imag, x[:, second])
    assert torch.equal(write_pairs(z, layout), x)
    # the half layout reads the layout-permuted vector as the interleaved one reads x
    if layout == "half":
        assert torch.equal(read_pairs(x[:, layout_permutation(dim)], "half"), read_pairs(x))
    # RoPE is multiplication of each pair by e^{i m theta_k}, in either layout
    rotated = apply_rope(x[None], torch.full((1, 3), 7), layout=layout)[0]
    phase = torch.polar(torch.ones(half_dim, dtype=torch.float64), 7 * frequencies(dim))
    torch.testing.assert_close(read_pairs(rotated, layout), z * phase)


def test_the_pair_reader_refuses_what_it_cannot_read() -> None:
    with pytest.raises(TypeError, match="float32 or float64"):
        read_pairs(torch.ones(2, 4, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="even"):
        read_pairs(torch.ones(3, 5))
    with pytest.raises(TypeError, match="complex"):
        write_pairs(torch.ones(3, 4))
    with pytest.raises(ValueError, match="layout"):
        # deliberately ill-typed: the runtime check is under test
        read_pairs(torch.ones(3, 4), "interleave")  # type: ignore[arg-type]


def test_a_rope_spec_is_the_short_forms_with_its_settings_bound() -> None:
    x = random_features(2, 3, 10, 16, seed=1)
    positions = torch.arange(10).expand(2, 1, 10) + torch.tensor([[[0]], [[500]]])
    # the default spec is the short forms with their defaults
    assert torch.equal(Rope(16).apply(x), apply_rope(x))
    assert torch.equal(Rope(16).apply(x, positions), apply_rope(x, positions))
    cases: tuple[tuple[Rope, float, Layout, float], ...] = (
        (Rope(16), 10000.0, "interleaved", 1.0),
        (Rope(16, base=100.0, layout="half", p=0.5), 100.0, "half", 0.5),
    )
    for spec, base, layout, p in cases:
        assert torch.equal(spec.apply(x), apply_rope(x, base=base, layout=layout, p=p))
        assert torch.equal(
            spec.apply(x, positions), apply_rope(x, positions, base=base, layout=layout, p=p)
        )
        assert torch.equal(spec.theta, frequencies(16, base, p=p))
        assert torch.equal(
            spec.angles(torch.tensor([3])), rotation_angles(torch.tensor([3]), 16, base, p=p)
        )
        q, k = x[0, 0, 0], x[0, 0, 1]
        distances = torch.arange(0, 50, 7)
        assert torch.equal(
            spec.score_at_distance(q, k, distances),
            score_at_distance(q, k, distances, base=base, layout=layout, p=p),
        )
        assert torch.equal(spec.pairs(x), read_pairs(x, spec.layout))


def test_a_rope_spec_from_any_frequency_vector() -> None:
    theta = [1.0, 0.1, 0.0]
    for given_theta in (theta, tuple(theta), torch.tensor(theta, dtype=torch.float64)):
        spec = Rope.from_theta(given_theta, layout="half", attention_factor=1.5)
        assert spec.dim == 6 and spec.base is None and spec.p is None
        assert torch.equal(spec.theta, torch.tensor(theta, dtype=torch.float64))
        assert spec == Rope.from_theta(theta, layout="half", attention_factor=1.5)
    x = random_features(1, 1, 5, 6, seed=2)
    float64_theta = torch.tensor(theta, dtype=torch.float64)
    assert torch.equal(Rope.from_theta(theta).apply(x), apply_rope(x, theta=float64_theta))
    assert "custom frequencies" in Rope.from_theta(theta).describe()


def test_rope_specs_compare_by_what_they_compute_and_cannot_change() -> None:
    ladder = Rope(8, base=100.0)
    assert ladder == Rope.from_theta(frequencies(8, 100.0))  # the same frequencies
    assert len({ladder, Rope.from_theta(frequencies(8, 100.0))}) == 1
    assert ladder != Rope(8, base=100.0, layout="half")
    assert ladder != Rope(8, base=100.0, attention_factor=1.1)
    with pytest.raises(AttributeError, match="immutable"):
        ladder.layout = "half"
    handed_out = ladder.theta
    handed_out[0] = 5.0
    assert ladder.theta[0] == 1.0  # theta hands out a copy
    assert repr(ladder) == "Rope(8, base=100, layout='interleaved', p=1, attention_factor=1)"
    assert ladder.describe() == (
        "RoPE, d = 8, base 100, p = 1 (4 of 4 pairs rotate), interleaved layout, attention factor 1"
    )


def test_a_rope_spec_copies_pickles_changes_layout_and_describes_itself() -> None:
    spec = Rope(8, base=100.0, p=0.5, layout="half", attention_factor=1.25)
    assert copy.deepcopy(spec) is spec and copy.copy(spec) is spec  # immutable
    again = pickle.loads(pickle.dumps(spec))
    assert again == spec and (again.base, again.p) == (100.0, 0.5)
    turned = spec.with_layout("interleaved")
    assert turned.layout == "interleaved" and turned != spec
    assert torch.equal(turned.theta, spec.theta) and turned.attention_factor == 1.25
    values = spec.to_dict()
    assert json.loads(json.dumps(values)) == values
    assert values == {
        "dim": 8,
        "base": 100.0,
        "p": 0.5,
        "theta": frequencies(8, 100.0, p=0.5).tolist(),
        "layout": "half",
        "attention_factor": 1.25,
    }


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: Rope(7), ValueError, "even"),
        (lambda: Rope(8, base=1.0), ValueError, "base"),
        (lambda: Rope(8, p=1.5), ValueError, "p"),
        # deliberately ill-typed: the runtime check is under test
        (lambda: Rope(8, layout="halves"), ValueError, "layout"),  # type: ignore[arg-type]
        (lambda: Rope(8, attention_factor=0.0), ValueError, "attention_factor"),
        (lambda: Rope(8, attention_factor=True), ValueError, "attention_factor"),
        (lambda: Rope.from_theta([]), TypeError, "theta"),
        # deliberately ill-typed: the runtime check is under test
        (lambda: Rope.from_theta("1.0"), TypeError, "theta"),  # type: ignore[arg-type]
        (lambda: Rope.from_theta([1.0, -0.1]), ValueError, "theta"),
        (lambda: Rope.from_theta([1.0, float("nan")]), ValueError, "theta"),
        (lambda: Rope.from_theta(torch.ones(2, 2)), ValueError, "shape"),
    ],
)
def test_bad_rope_specs_are_refused(
    build: Callable[[], object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        build()


def test_seq_dim_reads_batch_seq_heads_features_right() -> None:
    """(B, T, H, d), Hugging Face's projections before their transpose: seq_dim=1 rotates
    them as the transposed (B, H, T, d); without it, 2-D positions are refused with a
    message that names the layout."""
    x = torch.randn(2, 10, 4, 8, generator=torch.Generator().manual_seed(0))  # (B, T, H, d)
    positions = torch.arange(10) + torch.tensor([[0], [7]])  # (B, T)
    spec = Rope(8, layout="half")
    expected = spec.apply(x.transpose(1, 2), positions).transpose(1, 2)
    assert torch.equal(spec.apply(x, positions, seq_dim=1), expected)
    assert torch.equal(apply_rope(x, positions, layout="half", seq_dim=1), expected)
    assert torch.equal(spec.apply(x, seq_dim=1), spec.apply(x.transpose(1, 2)).transpose(1, 2))
    assert torch.equal(spec.apply(x, positions, seq_dim=-3), expected)
    with pytest.raises(ValueError, match=r"look like \(batch, seq, heads, head_dim\)"):
        spec.apply(x, positions)
    with pytest.raises(ValueError, match="cannot be the last axis"):
        spec.apply(x, seq_dim=-1)
    with pytest.raises(ValueError, match="is not an axis"):
        apply_rope(x, seq_dim=4)
    with pytest.raises(TypeError, match="seq_dim must be an int"):
        apply_rope(x, seq_dim=1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("dim, base", [(8, 10000.0), (64, 500000.0), (16, 100.0)])
def test_misread_ladders_are_the_slips_they_name_and_differ_from_ropes(
    dim: int, base: float
) -> None:
    """Each misread ladder, pair by pair from its formula in plain floats, and none equal
    to RoPE's own ladder (a checker must be able to tell it apart)."""

    from rope_lessons.rope.ladder import MisreadLadder, misread_ladders

    slips = misread_ladders(dim, base)
    formulas: dict[MisreadLadder, Callable[[int], float]] = {
        "half_exponent": lambda k: base ** (-k / dim),
        "quadruple_exponent": lambda k: base ** (-4 * k / dim),
        "linspace": lambda k: base ** (-2 * k / (dim - 2)),
        "from_one": lambda k: base ** (-2 * (k + 1) / dim),
        "doubled": lambda k: 2 * base ** (-2 * k / dim),
        "reversed": lambda k: base ** (-2 * (dim // 2 - 1 - k) / dim),
        "inverted": lambda k: base ** (2 * k / dim),
        "flat": lambda _: 1.0,
    }
    assert set(slips) == set(formulas)
    rope = frequencies(dim, base)
    for slip, formula in formulas.items():
        expected = torch.tensor([formula(k) for k in range(dim // 2)], dtype=torch.float64)
        assert slips[slip].dtype == torch.float64 and slips[slip].shape == (dim // 2,)
        torch.testing.assert_close(slips[slip], expected, rtol=1e-12, atol=0.0)
        assert not torch.allclose(slips[slip], rope), slip
