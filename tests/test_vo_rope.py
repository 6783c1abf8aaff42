"""Chapter 6 helpers: shared keys and values, cache sizes, Su's published ranking,
the MarkerDistance task, what reading_stats measures on a model, and where position
reaches the attention scores (key_position_sensitivity)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from helpers import random_features

from rope_lessons._checks import Layout
from rope_lessons.chapters.vo_rope import (
    READ_BATCH,
    SU_2025_LOSSES,
    SU_2025_TIERS,
    WITHOUT_VALUE_TURN,
    cache_bytes_per_token,
    decode_with_one_cached_vector,
    key_and_value_streams,
    key_position_sensitivity,
    key_position_stats,
    reading_stats,
    shift_change,
    stored_angles,
    trained_angles,
)
from rope_lessons.evidence.runs import make_run
from rope_lessons.rope.forms import rotation_matrix
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.model import Block, ModelConfig, TinyTransformer
from rope_lessons.toy.rotary_attention import PLACEMENTS, RELATIVE_PLACEMENTS, Placement, attention
from rope_lessons.toy.synthetic import IGNORE, CopyAtLag, MarkerDistance, batch_sampler

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


# ---------------------------------------------------------------- Su's ranking


def test_su_table_covers_the_nine_placements_in_his_order() -> None:
    assert set(SU_2025_LOSSES) == set(PLACEMENTS)
    assert list(SU_2025_LOSSES) == sorted(SU_2025_LOSSES, key=SU_2025_LOSSES.__getitem__)
    assert list(SU_2025_TIERS) == list(SU_2025_LOSSES)  # his tiers follow his losses
    assert list(SU_2025_TIERS.values()) == sorted(SU_2025_TIERS.values())


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


# ---------------------------------------------------------------- where position reaches the scores


def key_test_model(placement: Placement, n_layers: int = 2) -> TinyTransformer:
    torch.manual_seed(3)
    if placement == "nope":
        return ModelConfig(
            vocab_size=11, dim=32, n_heads=2, n_layers=n_layers, position="none"
        ).build()
    return ModelConfig(
        vocab_size=11, dim=32, n_heads=2, n_layers=n_layers, placement=placement
    ).build()


def key_test_inputs(batch: int = 3, length: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(4)
    tokens = torch.randint(0, 11, (batch, length), generator=generator)
    permutation = torch.stack([torch.randperm(length, generator=generator) for _ in range(batch)])
    return tokens, permutation


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_the_first_layer_sees_the_keys_positions_only_when_keys_turn(placement: Placement) -> None:
    """(R_m q_m)^T k_n: q, v, o alone leave layer 1 exactly as blind to a key's place as NoPE."""
    model = key_test_model(placement)
    tokens, permutation = key_test_inputs()
    with torch.no_grad():
        first, second = key_position_sensitivity(model, tokens, permutation)
        unmoved = key_position_sensitivity(model, tokens, torch.arange(tokens.shape[1]))
    assert unmoved == [0.0, 0.0]
    if "k" in placement:
        assert first > 0.01
    else:
        assert first == 0.0
    if placement == "nope":
        assert second == 0.0
    else:  # the first layer wrote positions into the tokens (q: through which keys it read)
        assert second > 1e-4


def test_key_position_sensitivity_by_hand() -> None:
    """One k-only layer: softmax rows of q_m . R_{pi(n)} k_n / sqrt(D) against q_m . R_n k_n."""
    model = key_test_model("k", n_layers=1)
    tokens, permutation = key_test_inputs(batch=2, length=6)
    with torch.no_grad():
        (found,) = key_position_sensitivity(model, tokens, permutation)
        block = model.blocks[0]
        assert isinstance(block, Block)
        q, k, _ = (t.double() for t in block.attn.project(block.ln_attn(model.embed(tokens))))
    dim, length = q.shape[-1], tokens.shape[1]
    future = torch.ones(length, length, dtype=torch.bool).triu(1)

    def rows(b: int, positions: torch.Tensor) -> torch.Tensor:  # (H, T, T), sequence b
        turned = torch.stack(  # (T, D, H): key n of every head turned by R_{positions[n]}
            [rotation_matrix(int(p), dim) @ k[b, :, n].T for n, p in enumerate(positions)]
        )
        scores = torch.einsum("htd,ndh->htn", q[b], turned) / math.sqrt(dim)
        return scores.masked_fill(future, float("-inf")).softmax(-1)

    total = 0.0
    for b in range(tokens.shape[0]):
        moved, plain = rows(b, permutation[b]), rows(b, torch.arange(length))
        total += float(0.5 * (moved - plain).abs().sum(-1).mean()) / tokens.shape[0]
    assert found == pytest.approx(total, rel=1e-4)
    assert found > 0.01


def test_key_position_stats_names_each_layer_and_refuses_what_it_cannot_read() -> None:
    run = make_run(
        "k", CopyAtLag(lag=1), train_len=10, eval_lens=(10,), steps=1, dim=32, placement="k"
    )
    with torch.no_grad():
        stats = key_position_stats(run.model.build(), run, torch.device("cpu"))
    assert set(stats) == {"key_tv/0", "key_tv/1"} and stats["key_tv/0"] > 0
    tokens, permutation = key_test_inputs()
    with pytest.raises(ValueError, match="permutation"):
        key_position_sensitivity(key_test_model("k"), tokens, permutation.clamp(max=3))
    learned = ModelConfig(vocab_size=11, dim=32, n_heads=2, position="learned").build()
    with pytest.raises(ValueError, match="rotation only"):
        key_position_sensitivity(learned, tokens, permutation)
