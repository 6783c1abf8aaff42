"""Chapter 8's benchmark and the attention it needs: copied segments in text, local windows
and chunks, Llama 4's QK-norm and temperature, scores per band."""

from __future__ import annotations

import itertools
import math
import re

import pytest
import torch
from helpers import random_features
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons.chapters.extension import extended, fine_tune
from rope_lessons.chapters.long_context import (
    CHANCE_ACCURACY,
    CHANCE_LOSS,
    LETTERS,
    CopyInText,
    Probe,
    TokenScores,
    attention_beyond,
    copy_scores,
    source_attention,
    text_band_losses,
    token_scores,
)
from rope_lessons.sweeps.ch08_benchmark import with_fields
from rope_lessons.toy.model import ModelConfig, TinyTransformer, llama4_temperature, rms_normalised
from rope_lessons.toy.rotary_attention import Local, attention
from rope_lessons.toy.synthetic import IGNORE

CORPUS = CopyInText(segment=4)


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- the task ------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(seq_len=st.integers(8, 200), seed=st.integers(0, 10_000))
def test_every_pair_repeats_its_letters_distance_later(seq_len: int, seed: int) -> None:
    """In training windows: max(1, T // pair_every) pairs per window (as many as found
    room), segments that do not overlap, the second copy equal to the first, its letters
    after the cue scored, the first copy's letters and the cue not."""
    data = CopyInText(segment=4, pair_every=16)
    tokens, targets = data.sample(3, seq_len, generator(seed))
    assert tokens.shape == targets.shape == (3, seq_len)
    # the same draws, step by step: the windows, then the places of the pairs
    replay = generator(seed)
    data._windows(3, seq_len, replay, "train")
    pairs = data._place(3, seq_len, replay)
    wanted = max(1, seq_len // 16)
    letters = set(data.encode(LETTERS).tolist())
    for row in range(3):
        mine = pairs[pairs[:, 0] == row]
        assert 1 <= len(mine) <= wanted
        covered = torch.zeros(seq_len, dtype=torch.long)
        for _, first, distance in mine.tolist():
            one, two = slice(first, first + 4), slice(first + distance, first + distance + 4)
            covered[one] += 1
            covered[two] += 1
            assert torch.equal(tokens[row, one], tokens[row, two])
            assert set(tokens[row, one].tolist()) <= letters
            assert bool((targets[row, first + distance : first + distance + 3] != IGNORE).all())
            assert int(targets[row, first + distance - 1]) == IGNORE  # the cue
            assert bool((targets[row, max(first - 1, 0) : first + 3] == IGNORE).all())
        assert int(covered.max()) == 1  # no two segments overlap
    # where a target is scored, it is the next token
    scored = targets[:, :-1] != IGNORE
    assert torch.equal(targets[:, :-1][scored], tokens[:, 1:][scored])


def test_a_probe_puts_the_second_copy_at_the_end_at_its_distance() -> None:
    probe = CORPUS.probe(16, 64, (10, 30), seed=3)
    s = CORPUS.segment
    assert probe.tokens.shape == (16, 64) and probe.distance.shape == (16,)
    assert bool(((probe.distance >= 10) & (probe.distance < 30)).all())
    for row in range(16):
        d = int(probe.distance[row])
        second = probe.tokens[row, 64 - s :]
        first = probe.tokens[row, 64 - s - d : 64 - d]
        assert torch.equal(first, second)
        # the copied targets are letters 2..S of the second copy, and they equal the tokens after
        scored = probe.copied[row].nonzero().flatten()
        assert scored.tolist() == list(range(64 - s, 63))
        assert torch.equal(probe.targets[row, scored], probe.tokens[row, scored + 1])
        # the first copy's letters and the second copy's cue are not scored
        assert bool((probe.targets[row, 64 - s - d - 1 : 64 - d - 1] == IGNORE).all())
        assert int(probe.targets[row, 64 - s - 1]) == IGNORE


def test_probes_repeat_and_differ_by_seed() -> None:
    one, again, other = (CORPUS.probe(8, 64, (10, 30), seed=s) for s in (1, 1, 2))
    assert torch.equal(one.tokens, again.tokens) and torch.equal(one.targets, again.targets)
    assert not torch.equal(one.tokens, other.tokens)


def test_training_windows_repeat_for_a_seed() -> None:
    first = CORPUS.sample(4, 48, generator(5))
    second = CORPUS.sample(4, 48, generator(5))
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


def test_longer_windows_carry_more_pairs() -> None:
    data = CopyInText(segment=16)
    _, short = data.sample(8, 64, generator(0))
    _, long = data.sample(8, 512, generator(0))
    assert int((short == IGNORE).sum()) <= 8 * 17
    assert int((long == IGNORE).sum()) > 8 * 17 * 6  # about eight pairs per window of 512


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"segment": 1}, ValueError, "segment must be >= 2"),
        ({"segment": 2.0}, TypeError, "segment must be an int"),
        ({"pair_every": 0}, ValueError, "pair_every must be >= 1"),
    ],
)
def test_bad_task_fields_are_refused(fields: dict[str, object], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        CopyInText(**fields)  # type: ignore[arg-type]


def test_bad_lengths_and_distances_are_refused() -> None:
    with pytest.raises(ValueError, match="seq_len must be >= 8"):
        CORPUS.sample(2, 7, generator())
    with pytest.raises(ValueError, match="distances"):
        CORPUS.probe(2, 64, (2, 10), seed=0)  # shorter than a segment
    with pytest.raises(ValueError, match="distances"):
        CORPUS.probe(2, 64, (10, 62), seed=0)  # the first copy would start before 0
    with pytest.raises(ValueError, match="distances"):
        CORPUS.probe(2, 64, (20, 20), seed=0)


# --- scores --------------------------------------------------------------------------------


class Oracle(torch.nn.Module):
    """Predicts the next token of a probe exactly where it is a copied letter (it is told
    the answers), uniformly elsewhere."""

    def __init__(self, probe: Probe, vocab: int) -> None:
        super().__init__()
        self.probe, self.vocab = probe, vocab
        self.anchor = torch.nn.Parameter(torch.zeros(()))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*tokens.shape, self.vocab)
        rows = (tokens[:, None, :] == self.probe.tokens[None]).all(-1).float().argmax(1)
        copied, targets = self.probe.copied[rows], self.probe.targets[rows]
        logits[copied, targets[copied]] = 100.0
        return logits + self.anchor


def test_scores_split_text_from_copied_letters() -> None:
    probe = CORPUS.probe(12, 64, (10, 30), seed=0)
    scores = token_scores(Oracle(probe, CORPUS.vocab_size), probe, batch_size=5)
    losses = scores.loss
    assert losses.shape == (12, 64) and losses.dtype == torch.float64
    assert bool(losses[probe.targets == IGNORE].isnan().all())
    assert not bool(scores.hit[probe.targets == IGNORE].any())
    copied = copy_scores(scores, probe)
    assert copied.loss == pytest.approx(0.0, abs=1e-6)
    assert copied.accuracy == 1.0 and copied.below_chance == 1.0
    uniform = math.log(CORPUS.vocab_size)
    assert text_band_losses(losses, probe, [(0, 32), (32, 64)]) == pytest.approx([uniform] * 2)
    assert pytest.approx(math.log(26)) == CHANCE_LOSS and uniform > CHANCE_LOSS
    assert pytest.approx(1 / 26) == CHANCE_ACCURACY


def test_accuracy_counts_copies_that_a_few_confident_errors_hide_from_the_mean_loss() -> None:
    """Two of three copied letters right at 0.1 nats, one wrong at 20 nats: mean loss 6.7 >
    log 26, yet two thirds are copied."""
    probe = CORPUS.probe(1, 64, (10, 30), seed=0)
    n = int(probe.copied.sum())
    assert n == 3  # segment 4: its last three letters
    loss = torch.full((1, 64), 0.1, dtype=torch.float64)
    hit = probe.copied.clone()
    wrong = torch.nonzero(probe.copied[0])[:1, 0]
    loss[0, wrong], hit[0, wrong] = 20.0, False
    scores = copy_scores(TokenScores(loss, hit), probe)
    assert scores.loss > CHANCE_LOSS
    assert scores.accuracy == pytest.approx(2 / 3)
    assert scores.below_chance == pytest.approx(scores.accuracy)


def test_scores_of_another_shape_are_refused() -> None:
    probe = CORPUS.probe(2, 64, (10, 30), seed=0)
    wrong = torch.zeros(2, 63, dtype=torch.float64)
    with pytest.raises(ValueError, match="probe's shape"):
        copy_scores(TokenScores(wrong, wrong.bool()), probe)
    with pytest.raises(ValueError, match="probe's shape"):
        text_band_losses(wrong, probe, [(0, 32)])


def test_source_attention_reads_the_weight_on_the_first_copy() -> None:
    """A head that puts all its weight on the letter after the matching one scores 1; a head
    that looks at its own position scores 0."""
    probe = CORPUS.probe(6, 64, (10, 30), seed=1)
    batch, length = probe.tokens.shape
    induction = torch.zeros(batch, length, length, dtype=torch.float64)
    positions = torch.arange(length)
    for b in range(batch):
        source = (positions + 1 - probe.distance[b]).clamp(min=0)
        induction[b, positions, source] = 1.0
    own = torch.eye(length, dtype=torch.float64).expand(batch, length, length)
    maps = [torch.stack([induction, own], 1), torch.stack([own, induction], 1)]  # (B, 2, T, T)
    assert torch.equal(
        source_attention(maps, probe), torch.tensor([[1.0, 0.0], [0.0, 1.0]]).double()
    )
    with pytest.raises(ValueError, match="over the probe's 6 windows of 64"):
        source_attention([induction[:, None, :32, :32]], probe)


@given(reach=st.integers(1, 15), length=st.integers(2, 16))
def test_attention_beyond_uniform_causal_attention(reach: int, length: int) -> None:
    """Uniform causal attention: the query at t spreads 1/(t+1) over its keys, so the mass
    on keys ``reach`` or more back is (t + 1 - reach)/(t + 1)."""
    if length <= reach:
        with pytest.raises(ValueError, match="T > reach"):
            attention_beyond([torch.ones(1, 1, length, length)], reach)
        return
    causal = torch.tril(torch.ones(length, length, dtype=torch.float64))
    uniform = (causal / causal.sum(-1, keepdim=True)).expand(3, 2, length, length)
    t = torch.arange(reach, length, dtype=torch.float64)
    expected = float(((t + 1 - reach) / (t + 1)).mean())
    got = attention_beyond([uniform, uniform], reach)
    assert got.shape == (2, 2)
    assert torch.allclose(got, torch.full((2, 2), expected, dtype=torch.float64))


def test_a_band_without_text_is_refused() -> None:
    probe = CORPUS.probe(2, 64, (10, 30), seed=0)
    losses = torch.zeros(2, 64, dtype=torch.float64)
    with pytest.raises(ValueError, match="holds no text target"):
        text_band_losses(losses, probe, [(61, 63)])  # only the copy's letters


def test_a_band_that_does_not_fit_the_probe_is_refused() -> None:
    """As band_losses refuses it: a band past T would be silently cut to [start, T)."""
    probe = CORPUS.probe(2, 64, (10, 30), seed=0)
    losses = torch.zeros(2, 64, dtype=torch.float64)
    for start, stop in [(32, 80), (-1, 10), (10, 10)]:
        with pytest.raises(ValueError, match=re.escape(f"band [{start}, {stop}) does not fit 64")):
            text_band_losses(losses, probe, [(0, 32), (start, stop)])


# --- local attention -----------------------------------------------------------------------


def brute_force(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor
) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ v


@settings(max_examples=30, deadline=None)
@given(
    size=st.integers(1, 9),
    kind=st.sampled_from(["window", "chunk"]),
    seq=st.integers(1, 20),
    causal=st.booleans(),
)
def test_local_attention_equals_masking_by_hand(
    size: int, kind: str, seq: int, causal: bool
) -> None:
    q, k, v = random_features(3, 2, 2, seq, 8, seed=size + seq)
    local = Local(size, kind)  # type: ignore[arg-type]
    m = torch.arange(seq)
    if kind == "window":
        allowed = (m[:, None] - m[None]).abs() < size
    else:
        allowed = m[:, None] // size == m[None] // size
    if causal:
        allowed &= m[None] <= m[:, None]
    expected = brute_force(q, k, v, allowed)  # no rotation: placement nope
    fused = attention(q, k, v, placement="nope", causal=causal, local=local)
    out, weights = attention(
        q, k, v, placement="nope", causal=causal, local=local, return_weights=True
    )
    torch.testing.assert_close(fused, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert bool((weights[..., ~allowed] == 0).all())


def test_a_window_as_wide_as_the_sequence_changes_nothing() -> None:
    q, k, v = random_features(3, 2, 2, 10, 8, seed=0)
    torch.testing.assert_close(attention(q, k, v, local=Local(10)), attention(q, k, v))
    torch.testing.assert_close(attention(q, k, v, local=Local(10, "chunk")), attention(q, k, v))
    assert not torch.allclose(attention(q, k, v, local=Local(3)), attention(q, k, v))


def test_a_decode_step_sees_the_window_of_its_own_position() -> None:
    """One query at the end of 12 keys, a window of 4: the same as attending the last 4 keys."""
    q, k, v = random_features(3, 1, 2, 12, 8, seed=1)
    step = attention(q[:, :, -1:], k, v, local=Local(4))
    last4 = attention(
        q[:, :, -1:],
        k[:, :, -4:],
        v[:, :, -4:],
        k_positions=torch.arange(8, 12),
        q_positions=torch.tensor([11]),
    )
    torch.testing.assert_close(step, last4)


def test_local_values_are_checked() -> None:
    with pytest.raises(ValueError, match="size must be >= 1"):
        Local(0)
    with pytest.raises(ValueError, match="kind"):
        Local(4, "ring")  # type: ignore[arg-type]
    q = torch.zeros(1, 1, 3, 4)
    with pytest.raises(TypeError, match="local must be a Local"):
        attention(q, q, q, local=4)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"sees no key.*outside its window of 1"):
        attention(q, q, q, q_positions=torch.tensor([5, 6, 7]), local=Local(1))


# --- the model's Llama 4 parts -------------------------------------------------------------


def test_rms_normalised_matches_transformers_llama4_l2norm() -> None:
    llama4 = pytest.importorskip("transformers.models.llama4.modeling_llama4")
    x = random_features(2, 3, 5, 16, seed=2) * 7.0
    torch.testing.assert_close(rms_normalised(x), llama4.Llama4TextL2Norm(1e-6)(x))


def test_the_temperature_is_llama4s() -> None:
    positions = torch.arange(40_000)
    expected = torch.log1p(torch.floor((positions.float() + 1.0) / 8192)) * 0.1 + 1.0
    torch.testing.assert_close(llama4_temperature(positions, 8192), expected)
    assert float(llama4_temperature(torch.tensor(8190), 8192)) == 1.0
    assert float(llama4_temperature(torch.tensor(8191), 8192)) == pytest.approx(
        1 + 0.1 * math.log(2)
    )


def small(**fields: object) -> TinyTransformer:
    torch.manual_seed(0)
    return ModelConfig(vocab_size=11, dim=32, n_layers=2, n_heads=2, **fields).build()  # type: ignore[arg-type]


def test_each_llama4_part_acts_on_its_own_layers() -> None:
    """The window and QK-norm act in rotating layers only, the temperature in NoPE layers
    only: on a model without NoPE layers the temperature changes nothing, and on a model
    whose layers are all NoPE the window and the norm change nothing."""
    tokens = torch.randint(0, 11, (2, 30), generator=generator())
    rope = small()
    nope = small(nope_layers=(0, 1))
    for fields in ({"rope_local": Local(4)}, {"qk_norm": True}):
        assert not torch.allclose(rope(tokens), with_fields(rope, **fields)(tokens))
        torch.testing.assert_close(nope(tokens), with_fields(nope, **fields)(tokens))
    torch.testing.assert_close(rope(tokens), with_fields(rope, nope_temperature=4)(tokens))
    assert not torch.allclose(nope(tokens), with_fields(nope, nope_temperature=4)(tokens))
    # within the first floor_scale - 1 positions the temperature is 1
    torch.testing.assert_close(
        nope(tokens[:, :20]), with_fields(nope, nope_temperature=21)(tokens[:, :20])
    )


def test_a_chunked_model_reads_each_chunk_as_a_sequence_of_its_own() -> None:
    """With every layer rotating and chunks of 8, positions 8-15 see only each other: their
    logits equal those of the chunk read alone (RoPE is relative)."""
    model = small(rope_local=Local(8, "chunk"))
    tokens = torch.randint(0, 11, (2, 16), generator=generator(1))
    with torch.no_grad():
        torch.testing.assert_close(model(tokens)[:, 8:], model(tokens[:, 8:]), atol=1e-5, rtol=1e-5)


def test_new_fields_are_described_only_when_set_and_checked() -> None:
    plain = ModelConfig(vocab_size=11).describe()
    assert not {"rope_local", "qk_norm", "nope_temperature"} & set(plain)
    described = ModelConfig(
        vocab_size=11, rope_local=Local(4, "chunk"), qk_norm=True, nope_temperature=4
    ).describe()
    assert described["rope_local"] == {"size": 4, "kind": "chunk"}
    assert described["qk_norm"] is True and described["nope_temperature"] == 4
    with pytest.raises(TypeError, match="rope_local must be a Local"):
        ModelConfig(vocab_size=11, rope_local=4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nope_temperature must be >= 1"):
        ModelConfig(vocab_size=11, nope_temperature=0)
    with pytest.raises(ValueError, match="only apply with position='rope'"):
        ModelConfig(vocab_size=11, position="none", qk_norm=True)


def test_extended_windows_the_rotary_layers_only() -> None:
    model = small(nope_layers=(1,))
    windowed = extended(model, rope_local=Local(4))
    assert windowed.config.rope_local == Local(4) and model.config.rope_local is None
    tokens = torch.randint(0, 11, (2, 12), generator=generator(2))
    with torch.no_grad():
        torch.testing.assert_close(windowed(tokens[:, :4]), model(tokens[:, :4]))
        assert not torch.allclose(windowed(tokens), model(tokens))
    with pytest.raises(TypeError, match="rope_local must be a Local"):
        extended(model, rope_local=4)  # type: ignore[arg-type]


def test_a_fine_tune_calls_back_at_its_checkpoints() -> None:
    torch.manual_seed(0)
    model = ModelConfig(vocab_size=CORPUS.vocab_size, dim=32, n_layers=2, n_heads=2).build()
    seen: list[int] = []
    fine_tune(
        model,
        CORPUS,
        length=16,
        steps=6,
        batch_size=2,
        lr=1e-3,
        seed=0,
        warmup=1,
        checkpoints=(2, 6),
        on_checkpoint=seen.append,
    )
    assert seen == [2, 6] and not model.training


def test_the_benchmark_scores_every_band_of_every_reading() -> None:
    from rope_lessons.sweeps import ch08_benchmark as bench

    torch.manual_seed(0)
    model = ModelConfig(vocab_size=bench.DATA.vocab_size, dim=64, n_layers=1, n_heads=2).build()
    readings = bench.zero_shot_models(model)
    assert {"plain", "window", "pi", "yarn", "dynamic ntk", "plain, log scaling"} <= set(readings)
    scores = bench.score(readings["window"], "window", seed=0)
    expected = {
        bench.key("window", metric, band)
        for metric, bands in bench.METRIC_BANDS.items()
        for band in bands
    }
    assert set(scores) == expected and all(math.isfinite(v) for v in scores.values())
    # an untrained model guesses: every copied letter costs about log V, far above log 26,
    # and its accuracy is about 1/V
    for band in bench.DISTANCE_BANDS:
        assert scores[bench.key("window", "copy-loss", band)] > CHANCE_LOSS
        assert scores[bench.key("window", "copy-accuracy", band)] < 3 * CHANCE_ACCURACY
        assert 0 <= scores[bench.key("window", "copy-below-chance", band)] <= 1
    # a window of the trained length changes nothing inside the trained length
    tokens = bench.probes(0)[0].tokens[:2, : bench.TRAIN_LEN]
    with torch.no_grad():
        torch.testing.assert_close(readings["window"](tokens), model(tokens))
    with pytest.raises(ValueError, match="is read in bands"):
        bench.key("window", "text-loss", bench.DISTANCE_BANDS[0])


def test_each_seed_reads_its_own_probes() -> None:
    from rope_lessons.sweeps import ch08_benchmark as bench

    first, second = bench.probes(0), bench.probes(1)
    assert len(first) == len(bench.DISTANCE_BANDS)
    for band, a, b in zip(bench.DISTANCE_BANDS, first, second, strict=True):
        assert not torch.equal(a.tokens, b.tokens)
        assert bool(((a.distance >= band[0]) & (a.distance < band[1])).all())
    assert bench.probes(0) is first  # cached: every reading of a seed meets the same windows


def test_the_key_count_readings_and_the_attention_measures() -> None:
    """With 512 keys the plain reading is the model itself; with 64 keys dividing the slow
    pairs by 64/64 changes nothing; the attention measures are weights of the model."""
    from rope_lessons.rope.ladder import frequencies
    from rope_lessons.rope.scaling import critical_pair
    from rope_lessons.sweeps import ch08_benchmark as bench

    torch.manual_seed(1)
    model = ModelConfig(vocab_size=bench.DATA.vocab_size, dim=64, n_layers=2, n_heads=2).build()
    readings = bench.key_count_readings(model)
    assert set(readings) == {
        f"keys {n}/{v}" for n in bench.KEY_COUNTS for v in ("plain", "slow pairs divided")
    }
    tokens = bench.probes(0)[0].tokens[:2]
    with torch.no_grad():
        torch.testing.assert_close(readings["keys 512/plain"](tokens), model(tokens))
        torch.testing.assert_close(
            readings["keys 64/slow pairs divided"](tokens), readings["keys 64/plain"](tokens)
        )
    divided = bench.slow_pairs_divided(4.0).theta / frequencies(bench.HEAD_DIM)
    critical = critical_pair(bench.HEAD_DIM, bench.TRAIN_LEN)
    assert bool((divided[:critical] == 1).all()) and bool((divided[critical:] == 0.25).all())
    attention = bench.attention_scores(model, seed=0)
    assert len(attention) == 2 * 2 * 2 * 2  # readings x measures x layers x heads
    assert all(0 <= v <= 1 for v in attention.values())
    for layer, head in itertools.product(range(2), range(2)):
        assert attention[bench.attention_key("window", "beyond 64", layer, head)] == 0.0
        assert attention[bench.attention_key("plain", "beyond 64", layer, head)] > 0.5


def test_above_chance_reads_the_interval_against_one_in_26() -> None:
    from rope_lessons.sweeps import ch08_benchmark as bench

    assert bench.above_chance([0.30, 0.35, 0.25, 0.32]) == "above chance"
    assert bench.above_chance([0.020, 0.025, 0.022, 0.030]) == "below chance"
    assert bench.above_chance([0.02, 0.06, 0.04, 0.03]) == "not resolved from chance"
    with pytest.raises(ValueError, match="at least two seeds"):
        bench.above_chance([0.5])


def test_above_chance_widens_its_interval_for_a_family() -> None:
    from rope_lessons.evidence.comparisons import summarise, t_quantile
    from rope_lessons.sweeps import ch08_benchmark as bench

    # mean 0.055, 95% half-width 0.011 (t 3.18, sem 0.0035): above 1/26 alone; for 13
    # readings each at 1 - 0.05/13 (t 8.16, half-width 0.029) the interval reaches below it
    accuracies = [0.05, 0.06, 0.048, 0.062]
    summary = summarise(accuracies)
    assert summary.mean - summary.half_width > 1 / 26
    assert summary.mean - t_quantile(1 - 0.05 / 13, 3) * summary.sem < 1 / 26
    assert bench.above_chance(accuracies) == "above chance"
    assert bench.above_chance(accuracies, family=13) == "not resolved from chance"
    assert bench.above_chance(accuracies, family=1) == bench.above_chance(accuracies)
    with pytest.raises(ValueError, match="family"):
        bench.above_chance(accuracies, family=0)


def test_the_induction_head_is_the_one_on_the_source_in_the_window() -> None:
    from rope_lessons.evidence.runs import RunResult
    from rope_lessons.sweeps import ch08_benchmark as bench

    extra = {
        bench.attention_key("window", "source", layer, head): 0.01 * (layer + head)
        for layer in range(bench.N_LAYERS)
        for head in range(bench.N_HEADS)
    }
    extra[bench.attention_key("window", "source", 2, 1)] = 0.7
    extra[bench.attention_key("plain", "source", 3, 1)] = 0.9  # not the window: ignored
    assert bench.induction_head(RunResult("rope", 0, [], extra=extra)) == (2, 1)
