"""Chapter 5: what decides whether p-RoPE extrapolates? Loss per position to 8x the trained length.

The question. p-RoPE (Barbero et al., 2025) rotates only the fastest fraction
``p`` of the rotary pairs and leaves the rest unrotated. A pair whose angle
over the trained context, ``(T - 1) * theta_k``, reaches ``2 pi`` has shown
every angle it will ever show; a pair that turns only partly meets angles it
never saw as soon as a query reads further back than ``T - 1``
(:func:`~rope_lessons.chapters.spectrum.turn_counts` counts both kinds). The variants are
chosen so that this count varies independently of ``p`` and of the number of
kept pairs:

===========================  ====  =======  =========  ============
label                        kept  turn     turn only  stopped
                                   fully    partly
===========================  ====  =======  =========  ============
``nope``                        0        0          0            32
``p=0.25, base 100``            8        8          0            24
``partial 0.25, base 100``      8        5          3            24
``p=0.5, base 100``            16       16          0            16
``p=0.5, base 10000``          16        9          7            16
``rope, base 100``             32       17         15             0
``nope, 4 heads``               0        0          0      (16 dims)
``rope, base 100, 4 heads``     8        5          3             0
===========================  ====  =======  =========  ============

(head dimension 64, i.e. 32 pairs, trained at T = 64; the 4-head models have
head dimension 16, 8 pairs). Two contrasts hold the kept count fixed and change
only whether all kept pairs turn fully: ``p=0.25, base 100`` against GPT-NeoX
partial rotary ``partial 0.25, base 100`` (8 kept pairs each; partial rotary
keeps its slowest pairs, :func:`~rope_lessons.chapters.spectrum.partial_rotary_theta`),
and ``p=0.5`` at base 100 against base 10000 (16 kept pairs each). NoPE
(``p = 0``) and RoPE (``p = 1``) bracket them.

NoPE with more heads. Barbero et al.'s Proposition 5.2 ties two copies of a
token in a first-layer NoPE head wherever they stand, and a layer of several
such heads ties them as well: heads do not break the tie, depth does (a
causal model recovers positions from its mask from the second layer on). So
``nope, 4 heads`` (4 heads of dimension 16, same width) is a capacity
control: it tests whether NoPE's gap to RoPE comes from having one head per
layer; ``rope, base 100, 4 heads`` is its RoPE counterpart, so that the
change from 1 to 4 heads is compared for both. (Chapter 6's ``ch06_depth``
varies the depth.)

Model and budget. A character model on the course corpus (``CharCorpus()``),
width 64, 2 layers, 32 windows of 64 characters per step, 1600 steps. The
budget comes from a pilot (one seed, RoPE base 100 and p = 0.25): held-out
loss at 64 of 2.248 / 1.807 / 1.725 / 1.702 after 10% / 50% / 80% / 100% of a
1600-step run (seed 1: 1.709 -> 1.689 over the last fifth), final 1.76 (an earlier pilot)
/ 1.702 / 1.675 / 1.629 for budgets of 1200 / 1600 / 2000 / 3000 steps: the
gain per 400 extra steps falls from 0.06 to 0.025 to about 0.02, so 1600 is
where the curve has flattened. The last fifth of every budget up to 3000 still
falls by 0.020 to 0.026 (the cosine schedule anneals there), so the strict
per-run rule may call the trained-length loss still moving at any affordable
budget; the stored checkpoints show it.

Evaluation. Every checkpoint evaluates held-out loss at 64 and at 512 (8x),
one batch of 256 sequences each. The ``analyse`` hook,
:func:`position_losses`, reads the trained model on that same batch of 512
and stores the mean loss per position band, ``band/0-64`` (trained),
``band/64-128``, ``band/128-256``, ``band/256-512`` (never trained), and a
32-bin curve ``curve/0-16`` ... ``curve/496-512``.

Cost. About 67 s of one core per (run, seed) on an otherwise idle core (the
pilot's 1600 steps took 55-57 s, each evaluation at 512 about 2 s, the hook
2 s; 88 s measured while other jobs shared the machine), so 40 runs are about
45 minutes: 5 seeds and 8 variants. (``--dry-run`` overestimates this sweep
several times over: its 5 timed steps include the model's build and a whole
evaluation at 512.) p = 0.75, RoPE at base 10000 and partial rotary 0.75 were
cut to fit (the issue's 1200-step runs put p = 0.75, with 7 partial pairs,
between RoPE and p = 0.5); seeds and steps were not.

Run with ``python -m rope_lessons.sweeps ch05_prope``.
"""

from __future__ import annotations

from typing import Any

import torch

from rope_lessons.chapters.extension import band_edges, band_losses, token_losses
from rope_lessons.chapters.spectrum import partial_rotary_theta
from rope_lessons.evidence.runs import Run, held_out, make_run
from rope_lessons.evidence.sweep import Sweep
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.corpus import CharCorpus
from rope_lessons.toy.model import TinyTransformer

DIM = 64
HEAD_DIM = 64  # one head per layer; the 4-head models have heads of DIM // 4 = 16
BASE = 100.0
TRAIN_LEN = 64
FACTOR = 8
EVAL_LEN = TRAIN_LEN * FACTOR
EVAL_LENS = (TRAIN_LEN, EVAL_LEN)
STEPS = 1600
SEEDS = (0, 1, 2, 3, 4)
BANDS = band_edges(TRAIN_LEN, FACTOR)  # [0, 64), [64, 128), [128, 256), [256, 512)
BINS = 32
BIN_WIDTH = EVAL_LEN // BINS
CHUNK = 64  # sequences per forward pass in the analyse hook

# Each variant's RoPE spec (None: no position encoding) and heads per layer.
VARIANTS: dict[str, tuple[Rope | None, int]] = {
    "nope": (None, 1),
    "p=0.25, base 100": (Rope(HEAD_DIM, BASE, p=0.25), 1),
    "partial 0.25, base 100": (Rope.from_theta(partial_rotary_theta(HEAD_DIM, 0.25, BASE)), 1),
    "p=0.5, base 100": (Rope(HEAD_DIM, BASE, p=0.5), 1),
    "p=0.5, base 10000": (Rope(HEAD_DIM, 10000.0, p=0.5), 1),
    "rope, base 100": (Rope(HEAD_DIM, BASE), 1),
    "nope, 4 heads": (None, 4),
    "rope, base 100, 4 heads": (Rope(DIM // 4, BASE), 4),
}


def band_key(start: int, stop: int) -> str:
    """The ``extra`` key of the mean loss over positions ``[start, stop)``: ``band/64-128``."""
    return f"band/{start}-{stop}"


def curve_key(start: int, stop: int) -> str:
    """The ``extra`` key of one bin of the per-position curve: ``curve/0-16``."""
    return f"curve/{start}-{stop}"


BAND_KEYS = tuple(band_key(start, stop) for start, stop in BANDS)
CURVE_BINS = tuple((i * BIN_WIDTH, (i + 1) * BIN_WIDTH) for i in range(BINS))
CURVE_KEYS = tuple(curve_key(start, stop) for start, stop in CURVE_BINS)


def position_losses(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    """Held-out loss per position band and per bin of 16 positions, at 512 tokens.

    The batch is the one every checkpoint evaluates at 512 (the first batch of
    :func:`~rope_lessons.evidence.runs.held_out`, 256 sequences), read in chunks of
    64 sequences, so the mean over all 512 positions is the stored loss at 512.
    """
    tokens, targets = held_out(run.data, EVAL_LEN, device=device)()
    chunks = [
        (tokens[i : i + CHUNK], targets[i : i + CHUNK]) for i in range(0, tokens.shape[0], CHUNK)
    ]
    per_position = token_losses(model, chunks)  # (512,)
    bands = band_losses(per_position, BANDS)
    curve = band_losses(per_position, CURVE_BINS)
    return dict(zip(BAND_KEYS, bands, strict=True)) | dict(zip(CURVE_KEYS, curve, strict=True))


def variant_run(label: str, rope: Rope | None, heads: int) -> Run[TinyTransformer]:
    """The chapter's model with ``rope`` (None: no position encoding) and ``heads`` heads per
    layer: the shared model size, budget, corpus and evaluation."""
    position: dict[str, Any] = {"position": "none"} if rope is None else {"rope": rope}
    return make_run(
        label,
        CharCorpus(),
        train_len=TRAIN_LEN,
        eval_lens=EVAL_LENS,
        steps=STEPS,
        eval_batches=1,
        analyse=position_losses,
        dim=DIM,
        n_layers=2,
        n_heads=heads,
        **position,
    )


def prope_run(label: str) -> Run[TinyTransformer]:
    """The run of one variant of :data:`VARIANTS`."""
    rope, heads = VARIANTS[label]
    return variant_run(label, rope, heads)


SWEEP = Sweep(
    name="ch05_prope",
    version=2,
    description=(
        "Chapter 5: p-RoPE (p = 0.25, 0.5 at base 100; 0.5 at base 10000), GPT-NeoX partial "
        "rotary 0.25, RoPE and NoPE (1 head; and 4 heads for NoPE and RoPE) on the corpus, "
        "1600 steps at length 64, loss per position band and per 16 positions to 512."
    ),
    runs=tuple(prope_run(label) for label in VARIANTS),
    seeds=SEEDS,
)
