"""Chapter 4: RoFormer's bound, the critique's constructions, and the distance profile."""

from __future__ import annotations

import cmath
import math

import numpy as np
import pytest
import torch
from helpers import random_features
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons._checks import Layout
from rope_lessons.chapters.decay import (
    SUMMARY_NAMES,
    decay_numbers,
    decay_run,
    decay_summary,
    distance_profile,
    flatten_summary,
    near_minus_far,
    summary_from_numbers,
)
from rope_lessons.chapters.decay_bounds import (
    MAX_DISTANCE,
    abel_bound,
    attention_by_distance,
    expected_score_terms,
    monte_carlo_score,
    peaked_key,
    roformer_bound,
)
from rope_lessons.chapters.spectrum import pair_dims
from rope_lessons.rope.kernels import read_pairs, score_at_distance
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.model import ModelConfig, TinyTransformer
from rope_lessons.toy.rotary_attention import attention

dims = st.integers(1, 32).map(lambda half: 2 * half)
bases = st.sampled_from([10.0, 100.0, 10_000.0, 500_000.0])
layouts = st.sampled_from(["interleaved", "half"])
seeds = st.integers(0, 2**16)
ALL_DISTANCES = torch.arange(100_001)


def bound_by_loop(r: int, d: int, base: float) -> float:
    """(1/(d/2)) sum_{j=1}^{d/2} |sum_{k<j} exp(i r theta_k)|, one term at a time."""
    total, partial = 0.0, 0j
    for k in range(d // 2):
        partial += cmath.exp(1j * r * base ** (-2 * k / d))
        total += abs(partial)
    return total / (d // 2)


# ---------------------------------------------------------------- the bound


@given(half=st.integers(1, 128), base=bases)
def test_bound_at_distance_zero_is_half_of_pairs_plus_one(half: int, base: float) -> None:
    bound = roformer_bound(torch.tensor([0]), 2 * half, base)
    assert bound.dtype == torch.float64
    assert bound.item() == pytest.approx((half + 1) / 2, rel=1e-14)


@given(
    d=dims,
    base=bases,
    distances=st.lists(st.integers(0, 10**6), min_size=1, max_size=8),
)
def test_bound_equals_a_brute_force_loop(d: int, base: float, distances: list[int]) -> None:
    bound = roformer_bound(torch.tensor(distances), d, base)
    expected = torch.tensor([bound_by_loop(r, d, base) for r in distances], dtype=torch.float64)
    torch.testing.assert_close(bound, expected, rtol=1e-9, atol=1e-9)


def test_bound_values_quoted_in_the_book() -> None:
    """d = 128: falls from 32.5 to 6.5 at 256, but is back up to 7.6 at 5000."""
    bound = roformer_bound(torch.tensor([0, 256, 1000, 5000]), 128)
    assert bound.round(decimals=1).tolist() == [32.5, 6.5, 4.5, 7.6]


def test_bound_keeps_the_shape_of_distances() -> None:
    assert roformer_bound(torch.zeros(3, 4, dtype=torch.long), 8).shape == (3, 4)


def test_abel_bound_refuses_distances_that_are_not_one_dimensional() -> None:
    """abel_bound's distances are (R,), as its docstring says: a (2, 3) grid is refused,
    not broadcast against the leading dimensions of q and k."""
    q, k = random_features(2, 8, seed=0)
    assert abel_bound(q, k, torch.arange(3)).shape == (3,)
    with pytest.raises(ValueError, match="distances must be 1-D"):
        abel_bound(q, k, torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="distances must be 1-D"):
        abel_bound(q, k, torch.tensor(3))


@given(d=dims, base=bases, layout=layouts, seed=seeds)
def test_abel_bound_bounds_the_score(d: int, base: float, layout: Layout, seed: int) -> None:
    q, k = random_features(2, 4, d, seed=seed)
    distances = torch.tensor([0, 1, 2, 10, 100, 1000, 12345, 10**5])
    score = score_at_distance(q, k, distances, base=base, layout=layout)
    bound = abel_bound(q, k, distances, rope=Rope(d, base, layout))
    assert bound.shape == score.shape == (4, 8)
    assert bool((score.abs() <= bound * (1 + 1e-12)).all())


@given(d=dims, base=bases, seed=seeds)
def test_abel_summation_rewrites_the_score(d: int, base: float, seed: int) -> None:
    """Re sum_k h_k e^{i r theta_k} = -Re sum_k (h_{k+1} - h_k) S_{k+1}, with h_{d/2} = 0."""
    q, k = random_features(2, d, seed=seed)
    distances = torch.tensor([0, 1, 7, 300, 99_999])
    h = read_pairs(q) * read_pairs(k).conj()  # (d/2,)
    steps = torch.diff(h, append=torch.zeros(1, dtype=h.dtype))  # h_{k+1} - h_k
    angles = distances[:, None].double() * frequencies(d, base)  # (R, d/2)
    partial_sums = torch.polar(torch.ones_like(angles), angles).cumsum(-1)  # S_1 .. S_{d/2}
    by_parts = -(partial_sums * steps).sum(-1).real
    torch.testing.assert_close(by_parts, score_at_distance(q, k, distances, base=base))


# ---------------------------------------------------------------- the peaked key


@given(
    d=st.integers(1, 16).map(lambda half: 2 * half),
    r=st.integers(0, 100_000),
    layout=layouts,
    seed=seeds,
    sparse=st.booleans(),
)
def test_peaked_key_peaks_where_asked(
    d: int, r: int, layout: Layout, seed: int, sparse: bool
) -> None:
    """Among all distances 0..10^5, the score is largest at r, and equals |q|^2 there."""
    q = random_features(d, seed=seed)
    if sparse:  # only the slowest pair is nonzero: the flattest peak there is
        slowest = [d - 2, d - 1] if layout == "interleaved" else [d // 2 - 1, d - 1]
        q = torch.zeros(d, dtype=torch.float64)
        q[slowest] = torch.tensor([0.3, -1.7], dtype=torch.float64)
    k = peaked_key(q, r, rope=Rope(d, layout=layout))
    assert k.shape == q.shape and k.dtype == q.dtype
    assert k.norm().item() == pytest.approx(q.norm().item(), rel=1e-12)
    scores = score_at_distance(q, k, ALL_DISTANCES, layout=layout)
    assert scores.argmax().item() == r
    assert scores[r].item() == pytest.approx(q.square().sum().item(), rel=1e-12)
    others = torch.cat((scores[:r], scores[r + 1 :]))
    assert bool((others < scores[r]).all())


def test_peaked_key_handles_a_batch_of_queries() -> None:
    q = random_features(3, 2, 16, seed=1)
    keys = peaked_key(q, 40, rope=Rope(16, 500.0))
    scores = score_at_distance(q, keys, torch.arange(2000), base=500.0)
    assert (scores.argmax(-1) == 40).all()


# ---------------------------------------------------------------- attention by distance


@given(d=dims, context=st.integers(1, 64), layout=layouts, seed=seeds)
def test_attention_by_distance_is_a_row_of_causal_attention(
    d: int, context: int, layout: Layout, seed: int
) -> None:
    q, k = random_features(2, d, seed=seed) * 3
    rope = Rope(d, layout=layout)
    weights = attention_by_distance(q, k, context, rope=rope)
    queries = q.expand(1, 1, context, d)
    keys = k.expand(1, 1, context, d)
    _, full = attention(queries, keys, keys, rope=rope, return_weights=True)
    last_row = full[0, 0, -1]  # key n at distance context - 1 - n
    torch.testing.assert_close(weights, last_row.flip(-1), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("context", [MAX_DISTANCE + 2, 2 * 10**9])
def test_attention_by_distance_refuses_a_context_past_max_distance_before_allocating(
    context: int,
) -> None:
    """The farthest key is context - 1 positions back: past MAX_DISTANCE it is refused
    before the distances 0 .. context - 1 (8 bytes each, 16 GB for 2e9) are built."""
    q = torch.ones(8)
    with pytest.raises(ValueError, match="1e\\+09"):
        attention_by_distance(q, q, context)


# ---------------------------------------------------------------- Monte Carlo


def test_monte_carlo_gaussian_mean_is_zero_within_its_error() -> None:
    distances = torch.tensor([0, 1, 10, 100, 1000, 10_000, 100_000])
    result = monte_carlo_score(64, distances, samples=8192, seed=3)
    z = result.mean / result.stderr
    assert bool((z.abs() < 4.5).all())
    # one sample has variance d, so the standard error is sqrt(d / samples)
    torch.testing.assert_close(
        result.stderr,
        torch.full((7,), math.sqrt(64 / 8192), dtype=torch.float64),
        rtol=0.05,
        atol=0,
    )


@given(correlation=st.sampled_from([-0.5, 0.3, 0.9, 1.0]), layout=layouts)
def test_monte_carlo_correlated_mean_is_c_times_the_trace(
    correlation: float, layout: Layout
) -> None:
    d = 32
    distances = torch.tensor([0, 3, 50, 700])
    result = monte_carlo_score(
        d,
        distances,
        samples=4096,
        correlation=correlation,
        seed=1,
        rope=Rope(d, layout=layout),
        chunk=1000,
    )
    angles = distances[:, None].double() * frequencies(d)
    trace = 2 * angles.cos().sum(-1)
    assert bool(((result.mean - correlation * trace).abs() < 4.5 * result.stderr).all())
    variance = (1 - correlation**2) * d + 4 * correlation**2 * angles.cos().square().sum(-1)
    torch.testing.assert_close(result.stderr, (variance / 4096).sqrt(), rtol=0.08, atol=0)


def test_monte_carlo_is_reproducible_and_chunk_independent() -> None:
    distances = torch.arange(5)
    a = monte_carlo_score(8, distances, samples=100, seed=7, chunk=100)
    b = monte_carlo_score(8, distances, samples=100, seed=7, chunk=100)
    assert torch.equal(a.mean, b.mean) and torch.equal(a.stderr, b.stderr)


# ---------------------------------------------------------------- a model's profile


def small_model(**fields: object) -> TinyTransformer:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=11, dim=32, n_layers=2, n_heads=2, **fields)  # type: ignore[arg-type]
    return TinyTransformer(config)


def test_distance_profile_matches_the_model_attention() -> None:
    """Logit, weight and unrotated score at distance r: means over queries 8..19, by hand."""
    model = small_model()
    tokens = torch.randint(0, 11, (3, 20), generator=torch.Generator().manual_seed(0))
    profile = distance_profile(model, tokens, max_distance=8)
    assert profile.logit.shape == profile.weight.shape == profile.content.shape == (2, 2, 9)
    assert profile.mean_query.shape == profile.mean_key.shape == (2, 2, 16)
    qkv = model.layer_qkv(tokens)
    _, weights = model.attention_maps(tokens)
    queries = torch.arange(8, 20)
    for layer in range(2):
        q, k = qkv[layer].q.double(), qkv[layer].k.double()  # (B, H, T, D)
        for r in (0, 3, 8):
            keys = queries - r
            logit = score_at_distance(q[:, :, queries], k[:, :, keys], torch.tensor([r]))[..., 0]
            content = (q[:, :, queries] * k[:, :, keys]).sum(-1)  # (B, H, M)
            weight = weights[layer][:, :, queries, keys].double()
            torch.testing.assert_close(profile.logit[layer, :, r], logit.mean((0, 2)) / 4.0)
            torch.testing.assert_close(profile.content[layer, :, r], content.mean((0, 2)) / 4.0)
            torch.testing.assert_close(profile.weight[layer, :, r], weight.mean((0, 2)))
        torch.testing.assert_close(profile.mean_query[layer], q.mean((0, 2)))
    assert profile.uniform_weight == pytest.approx(sum(1 / (m + 1) for m in range(8, 20)) / 12)


def test_distance_profile_logits_give_the_model_weights() -> None:
    """Softmax over the rotated logits of a full row reproduces attention_maps."""
    model = small_model()
    tokens = torch.randint(0, 11, (1, 12), generator=torch.Generator().manual_seed(2))
    profile = distance_profile(model, tokens, max_distance=11)  # one query: position 11
    _, weights = model.attention_maps(tokens)
    for layer in range(2):
        from_logits = profile.logit[layer].softmax(-1)  # (H, 12) over distances 0..11
        expected = weights[layer][0, :, 11].flip(-1).double()  # keys 11..0
        torch.testing.assert_close(from_logits, expected, rtol=1e-5, atol=1e-6)


def test_mean_vector_logit_is_the_rotary_score_of_the_means() -> None:
    model = small_model()
    tokens = torch.randint(0, 11, (2, 16), generator=torch.Generator().manual_seed(1))
    profile = distance_profile(model, tokens)
    far = torch.tensor([0, 5, 10_000])
    expected = score_at_distance(profile.mean_query, profile.mean_key, far) / 4.0
    torch.testing.assert_close(profile.mean_vector_logit(far), expected)
    assert profile.mean_vector_logit().shape == (2, 2, 9)


def test_near_minus_far() -> None:
    curve = torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0]])
    assert near_minus_far(curve, (0, 1), (3, 4)).tolist() == [3.0]


def test_distance_profile_leaves_the_model_in_its_mode() -> None:
    model = small_model()
    tokens = torch.randint(0, 11, (2, 16), generator=torch.Generator().manual_seed(1))
    model.train()
    distance_profile(model, tokens)
    assert model.training
    model.eval()
    distance_profile(model, tokens)
    assert not model.training


def test_logit_terms_add_up_to_the_logit() -> None:
    model = small_model()
    tokens = torch.randint(0, 11, (2, 16), generator=torch.Generator().manual_seed(1))
    profile = distance_profile(model, tokens)
    terms = profile.logit_terms()
    torch.testing.assert_close(terms.mean, profile.mean_vector_logit())
    torch.testing.assert_close(terms.total, profile.logit)
    # The rest is the covariance term plus cross terms: one name for one quantity.
    cross_terms = terms.rest - profile.covariance
    assert not hasattr(terms, "covariance")
    assert float(cross_terms.abs().max()) > 0.0


def test_decay_summary_by_hand() -> None:
    model = small_model()
    tokens = torch.randint(0, 11, (3, 20), generator=torch.Generator().manual_seed(0))
    profile = distance_profile(model, tokens, max_distance=8)
    summary = decay_summary(profile, near=(1, 2), far=(5, 8))
    assert tuple(summary) == SUMMARY_NAMES
    assert all(values.shape == (2, 2) for values in summary.values())
    logit = profile.logit[..., 1:3].mean(-1) - profile.logit[..., 5:9].mean(-1)
    torch.testing.assert_close(summary["logit"], logit)
    torch.testing.assert_close(summary["mean_vector"] + summary["rest"], summary["logit"])
    ratio = profile.weight[..., 1:3].mean(-1) / profile.weight[..., 5:9].mean(-1)
    torch.testing.assert_close(summary["log_weight_ratio"], ratio.log())
    default = decay_summary(profile)  # near 1..4, far 4..8
    torch.testing.assert_close(default["content"], near_minus_far(profile.content, (1, 4), (4, 8)))


def test_decay_numbers_round_trip() -> None:
    """decay_numbers of the chapter's (untrained) model reads back as decay_summary."""
    run = decay_run(steps=1)
    torch.manual_seed(0)
    model = run.model.build()
    numbers = decay_numbers(model, run, torch.device("cpu"))
    assert len(numbers) == len(SUMMARY_NAMES) * 2 * 4
    assert all(isinstance(value, float) for value in numbers.values())
    back = summary_from_numbers(numbers)
    assert tuple(back) == SUMMARY_NAMES
    assert flatten_summary(back) == numbers
    assert back["logit"].shape == (2, 4)
    with pytest.raises(ValueError, match="unknown"):
        summary_from_numbers({**numbers, "layer 0 head 0: extra": 1.0})
    with pytest.raises(ValueError, match="missing"):
        summary_from_numbers({k: v for k, v in numbers.items() if not k.endswith("rest")})
    with pytest.raises(ValueError, match="not decay_numbers"):
        summary_from_numbers({"loss": 1.0})


# ---------------------------------------------------------------- mean and covariance terms


def rotation_entries(rope: Rope, r: int) -> torch.Tensor:
    """(R_{-r})_{ij} built from rotated basis vectors: row i of rope.apply(I, r) is R_r e_i."""
    eye = torch.eye(rope.dim, dtype=torch.float64)
    return rope.apply(eye[:, None, :], torch.tensor([r]))[:, 0, :]  # [i, j] = (R_r)_{ji}


@given(d=st.integers(1, 8).map(lambda half: 2 * half), layout=layouts, seed=seeds)
def test_expected_score_is_mean_term_plus_covariance_term(
    d: int, layout: Layout, seed: int
) -> None:
    """q = mu_q + A g, k = mu_k + B g: E[q^T R_{-r} k] = sum_ij (C + mu_q mu_k^T)_ij (R_{-r})_ij."""
    generator = torch.Generator().manual_seed(seed)
    mu_q, mu_k = torch.randn(2, d, generator=generator, dtype=torch.float64)
    a, b = torch.randn(2, d, d, generator=generator, dtype=torch.float64)
    cross = a @ b.T  # Cov(q_i, k_j) = sum_l A_il B_jl
    rope = Rope(d, layout=layout)
    distances = torch.tensor([0, 1, 7, 100, 12_345])
    terms = expected_score_terms(mu_q, mu_k, cross, distances, rope=rope)
    second_moment = cross + torch.outer(mu_q, mu_k)
    for i, r in enumerate(distances.tolist()):
        entries = rotation_entries(rope, r)
        assert terms.total[i].item() == pytest.approx(
            float((second_moment * entries).sum()), abs=1e-9
        )
        assert terms.mean[i].item() == pytest.approx(float(mu_q @ entries @ mu_k), abs=1e-9)
    # independent q and k (C = 0) that are not centred: only the mean term, not zero
    independent = expected_score_terms(mu_q, mu_k, torch.zeros(d, d), distances, rope=rope)
    assert bool((independent.covariance == 0).all())
    torch.testing.assert_close(independent.total, rope.score_at_distance(mu_q, mu_k, distances))


@given(half=st.integers(2, 16), layout=layouts, seed=seeds, data=st.data())
def test_means_in_different_pairs_give_a_zero_mean_term_at_every_distance(
    half: int, layout: Layout, seed: int, data: st.DataObject
) -> None:
    """Neither mean is zero, yet independent q and k score 0 on average at every distance:
    mu_q lives on some pairs and mu_k on the others, so m_k = z_k(mu_q) conj(z_k(mu_k)) = 0
    in every pair. (Pair 0 against pair 1 is the smallest case.)"""
    d = 2 * half
    rope = Rope(d, layout=layout)
    query_pairs = sorted(
        data.draw(st.sets(st.integers(0, half - 1), min_size=1, max_size=half - 1))
    )
    key_pairs = [pair for pair in range(half) if pair not in query_pairs]
    generator = torch.Generator().manual_seed(seed)
    mu_q, mu_k = torch.zeros(2, d, dtype=torch.float64)
    for mean, pairs in ((mu_q, query_pairs), (mu_k, key_pairs)):
        dims = pair_dims(rope)[pairs].flatten()
        mean[dims] = torch.randn(len(dims), generator=generator, dtype=torch.float64) + 3.0
    assert mu_q.norm() > 0 and mu_k.norm() > 0
    distances = torch.tensor([0, 1, 2, 7, 100, 12_345, MAX_DISTANCE])
    terms = expected_score_terms(mu_q, mu_k, torch.zeros(d, d), distances, rope=rope)
    assert bool((terms.mean == 0).all()) and bool((terms.total == 0).all())


def test_expected_score_terms_against_monte_carlo() -> None:
    generator = torch.Generator().manual_seed(0)
    d, n = 8, 200_000
    mu_q, mu_k = torch.randn(2, d, generator=generator, dtype=torch.float64)
    a, b = torch.randn(2, d, d, generator=generator, dtype=torch.float64) / 2
    g = torch.randn(n, d, generator=generator, dtype=torch.float64)
    q, k = mu_q + g @ a.T, mu_k + g @ b.T
    distances = torch.arange(0, 40, 3)
    scores = score_at_distance(q, k, distances)  # (n, R)
    terms = expected_score_terms(mu_q, mu_k, a @ b.T, distances)
    z = (scores.mean(0) - terms.total) / (scores.std(0) / math.sqrt(n))
    assert bool((z.abs() < 5).all())


# ---------------------------------------------------------------- bad input


def test_chapter_4_edge_cases() -> None:
    """abel_bound on low precision and mismatched d, distances too far, numpy integers."""
    generator = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 16, generator=generator)
    distances = torch.tensor([0, 5, 1000])
    low = abel_bound(q.bfloat16(), k.bfloat16(), distances)
    exact = abel_bound(q.bfloat16().double(), k.bfloat16().double(), distances)
    torch.testing.assert_close(low, exact)
    assert low.dtype == torch.float64
    with pytest.raises(ValueError, match="same last dimension, got 16 and 8"):
        abel_bound(q, k[:8], distances)
    with pytest.raises(ValueError, match="1e\\+09"):
        roformer_bound(torch.tensor([10**11]), 16)
    with pytest.raises(ValueError, match=r"beyond \+-2\*\*40"):  # no position reaches that far
        roformer_bound(torch.tensor([10**15]), 16)
    assert roformer_bound(torch.tensor([MAX_DISTANCE]), 16).isfinite().all()
    torch.testing.assert_close(peaked_key(q, np.int64(7)), peaked_key(q, 7))
    torch.testing.assert_close(peaked_key(q, torch.tensor(7)), peaked_key(q, 7))
    with pytest.raises(ValueError, match="cross_covariance"):
        expected_score_terms(q, k, torch.zeros(8, 8), distances)


def test_expected_score_terms_refuses_a_covariance_that_is_not_a_float_tensor() -> None:
    mean = torch.ones(4)
    rows = [[0.0] * 4] * 4
    with pytest.raises(TypeError, match=r"cross_covariance must be a torch\.Tensor, got list"):
        expected_score_terms(mean, mean, rows, torch.arange(3))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cross_covariance must have a floating dtype"):
        expected_score_terms(mean, mean, torch.zeros(4, 4, dtype=torch.long), torch.arange(3))


def test_bad_input_is_refused() -> None:
    with pytest.raises(TypeError, match="distances"):
        roformer_bound(torch.tensor([1.5]), 8)
    with pytest.raises(ValueError, match="distances"):
        roformer_bound(torch.tensor([-1]), 8)
    with pytest.raises(ValueError, match="d must be a positive even"):
        roformer_bound(torch.tensor([1]), 7)
    with pytest.raises(TypeError, match="q must be a torch"):
        abel_bound([1.0, 2.0], torch.ones(2), torch.arange(3))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="distances"):
        roformer_bound([1, 2], 8)  # type: ignore[arg-type]
    q = torch.ones(8)
    with pytest.raises(TypeError, match="r must be an int"):
        peaked_key(q, 2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="r must be an int"):
        peaked_key(q, True)
    with pytest.raises(ValueError, match="r must be >= 0"):
        peaked_key(q, -3)
    with pytest.raises(ValueError, match="zero vector"):
        peaked_key(torch.zeros(2, 8), 3)
    with pytest.raises(ValueError, match="even"):
        peaked_key(torch.ones(7), 3)
    with pytest.raises(TypeError, match="q"):
        peaked_key(torch.ones(8, dtype=torch.long), 3)
    with pytest.raises(ValueError, match="build Rope\\(8"):
        peaked_key(q, 3, rope=Rope(16))
    with pytest.raises(ValueError, match="correlation"):
        monte_carlo_score(8, torch.arange(3), correlation=1.5)
    with pytest.raises(ValueError, match="samples"):
        monte_carlo_score(8, torch.arange(3), samples=1)
    with pytest.raises(ValueError, match="context"):
        attention_by_distance(q, q, 0)
    with pytest.raises(ValueError, match="near"):
        near_minus_far(torch.zeros(5), (0, 5), (1, 2))
    tokens = torch.zeros(1, 10, dtype=torch.long)
    with pytest.raises(ValueError, match="max_distance"):
        distance_profile(small_model(), tokens, max_distance=10)
    with pytest.raises(ValueError, match="position='rope'"):
        distance_profile(small_model(position="none"), tokens)
    with pytest.raises(ValueError, match="rope='qk'"):
        distance_profile(small_model(placement="vo"), tokens)
    with pytest.raises(TypeError, match="tokens"):
        distance_profile(small_model(), torch.zeros(1, 10))
