"""Synthetic sequence tasks that a model can only solve if it knows token order.

Each task draws batches ``(tokens, targets)`` of shape ``(B, T)``. A target of
``IGNORE`` (-100) marks a position that is not scored, which is what
:func:`torch.nn.functional.cross_entropy` skips by default. All randomness
comes from a :class:`torch.Generator`, so a seed fixes the data exactly.

Every task, and the text corpus of :mod:`rope_lessons.toy.corpus`, has two splits,
``"train"`` and ``"val"``. A corpus holds out the end of its text; a synthetic
task draws both splits from the same distribution, and
:func:`batch_sampler` keeps them apart by seeding the validation stream with
``VALIDATION_SEED_OFFSET + seed``, so a training stream (seed below the
offset) never repeats a validation stream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

import torch

from rope_lessons._checks import check_choice, check_positive_int

IGNORE = -100

Batch = tuple[torch.Tensor, torch.Tensor]

Split = Literal["train", "val"]
SPLITS: tuple[Split, ...] = get_args(Split)
VALIDATION_SEED_OFFSET = 10_000


class Task(Protocol):
    """What the training loop needs from a task."""

    @property
    def vocab_size(self) -> int:
        """Number of token ids the task uses."""
        ...

    @property
    def min_len(self) -> int:
        """Shortest sequence the task can be posed on."""
        ...

    def sample(
        self, batch_size: int, seq_len: int, generator: torch.Generator, split: Split = "train"
    ) -> Batch:
        """Tokens and targets, both ``(batch_size, seq_len)`` long tensors on the CPU."""
        ...


def _check_shape(task: Task, batch_size: int, seq_len: int, split: str) -> None:
    check_choice(split, "split", SPLITS)
    check_positive_int(batch_size, "batch_size")
    check_positive_int(seq_len, "seq_len")
    if seq_len < task.min_len:
        raise ValueError(f"seq_len must be >= {task.min_len} for this task, got {seq_len}")


@dataclass(frozen=True)
class WhichFirst:
    """Two markers, ``A`` and ``B``, sit among random fillers; which came first?

    The last token is a query; its target is ``A`` if ``A`` precedes ``B``,
    else ``B``. Every other position is unscored. Both answers have
    probability 1/2, and the *set* of tokens is the same for both answers, so
    a model that cannot see order scores exactly chance (1/2) in expectation.

    Tokens: ``0 = A``, ``1 = B``, ``2 = ?`` (query), ``3 ..`` fillers.
    """

    n_fillers: int = 8

    A = 0
    B = 1
    QUERY = 2

    @property
    def vocab_size(self) -> int:
        return 3 + self.n_fillers

    @property
    def min_len(self) -> int:
        return 3

    chance_accuracy = 0.5

    @property
    def answers(self) -> tuple[int, int]:
        """The two possible targets, ``(A, B)``: see
        :func:`rope_lessons.evidence.training.evaluate`."""
        return (self.A, self.B)

    def sample(
        self, batch_size: int, seq_len: int, generator: torch.Generator, split: Split = "train"
    ) -> Batch:
        """Tokens and targets ``(B, T)``; only the last column is scored.

        Both splits come from the same distribution (see the module docstring).
        """
        _check_shape(self, batch_size, seq_len, split)
        tokens = torch.randint(3, self.vocab_size, (batch_size, seq_len), generator=generator)
        tokens[:, -1] = self.QUERY
        # Two distinct random places among the first T-1 positions.
        places = torch.rand(batch_size, seq_len - 1, generator=generator).argsort(-1)[:, :2]
        rows = torch.arange(batch_size)
        tokens[rows, places[:, 0]] = self.A
        tokens[rows, places[:, 1]] = self.B
        targets = torch.full_like(tokens, IGNORE)
        a_first = places[:, 0] < places[:, 1]
        targets[:, -1] = torch.where(a_first, self.A, self.B)
        return tokens, targets


@dataclass(frozen=True)
class CopyAtLag:
    """Predict the token seen ``lag`` steps earlier: ``target[t] = tokens[t - lag]``.

    Tokens are uniform over ``vocab``; the first ``lag`` positions are
    unscored. Chance accuracy is ``1 / vocab``. With ``lag=1`` it is the job of
    a previous-token head.
    """

    lag: int = 1
    vocab: int = 16

    @property
    def vocab_size(self) -> int:
        return self.vocab

    @property
    def min_len(self) -> int:
        return self.lag + 1

    @property
    def chance_accuracy(self) -> float:
        return 1.0 / self.vocab

    def sample(
        self, batch_size: int, seq_len: int, generator: torch.Generator, split: Split = "train"
    ) -> Batch:
        """Tokens and targets ``(B, T)``; the first ``lag`` columns are unscored.

        Both splits come from the same distribution (see the module docstring).
        """
        _check_shape(self, batch_size, seq_len, split)
        check_positive_int(self.lag, "lag")
        tokens = torch.randint(0, self.vocab, (batch_size, seq_len), generator=generator)
        targets = torch.full_like(tokens, IGNORE)
        targets[:, self.lag :] = tokens[:, : -self.lag]
        return tokens, targets


@dataclass(frozen=True)
class PositionModulo:
    r"""Say where you are, modulo ``modulus``: ``target[t] = t mod modulus``.

    The tokens are uniform over ``vocab`` and carry no information; the answer
    is the position itself, counted from the start of the sequence and reduced
    modulo ``modulus`` (answer ``r`` is token id ``r``). Every position is
    scored. Chance accuracy is ``1 / modulus``. A causal model must count: a
    recurrence with real positive decays turns a constant input into a
    monotone state and cannot oscillate with period 3; a complex decay
    :math:`r e^{\pm 2\pi i/3}` can (chapter 7).
    """

    modulus: int = 3
    vocab: int = 8

    @property
    def vocab_size(self) -> int:
        return max(self.vocab, self.modulus)

    @property
    def min_len(self) -> int:
        return 1

    @property
    def chance_accuracy(self) -> float:
        return 1.0 / self.modulus

    def sample(
        self, batch_size: int, seq_len: int, generator: torch.Generator, split: Split = "train"
    ) -> Batch:
        """Tokens and targets ``(B, T)``; every position is scored.

        Both splits come from the same distribution (see the module docstring).
        """
        _check_shape(self, batch_size, seq_len, split)
        check_positive_int(self.modulus, "modulus")
        check_positive_int(self.vocab, "vocab")
        if self.modulus < 2:
            raise ValueError(f"modulus must be >= 2, got {self.modulus}")
        tokens = torch.randint(0, self.vocab, (batch_size, seq_len), generator=generator)
        targets = (torch.arange(seq_len) % self.modulus).expand(batch_size, seq_len).clone()
        return tokens, targets


def batch_sampler(
    task: Task,
    batch_size: int,
    seq_len: int,
    *,
    seed: int,
    split: Split = "train",
    device: torch.device | str = "cpu",
) -> Callable[[], Batch]:
    """A function that returns a fresh batch of ``split`` on ``device`` at every call.

    The batches come from a generator seeded with ``seed`` (training) or
    ``VALIDATION_SEED_OFFSET + seed`` (validation), so two samplers with the
    same arguments produce the same stream on any machine.
    """
    check_choice(split, "split", SPLITS)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    generator = torch.Generator().manual_seed(
        seed + (VALIDATION_SEED_OFFSET if split == "val" else 0)
    )

    def sample() -> Batch:
        tokens, targets = task.sample(batch_size, seq_len, generator, split)
        return tokens.to(device), targets.to(device)

    return sample


@dataclass(frozen=True)
class MarkerDistance:
    """How many steps ago was the marker? The answer is a relative position.

    One ``MARKER`` token sits at a random place among uniform fillers. Every
    later position ``t`` at most ``max_distance`` after it is scored, with the
    answer token of the distance ``t - p`` to the marker at ``p``; all other
    positions are unscored. The answer is the relative position of a token that
    attention retrieves by its content, which is what turning values by their
    position encodes (chapter 6: VO-RoPE and RoPER). Chance accuracy is
    ``1 / max_distance``.

    Tokens: ``0 = MARKER``, ``1 .. n_fillers`` fillers, then one answer token
    per distance ``1 .. max_distance`` (id ``n_fillers + distance``); answer
    tokens appear only as targets.
    """

    max_distance: int = 16
    n_fillers: int = 8

    MARKER = 0

    @property
    def vocab_size(self) -> int:
        return 1 + self.n_fillers + self.max_distance

    @property
    def min_len(self) -> int:
        return 2

    @property
    def chance_accuracy(self) -> float:
        return 1.0 / self.max_distance

    def answer(self, distance: torch.Tensor) -> torch.Tensor:
        """The answer token of each distance in ``1 .. max_distance``."""
        return self.n_fillers + distance

    def sample(
        self, batch_size: int, seq_len: int, generator: torch.Generator, split: Split = "train"
    ) -> Batch:
        """Tokens and targets ``(B, T)``; scored where ``1 <= t - marker <= max_distance``.

        Both splits come from the same distribution (see the module docstring).
        """
        _check_shape(self, batch_size, seq_len, split)
        check_positive_int(self.max_distance, "max_distance")
        check_positive_int(self.n_fillers, "n_fillers")
        tokens = torch.randint(1, 1 + self.n_fillers, (batch_size, seq_len), generator=generator)
        marker = torch.randint(0, seq_len - 1, (batch_size,), generator=generator)  # (B,)
        tokens[torch.arange(batch_size), marker] = self.MARKER
        distance = torch.arange(seq_len)[None, :] - marker[:, None]  # (B, T)
        scored = (distance >= 1) & (distance <= self.max_distance)
        targets = torch.where(scored, self.answer(distance.clamp(min=1)), IGNORE)
        return tokens, targets
