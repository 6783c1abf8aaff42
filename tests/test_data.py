"""Synthetic tasks and the shipped corpus: targets, determinism, checksums."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from rope_lessons.toy.corpus import CORPUS_SHA256, CharCorpus, load_text
from rope_lessons.toy.synthetic import IGNORE, CopyAtLag, PositionModulo, WhichFirst, batch_sampler


def test_which_first_targets_name_the_earlier_marker() -> None:
    task = WhichFirst(n_fillers=5)
    tokens, targets = task.sample(500, 10, torch.Generator().manual_seed(0))
    assert tokens.shape == targets.shape == (500, 10)
    assert (tokens[:, -1] == task.QUERY).all()
    assert (targets[:, :-1] == IGNORE).all()
    first_a = (tokens == task.A).int().argmax(1)
    first_b = (tokens == task.B).int().argmax(1)
    expected = torch.where(first_a < first_b, task.A, task.B)
    assert torch.equal(targets[:, -1], expected)
    assert ((tokens == task.A).sum(1) == 1).all() and ((tokens == task.B).sum(1) == 1).all()
    share_a = (targets[:, -1] == task.A).float().mean().item()
    assert 0.4 < share_a < 0.6  # balanced answers


def test_which_first_token_counts_do_not_reveal_the_answer() -> None:
    """The multiset of tokens is independent of the answer: same distribution of counts."""
    task = WhichFirst(n_fillers=3)
    tokens, targets = task.sample(4000, 8, torch.Generator().manual_seed(1))
    counts = torch.stack([(tokens == t).sum(1) for t in range(task.vocab_size)], 1).float()
    a_first = targets[:, -1] == task.A
    diff = counts[a_first].mean(0) - counts[~a_first].mean(0)
    assert diff.abs().max() < 0.15


def test_copy_at_lag_targets_are_shifted_tokens() -> None:
    tokens, targets = CopyAtLag(lag=3, vocab=7).sample(4, 10, torch.Generator().manual_seed(0))
    assert (targets[:, :3] == IGNORE).all()
    assert torch.equal(targets[:, 3:], tokens[:, :-3])


def test_position_modulo_targets_count_positions() -> None:
    task = PositionModulo(modulus=3, vocab=8)
    tokens, targets = task.sample(5, 11, torch.Generator().manual_seed(0))
    assert tokens.shape == targets.shape == (5, 11)
    assert tokens.dtype == targets.dtype == torch.long
    assert int(tokens.min()) >= 0 and int(tokens.max()) < task.vocab_size
    assert (targets != IGNORE).all()  # every position is scored
    assert targets[0].tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1]
    assert (targets == targets[0]).all()  # the same answers whatever the tokens
    assert task.chance_accuracy == pytest.approx(1 / 3)
    assert task.min_len == 1
    assert PositionModulo(modulus=5, vocab=3).vocab_size == 5  # answers need their ids


def test_position_modulo_tokens_carry_no_answer() -> None:
    """The tokens are uniform whatever the answer: each answer sees every token about as often."""
    tokens, targets = PositionModulo(3, 4).sample(3000, 9, torch.Generator().manual_seed(1))
    for answer in range(3):
        counts = torch.bincount(tokens[targets == answer], minlength=4).double()
        assert (counts / counts.sum() - 0.25).abs().max() < 0.02


def test_position_modulo_train_and_val_streams_differ() -> None:
    task = PositionModulo()
    train_tokens = batch_sampler(task, 8, 12, seed=3)()[0]
    val_tokens = batch_sampler(task, 8, 12, seed=3, split="val")()[0]
    assert not torch.equal(train_tokens, val_tokens)
    again = batch_sampler(task, 8, 12, seed=3, split="val")()[0]
    assert torch.equal(val_tokens, again)


def test_sampler_is_deterministic_for_a_seed() -> None:
    a = batch_sampler(WhichFirst(), 4, 9, seed=5)
    b = batch_sampler(WhichFirst(), 4, 9, seed=5)
    for _ in range(3):
        assert all(torch.equal(x, y) for x, y in zip(a(), b(), strict=True))


@pytest.mark.parametrize(
    ("call", "error", "word"),
    [
        (lambda: WhichFirst().sample(2, 2, torch.Generator()), ValueError, "seq_len must be >= 3"),
        (lambda: CopyAtLag(lag=4).sample(2, 4, torch.Generator()), ValueError, "seq_len"),
        (lambda: PositionModulo(modulus=1).sample(2, 4, torch.Generator()), ValueError, "modulus"),
        (lambda: PositionModulo(vocab=0).sample(2, 4, torch.Generator()), ValueError, "vocab"),
        (lambda: WhichFirst().sample(0, 5, torch.Generator()), ValueError, "batch_size"),
    ],
)
def test_bad_task_arguments(call: Callable[[], object], error: type[Exception], word: str) -> None:
    with pytest.raises(error, match=word):
        call()


def test_corpus_is_the_recorded_text() -> None:
    text = load_text()
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == CORPUS_SHA256
    assert len(text) == 1_191_295
    assert text.startswith("CHAPTER 1. Loomings.\n\nCall me Ishmael.")


def test_char_corpus_round_trips_and_samples_next_characters() -> None:
    corpus = CharCorpus()
    assert corpus.vocab_size == 81
    assert corpus.decode(corpus.encode("Call me Ishmael.")) == "Call me Ishmael."
    tokens, targets = corpus.sample(3, 16, torch.Generator().manual_seed(0), split="val")
    assert tokens.shape == targets.shape == (3, 16)
    assert torch.equal(tokens[:, 1:], targets[:, :-1])
    with pytest.raises(ValueError, match="not in the corpus alphabet"):
        corpus.encode("€")
    with pytest.raises(ValueError, match="split must be one of"):
        # deliberately ill-typed: the runtime check is under test
        corpus.sample(1, 4, torch.Generator(), split="test")  # type: ignore[arg-type]


def test_small_custom_corpus_has_its_own_alphabet() -> None:
    corpus = CharCorpus("abcabcabcabc", val_fraction=0.25)
    assert corpus.alphabet == ["a", "b", "c"]
    assert len(corpus.splits["train"]) == 9


def test_corpus_from_file_reads_the_text(tmp_path: Path) -> None:
    path = tmp_path / "mytext.txt"
    path.write_text("the whale, the whale! " * 5, encoding="utf-8")
    corpus = CharCorpus.from_file(path, val_fraction=0.2)
    assert corpus.text == path.read_text(encoding="utf-8") and corpus.val_fraction == 0.2
    assert CharCorpus.from_file(str(path)).text == corpus.text
    assert "w" in corpus.alphabet and "." not in corpus.alphabet


@pytest.mark.parametrize("text", ["", "x", "mytext.txt"])
def test_too_short_text_is_refused_with_its_length(text: str) -> None:
    # a file name passed as the text used to be trained on; an empty text was accepted
    with pytest.raises(ValueError, match=rf"text of {len(text)} characters is too short"):
        CharCorpus(text)


def test_shortest_accepted_corpus_samples_both_splits() -> None:
    # 11 characters at val_fraction 0.1 split 9 + 2: one window of length 1 and its target
    corpus = CharCorpus("abcdefghijk")
    assert [len(corpus.splits[s]) for s in ("train", "val")] == [9, 2]
    for split in ("train", "val"):
        tokens, targets = batch_sampler(corpus, 4, 1, seed=0, split=split)()
        assert tokens.shape == targets.shape == (4, 1)
    with pytest.raises(ValueError, match="splits into 1 training and 1 validation"):
        CharCorpus("ab", val_fraction=0.5)
    with pytest.raises(ValueError, match="splits into 3 training and 1 validation"):
        CharCorpus("abcd", val_fraction=0.25)
    with pytest.raises(TypeError, match="text must be a str"):
        CharCorpus(Path("mytext.txt"))  # type: ignore[arg-type]


def test_decode_takes_a_list_and_refuses_what_is_not_one_sequence_of_ids() -> None:
    corpus = CharCorpus()
    ids = corpus.encode("Call me Ishmael.")
    assert corpus.decode(ids.tolist()) == corpus.decode(ids) == "Call me Ishmael."
    assert corpus.decode([]) == ""
    bad_ids: list[list[Any]] = [[len(corpus.alphabet)], [-1], [1.0], [True]]
    for bad in bad_ids:
        with pytest.raises(ValueError, match="ids must be ints"):
            corpus.decode(bad)
    with pytest.raises(ValueError, match="one-dimensional"):
        corpus.decode(ids[None, :4])
