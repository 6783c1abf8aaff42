"""Training and evaluation loops for the toy models of the course.

One optimiser (AdamW), a short linear warm-up followed by cosine decay,
gradient clipping, and a progress bar on standard error. Targets equal to
:data:`rope_lessons.toy.synthetic.IGNORE` are not scored.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from rope_lessons._checks import check_positive_int
from rope_lessons.evidence.runtime import smoke_steps
from rope_lessons.toy.synthetic import IGNORE, Batch


def running_mean(values: torch.Tensor, window: int) -> torch.Tensor:
    """Mean of the last ``window`` entries at every index (fewer at the start).

    Args:
        values: ``(..., steps)``.
        window: how many entries to average, >= 1.

    Returns:
        Tensor of the shape of ``values``, float64.
    """
    if not isinstance(values, torch.Tensor):
        raise TypeError(f"values must be a torch.Tensor, got {type(values).__name__}")
    window = check_positive_int(window, "window")
    values = values.double()
    totals = values.cumsum(dim=-1)  # (..., steps)
    shifted = torch.zeros_like(totals)
    shifted[..., window:] = totals[..., :-window]
    counts = torch.arange(1, values.shape[-1] + 1, dtype=torch.float64).clamp(max=window)
    return (totals - shifted) / counts


@dataclass(frozen=True)
class Metrics:
    """Held-out metrics over the scored positions.

    Attributes:
        loss: mean cross-entropy (nats).
        accuracy: share of argmax predictions over the whole vocabulary that
            equal the target.
        answer_accuracy: for a task with a fixed answer set (e.g. ``A`` and
            ``B`` of :class:`~rope_lessons.toy.synthetic.WhichFirst`), the share of
            positions where the target has the highest logit *among the
            answers*: the answers scored against each other. ``None`` otherwise.
        neither: for such a task, the share of positions whose argmax over the
            whole vocabulary is none of the answers. ``None`` otherwise.
    """

    loss: float
    accuracy: float
    answer_accuracy: float | None = None
    neither: float | None = None


@dataclass(frozen=True)
class TrainResult:
    """What a training run produced.

    Attributes:
        losses: the training loss at every step trained.
        wall_seconds: time spent in the loop.
    """

    losses: list[float]
    wall_seconds: float

    def smoothed(self, window: int = 20) -> list[float]:
        """Running mean of the losses over the last ``window`` steps (see :func:`running_mean`)."""
        return running_mean(torch.tensor(self.losses, dtype=torch.float64), window).tolist()


def masked_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over positions whose target is not IGNORE.

    Args:
        logits: ``(B, T, V)``.
        targets: ``(B, T)`` long.
    """
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


def learning_rate(step: int, steps: int, peak: float, warmup: int) -> float:
    """Linear warm-up to ``peak`` over ``warmup`` steps, then cosine decay to ``peak / 10``."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def train(
    model: nn.Module,
    sample_batch: Callable[[], Batch],
    *,
    steps: int,
    lr: float = 3e-3,
    weight_decay: float = 0.01,
    warmup: int | None = None,
    grad_clip: float = 1.0,
    progress: bool = True,
    desc: str = "training",
    stop_after: int | None = None,
    checkpoints: Collection[int] = (),
    on_checkpoint: Callable[[int], None] | None = None,
) -> TrainResult:
    """Train ``model`` on batches from ``sample_batch`` for ``steps`` steps.

    Args:
        model: maps tokens ``(B, T)`` to logits ``(B, T, V)``.
        sample_batch: returns ``(tokens, targets)`` on the model's device.
        steps: optimiser steps.
        lr: peak learning rate.
        weight_decay: AdamW weight decay.
        warmup: warm-up steps; default 10% of ``steps``.
        grad_clip: maximum global gradient norm.
        progress: show a progress bar on standard error.
        desc: the progress bar's label.
        stop_after: train only the first this many steps of the ``steps``-step
            schedule (the learning rate follows the full schedule, so the
            losses are a prefix of the full run's). Default: all of them. The
            environment variable ``ROPE_LESSONS_SMOKE_STEPS`` caps it further
            (:func:`~rope_lessons.evidence.runtime.smoke_steps`).
        checkpoints: steps done after which ``on_checkpoint(steps_done)`` is
            called (e.g. to evaluate the model on held-out data; that touches
            neither the training stream nor the optimiser, so the losses are
            the same with or without it); the model is put back in training
            mode afterwards. Checkpoints past the last step trained are skipped.
        on_checkpoint: the function called at the checkpoints.

    Returns:
        A :class:`TrainResult` with the loss of every step trained.
    """
    check_positive_int(steps, "steps")
    last = steps if stop_after is None else min(check_positive_int(stop_after, "stop_after"), steps)
    smoke = smoke_steps()
    if smoke is not None:
        last = min(last, smoke)
    if checkpoints and on_checkpoint is None:
        raise ValueError("checkpoints need an on_checkpoint function")
    for point in checkpoints:
        check_positive_int(point, "checkpoints")
    warmup = max(1, steps // 10) if warmup is None else warmup
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    model.train()
    losses: list[float] = []
    start = time.perf_counter()
    bar = tqdm(range(last), desc=desc, disable=not progress, file=sys.stderr, mininterval=1.0)
    for step in bar:
        for group in optimiser.param_groups:
            group["lr"] = learning_rate(step, steps, lr, warmup)
        tokens, targets = sample_batch()
        loss = masked_cross_entropy(model(tokens), targets)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimiser.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
        done = step + 1
        if on_checkpoint is not None and done in checkpoints:
            on_checkpoint(done)
            model.train()
    model.eval()
    return TrainResult(losses=losses, wall_seconds=time.perf_counter() - start)


def fixed_batches(sample_batch: Callable[[], Batch], batches: int) -> list[Batch]:
    """Draw ``batches`` batches once, to evaluate on the same data again and again."""
    return [sample_batch() for _ in range(check_positive_int(batches, "batches"))]


@torch.no_grad()
def evaluate(
    model: nn.Module,
    sample_batch: Callable[[], Batch],
    *,
    batches: int = 8,
    answers: Sequence[int] | None = None,
) -> Metrics:
    """Mean loss and accuracy of ``model`` over ``batches`` batches.

    Accuracy counts argmax predictions over the whole vocabulary, at scored
    positions only. With ``answers`` (a task's fixed answer set, e.g.
    ``(WhichFirst.A, WhichFirst.B)``) it also scores the answers against each
    other and counts predictions that are none of them (see :class:`Metrics`).

    Under ``ROPE_LESSONS_SMOKE_STEPS`` (a smoke test) one batch is evaluated.

    Raises:
        ValueError: if no position is scored, if a target lies outside
            ``answers``, or if the model's logits are not finite (a metric is
            never NaN).
    """
    check_positive_int(batches, "batches")
    if smoke_steps() is not None:  # a smoke test runs code paths; one batch exercises them
        batches = 1
    answer_ids = None if answers is None else check_answers(answers)
    model.eval()
    total_loss, correct, answer_correct, neither, scored = 0.0, 0, 0, 0, 0
    for _ in range(batches):
        tokens, targets = sample_batch()
        logits = model(tokens)  # (B, T, V)
        mask = targets != IGNORE
        if not bool(mask.any()):
            continue
        scored_logits, scored_targets = logits[mask], targets[mask]  # (N, V), (N,)
        if not bool(torch.isfinite(scored_logits).all()):
            raise ValueError(
                "the model's logits are not finite (NaN or inf): did training diverge?"
            )
        total_loss += F.cross_entropy(scored_logits, scored_targets, reduction="sum").item()
        predictions = scored_logits.argmax(-1)
        correct += int((predictions == scored_targets).sum())
        scored += int(mask.sum())
        if answer_ids is not None:
            answer_ids = answer_ids.to(targets.device)
            is_answer = scored_targets[:, None] == answer_ids  # (N, answers)
            if not bool(is_answer.any(-1).all()):
                raise ValueError(f"answers {answers} do not contain every scored target")
            best_answer = answer_ids[scored_logits[:, answer_ids].argmax(-1)]
            answer_correct += int((best_answer == scored_targets).sum())
            neither += int((~torch.isin(predictions, answer_ids)).sum())
    if scored == 0:
        raise ValueError("the batches contain no scored positions")
    if answer_ids is None:
        return Metrics(loss=total_loss / scored, accuracy=correct / scored)
    return Metrics(
        loss=total_loss / scored,
        accuracy=correct / scored,
        answer_accuracy=answer_correct / scored,
        neither=neither / scored,
    )


def check_answers(answers: Sequence[int]) -> torch.Tensor:
    """``answers`` as a long tensor, if it is a sequence of at least two distinct token ids."""
    values = list(answers)
    if len(values) < 2 or len(set(values)) != len(values):
        raise ValueError(f"answers must hold at least two distinct token ids, got {answers!r}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TypeError(f"answers must be non-negative ints, got {answers!r}")
    return torch.tensor(values, dtype=torch.long)
