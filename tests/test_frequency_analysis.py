"""Chapter 5's stored measurements: ``frequency_analysis`` and what it stores."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rope_lessons.chapters.spectrum import (
    ablate_pairs,
    mean_pair_norms,
    pair_energy_shares,
    qkv_pair_norms,
)
from rope_lessons.evidence.runs import held_out
from rope_lessons.evidence.training import evaluate
from rope_lessons.sweeps.ch05_frequencies import (
    COPY,
    MATCHED_DRAWS,
    RANDOM_QUARTERS,
    frequency_analysis,
    quarters,
    random_quarters,
    shares_of,
)
from rope_lessons.toy.model import TinyTransformer

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def model() -> TinyTransformer:
    torch.manual_seed(0)
    return COPY.model.build().eval()


@pytest.fixture(scope="module")
def numbers(model: TinyTransformer) -> dict[str, float]:
    return frequency_analysis(model, COPY, CPU)


def test_frequency_analysis_stores_what_it_promises(
    model: TinyTransformer, numbers: dict[str, float]
) -> None:
    """The losses are the ablated models' held-out losses; the shares read back as
    pair_energy_shares of the same tokens, and the quarter shares are their sums."""
    fast, slow = quarters(32)

    def loss(candidate: TinyTransformer) -> float:
        sampler = held_out(COPY.data, COPY.train_len, device=CPU)
        return evaluate(candidate, sampler, batches=COPY.eval_batches).loss

    assert numbers["loss"] == pytest.approx(loss(model), abs=1e-6)
    assert numbers["loss_without_fast"] == pytest.approx(loss(ablate_pairs(model, fast)), abs=1e-6)
    assert numbers["loss_without_slow"] == pytest.approx(loss(ablate_pairs(model, slow)), abs=1e-6)
    last = random_quarters(32)[-1]
    assert numbers[f"loss_without_random_{RANDOM_QUARTERS - 1}"] == pytest.approx(
        loss(ablate_pairs(model, last)), abs=1e-6
    )
    tokens = held_out(COPY.data, COPY.train_len, device=CPU)()[0][:64]
    rope = model.config.rope
    assert rope is not None
    with torch.no_grad():  # a reading of the trained model, not a step of training
        q_shares, k_shares = pair_energy_shares(model.layer_qkv(tokens), rope)
    torch.testing.assert_close(shares_of(numbers, "q", 2, 2), q_shares)
    torch.testing.assert_close(shares_of(numbers, "k", 2, 2), k_shares)
    assert numbers["fast_share"] == pytest.approx(float(q_shares[..., fast].sum(-1).mean()))
    for name in ("fast", "slow"):
        for draw in range(MATCHED_DRAWS):
            assert 0 < numbers[f"matched_{name}_share_{draw}"] < 1
            assert f"loss_without_matched_{name}_{draw}" in numbers
    for key in ("diagonal_L1H0", "previous_token_L0H1"):
        assert 0 <= numbers[key] <= 1


def test_frequency_analysis_repeats_and_leaves_the_model_alone(
    model: TinyTransformer, numbers: dict[str, float]
) -> None:
    """Same model, same numbers (the controls' draws are seeded); weights untouched."""
    before = [p.clone() for p in model.parameters()]
    assert frequency_analysis(model, COPY, CPU) == numbers
    for a, b in zip(before, model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_random_quarters_are_quarters_and_differ() -> None:
    draws = random_quarters(32)
    assert len(draws) == RANDOM_QUARTERS
    assert all(len(d) == 4 and len(set(d)) == 4 and all(0 <= k < 16 for k in d) for d in draws)
    assert len({tuple(d) for d in draws}) == RANDOM_QUARTERS


def test_mean_pair_norms_are_the_mean_norms_of_layer_qkv(model: TinyTransformer) -> None:
    """mean_pair_norms reads layer_qkv; zeroing a pair's W_q rows in layer 0 zeroes its norm
    there (layer 1's queries change too: they read layer 0's output)."""
    tokens = torch.randint(0, model.config.vocab_size, (4, 16))
    rope = model.config.rope
    assert rope is not None
    queries, keys = mean_pair_norms(model, tokens)
    expected = qkv_pair_norms(model.layer_qkv(tokens), rope)
    torch.testing.assert_close(queries, expected[0])
    torch.testing.assert_close(keys, expected[1])
    ablated_queries, _ = mean_pair_norms(ablate_pairs(model, [2], layers=[0]), tokens)
    assert ablated_queries[0, :, 2].eq(0).all() and queries[0, :, 2].gt(0).all()
    nope = dataclasses.replace(model.config, position="none", rope=None).build()
    with pytest.raises(ValueError, match="RoPE model"):
        mean_pair_norms(nope, tokens)
