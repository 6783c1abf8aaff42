"""Chapter 8's toy experiment: a char LM trained at 64 tokens, read up to 512.

Three models trained from scratch on the course corpus with the same budget
(4 layers, width 64, 2 heads of dimension 32, 200 steps of 32 sequences of 64
characters):

* ``"rope"``: plain RoPE. Its ``analyse`` hook evaluates the trained model at
  512 tokens, loss per position band (trained range, 2x, 4x, 8x), with plain
  frequencies and each extension table of :func:`~rope_lessons.extension.scaled_frequencies`
  (factor 8) zero-shot, then after a short fine-tune of a copy at 256 tokens;
  and the ablations of the chapter: only the slow pairs (from Liu et al.'s
  critical pair on) interpolated, only the fast ones, YaRN without its
  attention factor, Su's log-length scaling; and the attention entropy per band.
* ``"p-rope"``: p-RoPE with p = 0.25 (:func:`~rope_lessons.spectrum.prope_theta`):
  only the four fastest pairs rotate, all of them turning fully within 64 tokens.
* ``"rope+nope"``: RoPE in layers 0-2, no position encoding in layer 3 (every
  fourth layer, as in Llama 4).

``notebooks/08_extension_experiment.ipynb`` trains seed 0 of ``"rope"`` live.
The first two runs are the cheap ones (the reproduction test re-trains
``"p-rope"``, seed 0, the cheapest by :attr:`~rope_lessons.experiments.Run.cost`).
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from rope_lessons.corpus import CharCorpus
from rope_lessons.experiments import Analyse, Run, held_out, make_run
from rope_lessons.extension import (
    METHODS,
    Method,
    attention_entropy,
    band_edges,
    band_losses,
    critical_pair,
    extended,
    fine_tune,
    scaled_frequencies,
    token_losses,
)
from rope_lessons.model import TinyTransformer
from rope_lessons.rope import Rope, frequencies
from rope_lessons.sweep import Sweep
from rope_lessons.synthetic import Task
from rope_lessons.training import fixed_batches

TRAIN_LEN = 64
FACTOR = 8
EVAL_LEN = TRAIN_LEN * FACTOR
BANDS = band_edges(TRAIN_LEN, FACTOR)  # [0, 64), [64, 128), [128, 256), [256, 512)
BAND_NAMES = tuple(f"{start}-{stop}" for start, stop in BANDS)
HEAD_DIM = 32
STEPS, BATCH_SIZE = 200, 32
EVAL_SEQUENCES, EVAL_BATCHES = 32, 2  # held-out sequences of 512 per batch, batches
FINE_TUNE_LEN, FINE_TUNE_STEPS, FINE_TUNE_BATCH, FINE_TUNE_LR, FINE_TUNE_SEED = (
    256,
    50,
    4,
    1e-3,
    100,
)
P = 0.25
Table = Literal["plain"] | Method
TABLES: tuple[Table, ...] = ("plain", *METHODS)  # plain RoPE, then linear, ntk, yarn, llama3


def eval_batches(data: Task, device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The held-out batches at 512 tokens: the validation split, the same for every run."""
    return fixed_batches(held_out(data, EVAL_LEN, EVAL_SEQUENCES, device), EVAL_BATCHES)


def table(method: Table) -> Rope:
    """The spec (frequencies and attention factor) of ``"plain"`` RoPE or an extension method."""
    if method == "plain":
        return Rope(HEAD_DIM)
    return scaled_frequencies(HEAD_DIM, method, factor=float(FACTOR), original_length=TRAIN_LEN)


def slow_pairs_interpolated(slow: bool) -> torch.Tensor:
    """RoPE's frequencies with only the slow pairs (from the critical pair on) divided by 8,
    or (``slow=False``) only the fast ones."""
    theta = frequencies(HEAD_DIM)
    critical = critical_pair(HEAD_DIM, TRAIN_LEN)
    part = slice(critical, None) if slow else slice(0, critical)
    theta[part] = theta[part] / FACTOR
    return theta


def bands(
    model: TinyTransformer, batches: list[tuple[torch.Tensor, torch.Tensor]], name: str
) -> dict[str, float]:
    """Held-out loss of ``model`` per position band, keyed ``"{name}/{band}"``."""
    losses = band_losses(token_losses(model, batches), BANDS)
    return {f"{name}/{band}": loss for band, loss in zip(BAND_NAMES, losses, strict=True)}


def analyse_bands(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    """Loss per band at 512 tokens, as trained (the from-scratch runs)."""
    return bands(model, eval_batches(run.data, device), "scratch")


ENTROPY_VARIANTS = ("plain", "plain, log scaling", "yarn without factor", "yarn")


def zero_shot_models(model: TinyTransformer) -> dict[str, TinyTransformer]:
    """Copies of the trained model read at 512 tokens without training: every table of
    :data:`TABLES`, then the ablations (the slow or the fast pairs interpolated alone,
    YaRN without its attention factor, Su's log-length scaling)."""
    models: dict[str, TinyTransformer] = {}
    for method in TABLES:
        models[method] = extended(model, table(method))
    yarn_unscaled = Rope.from_theta(table("yarn").theta)  # without its attention factor
    models |= {
        "slow pairs interpolated": extended(model, Rope.from_theta(slow_pairs_interpolated(True))),
        "fast pairs interpolated": extended(model, Rope.from_theta(slow_pairs_interpolated(False))),
        "yarn without factor": extended(model, yarn_unscaled),
        "plain, log scaling": extended(model, log_scale_from=TRAIN_LEN),
        "yarn, log scaling": extended(model, yarn_unscaled, log_scale_from=TRAIN_LEN),
    }
    return models


def fine_tuned_model(model: TinyTransformer, method: Table, data: Task) -> TinyTransformer:
    """A copy of the trained model with ``method``'s table, fine-tuned at 256 tokens."""
    return fine_tune(
        extended(model, table(method)),
        data,
        length=FINE_TUNE_LEN,
        steps=FINE_TUNE_STEPS,
        batch_size=FINE_TUNE_BATCH,
        lr=FINE_TUNE_LR,
        seed=FINE_TUNE_SEED,
    )


def entropy_bands(model: TinyTransformer, tokens: torch.Tensor, name: str) -> dict[str, float]:
    """Mean attention entropy per position band, keyed ``"entropy/{name}/{band}"``."""
    per_position = attention_entropy(model, tokens)
    values = band_losses(per_position, BANDS)
    return {f"entropy/{name}/{band}": v for band, v in zip(BAND_NAMES, values, strict=True)}


def analyse_extension(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    """Every zero-shot and fine-tuned table, the ablations and the attention entropy."""
    batches = eval_batches(run.data, device)
    out: dict[str, float] = {}
    models = zero_shot_models(model)
    for name, variant in models.items():
        out |= bands(variant, batches, f"zero-shot/{name}")
    for method in TABLES:
        out |= bands(fine_tuned_model(model, method, run.data), batches, f"fine-tuned/{method}")
    for name in ENTROPY_VARIANTS:
        out |= entropy_bands(models[name], batches[0][0], name)
    return out


CORPUS = CharCorpus()


def corpus_run(
    label: str, analyse: Analyse[TinyTransformer], eval_lens: tuple[int, ...], **fields: Any
) -> Run[TinyTransformer]:
    """A run of the experiment: the shared model size, budget and corpus."""
    return make_run(
        label,
        CORPUS,
        train_len=TRAIN_LEN,
        eval_lens=eval_lens,
        steps=STEPS,
        batch_size=BATCH_SIZE,
        analyse=analyse,
        dim=64,
        n_layers=4,
        n_heads=2,
        **fields,
    )


PROPE = corpus_run("p-rope", analyse_bands, (TRAIN_LEN,), rope=Rope(HEAD_DIM, p=P))
NOPE_LAYERS = corpus_run("rope+nope", analyse_bands, (TRAIN_LEN,), nope_layers=(3,))
ROPE = corpus_run("rope", analyse_extension, (TRAIN_LEN, EVAL_LEN))

SWEEP = Sweep(
    name="ch08_extension",
    version=1,
    description=(
        "Chapter 8: a 4-layer char LM trained at 64 tokens and read to 512, loss per position "
        "band; plain RoPE with PI, NTK-aware, YaRN and llama3 tables zero-shot and after a "
        "fine-tune at 256, against p-RoPE (p=0.25) and a NoPE fourth layer trained from scratch."
    ),
    runs=(PROPE, NOPE_LAYERS, ROPE),
    seeds=(0, 1, 2),
)
