"""Chapters 5 and 9: the toy's pair ablations under zero- and mean-ablation, side by side.

Chapter 5 removed quarters of a toy's rotary pairs by setting them to zero
(``ch05_frequencies``). Zeroing also deletes what every token shares, the
mean term that chapter 4 found behind the decay, so chapter 9 compares it
with mean-ablation on SmolLM2 (:mod:`rope_lessons.chapters.ablation`). This sweep
makes the same comparison on the toy, with the same sets and the same code
as the real model's notebook:

* the four contiguous quarters of the 16 pairs (0-3 fastest ... 12-15
  slowest) and eight random quarters, each with the queries' pairs set to
  zero, to their means, and (these sets are the same in every head) the keys'
  pairs set to their means;
* the fastest and the slowest quarter against norm-matched controls (three
  draws each), both limited to the heads where the control reaches 90% of the
  quarter's share of the query norm² (:func:`~rope_lessons.chapters.ablation.norm_matched_sets`).

The model is chapter 5's ``corpus`` run (next character on the course corpus,
base 10000, 1600 steps of 32 windows of 64 characters, five seeds; its
stored twin in ``ch05_frequencies`` has the zero-ablation numbers of chapter
5). Chapter 5's lag-1 copy model is left out: its fastest quarter holds
nearly all of every head's norm, so no control can match it. The means are
over the 64 held-out sequences the pair shares are measured on; losses are on
the run's held-out batches.

Run with ``python -m rope_lessons.sweeps ch05_mean_ablation``; chapter 9's
ablation notebook reads it beside SmolLM2's numbers.
"""

from __future__ import annotations

import dataclasses
import functools

import torch

from rope_lessons.chapters.ablation import (
    AblationCost,
    AblationSet,
    ablation_costs,
    norm_matched_sets,
    pairs_ablated,
    projection_means,
    quarter_sets,
)
from rope_lessons.chapters.spectrum import pair_energy_shares
from rope_lessons.evidence.runs import Run, held_out
from rope_lessons.evidence.sweep import Sweep
from rope_lessons.evidence.training import evaluate
from rope_lessons.sweeps.ch05_frequencies import ANALYSIS_SEQUENCES, CORPUS, quarters
from rope_lessons.toy.model import TinyTransformer

RANDOM_DRAWS = 8
MATCHED_DRAWS = 3
CONTROL_SEED = 0
COST_KINDS = ("zero", "mean_query", "mean_key")


def cost_key(kind: str, name: str, draw: int) -> str:
    """The ``extra`` key of one cost: ``"zero | pairs 0-3 | 0"``."""
    return f"{kind} | {name} | {draw}"


@torch.no_grad()
def ablation_analysis(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    """Zero- and mean-ablation costs of every set (the sweep's ``analyse``).

    Returns:
        ``loss`` (intact, held-out), and for every set ``name`` and its draw
        ``i``: ``zero | name | i``, ``mean_query | name | i``, ``mean_key |
        name | i`` (uniform sets only) in nats above ``loss``, and ``share |
        name | i``, the query norm² share it removes, where measured.
    """
    rope = model.config.rope
    assert rope is not None
    sampler = held_out(run.data, run.train_len, device=device)
    tokens = sampler()[0][:ANALYSIS_SEQUENCES]
    layers = model.layer_qkv(tokens)
    q_shares, _ = pair_energy_shares(layers, rope)  # (L, H, P)
    generator = torch.Generator().manual_seed(CONTROL_SEED)
    sets: list[AblationSet] = quarter_sets(rope.dim // 2, RANDOM_DRAWS, generator)
    for quarter in quarters(model.config.head_dim):
        sets += norm_matched_sets(q_shares, quarter, MATCHED_DRAWS, generator)

    def loss() -> float:
        sampler = held_out(run.data, run.train_len, device=device)
        return evaluate(model, sampler, batches=run.eval_batches).loss

    numbers = {"loss": loss()}
    ablate = functools.partial(pairs_ablated, model)
    costs = ablation_costs(loss, numbers["loss"], ablate, sets, projection_means(layers))
    draws: dict[str, int] = {}
    for cost in costs:
        draw = draws[cost.name] = draws.get(cost.name, -1) + 1
        for kind in COST_KINDS:
            value = getattr(cost, kind)
            if value is not None:
                numbers[cost_key(kind, cost.name, draw)] = value
        if cost.share is not None:
            numbers[cost_key("share", cost.name, draw)] = cost.share
    return numbers


def stored_costs(extra: dict[str, float]) -> list[AblationCost]:
    """The costs of one stored run, as
    :func:`~rope_lessons.chapters.ablation.ablation_costs` returned them (draws of a
    control in order)."""
    rows: dict[tuple[str, int], dict[str, float]] = {}
    for key, value in extra.items():
        if key.count(" | ") == 2:
            kind, name, draw = key.split(" | ")
            rows.setdefault((name, int(draw)), {})[kind] = value
    return [
        AblationCost(
            name,
            row.get("share"),
            row["zero"],
            row["mean_query"],
            row.get("mean_key"),
        )
        for (name, _), row in rows.items()
    ]


SWEEP = Sweep(
    name="ch05_mean_ablation",
    version=1,
    description=(
        "Chapters 5 and 9: chapter 5's corpus toy (base 1e4, T 64) with quarters, "
        "random quarters and norm-matched sets of pairs removed by zero- and by mean-ablation "
        "(queries, and keys where the set is the same in every head)."
    ),
    runs=(dataclasses.replace(CORPUS, analyse=ablation_analysis),),
    seeds=(0, 1, 2, 3, 4),
)
