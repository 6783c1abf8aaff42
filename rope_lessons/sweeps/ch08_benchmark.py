"""Chapter 8's benchmark: a char LM trained at 64 tokens on text with copied segments, read to 512.

The data is :class:`~rope_lessons.long_context.CopyInText` (the course corpus
with a segment of 16 random letters written again 16 to 48 characters later
in every training window), so a model that cannot reach back past its window
pays for it on the copied letters, and every method is scored twice: on the
text, per position band, and on the copied letters, per distance band
(:func:`score`).

Two runs, 10 seeds, 2000 steps of 32 windows of 64 (copying is learnt by about
step 1000; see the chapter's learning curve):

* ``"rope+nope"``: RoPE in layers 0-2 and no position encoding in layer 3,
  read as trained, then with its RoPE layers chunked or windowed at the
  trained length (a zero-shot iRoPE) and with Llama 4's temperature tuning
  added. Listed first: it is the cheaper reference run the reproduction test
  re-trains.
* ``"rope"``: plain RoPE, read zero-shot with every extension spec of
  :func:`zero_shot_models` and a sliding window of the trained length; then
  fine-tuned from the trained weights with plain, PI, YaRN and raised-base
  frequencies at 256 tokens, with plain RoPE at 512 (continued training at
  the target length), and with plain RoPE at 64 (the control: the same extra
  steps and tokens without longer windows), 1024 tokens per step, each on the
  seed's own stream, scored after 50, 200 and 800 steps of one 800-step
  fine-tune.

The baselines trained from scratch (a model trained at 512 with the same
tokens, p-RoPE, a trained iRoPE) are the sweep ``ch08_baselines``.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any, Literal

import torch

from rope_lessons.attention import Local
from rope_lessons.experiments import Analyse, Run, make_run
from rope_lessons.extension import (
    ExtensionMethod,
    band_edges,
    extended,
    fine_tune,
    scaled_frequencies,
)
from rope_lessons.long_context import (
    CopyInText,
    Probe,
    copy_loss,
    per_token_losses,
    text_band_losses,
)
from rope_lessons.model import TinyTransformer
from rope_lessons.rope import Rope
from rope_lessons.sweep import Sweep

TRAIN_LEN, FACTOR, SEGMENT, HEAD_DIM = 64, 8, 16, 32
EVAL_LEN = TRAIN_LEN * FACTOR
STEPS, BATCH_SIZE = 2000, 32
TEXT_BANDS = tuple(band_edges(TRAIN_LEN, FACTOR))  # [0, 64), [64, 128), [128, 256), [256, 512)
# distances between the two copies: those seen in training (16-48), then 2x, 4x, 8x
DISTANCE_BANDS = ((SEGMENT, TRAIN_LEN - SEGMENT + 1), (64, 128), (128, 256), (256, 497))
PROBE_SEQUENCES, PROBE_SEED = 32, 8
FINE_TUNE_LEN, FINE_TUNE_BATCH, FINE_TUNE_LR, FINE_TUNE_WARMUP = 256, 4, 1e-3, 10
FINE_TUNE_STEPS, FINE_TUNE_POINTS = 800, (50, 200, 800)
FINE_TUNE_TOKENS = FINE_TUNE_BATCH * FINE_TUNE_LEN  # per step, at every length
FINE_TUNE_SEED_OFFSET = 1000  # seed s fine-tunes on stream 1000 + s
RAISED_BASE = 1e5
DATA = CopyInText(segment=SEGMENT)


Kind = Literal["text", "copy"]
BANDS: dict[Kind, tuple[tuple[int, int], ...]] = {"text": TEXT_BANDS, "copy": DISTANCE_BANDS}


def band_name(band: tuple[int, int]) -> str:
    """``"start-stop"``: how a band ``[start, stop)`` is named in stored keys."""
    return f"{band[0]}-{band[1]}"


def band_label(band: tuple[int, int]) -> str:
    """How the chapter names a band ``[start, stop)``: its first and last value,
    ``"start-(stop-1)"`` (e.g. ``"256-511"``)."""
    return f"{band[0]}-{band[1] - 1}"


def key(reading: str, kind: Kind, band: tuple[int, int]) -> str:
    """Where a score is kept in a result's ``extra``: ``"{reading}/{kind}/{start-stop}"``,
    e.g. ``"zero-shot/yarn/copy/256-497"`` or ``"ft200/pi/text/0-64"``."""
    return f"{reading}/{kind}/{band_name(band)}"


@cache
def probes() -> tuple[Probe, ...]:
    """One held-out probe per distance band, at 512 tokens, the same for every model."""
    return tuple(
        DATA.probe(PROBE_SEQUENCES, EVAL_LEN, band, seed=PROBE_SEED + i)
        for i, band in enumerate(DISTANCE_BANDS)
    )


def score(model: TinyTransformer, name: str) -> dict[str, float]:
    """Loss on the text per position band (``"{name}/text/{band}"``) over every probe, and
    on the copied letters per distance band (``"{name}/copy/{band}"``)."""
    out: dict[str, float] = {}
    losses = [per_token_losses(model, probe) for probe in probes()]
    text = text_band_losses(torch.cat(losses), Probe.joined(probes()), TEXT_BANDS)
    out |= {key(name, "text", b): v for b, v in zip(TEXT_BANDS, text, strict=True)}
    for band, probe, loss in zip(DISTANCE_BANDS, probes(), losses, strict=True):
        out[key(name, "copy", band)] = copy_loss(loss, probe)
    return out


def spec(method: ExtensionMethod, **options: Any) -> Rope:
    """An extension method's spec for factor 8 from 64 tokens."""
    return scaled_frequencies(
        HEAD_DIM, method, factor=float(FACTOR), original_length=TRAIN_LEN, **options
    )


def zero_shot_specs() -> dict[str, Rope]:
    """The specs read without training: plain RoPE and every extension method's."""
    yarn = spec("yarn")
    return {
        "plain": Rope(HEAD_DIM),
        "pi": spec("linear"),
        "ntk": spec("ntk"),
        "ntk, alpha=16": spec("ntk", alpha=16.0),
        "ntk, alpha=64": spec("ntk", alpha=64.0),
        "dynamic ntk": spec("dynamic", length=EVAL_LEN),
        "yarn": yarn,
        "yarn, paper ramp": spec("yarn", ramp="turns"),
        "yarn, no truncation": spec("yarn", truncate=False),
        "yarn without factor": Rope.from_theta(yarn.theta),
        "llama3": spec("llama3"),
    }


def zero_shot_models(model: TinyTransformer) -> dict[str, TinyTransformer]:
    """Copies of the trained model read at 512 without training: each spec of
    :func:`zero_shot_specs`, a sliding window of the trained length, and Su's log-length
    scaling on plain RoPE."""
    models = {name: extended(model, rope) for name, rope in zero_shot_specs().items()}
    models["window"] = extended(model, rope_local=Local(TRAIN_LEN))
    models["plain, log scaling"] = extended(model, log_scale_from=TRAIN_LEN)
    return models


FINE_TUNES: dict[str, tuple[Rope, int]] = {
    "plain": (Rope(HEAD_DIM), FINE_TUNE_LEN),
    "pi": (spec("linear"), FINE_TUNE_LEN),
    "yarn": (spec("yarn"), FINE_TUNE_LEN),
    "raised base": (Rope(HEAD_DIM, base=RAISED_BASE), FINE_TUNE_LEN),
    "plain at 512": (Rope(HEAD_DIM), EVAL_LEN),
    "control": (Rope(HEAD_DIM), TRAIN_LEN),
}


def fine_tuned_scores(model: TinyTransformer, method: str, seed: int) -> dict[str, float]:
    """One 800-step fine-tune of a copy of ``model`` with ``method``'s spec and length,
    scored after 50, 200 and 800 steps (``"ft{steps}/{method}/..."``)."""
    rope, length = FINE_TUNES[method]
    copy = extended(model, rope)
    out: dict[str, float] = {}

    def checkpoint(done: int) -> None:
        out.update(score(copy, f"ft{done}/{method}"))

    fine_tune(
        copy,
        DATA,
        length=length,
        steps=FINE_TUNE_STEPS,
        batch_size=FINE_TUNE_TOKENS // length,
        lr=FINE_TUNE_LR,
        seed=FINE_TUNE_SEED_OFFSET + seed,
        warmup=FINE_TUNE_WARMUP,
        checkpoints=FINE_TUNE_POINTS,
        on_checkpoint=checkpoint,
    )
    return out


def analyse_rope(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    """Every zero-shot reading, then every fine-tune curve."""
    out: dict[str, float] = {}
    for name, variant in zero_shot_models(model).items():
        out |= score(variant, f"zero-shot/{name}")
    seed = torch.initial_seed()  # the run's seed: run_once seeded torch with it
    for method in FINE_TUNES:
        out |= fine_tuned_scores(model, method, seed)
    return out


def with_fields(model: TinyTransformer, **fields: Any) -> TinyTransformer:
    """A copy of ``model`` whose config has ``fields`` changed, with the same weights."""
    copy = TinyTransformer(dataclasses.replace(model.config, **fields))
    copy.load_state_dict(model.state_dict())
    return copy.to(next(model.parameters()).device).eval()


def analyse_nope_layers(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    """As trained; with the RoPE layers chunked or windowed at 64 (a zero-shot iRoPE);
    chunked with Llama 4's temperature tuning (floor scale 64) in the NoPE layer."""
    chunk, window = Local(TRAIN_LEN, "chunk"), Local(TRAIN_LEN)
    return (
        score(model, "as trained")
        | score(with_fields(model, rope_local=chunk), "chunked")
        | score(with_fields(model, rope_local=window), "windowed")
        | score(
            with_fields(model, rope_local=chunk, nope_temperature=TRAIN_LEN),
            "chunked, temperature",
        )
    )


def benchmark_run(
    label: str,
    analyse: Analyse[TinyTransformer],
    *,
    train_len: int = TRAIN_LEN,
    batch_size: int = BATCH_SIZE,
    steps: int = STEPS,
    **fields: Any,
) -> Run[TinyTransformer]:
    """A run of the benchmark: the shared model and data, by default the shared budget
    (the baselines of ``ch08_baselines`` and ``ch08_irope`` change length or steps)."""
    run = make_run(
        label,
        DATA,
        train_len=train_len,
        eval_lens=(train_len,),
        steps=steps,
        batch_size=batch_size,
        analyse=analyse,
        dim=64,
        n_layers=4,
        n_heads=2,
        **fields,
    )
    return dataclasses.replace(run, n_checkpoints=10)


SWEEP = Sweep(
    name="ch08_benchmark",
    version=1,
    description=(
        "Chapter 8's benchmark: a 4-layer char LM trained at 64 on text with a segment of 16 "
        "random letters copied 16-48 characters later, read to 512: text loss per position "
        "band, copied-letter loss per distance band; plain RoPE zero-shot with every extension "
        "spec and a 64-token window, fine-tune curves (50/200/800 steps at 256 and at 512, "
        "per-seed streams, a same-steps control at 64), and a NoPE fourth layer read as a "
        "zero-shot iRoPE."
    ),
    runs=(
        benchmark_run("rope+nope", analyse_nope_layers, nope_layers=(3,)),
        benchmark_run("rope", analyse_rope),
    ),
    seeds=tuple(range(10)),
)
