"""Training and evaluation loops for the toy models of the course.

One optimiser (AdamW), a short linear warm-up followed by cosine decay,
gradient clipping, and a progress bar on standard error. Targets equal to
:data:`rope_lessons.synthetic.IGNORE` are not scored.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from rope_lessons._checks import check_positive_int
from rope_lessons.synthetic import IGNORE, Batch


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
class TrainResult:
    """What a training run produced.

    Attributes:
        losses: the training loss at every step.
        wall_seconds: time spent in the loop.
    """

    losses: list[float]
    wall_seconds: float

    def smoothed(self, window: int = 20) -> list[float]:
        """Running mean of the losses over the last ``window`` steps (see :func:`running_mean`)."""
        return running_mean(torch.tensor(self.losses, dtype=torch.float64), window).tolist()


@dataclass(frozen=True)
class Metrics:
    """Mean loss and accuracy over the scored positions."""

    loss: float
    accuracy: float


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

    Returns:
        A :class:`TrainResult` with the loss of every step.
    """
    check_positive_int(steps, "steps")
    warmup = max(1, steps // 10) if warmup is None else warmup
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    model.train()
    losses: list[float] = []
    start = time.perf_counter()
    bar = tqdm(range(steps), desc=desc, disable=not progress, file=sys.stderr, mininterval=1.0)
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
    model.eval()
    return TrainResult(losses=losses, wall_seconds=time.perf_counter() - start)


@torch.no_grad()
def evaluate(
    model: nn.Module,
    sample_batch: Callable[[], Batch],
    *,
    batches: int = 8,
) -> Metrics:
    """Mean loss and accuracy of ``model`` over ``batches`` batches.

    Accuracy counts argmax predictions over scored positions only.
    """
    check_positive_int(batches, "batches")
    model.eval()
    total_loss, correct, scored = 0.0, 0, 0
    for _ in range(batches):
        tokens, targets = sample_batch()
        logits = model(tokens)
        mask = targets != IGNORE
        n = int(mask.sum())
        total_loss += masked_cross_entropy(logits, targets).item() * n
        correct += int((logits.argmax(-1) == targets)[mask].sum())
        scored += n
    if scored == 0:
        raise ValueError("the batches contain no scored positions")
    return Metrics(loss=total_loss / scored, accuracy=correct / scored)
