"""NoPE: permutation symmetry of attention; the 1/(m+1) and sigma^2/(m+1) laws of causal NoPE."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from helpers import random_features
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons.chapters.nope import (
    mean_square_by_position,
    output_mean_square,
    permute_sequence,
    position_from_first_token_weight,
    sample_uniform_causal_mean_square,
    uniform_causal_attention,
)
from rope_lessons.toy.model import ModelConfig, TinyTransformer
from rope_lessons.toy.rotary_attention import attention


def random_permutation(n: int, seed: int) -> torch.Tensor:
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))


def test_permute_sequence_reorders_rows_and_inverts() -> None:
    x = random_features(2, 5, 3)
    perm = torch.tensor([4, 0, 3, 1, 2])
    out = permute_sequence(x, perm)
    assert torch.equal(out[:, 0], x[:, 4]) and torch.equal(out[:, 2], x[:, 3])
    assert torch.equal(permute_sequence(out, perm.argsort()), x)


@given(seq_len=st.integers(2, 24), seed=st.integers(0, 10_000))
def test_attention_without_positions_is_equivariant_in_the_queries(seq_len: int, seed: int) -> None:
    """attention(Pq, Pk, Pv) = P attention(q, k, v) for bidirectional NoPE."""
    q, k, v = random_features(3, 1, 2, seq_len, 8, seed=seed)
    perm = random_permutation(seq_len, seed)
    out = attention(q, k, v, placement="nope", causal=False)
    permuted_in = attention(
        *(permute_sequence(t, perm) for t in (q, k, v)), placement="nope", causal=False
    )
    torch.testing.assert_close(permuted_in, permute_sequence(out, perm), rtol=0, atol=1e-12)


@given(seq_len=st.integers(2, 24), seed=st.integers(0, 10_000))
def test_attention_without_positions_ignores_the_order_of_keys_and_values(
    seq_len: int, seed: int
) -> None:
    """attention(q, Pk, Pv) = attention(q, k, v): the keys and values form a set."""
    q, k, v = random_features(3, 1, 2, seq_len, 8, seed=seed)
    perm = random_permutation(seq_len, seed)
    out = attention(q, k, v, placement="nope", causal=False)
    shuffled = attention(
        q, permute_sequence(k, perm), permute_sequence(v, perm), placement="nope", causal=False
    )
    torch.testing.assert_close(shuffled, out, rtol=0, atol=1e-12)


def test_the_causal_mask_breaks_the_symmetry() -> None:
    q, k, v = random_features(3, 1, 1, 6, 8, seed=1)
    perm = torch.tensor([5, 4, 3, 2, 1, 0])
    out = attention(q, k, v, placement="nope", causal=True)
    permuted_in = attention(
        *(permute_sequence(t, perm) for t in (q, k, v)), placement="nope", causal=True
    )
    assert (permuted_in - permute_sequence(out, perm)).abs().max() > 1e-3


def test_a_whole_nope_encoder_is_equivariant() -> None:
    """Embedding, LayerNorm, MLP and attention layers: token order only permutes the logits."""
    torch.manual_seed(0)
    model = TinyTransformer(ModelConfig(vocab_size=11, position="none", causal=False)).double()
    tokens = torch.randint(0, 11, (3, 9), generator=torch.Generator().manual_seed(0))
    perm = random_permutation(9, 2)
    with torch.no_grad():
        logits = model(tokens)
        permuted = model(tokens[:, perm])
    torch.testing.assert_close(permuted, logits[:, perm], rtol=0, atol=1e-10)


def test_the_same_token_at_two_positions_gets_the_identical_output() -> None:
    embeddings = random_features(5, 16, seed=3)
    w_q, w_k, w_v = random_features(3, 16, 16, seed=4)
    x = embeddings[torch.tensor([0, 1, 2, 3, 1])]  # "the dog chased another dog"
    q, k, v = (x @ w for w in (w_q, w_k, w_v))
    out = attention(q[None, None], k[None, None], v[None, None], placement="nope", causal=False)
    # Identical in exact arithmetic; the kernels may round the two rows differently.
    torch.testing.assert_close(out[0, 0, 1], out[0, 0, 4], rtol=0, atol=1e-12)
    causal = attention(q[None, None], k[None, None], v[None, None], placement="nope", causal=True)
    assert (causal[0, 0, 1] - causal[0, 0, 4]).abs().max() > 1e-3


@given(seq_len=st.integers(1, 30), seed=st.integers(0, 10_000))
def test_uniform_causal_attention_is_attention_with_zero_queries(seq_len: int, seed: int) -> None:
    _, k, v = random_features(3, 2, 1, seq_len, 4, seed=seed)
    zeros = torch.zeros_like(k)
    expected = attention(zeros, k, v, placement="nope", causal=True)
    torch.testing.assert_close(uniform_causal_attention(v), expected, rtol=1e-12, atol=1e-12)


def test_uniform_causal_weight_on_the_first_token_is_one_over_m_plus_one() -> None:
    seq_len = 2000
    zeros = torch.zeros(1, 1, seq_len, 2, dtype=torch.float64)
    _, weights = attention(zeros, zeros, zeros, placement="nope", causal=True, return_weights=True)
    first = weights[0, 0, :, 0]  # (T,)
    m = torch.arange(seq_len, dtype=torch.float64)
    torch.testing.assert_close(first, 1.0 / (m + 1), rtol=1e-12, atol=0)
    assert torch.equal(position_from_first_token_weight(first), torch.arange(seq_len))


def test_output_mean_square_of_uniform_weights_is_sigma_squared_over_count() -> None:
    seq_len, sigma = 10, 1.5
    uniform = torch.ones(seq_len, seq_len, dtype=torch.float64).tril()
    uniform = uniform / uniform.sum(-1, keepdim=True)
    counts = torch.arange(1, seq_len + 1, dtype=torch.float64)
    torch.testing.assert_close(output_mean_square(uniform, sigma), sigma**2 / counts)
    one_hot = torch.eye(seq_len, dtype=torch.float64)  # each query sees one value
    torch.testing.assert_close(
        output_mean_square(one_hot, sigma), torch.full((seq_len,), sigma**2, dtype=torch.float64)
    )


def test_measured_mean_square_follows_sigma_squared_over_count() -> None:
    """Monte Carlo: within 5 standard errors of sigma^2/(m+1) at every position."""
    n_sequences, seq_len, dim, sigma = 2000, 32, 16, 2.0
    measured = sample_uniform_causal_mean_square(
        n_sequences, seq_len, dim, sigma=sigma, generator=torch.Generator().manual_seed(0)
    )
    expected = sigma**2 / torch.arange(1, seq_len + 1, dtype=torch.float64)
    relative_se = math.sqrt(2 / (n_sequences * dim))
    assert ((measured / expected - 1).abs() < 5 * relative_se).all()


def test_mean_square_by_position_averages_all_other_axes() -> None:
    outputs = torch.zeros(2, 3, 4, 5)
    outputs[..., 1, :] = 2.0
    assert mean_square_by_position(outputs).tolist() == [0.0, 4.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("call", "error", "word"),
    [
        (
            lambda: permute_sequence(torch.zeros(3, 2), torch.tensor([0, 0, 1])),
            ValueError,
            "permutation",
        ),
        (
            lambda: permute_sequence(torch.zeros(3, 2), torch.tensor([0.0, 1, 2])),
            TypeError,
            "permutation",
        ),
        (lambda: permute_sequence(torch.zeros(3), torch.tensor([0, 1, 2])), ValueError, "x must"),
        (
            lambda: uniform_causal_attention(torch.zeros(3, 2, dtype=torch.long)),
            TypeError,
            "values",
        ),
        (lambda: output_mean_square(torch.zeros(3, 2), 1.0), ValueError, "weights"),
        (lambda: output_mean_square(torch.zeros(3, 3), -1.0), ValueError, "sigma"),
        # deliberately ill-typed: the runtime check is under test
        (lambda: output_mean_square(torch.zeros(3, 3), "1"), TypeError, "sigma"),  # type: ignore[arg-type]
        (lambda: position_from_first_token_weight(torch.tensor([0.0])), ValueError, "weight"),
        (
            lambda: sample_uniform_causal_mean_square(
                0, 4, 2, sigma=1.0, generator=torch.Generator()
            ),
            ValueError,
            "n_sequences",
        ),
    ],
)
def test_bad_input_names_the_argument(
    call: Callable[[], object], error: type[Exception], word: str
) -> None:
    with pytest.raises(error, match=word):
        call()
