"""Synthetic sequence tasks that a model can only solve if it knows token order.

Each task draws batches ``(tokens, targets)`` of shape ``(B, T)``. A target of
``IGNORE`` (-100) marks a position that is not scored, which is what
:func:`torch.nn.functional.cross_entropy` skips by default. All randomness
comes from a :class:`torch.Generator`, so a seed fixes the data exactly.

Every task, and the text corpus of :mod:`rope_lessons.corpus`, has two splits,
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
        """The two possible targets, ``(A, B)``: see :func:`rope_lessons.training.evaluate`."""
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
