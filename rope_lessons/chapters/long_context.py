"""Chapter 8's benchmark: text in which a segment of random letters comes back later.

Plain text rarely needs a token far away, so a model that ignores distant
tokens loses little on it, and a benchmark of text alone cannot tell
*extending* the context from *ignoring* it. :class:`CopyInText` mixes a task
that does need distance into the course corpus: in every window of text, a
segment of ``segment`` random lowercase letters is written at some position
and written again ``distance`` characters later. The first copy cannot be
predicted (its targets are not scored); after its first letter, the second
copy can be read off the first, by a model that attends back ``distance``
tokens and copies (an induction head). A model that cannot reach the first
copy pays :data:`CHANCE_LOSS` = log 26 nats per copied letter at best.

:meth:`CopyInText.probe` builds the held-out probes of the benchmark: windows
whose second copy ends at the last position and whose distance lies in a
given range, so that every distance band is read at the same positions; and
:func:`token_scores` scores a model on them, token by token (loss and top-1 hit):
:func:`text_band_losses` reads the text per position band and
:func:`copy_scores` the copied letters (accuracy beside loss: a few confident
errors can hold the mean loss above log 26 while most letters are copied).

Shapes: ``B`` batch, ``T`` sequence length, ``S`` segment length.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from rope_lessons._checks import check_bands, check_choice, check_positive_int
from rope_lessons.toy.corpus import CharCorpus
from rope_lessons.toy.synthetic import IGNORE, SPLITS, VALIDATION_SEED_OFFSET, Batch, Split

LETTERS = string.ascii_lowercase
CHANCE_LOSS = math.log(len(LETTERS))  # a copied letter guessed without its first copy
CHANCE_ACCURACY = 1 / len(LETTERS)  # the top-1 accuracy of that guess
PLACEMENT_ATTEMPTS = 100


@dataclass(frozen=True)
class Probe:
    """Held-out windows with one copied segment each.

    Attributes:
        tokens: ``(B, T)`` ids.
        targets: ``(B, T)`` next ids; the first copy's letters are IGNORE.
        copied: ``(B, T)`` bool, True at the targets that are letters of the
            second copy after its first (the ones a copy can predict).
        distance: ``(B,)`` the distance between the two copies.
    """

    tokens: torch.Tensor
    targets: torch.Tensor
    copied: torch.Tensor
    distance: torch.Tensor

    @classmethod
    def joined(cls, probes: Sequence[Probe]) -> Probe:
        """The probes' windows one after another, as one probe."""
        return cls(
            torch.cat([p.tokens for p in probes]),
            torch.cat([p.targets for p in probes]),
            torch.cat([p.copied for p in probes]),
            torch.cat([p.distance for p in probes]),
        )

    def batches(self, size: int) -> list[Probe]:
        """The windows in consecutive groups of ``size`` (the last may hold fewer)."""
        check_positive_int(size, "size")
        return [
            Probe(
                self.tokens[i : i + size],
                self.targets[i : i + size],
                self.copied[i : i + size],
                self.distance[i : i + size],
            )
            for i in range(0, self.tokens.shape[0], size)
        ]


@dataclass
class CopyInText(CharCorpus):
    """The corpus with one random segment per window, copied ``distance`` characters later.

    Attributes:
        segment: letters per segment ``S`` (>= 2: the first letter of the
            second copy is a guess, the others can be copied).
        pair_every: training windows of length ``T`` hold ``max(1, T //
            pair_every)`` copied pairs, so that longer windows carry as many
            copies per token.

    In training windows the distance is uniform over ``[S, T - S]`` and the
    first copy's start uniform over the places where both fit. The targets of
    the first copy's letters (random) and of the second copy's first letter
    (random until the copy starts) are IGNORE.
    """

    segment: int = 8
    pair_every: int = 64

    def __post_init__(self) -> None:
        check_positive_int(self.segment, "segment")
        check_positive_int(self.pair_every, "pair_every")
        if self.segment < 2:
            raise ValueError(
                f"segment must be >= 2 (one letter to cue, one to copy), got {self.segment}"
            )
        super().__post_init__()
        self._letters = self.encode(LETTERS)

    @property
    def min_len(self) -> int:  # type: ignore[override]
        """Two copies side by side."""
        return 2 * self.segment

    def _windows(
        self, batch_size: int, seq_len: int, generator: torch.Generator, split: Split
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Text windows ``(B, T)`` and their next characters ``(B, T)``, before any copy."""
        return CharCorpus.sample(self, batch_size, seq_len, generator, split)

    def _insert(
        self,
        tokens: torch.Tensor,
        targets: torch.Tensor,
        pairs: torch.Tensor,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Write a random segment at each pair's first place and again ``distance`` later.

        ``pairs`` ``(P, 3)`` holds ``(row, first, distance)``; segments must not overlap.
        Returns tokens, targets (IGNORE where unpredictable) and the copied mask, ``(B, T)``.
        """
        batch, seq_len = tokens.shape
        s = self.segment
        rows, first, distance = pairs.unbind(1)  # (P,) each
        letters = self._letters[
            torch.randint(0, len(LETTERS), (len(pairs), s), generator=generator)
        ]
        offsets = torch.arange(s)
        rows = rows[:, None].expand(-1, s)  # (P, S)
        starts = first[:, None] + offsets  # (P, S)
        again = starts + distance[:, None]  # (P, S)
        # the full sequence, one longer than the window, so that targets follow the tokens
        full = torch.cat([tokens, targets[:, -1:]], dim=1)  # (B, T + 1)
        full[rows, starts] = letters
        full[rows, again] = letters
        tokens, targets = full[:, :-1].clone(), full[:, 1:].clone()
        # targets t predict token t + 1: the first copy's letters and the second copy's first
        unpredictable = torch.cat([starts - 1, again[:, :1] - 1], dim=1)  # (P, S + 1)
        valid = unpredictable >= 0
        targets[rows[:, :1].expand_as(unpredictable)[valid], unpredictable[valid]] = IGNORE
        copied = torch.zeros(batch, seq_len, dtype=torch.bool)
        copied[rows[:, 1:], again[:, 1:] - 1] = True  # targets of letters 2 .. S of the copy
        return tokens, targets, copied

    def _place(self, batch_size: int, seq_len: int, generator: torch.Generator) -> torch.Tensor:
        """``(row, first, distance)`` of ``max(1, T // pair_every)`` pairs per window, each
        distance uniform over ``[S, T - S]`` and each first place uniform over where both
        copies fit, redrawn (up to :data:`PLACEMENT_ATTEMPTS` times) where a segment would
        overlap one already placed; a pair that finds no room is left out."""
        s = self.segment
        wanted = max(1, seq_len // self.pair_every)
        pairs = []
        for row in range(batch_size):
            taken = torch.zeros(seq_len + 1, dtype=torch.bool)
            for _ in range(wanted):
                for _ in range(PLACEMENT_ATTEMPTS):
                    distance = int(torch.randint(s, seq_len - s + 1, (1,), generator=generator))
                    room = seq_len - s - distance + 1  # places where both copies fit
                    first = int(torch.rand(1, generator=generator) * room)
                    spans = (slice(first, first + s), slice(first + distance, first + distance + s))
                    if not any(bool(taken[span].any()) for span in spans):
                        for span in spans:
                            taken[span] = True
                        pairs.append((row, first, distance))
                        break
        return torch.tensor(pairs, dtype=torch.long).reshape(-1, 3)

    def sample(
        self, batch_size: int, seq_len: int, generator: torch.Generator, split: Split = "train"
    ) -> Batch:
        """Training windows: ``(tokens, targets)``, each ``(B, T)``."""
        check_choice(split, "split", SPLITS)
        if seq_len < self.min_len:
            raise ValueError(f"seq_len must be >= {self.min_len} (two segments), got {seq_len}")
        tokens, targets = self._windows(batch_size, seq_len, generator, split)
        pairs = self._place(batch_size, seq_len, generator)
        tokens, targets, _ = self._insert(tokens, targets, pairs, generator)
        return tokens, targets

    def probe(
        self, batch_size: int, seq_len: int, distances: tuple[int, int], *, seed: int
    ) -> Probe:
        """Held-out windows whose second copy ends at the last position, with distances
        uniform over ``[low, high)``; drawn from the validation split with a generator seeded
        ``VALIDATION_SEED_OFFSET + seed``, so every model reads the same probe."""
        low, high = distances
        s = self.segment
        if not s <= low < high <= seq_len - s + 1:
            raise ValueError(
                f"distances [{low}, {high}) must satisfy {s} <= low < high <= seq_len - "
                f"segment + 1 = {seq_len - s + 1}"
            )
        generator = torch.Generator().manual_seed(VALIDATION_SEED_OFFSET + seed)
        tokens, targets = self._windows(batch_size, seq_len, generator, "val")
        distance = torch.randint(low, high, (batch_size,), generator=generator)
        pairs = torch.stack([torch.arange(batch_size), seq_len - s - distance, distance], 1)
        tokens, targets, copied = self._insert(tokens, targets, pairs, generator)
        return Probe(tokens, targets, copied, distance)


class TokenScores(NamedTuple):
    """How a model scored every target of a probe, from one forward pass.

    Attributes:
        loss: ``(B, T)`` float64 cross-entropy, NaN where the target is IGNORE.
        hit: ``(B, T)`` bool, True where the largest logit is the target's (top-1);
            False where the target is IGNORE.
    """

    loss: torch.Tensor
    hit: torch.Tensor


def token_scores(model: nn.Module, probe: Probe, batch_size: int = 16) -> TokenScores:
    """Cross-entropy and top-1 hit of every target of ``probe`` (see :class:`TokenScores`)."""
    check_positive_int(batch_size, "batch_size")
    model.eval()
    device = next(model.parameters()).device
    losses, hits = [], []
    with torch.no_grad():
        for start in range(0, probe.tokens.shape[0], batch_size):
            tokens = probe.tokens[start : start + batch_size].to(device)
            targets = probe.targets[start : start + batch_size].to(device)
            logits = model(tokens)  # (b, T, V)
            loss = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (b, T)
            ignored = (targets == IGNORE).cpu()
            losses.append(loss.double().cpu().masked_fill(ignored, math.nan))
            hits.append((logits.argmax(-1) == targets).cpu() & ~ignored)
    return TokenScores(torch.cat(losses), torch.cat(hits))


def text_band_losses(
    losses: torch.Tensor, probe: Probe, bands: Sequence[tuple[int, int]]
) -> list[float]:
    """Mean loss on the text targets (neither copy) ``losses`` ``(B, T)`` in each position band
    ``[start, stop)``, which must lie within ``[0, T)`` and hold a text target."""
    if losses.shape != probe.targets.shape:
        raise ValueError(
            f"losses {tuple(losses.shape)} must have the probe's shape {tuple(probe.targets.shape)}"
        )
    check_bands(bands, losses.shape[-1])
    text = ~probe.copied & (probe.targets != IGNORE)
    out = []
    for start, stop in bands:
        chosen = text[:, start:stop]
        if not bool(chosen.any()):
            raise ValueError(f"band [{start}, {stop}) holds no text target")
        out.append(float(losses[:, start:stop][chosen].mean()))
    return out


@dataclass(frozen=True)
class CopyScores:
    """How well a model predicts the copied letters of a probe (``probe.copied``).

    Attributes:
        accuracy: top-1 accuracy; chance, without the first copy, is 1/26.
        below_chance: the fraction whose loss is below :data:`CHANCE_LOSS` (log 26): the
            letters the model predicts better than a guess among the 26.
        loss: mean cross-entropy (nats), which a few confident errors can dominate.
    """

    accuracy: float
    below_chance: float
    loss: float


def copy_scores(scores: TokenScores, probe: Probe) -> CopyScores:
    """Accuracy, share below log 26 and mean loss on the copied letters of ``probe``."""
    if scores.loss.shape != probe.copied.shape or scores.hit.shape != probe.copied.shape:
        raise ValueError(
            f"scores {tuple(scores.loss.shape)} must have the probe's shape "
            f"{tuple(probe.copied.shape)}"
        )
    loss = scores.loss[probe.copied]
    return CopyScores(
        accuracy=float(scores.hit[probe.copied].double().mean()),
        below_chance=float((loss < CHANCE_LOSS).double().mean()),
        loss=float(loss.mean()),
    )


def source_attention(maps: Sequence[torch.Tensor], probe: Probe) -> torch.Tensor:
    """The weight each head puts on the *source* of a copied letter: the query that predicts
    letter j of the second copy reading letter j of the first, ``distance - 1`` positions
    back (what an induction head attends to).

    Args:
        maps: each layer's attention weights ``(B, H, T, T)`` on ``probe.tokens``.

    Returns:
        float64 ``(layers, H)``: the mean over the probe's copied letters.
    """
    rows, targets = torch.nonzero(probe.copied, as_tuple=True)  # the copied targets
    sources = targets + 1 - probe.distance[rows]
    return torch.stack(
        [w.double().cpu()[rows, :, targets, sources].mean(0) for w in _checked_maps(maps, probe)]
    )


def attention_beyond(maps: Sequence[torch.Tensor], reach: int) -> torch.Tensor:
    """The attention mass on keys ``reach`` or more positions back, for the queries that
    have such keys (positions ``reach`` and later): how much a model trained on windows of
    ``reach`` tokens looks past what it could see in training.

    Args:
        maps: each layer's attention weights ``(B, H, T, T)``, with ``T > reach``.

    Returns:
        float64 ``(layers, H)``: the mass, averaged over windows and those queries.
    """
    check_positive_int(reach, "reach")
    out = []
    for w in maps:
        length = w.shape[-1]
        if w.ndim != 4 or w.shape[-2] != length or length <= reach:
            raise ValueError(f"maps must be (B, H, T, T) with T > reach={reach}, got {w.shape}")
        distance = torch.arange(length)[:, None] - torch.arange(length)[None, :]  # (T, T)
        far = (distance >= reach).to(w.device)
        mass = (w.double() * far).sum(-1)[:, :, reach:]  # (B, H, T - reach)
        out.append(mass.mean((0, 2)).cpu())
    return torch.stack(out)


def _checked_maps(maps: Sequence[torch.Tensor], probe: Probe) -> Sequence[torch.Tensor]:
    batch, length = probe.tokens.shape
    for w in maps:
        if w.ndim != 4 or w.shape[0] != batch or w.shape[-2:] != (length, length):
            raise ValueError(
                f"maps must be (B, H, T, T) over the probe's {batch} windows of {length}, "
                f"got {tuple(w.shape)}"
            )
    return maps
