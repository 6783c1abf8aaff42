"""Chapter 5: which RoPE frequencies a trained model uses, and what removing them costs.

Small RoPE models (width 64, 2 layers, 2 heads of dimension 32, 16 rotary
pairs per head):

* ``copy``: the lag-1 copy task (``CopyAtLag``, which needs a previous-token
  head), base 10000, 150 steps at length 32;
* ``corpus``: next-character prediction on the course corpus, base 10000,
  1600 steps of 32 windows of 64 characters (the budget chapter 5's p-RoPE
  sweep took from its learning curves; the first version of this sweep
  stopped at 300 steps, still far from converged);
* a grid over the base and the context length on the corpus, to find where
  the norm goes when more of the pairs barely turn: bases 100, 10000 and
  1e6 at length 64, bases 10000 and 1e6 at length 256 (``corpus, base 100,
  T 64`` ...; base 100 at 256 was cut to fit the recording into about 40
  minutes of one core). The runs at 256 see 8 windows per step, the same
  2048 characters as the runs at 64, and are evaluated on half as many
  windows (the same 65,536 characters).

Convergence. At 1600 steps the corpus runs still lose 0.021 to 0.026 nats
over the last fifth (the cosine schedule anneals there), more than the seeds'
spread, so by the course's rule they are still moving. A check at twice the
budget (3200 steps, run once outside the stored sweep: ``corpus`` seeds 0 and
1, ``corpus, base 1e6, T 256`` seed 0) lowered the loss by about 0.08 nats and
moved none of the chapter's findings: the fastest quarter's share of query
norm² 0.42, 0.39, 0.36 (0.43 and 0.39 at 1600 steps, means over seeds), the
still pairs' share 0.23, 0.21, 0.22 against even shares of 0.50 and 0.56, the
same peak pair (5), and removing the fastest quarter costing 1.0 to 1.2 nats
more than its norm-matched control.

After training, :func:`frequency_analysis` measures on held-out data at the
trained length:

* the loss intact, without the fastest quarter of the pairs (0-3), without
  the slowest quarter (12-15), without each of four random quarters (the same
  four draws in every run), and without pairs chosen per head to hold as much
  of the head's query norm as the fastest or the slowest quarter (two draws
  each, :func:`~rope_lessons.chapters.spectrum.norm_matched_pairs`), with the share
  they reached;
* per layer and head: the mean attention to the token itself (diagonal) and
  to the previous token, and each pair's share of the mean squared query and
  key norm (:func:`~rope_lessons.chapters.spectrum.pair_energy_shares`).

Run with ``python -m rope_lessons.sweeps ch05_frequencies``; chapter 5's first
notebook trains seed 0 of the copy model live, checks a prefix of the corpus
run, and reads the other seeds from the stored results.
"""

from __future__ import annotations

from typing import Any

import torch

from rope_lessons.chapters.spectrum import (
    ablate_pair_mask,
    ablate_pairs,
    norm_matched_pairs,
    offset_attention,
    pair_energy_shares,
)
from rope_lessons.evidence.runs import Run, held_out, make_run
from rope_lessons.evidence.sweep import Sweep
from rope_lessons.evidence.training import evaluate
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.corpus import CharCorpus
from rope_lessons.toy.model import TinyTransformer
from rope_lessons.toy.synthetic import CopyAtLag

HEAD_DIM = 32
PAIRS = HEAD_DIM // 2
ABLATED_FRACTION = 4  # ablate one quarter of the pairs
RANDOM_QUARTERS = 4  # random quarters removed, the same draws in every run
MATCHED_DRAWS = 2  # norm-matched controls per quarter
ANALYSIS_SEQUENCES = 64  # held-out sequences for the attention scores and pair shares
CONTROL_SEED = 0  # the generator of the random and norm-matched controls
STEPS = 1600
GRID_CELLS = ((100.0, 64), (10000.0, 64), (1e6, 64), (10000.0, 256), (1e6, 256))  # (base, T)
TOKENS_PER_STEP = 2048  # 32 windows of 64, or 8 of 256


def quarters(head_dim: int) -> tuple[list[int], list[int]]:
    """The fastest and the slowest quarter of the ``head_dim / 2`` pairs."""
    pairs = head_dim // 2
    size = pairs // ABLATED_FRACTION
    return list(range(size)), list(range(pairs - size, pairs))


def random_quarters(head_dim: int) -> list[list[int]]:
    """The :data:`RANDOM_QUARTERS` random quarters of the pairs that every run removes."""
    pairs = head_dim // 2
    generator = torch.Generator().manual_seed(CONTROL_SEED)
    return [
        sorted(torch.randperm(pairs, generator=generator)[: pairs // ABLATED_FRACTION].tolist())
        for _ in range(RANDOM_QUARTERS)
    ]


def share_key(kind: str, layer: int, head: int, pair: int) -> str:
    """The ``extra`` key of one pair's share: ``q_share_L1H0_3`` (``kind``: ``q`` or ``k``)."""
    return f"{kind}_share_L{layer}H{head}_{pair}"


@torch.no_grad()
def frequency_analysis(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    """Ablation losses, their controls and per-head measurements (the sweep's ``analyse``).

    Returns:
        ``loss`` (held-out, at the trained length), ``loss_without_fast``,
        ``loss_without_slow``, ``loss_without_random_{i}``,
        ``loss_without_matched_{fast,slow}_{i}`` and the mean share of the
        query norm those controls removed, ``matched_{fast,slow}_share_{i}``
        (against ``{fast,slow}_share``, the quarter's own mean share); per layer
        ``l`` and head ``h``: ``previous_token_L{l}H{h}``, ``diagonal_L{l}H{h}``
        and the pair shares ``q_share_L{l}H{h}_{k}``, ``k_share_L{l}H{h}_{k}``.
    """
    rope = model.config.rope
    assert rope is not None
    fast, slow = quarters(model.config.head_dim)

    def loss(candidate: TinyTransformer) -> float:
        sampler = held_out(run.data, run.train_len, device=device)
        return evaluate(candidate, sampler, batches=run.eval_batches).loss

    tokens = held_out(run.data, run.train_len, device=device)()[0][:ANALYSIS_SEQUENCES]
    q_shares, k_shares = pair_energy_shares(model.layer_qkv(tokens), rope)  # (L, H, P)
    numbers = {
        "loss": loss(model),
        "loss_without_fast": loss(ablate_pairs(model, fast)),
        "loss_without_slow": loss(ablate_pairs(model, slow)),
    }
    for draw, pairs in enumerate(random_quarters(model.config.head_dim)):
        numbers[f"loss_without_random_{draw}"] = loss(ablate_pairs(model, pairs))
    generator = torch.Generator().manual_seed(CONTROL_SEED)
    for name, quarter in (("fast", fast), ("slow", slow)):
        numbers[f"{name}_share"] = float(q_shares[..., quarter].sum(-1).mean())
        for draw in range(MATCHED_DRAWS):
            drop = norm_matched_pairs(q_shares, quarter, generator)  # (L, H, P)
            numbers[f"loss_without_matched_{name}_{draw}"] = loss(ablate_pair_mask(model, drop))
            numbers[f"matched_{name}_share_{draw}"] = float((q_shares * drop).sum(-1).mean())
    _, weights = model.attention_maps(tokens)
    for layer, layer_weights in enumerate(weights):
        diagonal = offset_attention(layer_weights, 0).mean(0)  # (H,)
        previous = offset_attention(layer_weights, 1).mean(0)  # (H,)
        for head in range(model.config.n_heads):
            numbers[f"diagonal_L{layer}H{head}"] = float(diagonal[head])
            numbers[f"previous_token_L{layer}H{head}"] = float(previous[head])
            for pair in range(q_shares.shape[-1]):
                numbers[share_key("q", layer, head, pair)] = float(q_shares[layer, head, pair])
                numbers[share_key("k", layer, head, pair)] = float(k_shares[layer, head, pair])
    return numbers


def shares_of(extra: dict[str, float], kind: str, n_layers: int, n_heads: int) -> torch.Tensor:
    """The pair shares stored by :func:`frequency_analysis`, as a float64 ``(L, H, P)`` tensor."""
    return torch.tensor(
        [
            [
                [extra[share_key(kind, layer, head, pair)] for pair in range(PAIRS)]
                for head in range(n_heads)
            ]
            for layer in range(n_layers)
        ],
        dtype=torch.float64,
    )


def corpus_label(base: float, length: int) -> str:
    """The label of a grid run: ``corpus, base 100, T 64``."""
    return f"corpus, base {base:g}, T {length}".replace("e+0", "e")


MODEL: dict[str, Any] = {"dim": 64, "n_layers": 2, "n_heads": 2}


def corpus_run(label: str, base: float, length: int) -> Run[TinyTransformer]:
    """The corpus model at one base and one trained length (2048 characters per step)."""
    return make_run(
        label,
        CharCorpus(),
        train_len=length,
        eval_lens=(length,),
        steps=STEPS,
        batch_size=TOKENS_PER_STEP // length,
        eval_batches=max(1, 128 // length),  # 65,536 held-out characters
        analyse=frequency_analysis,
        rope=Rope(HEAD_DIM, base),
        **MODEL,
    )


COPY = make_run(
    "copy",
    CopyAtLag(lag=1, vocab=16),
    train_len=32,
    eval_lens=(32,),
    steps=150,
    eval_batches=2,
    analyse=frequency_analysis,
    rope=Rope(HEAD_DIM),
    **MODEL,
)
CORPUS = corpus_run("corpus", 10000.0, 64)
GRID: dict[tuple[float, int], Run[TinyTransformer]] = {
    (base, length): CORPUS
    if (base, length) == (10000.0, 64)
    else corpus_run(corpus_label(base, length), base, length)
    for base, length in GRID_CELLS
}

SWEEP = Sweep(
    name="ch05_frequencies",
    version=2,
    description=(
        "Chapter 5: frequency use of RoPE models on the lag-1 copy task and on the corpus "
        "(bases 100, 1e4, 1e6 at length 64; 1e4, 1e6 at 256); held-out loss with the "
        "fastest, slowest, random or norm-matched quarters of the pairs ablated."
    ),
    runs=(COPY, *GRID.values()),
    seeds=(0, 1, 2, 3, 4),
)
