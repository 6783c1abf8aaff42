"""Chapter 8's benchmark: a char LM trained at 64 tokens on text with copied segments, read to 512.

The data is :class:`~rope_lessons.chapters.long_context.CopyInText` (the course corpus
with a segment of 16 random letters written again 16 to 48 characters later
in every training window), so a model that cannot reach back past its window
pays for it on the copied letters, and every method is scored on the text
(loss per position band) and on the copied letters per distance band: top-1
accuracy (chance 1/26), the share of letters below log 26 and mean loss
(:func:`score`). Each seed reads its own probe windows (:func:`probes`).

Two runs, 10 seeds, 2000 steps of 32 windows of 64 (copying is learnt by about
step 1000; see the chapter's learning curve):

* ``"rope+nope"``: RoPE in layers 0-2 and no position encoding in layer 3,
  read as trained, then with its RoPE layers chunked or windowed at the
  trained length (a zero-shot iRoPE) and with Llama 4's temperature tuning
  added. Listed first: it is the cheaper reference run the reproduction test
  re-trains.
* ``"rope"``: plain RoPE, read zero-shot with every extension spec of
  :func:`zero_shot_models` and a sliding window of the trained length; limited
  to 64-512 keys with and without its slow pairs divided to stay on their
  trained angles (the window-size curve, :func:`key_count_scores`); the
  attention of every head on the source of a copied letter and beyond 64
  keys (:func:`attention_scores`); then
  fine-tuned from the trained weights with plain, PI, YaRN and raised-base
  frequencies at 256 tokens, with plain RoPE at 512 (continued training at
  the target length), and with plain RoPE at 64 (the control: the same extra
  steps and tokens without longer windows), 1024 tokens per step, each on the
  seed's own stream, scored after 50, 200 and 800 steps of one 800-step
  fine-tune.

The baselines trained from scratch (a model trained at 512, p-RoPE) are the
sweep ``ch08_baselines``, the trained iRoPE the sweep ``ch08_irope``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from functools import cache
from typing import Any, Literal

import torch

from rope_lessons._checks import check_positive_int
from rope_lessons.chapters.extension import band_edges, extended, fine_tune
from rope_lessons.chapters.long_context import (
    CHANCE_ACCURACY,
    CopyInText,
    Probe,
    attention_beyond,
    copy_scores,
    source_attention,
    text_band_losses,
    token_scores,
)
from rope_lessons.evidence.comparisons import summarise
from rope_lessons.evidence.runs import Analyse, Run, RunResult, make_run
from rope_lessons.evidence.sweep import Sweep
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.scaled_specs import scaled_frequencies
from rope_lessons.rope.scaling import ExtensionMethod, critical_pair
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.model import TinyTransformer
from rope_lessons.toy.rotary_attention import Local

TRAIN_LEN, FACTOR, SEGMENT, HEAD_DIM = 64, 8, 16, 32
N_LAYERS, N_HEADS = 4, 2  # width 64: heads of HEAD_DIM
EVAL_LEN = TRAIN_LEN * FACTOR
STEPS, BATCH_SIZE = 2000, 32
TEXT_BANDS = tuple(band_edges(TRAIN_LEN, FACTOR))  # [0, 64), [64, 128), [128, 256), [256, 512)
# distances between the two copies: those seen in training (16-48), then 2x, 4x, 8x
DISTANCE_BANDS = ((SEGMENT, TRAIN_LEN - SEGMENT + 1), (64, 128), (128, 256), (256, 497))
TRAINED_DISTANCES = DISTANCE_BANDS[0]
PROBE_SEQUENCES, PROBE_SEED = 32, 8
FINE_TUNE_LEN, FINE_TUNE_BATCH, FINE_TUNE_LR, FINE_TUNE_WARMUP = 256, 4, 1e-3, 10
FINE_TUNE_STEPS, FINE_TUNE_POINTS = 800, (50, 200, 800)
FINE_TUNE_TOKENS = FINE_TUNE_BATCH * FINE_TUNE_LEN  # per step, at every length
FINE_TUNE_SEED_OFFSET = 1000  # seed s fine-tunes on stream 1000 + s
RAISED_BASE = 1e5
# The window-size curve: copying at the trained distances with this many keys
KEY_COUNTS = (64, 72, 96, 128, 256, 512)
ATTENTION_BATCH = 8  # probe windows per attention map (a 512 x 512 map per head and layer)
DATA = CopyInText(segment=SEGMENT)


Metric = Literal["text-loss", "copy-accuracy", "copy-below-chance", "copy-loss"]
# text: mean loss per position band; copied letters, per distance band: top-1 accuracy
# (chance 1/26), the share of letters below log 26, and mean loss
METRIC_BANDS: dict[Metric, tuple[tuple[int, int], ...]] = {
    "text-loss": TEXT_BANDS,
    "copy-accuracy": DISTANCE_BANDS,
    "copy-below-chance": DISTANCE_BANDS,
    "copy-loss": DISTANCE_BANDS,
}


def band_name(band: tuple[int, int]) -> str:
    """``"start-stop"``: how a band ``[start, stop)`` is named in stored keys."""
    return f"{band[0]}-{band[1]}"


def band_label(band: tuple[int, int]) -> str:
    """How the chapter names a band ``[start, stop)``: its first and last value,
    ``"start-(stop-1)"`` (e.g. ``"256-511"``)."""
    return f"{band[0]}-{band[1] - 1}"


def key(reading: str, metric: Metric, band: tuple[int, int]) -> str:
    """Where a score is kept in a result's ``extra``: ``"{reading}/{metric}/{start-stop}"``,
    e.g. ``"zero-shot/yarn/copy-accuracy/256-497"`` or ``"ft200/pi/text-loss/0-64"``."""
    if band not in METRIC_BANDS[metric]:
        raise ValueError(f"{metric!r} is read in bands {METRIC_BANDS[metric]}, not {band}")
    return f"{reading}/{metric}/{band_name(band)}"


@cache
def probes(seed: int) -> tuple[Probe, ...]:
    """Seed ``seed``'s held-out probes, one per distance band, at 512 tokens: every reading
    of that seed's model meets the same windows, and each seed meets its own, so that an
    interval over seeds includes the variance of the probe windows."""
    first = PROBE_SEED + seed * len(DISTANCE_BANDS)
    return tuple(
        DATA.probe(PROBE_SEQUENCES, EVAL_LEN, band, seed=first + i)
        for i, band in enumerate(DISTANCE_BANDS)
    )


def score(model: TinyTransformer, name: str, seed: int) -> dict[str, float]:
    """Every metric of :data:`METRIC_BANDS` on seed ``seed``'s probes: the loss on the text
    per position band (over every probe), and on the copied letters per distance band
    their top-1 accuracy, the share below log 26 and their mean loss."""
    seed_probes = probes(seed)
    scores = [token_scores(model, probe) for probe in seed_probes]
    losses = torch.cat([s.loss for s in scores])
    text = text_band_losses(losses, Probe.joined(seed_probes), TEXT_BANDS)
    out = {key(name, "text-loss", b): v for b, v in zip(TEXT_BANDS, text, strict=True)}
    for band, probe, scored in zip(DISTANCE_BANDS, seed_probes, scores, strict=True):
        copied = copy_scores(scored, probe)
        out[key(name, "copy-accuracy", band)] = copied.accuracy
        out[key(name, "copy-below-chance", band)] = copied.below_chance
        out[key(name, "copy-loss", band)] = copied.loss
    return out


def run_seed() -> int:
    """The seed of the run whose ``analyse`` hook is running: :func:`~.run_once` seeded torch
    with it."""
    return torch.initial_seed()


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


def slow_pairs_divided(factor: float) -> Rope:
    """RoPE's ladder with the pairs that do not turn fully in :data:`TRAIN_LEN` tokens (from
    the critical pair on) divided by ``factor``: the pairs that would otherwise meet unseen
    angles, carried back onto their trained arc."""
    theta = frequencies(HEAD_DIM)
    theta[critical_pair(HEAD_DIM, TRAIN_LEN) :] /= factor
    return Rope.from_theta(theta)


def key_count_readings(model: TinyTransformer) -> dict[str, TinyTransformer]:
    """The model limited to its last ``keys`` keys (:data:`KEY_COUNTS`), as trained
    (``"keys {n}/plain"``) and with its slow pairs divided by ``keys / 64``, so that no
    pair meets an angle it did not see in training (``"keys {n}/slow pairs divided"``)."""
    readings = {}
    for keys in KEY_COUNTS:
        window = Local(keys)
        readings[f"keys {keys}/plain"] = extended(model, Rope(HEAD_DIM), rope_local=window)
        readings[f"keys {keys}/slow pairs divided"] = extended(
            model, slow_pairs_divided(keys / TRAIN_LEN), rope_local=window
        )
    return readings


def key_count_scores(model: TinyTransformer, seed: int) -> dict[str, float]:
    """Copying at the trained distances (16-48) by each reading of
    :func:`key_count_readings`: accuracy and loss on seed ``seed``'s probe."""
    probe = probes(seed)[0]
    out = {}
    for name, reading in key_count_readings(model).items():
        copied = copy_scores(token_scores(reading, probe), probe)
        out[key(name, "copy-accuracy", TRAINED_DISTANCES)] = copied.accuracy
        out[key(name, "copy-loss", TRAINED_DISTANCES)] = copied.loss
    return out


def attention_key(reading: str, measure: str, layer: int, head: int) -> str:
    """``"attention/{reading}/{measure}/layer {l} head {h}"``, ``measure`` one of
    ``"source"`` and ``"beyond 64"``."""
    return f"attention/{reading}/{measure}/layer {layer} head {head}"


def attention_scores(model: TinyTransformer, seed: int) -> dict[str, float]:
    """Where each head looks on seed ``seed``'s probe at the trained distances, read at
    512 tokens with all keys (``"plain"``) and within a window of 64 (``"window"``): its
    weight on the source of each copied letter (:func:`~.source_attention`) and its mass on
    keys 64 or more back (:func:`~.attention_beyond`; zero in the window)."""
    probe = probes(seed)[0]
    device = next(model.parameters()).device
    out = {}
    for name, reading in (
        ("plain", model),
        ("window", extended(model, rope_local=Local(TRAIN_LEN))),
    ):
        source, beyond, windows = [], [], []
        for part in probe.batches(ATTENTION_BATCH):
            with torch.no_grad():
                _, maps = reading.attention_maps(part.tokens.to(device))
            source.append(source_attention(maps, part))
            beyond.append(attention_beyond(maps, TRAIN_LEN))
            windows.append(part.tokens.shape[0])
        # every window holds as many copied letters and queries: weigh each part by its windows
        weights = torch.tensor(windows, dtype=torch.float64)[:, None, None] / sum(windows)
        for measure, parts in (("source", source), ("beyond 64", beyond)):
            mean = (torch.stack(parts) * weights).sum(0)  # (layers, heads)
            for (layer, head), value in zip(
                itertools.product(*map(range, mean.shape)), mean.flatten().tolist(), strict=True
            ):
                out[attention_key(name, measure, layer, head)] = value
    return out


FINE_TUNES: dict[str, tuple[Rope, int]] = {
    "plain": (Rope(HEAD_DIM), FINE_TUNE_LEN),
    "pi": (spec("linear"), FINE_TUNE_LEN),
    "yarn": (spec("yarn"), FINE_TUNE_LEN),
    "raised base": (Rope(HEAD_DIM, base=RAISED_BASE), FINE_TUNE_LEN),
    "plain at 512": (Rope(HEAD_DIM), EVAL_LEN),
    "control": (Rope(HEAD_DIM), TRAIN_LEN),
}


def fine_tuned_scores(model: TinyTransformer, method: str, seed: int) -> dict[str, float]:
    """One 800-step fine-tune of a copy of ``model`` with ``method``'s spec and length, on
    seed ``seed``'s stream, scored on its probes after 50, 200 and 800 steps
    (``"ft{steps}/{method}/..."``)."""
    rope, length = FINE_TUNES[method]
    copy = extended(model, rope)
    out: dict[str, float] = {}

    def checkpoint(done: int) -> None:
        out.update(score(copy, f"ft{done}/{method}", seed))

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
    """Every zero-shot reading, the window-size curve, where the heads look, then every
    fine-tune curve."""
    seed = run_seed()
    out: dict[str, float] = {}
    for name, variant in zero_shot_models(model).items():
        out |= score(variant, f"zero-shot/{name}", seed)
    out |= key_count_scores(model, seed) | attention_scores(model, seed)
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
    seed = run_seed()
    return (
        score(model, "as trained", seed)
        | score(with_fields(model, rope_local=chunk), "chunked", seed)
        | score(with_fields(model, rope_local=window), "windowed", seed)
        | score(
            with_fields(model, rope_local=chunk, nope_temperature=TRAIN_LEN),
            "chunked, temperature",
            seed,
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
        dim=N_HEADS * HEAD_DIM,
        n_layers=N_LAYERS,
        n_heads=N_HEADS,
        **fields,
    )
    return dataclasses.replace(run, n_checkpoints=10)


SWEEP = Sweep(
    name="ch08_benchmark",
    version=2,
    description=(
        "Chapter 8's benchmark: a 4-layer char LM trained at 64 on text with a segment of 16 "
        "random letters copied 16-48 characters later, read to 512: text loss per position "
        "band, copied-letter accuracy, share below log 26 and loss per distance band, on probes "
        "drawn per seed; plain RoPE zero-shot with every extension spec and a 64-token window, "
        "copying with 64-512 keys with and without the slow pairs divided, attention on the "
        "source and beyond 64 keys, fine-tune curves (50/200/800 steps at 256 and at 512, "
        "per-seed streams, a same-steps control at 64), and a NoPE fourth layer read as a "
        "zero-shot iRoPE."
    ),
    runs=(
        benchmark_run("rope+nope", analyse_nope_layers, nope_layers=(3,)),
        benchmark_run("rope", analyse_rope),
    ),
    seeds=tuple(range(10)),
)


def induction_head(result: RunResult) -> tuple[int, int]:
    """The ``(layer, head)`` of a stored ``"rope"`` result that puts the most weight on the
    source of a copied letter when limited to 64 keys (where the model copies): its
    induction head."""
    return max(
        itertools.product(range(N_LAYERS), range(N_HEADS)),
        key=lambda lh: result.extra[attention_key("window", "source", *lh)],
    )


def above_chance(accuracies: Sequence[float], family: int = 1) -> str:
    """Whether copy accuracies over seeds are resolved above chance (1/26): the words a page
    may use, from the mean and its t interval, 95% for a ``family`` of readings tested
    against chance together (Bonferroni: each at ``1 - 0.05 / family``). ``"above chance"``
    if the interval lies above 1/26, ``"below chance"`` if below, else ``"not resolved
    from chance"``."""
    check_positive_int(family, "family")
    summary = summarise(accuracies)
    if summary.n < 2:
        raise ValueError(f"need at least two seeds, got {summary.n}")
    half = summary.half_width_at(1 - 0.05 / family)
    low, high = summary.mean - half, summary.mean + half
    if low > CHANCE_ACCURACY:
        return "above chance"
    if high < CHANCE_ACCURACY:
        return "below chance"
    return "not resolved from chance"
