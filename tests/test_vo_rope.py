"""Chapter 6 helpers: shared keys and values, cache sizes, Kendall tau and ranks,
the MarkerDistance task and what reading_stats measures on a model."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import torch
from helpers import random_features
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons.attention import PLACEMENTS, RELATIVE_PLACEMENTS, Placement, attention
from rope_lessons.experiments import T_QUANTILE_975, make_run
from rope_lessons.model import Block, ModelConfig
from rope_lessons.rope import Layout, Rope, rotation_matrix
from rope_lessons.synthetic import IGNORE, CopyAtLag, MarkerDistance, batch_sampler
from rope_lessons.vo_rope import (
    READ_BATCH,
    SU_2025_LOSSES,
    SU_2025_TIERS,
    WITHOUT_VALUE_TURN,
    bootstrap_kendall_tau,
    cache_bytes_per_token,
    decode_with_one_cached_vector,
    kendall_tau,
    kendall_tau_tail,
    key_and_value_streams,
    noise_tiers,
    rank_pairs,
    ranks,
    reading_stats,
    shift_change,
    stored_angles,
    trained_angles,
)

B, H, T, D = 2, 4, 9, 8

# ---------------------------------------------------------------- shared K = V


def shared_inputs(heads_c: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    q = random_features(B, H, T, D, seed=1)
    c = random_features(B, heads_c, T, D, seed=2)
    return q, c


@pytest.mark.parametrize("rope", PLACEMENTS)
def test_sharing_survives_exactly_when_keys_and_values_turn_together(rope: Placement) -> None:
    q, c = shared_inputs()
    keys, values = key_and_value_streams(q, c, placement=rope)
    shared = torch.equal(keys, values)
    assert shared == (("k" in rope) == ("v" in rope))  # nope and o contain neither


@pytest.mark.parametrize("rope", PLACEMENTS)
def test_only_relative_placements_survive_a_shift_with_shared_kv(rope: Placement) -> None:
    q, c = shared_inputs(heads_c=H)
    change = shift_change(q, c, c, placement=rope, shift=37)
    if rope in RELATIVE_PLACEMENTS:
        assert change < 1e-10
    else:
        assert change > 1e-3


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("heads_c", [1, H])
def test_decoding_from_one_cached_vector_is_qkvo_attention(layout: Layout, heads_c: int) -> None:
    q, c = shared_inputs(heads_c)
    spec = Rope(D, layout=layout)
    decoded = decode_with_one_cached_vector(q, c, rope=spec)
    shared = c.expand(B, H, T, D)
    full = attention(q, shared, shared, placement="qkvo", rope=spec)
    torch.testing.assert_close(decoded, full, rtol=1e-10, atol=1e-10)
    # and it is not plain shared attention without positions
    plain = attention(q, c.expand(B, H, T, D), c.expand(B, H, T, D), placement="nope")
    assert (decoded - plain).abs().max() > 1e-2


def test_shared_kv_inputs_are_checked() -> None:
    q, c = shared_inputs()
    with pytest.raises(TypeError, match=r"c must be a torch\.Tensor"):
        key_and_value_streams(q, c.numpy(), placement="qk")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="q and c must agree"):
        decode_with_one_cached_vector(q, c[..., :4])
    with pytest.raises(ValueError, match="c must be a floating tensor"):
        decode_with_one_cached_vector(q, c[0])
    with pytest.raises(TypeError, match="shift must be an int"):
        shift_change(q, c, c, placement="qk", shift=1.5)  # type: ignore[arg-type]


# ------------------------------------------------------------------- the cache


def test_cache_bytes_by_hand() -> None:
    # Llama-2-7B-like MHA, bf16: 32 layers x (32 keys + 32 values) x 128 x 2 bytes
    assert (
        cache_bytes_per_token(
            n_layers=32, vectors_per_layer=64, vector_dim=128, bytes_per_element=2
        )
        == 32 * 64 * 128 * 2
    )
    assert (
        cache_bytes_per_token(n_layers=1, vectors_per_layer=1, vector_dim=576, bytes_per_element=2)
        == 1152
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [("n_layers", 0), ("vectors_per_layer", -1), ("vector_dim", 2.0), ("bytes_per_element", True)],
)
def test_cache_bytes_rejects_bad_sizes(name: str, value: object) -> None:
    sizes: dict[str, object] = {
        "n_layers": 2,
        "vectors_per_layer": 2,
        "vector_dim": 8,
        "bytes_per_element": 2,
    }
    sizes[name] = value
    with pytest.raises((TypeError, ValueError), match=name):
        cache_bytes_per_token(**sizes)  # type: ignore[arg-type]


# ---------------------------------------------------------------- Kendall tau


@pytest.mark.parametrize(
    ("x", "y", "tau"),
    [
        ([1, 2, 3], [1, 2, 3], 1.0),
        ([1, 2, 3], [3, 2, 1], -1.0),
        ([1, 2, 3], [1, 3, 2], 1 / 3),  # pairs (1,2) and (1,3) agree, (2,3) does not
        ([1, 2, 3, 4], [2, 1, 4, 3], 1 / 3),  # 4 concordant, 2 discordant of 6
        # tau-b with a tie in y: n_c=2, n_d=0, untied pairs 3 in x and 2 in y
        ([1, 2, 3], [1, 2, 2], 2 / math.sqrt(6)),
    ],
)
def test_kendall_tau_hand_cases(x: list[float], y: list[float], tau: float) -> None:
    assert kendall_tau(x, y) == pytest.approx(tau, abs=1e-12)


def test_kendall_tau_counts_pairs_like_a_loop() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=9), rng.normal(size=9)
    concordant = discordant = 0
    for i, j in itertools.combinations(range(9), 2):
        product = (x[i] - x[j]) * (y[i] - y[j])
        concordant += product > 0
        discordant += product < 0
    assert kendall_tau(x, y) == pytest.approx((concordant - discordant) / 36, abs=1e-12)


whole = st.integers(-1000, 1000)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(whole, whole), min_size=2, max_size=12, unique_by=(lambda t: t[0], lambda t: t[1])
    )
)
def test_kendall_tau_properties(pairs: list[tuple[int, int]]) -> None:
    x = np.array([a for a, _ in pairs])
    y = np.array([b for _, b in pairs])
    tau = kendall_tau(x, y)
    assert -1.0 - 1e-12 <= tau <= 1.0 + 1e-12
    assert kendall_tau(y, x) == pytest.approx(tau, abs=1e-12)  # symmetric
    assert kendall_tau(x, -y) == pytest.approx(-tau, abs=1e-12)  # reversing one flips it
    assert kendall_tau(np.exp(x / 1000), y) == pytest.approx(tau, abs=1e-12)  # ranks only
    assert kendall_tau(x, x) == pytest.approx(1.0)
    order = np.argsort(x)
    assert kendall_tau(x[order], y[order]) == pytest.approx(tau, abs=1e-12)  # order of items


def test_kendall_tau_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="same length"):
        kendall_tau([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least two"):
        kendall_tau([1], [1])
    with pytest.raises(ValueError, match="constant"):
        kendall_tau([1, 1, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="finite"):
        kendall_tau([1, float("nan"), 3], [1, 2, 3])
    with pytest.raises(ValueError, match="one-dimensional"):
        # deliberately ill-typed: the runtime check is under test
        kendall_tau([[1, 2]], [[1, 2]])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="x must be a sequence"):
        kendall_tau("abc", [1, 2, 3])  # type: ignore[arg-type]


def test_ranks_average_ties_and_match_sorting() -> None:
    assert ranks([2.7, 2.9, 2.7, 2.5]).tolist() == [2.5, 4.0, 2.5, 1.0]
    values = np.random.default_rng(1).normal(size=20)
    assert (ranks(values) == np.argsort(np.argsort(values)) + 1).all()


def test_tau_tail_matches_enumeration() -> None:
    """The exact null tail equals a count over all 7! orders."""
    n = 7
    reference = list(range(n))
    taus = np.array([kendall_tau(reference, perm) for perm in itertools.permutations(reference)])
    for tau in (-1.0, -0.2, 0.0, 1 / 7, 0.5, 1.0):
        assert kendall_tau_tail(tau, n) == pytest.approx(float((taus >= tau - 1e-12).mean()))
    with pytest.raises(ValueError, match="tau"):
        kendall_tau_tail(1.5, n)
    with pytest.raises(ValueError, match="n must be >= 2"):
        kendall_tau_tail(0.0, 1)


def _exact_tau_tail(tau: float, n: int) -> Fraction:
    """P(tau >= ``tau``) for ``n`` items from the Mahonian numbers, in exact integers."""
    pairs = n * (n - 1) // 2
    most = math.floor((1 - Fraction(tau).limit_denominator()) * pairs / 2)  # tau >= t: I <= most
    counts = [1]  # permutations of 1 item by number of inversions, cut at `most`
    for size in range(2, n + 1):  # inserting item `size` adds 0 .. size-1 inversions
        prefix = [0, *itertools.accumulate(counts)]
        top = min(most, len(counts) - 1 + size - 1)
        counts = [
            prefix[min(i, len(counts) - 1) + 1] - prefix[max(0, i - size + 1)]
            for i in range(top + 1)
        ]
    return Fraction(sum(counts), math.factorial(n))


def test_tau_tail_for_many_items_matches_exact_integers() -> None:
    """n! overflows a float from n = 171: the tail must still be a probability, and exact."""
    assert _exact_tau_tail(0.5, 9) == Fraction(13_640, 362_880)  # the 7! check's method, n = 9
    assert kendall_tau_tail(0.5, 9) == pytest.approx(0.0376, abs=5e-5)
    for tau in (0.5, 0.1, -0.05):
        exact = float(_exact_tau_tail(tau, 200))
        assert kendall_tau_tail(tau, 200) == pytest.approx(exact, rel=1e-9, abs=0)
    # the normal approximation, var(tau) = 2(2n+5) / (9n(n-1)), is good near the centre
    sd = math.sqrt(2 * (2 * 200 + 5) / (9 * 200 * 199))
    assert kendall_tau_tail(0.1, 200) == pytest.approx(
        0.5 * math.erfc(0.1 / sd / math.sqrt(2)), rel=0.05
    )


def test_bootstrap_with_identical_seeds_has_no_spread() -> None:
    reference = list(SU_2025_LOSSES.values())
    losses = np.tile(np.array(reference)[::-1], (3, 1))  # every seed: the reversed order
    taus = bootstrap_kendall_tau(losses, reference, resamples=50, seed=0)
    assert taus.shape == (50,)
    assert np.allclose(taus, -1.0)
    noisy = losses + np.random.default_rng(0).normal(scale=0.05, size=losses.shape)
    spread = bootstrap_kendall_tau(noisy, reference, resamples=200, seed=0)
    assert spread.std() > 0
    with pytest.raises(ValueError, match="columns"):
        bootstrap_kendall_tau(losses[:, :4], reference, resamples=5, seed=0)


def test_bootstrap_draws_whose_means_all_tie_have_tau_zero() -> None:
    """Seed 0 ties every placement: a draw of seed 0 alone has constant means, orders no
    pair, and gets tau 0 instead of aborting the bootstrap; the other draws order all."""
    losses = np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 3.0]])  # (S, P)
    taus = bootstrap_kendall_tau(losses, [1.0, 2.0, 3.0], resamples=200, seed=0)
    assert taus.shape == (200,)
    assert set(taus.tolist()) == {0.0, 1.0}  # both kinds of draw occur (each about 1/4, 3/4)
    rng = np.random.default_rng(0)  # the same draws: tau 0 exactly where only seed 0 is picked
    only_seed_0 = (rng.integers(0, 2, size=(200, 2)) == 0).all(axis=1)
    assert ((taus == 0.0) == only_seed_0).all()


def test_bootstrap_refuses_a_constant_reference_and_non_finite_losses() -> None:
    losses = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.5]])
    with pytest.raises(ValueError, match="reference must not be constant"):
        bootstrap_kendall_tau(losses, [2.0, 2.0, 2.0], resamples=5, seed=0)
    with pytest.raises(ValueError, match="at least two placements, got 1"):
        bootstrap_kendall_tau(losses[:, :1], [2.0], resamples=5, seed=0)
    with pytest.raises(ValueError, match="at least two placements, got 0"):
        bootstrap_kendall_tau(losses[:, :0], [], resamples=5, seed=0)
    losses[1, 1] = math.nan
    with pytest.raises(ValueError, match="losses must be finite"):
        bootstrap_kendall_tau(losses, [1.0, 2.0, 3.0], resamples=5, seed=0)


def test_su_table_covers_the_nine_placements_in_his_order() -> None:
    assert set(SU_2025_LOSSES) == set(PLACEMENTS)
    assert list(SU_2025_LOSSES) == sorted(SU_2025_LOSSES, key=SU_2025_LOSSES.__getitem__)
    assert list(SU_2025_TIERS) == list(SU_2025_LOSSES)  # his tiers follow his losses
    assert list(SU_2025_TIERS.values()) == sorted(SU_2025_TIERS.values())


def test_rank_pairs_by_hand() -> None:
    names = ["a", "b", "c"]
    reference = {"a": 1.0, "b": 2.0, "c": 3.0}
    tiers = {"a": 1, "b": 1, "c": 2}
    # b - a = (0.2, 0.2, 0.2): no spread, resolved, same direction as the reference
    # c - a = (-1, -1, -1): resolved against the reference; c - b: likewise
    losses = np.array([[1.0, 2.0, 3.0], [1.2, 2.2, 3.2], [0.0, 1.0, 2.0]])
    pairs = {(p.first, p.second): p for p in rank_pairs(losses, names, reference, tiers)}
    assert list(pairs) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert pairs["a", "b"].difference == pytest.approx(0.2)
    assert pairs["a", "b"].verdict == "published tie" and not pairs["a", "b"].discordant
    assert pairs["a", "c"].verdict == "disagree" and pairs["a", "c"].discordant
    assert pairs["b", "c"].reference_difference == pytest.approx(1.0)
    # noisy differences: the paired t interval, checked against its formula
    noisy = np.array([[1.0, 1.0, 1.0], [1.1, 0.9, 1.3], [5.0, 5.0, 5.0]])
    gap = next(p for p in rank_pairs(noisy, names, reference, tiers) if p.second == "b")
    assert gap.half_width == pytest.approx(T_QUANTILE_975[1] * 0.2 / math.sqrt(3))
    assert not gap.resolved and gap.verdict == "tie on both sides"
    one_seed = rank_pairs(losses[:, :1], names, reference, tiers)
    assert all(math.isinf(p.half_width) and not p.resolved for p in one_seed)
    with pytest.raises(ValueError, match="shape"):
        rank_pairs(losses[:2], names, reference, tiers)
    with pytest.raises(ValueError, match="no published"):
        rank_pairs(losses, names, {"a": 1.0, "b": 2.0}, tiers)
    with pytest.raises(ValueError, match="at least one seed"):  # no NaN means and warnings
        rank_pairs(losses[:, :0], names, reference, tiers)


def test_noise_tiers_split_where_neighbours_separate() -> None:
    names = ["a", "b", "c", "d"]
    losses = np.array(
        [[2.0, 2.1, 1.9], [1.0, 1.1, 0.9], [1.02, 1.0, 1.01], [3.0, 3.0, 3.1]]
    )  # b and c tie, then a, then d
    assert noise_tiers(losses, names) == [["b", "c"], ["a"], ["d"]]
    assert noise_tiers(losses[:, :1], names) == [["b", "c", "a", "d"]]  # one seed: no tiers


def test_noise_tiers_refuse_non_finite_and_empty_losses() -> None:
    """A NaN mean would be sorted silently (last, by argsort); no placement, or no seed,
    leaves nothing to rank."""
    with pytest.raises(ValueError, match="losses must be finite"):
        noise_tiers(np.array([[1.0, math.nan], [2.0, 2.1]]), ["a", "b"])
    with pytest.raises(ValueError, match="at least one placement"):
        noise_tiers(np.zeros((0, 3)), [])
    with pytest.raises(ValueError, match="at least one seed"):
        noise_tiers(np.zeros((2, 0)), ["a", "b"])


# --------------------------------------------------------------- MarkerDistance


def test_marker_distance_targets_are_the_steps_since_the_marker() -> None:
    task = MarkerDistance(max_distance=5, n_fillers=3)
    tokens, targets = task.sample(64, 12, torch.Generator().manual_seed(0))
    assert tokens.shape == targets.shape == (64, 12)
    assert ((tokens == task.MARKER).sum(1) == 1).all()  # exactly one marker per row
    assert tokens.max() <= task.n_fillers  # answers never appear as input
    for row_tokens, row_targets in zip(tokens, targets, strict=True):
        marker = int((row_tokens == task.MARKER).nonzero())
        for t in range(12):
            distance = t - marker
            expected = task.n_fillers + distance if 1 <= distance <= 5 else IGNORE
            assert int(row_targets[t]) == expected
    assert int(targets.max()) < task.vocab_size
    assert task.chance_accuracy == pytest.approx(1 / 5)


def test_marker_distance_splits_and_bad_input() -> None:
    task = MarkerDistance()
    train = batch_sampler(task, 8, 20, seed=3)()
    val = batch_sampler(task, 8, 20, seed=3, split="val")()
    assert not torch.equal(train[0], val[0])
    with pytest.raises(ValueError, match="seq_len"):
        task.sample(4, 1, torch.Generator())
    with pytest.raises(ValueError, match="max_distance"):
        MarkerDistance(max_distance=0).sample(4, 8, torch.Generator())


# ------------------------------------------------------------------ reading_stats


def untrained_reading_stats(label: str, **fields: Any) -> dict[str, float]:
    """:func:`reading_stats` of an untrained two-head model with the model ``fields``."""
    torch.manual_seed(0)
    run = make_run(
        label,
        CopyAtLag(lag=2),
        train_len=12,
        eval_lens=(12,),
        steps=1,
        dim=16,
        n_heads=2,
        **fields,
    )
    return reading_stats(run.model.build(), run, torch.device("cpu"))


@pytest.mark.parametrize("rope", ["qk", "vo"])
def test_reading_stats_on_an_untrained_model(rope: Placement) -> None:
    stats = untrained_reading_stats(rope, placement=rope)
    assert 0 < stats["diagonal_weight"] < 1
    assert 0 < stats["mean_distance"] < 11
    turns = rope in WITHOUT_VALUE_TURN
    assert ("turn_cosine" in stats) == turns
    if turns:
        assert -1 <= stats["turn_cosine_fast"] <= stats["turn_cosine_slow"] + 1e-6
        assert stats["turn_cosine_slow"] > 0.99  # the slowest pair barely turns in 12 tokens
        assert stats["self_cosine_1"] > stats["self_cosine_4"]


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "none"])
def test_reading_stats_without_rope_reads_the_weights_only(position: str) -> None:
    """Absolute positions or none: where attention reads is defined, value turns are not."""
    stats = untrained_reading_stats(position, position=position)
    assert set(stats) == {"diagonal_weight", "mean_distance"}
    assert 0 < stats["diagonal_weight"] < 1 and 0 < stats["mean_distance"] < 11


def test_reading_stats_weights_match_the_attention_maps() -> None:
    """diagonal_weight is the mean of the attention maps' diagonals, computed independently."""
    torch.manual_seed(1)
    run = make_run(
        "v", CopyAtLag(lag=1), train_len=10, eval_lens=(10,), steps=1, dim=16, placement="v"
    )
    model = run.model.build()
    stats = reading_stats(model, run, torch.device("cpu"))
    tokens, _ = batch_sampler(run.data, READ_BATCH, 10, seed=10, split="val")()
    with torch.no_grad():
        _, maps = model.attention_maps(tokens)
    diagonal = sum(float(w.diagonal(dim1=-2, dim2=-1).mean()) for w in maps) / len(maps)
    assert stats["diagonal_weight"] == pytest.approx(diagonal, rel=1e-5)


def test_uniform_vo_attention_over_equal_values_is_the_mean_of_turned_copies() -> None:
    """The decay reading of chapter 6: o_m = (1/(m+1)) sum_{r<=m} R_{-r} v, shorter than v."""
    length, dim = 12, 8
    value = random_features(dim, seed=5)
    zero = torch.zeros(1, 1, length, dim, dtype=torch.float64)
    out = attention(zero, zero, value.expand(1, 1, length, dim), placement="vo")[0, 0]  # (T, d)
    for m in range(length):
        turned = torch.stack([rotation_matrix(-r, dim) @ value for r in range(m + 1)])
        torch.testing.assert_close(out[m], turned.mean(0), rtol=1e-12, atol=1e-12)
    assert out[-1].norm() < value.norm() - 0.05  # the turned copies partly cancel


def test_trained_angles_are_the_models_frequencies_and_read_back() -> None:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=7, dim=32, n_heads=4, placement="vo", learned_angles=True)
    model = config.build()
    with torch.no_grad():
        for i, block in enumerate(model.blocks):
            assert isinstance(block, Block) and block.attn.theta is not None
            block.attn.theta.mul_(1.0 + i)  # layer 1's angles doubled
    run = make_run("vo", CopyAtLag(lag=3), train_len=8, eval_lens=(8,), steps=1)
    angles = stored_angles(trained_angles(model, run, torch.device("cpu")))
    ladder = Rope(8).theta
    torch.testing.assert_close(angles, torch.stack([ladder, 2 * ladder]), atol=1e-6, rtol=1e-6)
    fixed = ModelConfig(vocab_size=7, dim=32, n_heads=4, nope_layers=(0,)).build()
    fixed_angles = stored_angles(trained_angles(fixed, run, torch.device("cpu")))
    torch.testing.assert_close(fixed_angles, ladder[None])  # layer 0 rotates nothing
    with pytest.raises(ValueError, match="no stored angles"):
        stored_angles({"loss": 1.0})
