"""A floor that needs no attention: the smoothed character-bigram model.

A model that reads only the current character to predict the next one is what
a language model falls back to when its attention does nothing useful (almost
uniform weights average the context away). Chapter 6 draws its held-out loss
as the floor every placement of RoPE has to beat: a placement that ties with
it has learned nothing from position or from the rest of the context.

The bigram model counts, on the corpus's training split, how often character
``b`` follows character ``a`` and adds ``smoothing`` to every count (add-k
smoothing, so unseen pairs keep a small probability):

    p(b | a) = (count(a, b) + k) / (count(a) + k V),    V = the alphabet size.

Shapes: ``V`` vocabulary, ``(B, T)`` token batches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from rope_lessons.toy.corpus import CharCorpus
from rope_lessons.toy.synthetic import IGNORE, Batch


def bigram_log_probs(ids: torch.Tensor, vocab_size: int, smoothing: float) -> torch.Tensor:
    """Add-k smoothed bigram log-probabilities fitted on a 1-D id sequence.

    Args:
        ids: long tensor ``(N,)``, ``N >= 2``: the training text as ids.
        vocab_size: ``V``; every id lies in ``[0, V)``.
        smoothing: ``k > 0``, added to every count.

    Returns:
        float64 tensor ``(V, V)``: row ``a`` holds :math:`\\log p(\\cdot \\mid a)`
        and sums (in probability) to 1.
    """
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.long or ids.ndim != 1:
        raise TypeError("ids must be a 1-D long tensor")
    if len(ids) < 2:
        raise ValueError(f"ids must hold at least 2 tokens (one pair), got {len(ids)}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
        raise ValueError(f"ids must lie in [0, {vocab_size})")
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)):
        raise TypeError(f"smoothing must be a number, got {type(smoothing).__name__}")
    if not (math.isfinite(smoothing) and smoothing > 0):
        raise ValueError(f"smoothing must be finite and > 0, got {smoothing}")
    pairs = ids[:-1] * vocab_size + ids[1:]  # (N - 1,): one index per (a, b)
    counts = torch.bincount(pairs, minlength=vocab_size * vocab_size).double()
    counts = counts.reshape(vocab_size, vocab_size) + smoothing  # (V, V)
    return counts.log() - counts.sum(-1, keepdim=True).log()


def bigram_loss(
    log_probs: torch.Tensor, sample_batch: Callable[[], Batch], *, batches: int
) -> float:
    """Mean loss (nats per scored token) of the bigram model on ``batches`` batches.

    It scores exactly what :func:`~rope_lessons.evidence.training.evaluate` scores: each
    target ``targets[:, t]`` (where it is not ignored) is predicted from
    ``tokens[:, t]``, the character before it.
    """
    total, count = 0.0, 0
    for _ in range(batches):
        tokens, targets = sample_batch()  # (B, T) each
        scored = targets != IGNORE
        log_p = log_probs.to(tokens.device)[tokens[scored], targets[scored]]  # (n,)
        total -= float(log_p.sum())
        count += int(scored.sum())
    if count == 0:
        raise ValueError("no position is scored")
    return total / count


def best_bigram_loss(
    corpus: CharCorpus,
    make_sampler: Callable[[], Callable[[], Batch]],
    *,
    batches: int,
    smoothings: Sequence[float] = (0.01, 0.1, 1.0),
) -> tuple[float, float]:
    """The lowest held-out bigram loss over ``smoothings``, and the ``k`` that gave it.

    Picking ``k`` on the held-out data itself favours the bigram, so the floor
    it gives is, if anything, too low: a model that beats it has beaten every
    bigram in the list.

    Args:
        corpus: the corpus whose training split the counts come from.
        make_sampler: returns a fresh sampler of the held-out batches, the same
            batches each time (e.g. ``lambda: held_out(corpus, 64)``), so that
            every ``k`` is scored on the same text.
        batches: how many batches to score.
        smoothings: the values of ``k`` to try.
    """
    results = []
    for k in smoothings:
        log_probs = bigram_log_probs(corpus.splits["train"], corpus.vocab_size, k)
        results.append((bigram_loss(log_probs, make_sampler(), batches=batches), float(k)))
    return min(results)
