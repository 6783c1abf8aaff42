"""The bigram floor: counts by hand, normalisation, and the held-out score."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons.evidence.runs import held_out
from rope_lessons.toy.corpus import CharCorpus
from rope_lessons.toy.ngram import best_bigram_loss, bigram_log_probs, bigram_loss
from rope_lessons.toy.synthetic import IGNORE


def test_bigram_by_hand() -> None:
    """'abab' with k = 1 over V = 3: a is followed by b twice, b by a once."""
    log_p = bigram_log_probs(torch.tensor([0, 1, 0, 1]), 3, 1.0)
    expected = torch.tensor([[1, 3, 1], [2, 1, 1], [1, 1, 1]], dtype=torch.float64)
    expected = expected / expected.sum(-1, keepdim=True)
    torch.testing.assert_close(log_p.exp(), expected)


@settings(max_examples=30, deadline=None)
@given(
    ids=st.lists(st.integers(0, 5), min_size=2, max_size=40),
    k=st.floats(0.001, 10.0),
)
def test_rows_are_distributions(ids: list[int], k: float) -> None:
    log_p = bigram_log_probs(torch.tensor(ids), 6, k)
    torch.testing.assert_close(log_p.exp().sum(-1), torch.ones(6, dtype=torch.float64))


def test_loss_scores_each_target_from_the_token_before_it() -> None:
    """A deterministic text is learned almost exactly; ignored targets are skipped."""
    log_p = bigram_log_probs(torch.tensor([0, 1, 2] * 50), 3, 0.001)
    tokens = torch.tensor([[0, 1, 2, 0]])
    targets = torch.tensor([[1, 2, 0, IGNORE]])
    loss = bigram_loss(log_p, lambda: (tokens, targets), batches=2)
    assert loss == pytest.approx(-float(log_p[0, 1] + log_p[1, 2] + log_p[2, 0]) / 3)
    assert loss < 1e-3
    wrong = torch.tensor([[2, 0, 1, IGNORE]])
    assert bigram_loss(log_p, lambda: (tokens, wrong), batches=1) > 5.0


def test_best_bigram_on_the_corpus_beats_uniform_and_keeps_its_k() -> None:
    corpus = CharCorpus()
    loss, k = best_bigram_loss(corpus, lambda: held_out(corpus, 64), batches=1)
    assert k in (0.01, 0.1, 1.0)
    assert loss < math.log(corpus.vocab_size) - 1.0  # far better than guessing
    for other in (0.01, 0.1, 1.0):
        log_p = bigram_log_probs(corpus.splits["train"], corpus.vocab_size, other)
        assert bigram_loss(log_p, held_out(corpus, 64), batches=1) >= loss - 1e-12


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: bigram_log_probs(torch.tensor([0]), 3, 1.0), ValueError),
        (lambda: bigram_log_probs(torch.tensor([0, 3]), 3, 1.0), ValueError),
        (lambda: bigram_log_probs(torch.tensor([0.0, 1.0]), 3, 1.0), TypeError),
        (lambda: bigram_log_probs(torch.tensor([0, 1]), 3, 0.0), ValueError),
        (lambda: bigram_log_probs(torch.tensor([0, 1]), 0, 1.0), ValueError),
        (
            lambda: bigram_loss(
                torch.zeros(2, 2),
                lambda: (torch.zeros(1, 2, dtype=torch.long), torch.full((1, 2), IGNORE)),
                batches=1,
            ),
            ValueError,
        ),
    ],
)
def test_bad_input_is_refused(call: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        call()  # type: ignore[operator]
