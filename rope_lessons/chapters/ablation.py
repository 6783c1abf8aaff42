r"""Removing rotary pairs at inference, by zero or by mean (chapters 5 and 9).

An ablation asks what a set of pairs carries by taking it away. There are
two ways to take a pair of the queries away, and they answer different
questions:

* **zero-ablation** sets the pair to 0. Its whole contribution to every
  score vanishes, including the part that every token shares: chapter 4's
  mean term :math:`\operatorname{Re}(m_k e^{ir\theta_k})`, which gives a head
  its decay, and some of the scale of the logits;
* **mean-ablation** sets the pair to its mean over tokens, :math:`\bar q^{(k)}`.
  What every token shares stays (the pair still turns with position, so the
  mean term is intact); only what differs from token to token is removed.

A pair costs much under zero-ablation and little under mean-ablation when
what it holds is mostly a constant, and the other way round when it carries
information that changes with the token. The key side is the mirror image:
the key's pair is replaced instead of the query's. (Zeroing the key's pair
has the same effect on the scores as zeroing the query's: the pair's term
is a product of the two.)

Both work by forward hooks on the projection that makes the queries or the
keys, replacing the chosen output features, so the same code serves the
course's :class:`~rope_lessons.toy.model.TinyTransformer` (one fused projection,
queries then keys then values) and a Hugging Face model (``q_proj`` and
``k_proj``): :func:`pairs_ablated` for the toy,
:meth:`rope_lessons.real.pretrained.Pretrained.pairs_ablated` for SmolLM2, both
through :func:`replacing_pairs`.

Shapes: ``L`` layers, ``H`` heads on the ablated side (query heads, or
key/value heads), ``D`` head dimension, ``P = D/2`` pairs, ``B`` batch,
``T`` tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch
from torch import nn

from rope_lessons.chapters.spectrum import norm_matched_pairs, pair_columns
from rope_lessons.evidence.comparisons import summarise
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.model import QKV, Block, TinyTransformer

Side = Literal["query", "key"]
Fill = Literal["zero", "mean"]
SIDES: tuple[Side, ...] = ("query", "key")
FILLS: tuple[Fill, ...] = ("zero", "mean")
ALL_POSITIONS = slice(None)  # every token's features are replaced
FIRST_KEPT = slice(1, None)  # every token's but the first's (an attention sink's)
FIRST_ONLY = slice(0, 1)  # the first token's alone


def check_drop(drop: torch.Tensor, shape: tuple[int, int, int]) -> torch.Tensor:
    """``drop`` expanded to ``shape`` ``(L, H, P)``, refused with a clear message otherwise.

    Args:
        drop: bool tensor broadcastable to ``shape`` (e.g. ``(P,)``: the same
            pairs in every layer and head).
        shape: ``(layers, heads, pairs)`` of the ablated side.

    Returns:
        bool tensor ``shape`` on the CPU.
    """
    expected = "(layers, heads, pairs) = " + str(tuple(shape))
    if not isinstance(drop, torch.Tensor) or drop.dtype != torch.bool:
        raise TypeError(f"drop must be a bool tensor broadcastable to {expected}")
    try:
        return drop.cpu().expand(shape)
    except RuntimeError:
        raise ValueError(
            f"drop of shape {tuple(drop.shape)} does not broadcast to {expected}"
        ) from None


def projection_means(layers_qkv: Sequence[QKV]) -> tuple[torch.Tensor, torch.Tensor]:
    """Each layer's mean unrotated query and key, over the batch and every position.

    Args:
        layers_qkv: one :class:`~rope_lessons.toy.model.QKV` per layer (``q``
            ``(B, H, T, D)``, ``k`` ``(B, H_kv, T, D)``).

    Returns:
        ``(query_means, key_means)``: ``(L, H, D)`` and ``(L, H_kv, D)``, float32.
    """
    queries = torch.stack([qkv.q.detach().float().mean(dim=(0, 2)) for qkv in layers_qkv])
    keys = torch.stack([qkv.k.detach().float().mean(dim=(0, 2)) for qkv in layers_qkv])
    return queries, keys


@contextmanager
def replacing_pairs(
    projections: Sequence[nn.Module],
    drop: torch.Tensor,
    rope: Rope,
    *,
    means: torch.Tensor | None = None,
    offset: int = 0,
    positions: slice = ALL_POSITIONS,
) -> Iterator[None]:
    """Within the block, each projection's output loses the chosen pairs (zero or mean).

    A forward hook on ``projections[l]`` overwrites, in its output
    ``(B, T, features)``, the features ``offset + pair_columns(drop[l])`` at
    the token positions ``positions``: with 0 where ``means`` is None, else
    with ``means[l]``'s values at those features. The hooks are removed
    afterwards whatever happens.

    Args:
        projections: one module per layer whose output holds the side's heads
            from feature ``offset`` on (``H * D`` features).
        drop: bool ``(L, H, P)``.
        rope: the spec whose layout says where the pairs sit.
        means: ``(L, H, D)`` mean vectors (mean-ablation), or None (zero-ablation).
        offset: where the heads start in the output (the keys of a fused
            query-key-value projection start after the queries).
        positions: the token positions replaced, every one by default;
            ``slice(1, None)`` keeps the first token's features intact
            (:data:`FIRST_KEPT`), ``slice(0, 1)`` replaces only them
            (:data:`FIRST_ONLY`).
    """
    if means is not None and tuple(means.shape) != (*drop.shape[:2], rope.dim):
        raise ValueError(
            f"means must have shape {(*drop.shape[:2], rope.dim)} (layers, heads, head_dim), "
            f"got {tuple(means.shape)}"
        )

    def overwrite(columns: torch.Tensor, values: torch.Tensor | None) -> Any:
        def hook(_module: nn.Module, _inputs: Any, output: torch.Tensor) -> torch.Tensor:
            replaced = output.clone()
            where = columns.to(output.device)
            replaced[:, positions, where] = 0.0 if values is None else values.to(output)
            return replaced

        return hook

    with ExitStack() as stack:
        for layer, module in enumerate(projections):
            columns = pair_columns(drop[layer], rope)
            if columns.numel() == 0:
                continue
            values = None if means is None else means[layer].flatten()[columns]
            handle = module.register_forward_hook(overwrite(offset + columns, values))
            stack.callback(handle.remove)
        yield


def check_side_and_fill(side: str, fill: str, means: torch.Tensor | None) -> None:
    """Refuse an unknown side or fill, and a mean-ablation without means."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    if fill not in FILLS:
        raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")
    if (fill == "mean") != (means is not None):
        raise ValueError("means are needed for fill='mean' and only for it")


@contextmanager
def pairs_ablated(
    model: TinyTransformer,
    drop: torch.Tensor,
    *,
    side: Side = "query",
    fill: Fill = "zero",
    means: torch.Tensor | None = None,
) -> Iterator[None]:
    """Within the block, the toy ``model`` runs with the chosen pairs of its queries
    (or keys) set to zero or to their means.

    Args:
        model: a trained :class:`~rope_lessons.toy.model.TinyTransformer` with RoPE;
            its weights are not changed.
        drop: bool, broadcastable to ``(L, H, P)``, ``H`` the query heads for
            ``side="query"`` and the key/value heads for ``side="key"``.
        side: ``"query"`` or ``"key"``.
        fill: ``"zero"`` or ``"mean"``.
        means: for ``fill="mean"``: ``(L, H, D)`` of that side, e.g. from
            :func:`projection_means` of ``model.layer_qkv(tokens)``.
    """
    if not isinstance(model, TinyTransformer):
        raise TypeError(f"model must be a TinyTransformer, got {type(model).__name__}")
    check_side_and_fill(side, fill, means)
    cfg = model.config
    if cfg.rope is None:
        raise ValueError("the model has no RoPE spec, so it has no rotary pairs")
    if side == "key" and cfg.shared_kv:
        raise ValueError(
            "with shared_kv the key is also the value: a key-side ablation would change values"
        )
    heads = cfg.n_heads if side == "query" else cfg.key_value_heads
    chosen = check_drop(drop, (cfg.n_layers, heads, cfg.head_dim // 2))
    projections = []
    for block in model.blocks:
        assert isinstance(block, Block)
        projections.append(block.attn.qkv)  # (C) -> (q: C, k: H_kv D, v: H_kv D)
    offset = 0 if side == "query" else cfg.dim
    with replacing_pairs(projections, chosen, cfg.rope, means=means, offset=offset):
        yield


@dataclass(frozen=True)
class AblationSet:
    """Pairs to remove from the queries, per layer and head.

    Attributes:
        name: the row it belongs to, e.g. ``"pairs 0-7"``, ``"random quarter"``;
            the draws of a control share a name.
        drop: bool ``(L, H, P)``, or ``(P,)`` for the same pairs in every head.
        share: the mean share of the query norm² it removes, over the heads it
            touches (None where not measured).
    """

    name: str
    drop: torch.Tensor
    share: float | None = None

    @property
    def uniform(self) -> bool:
        """The same pairs in every head: then the key side has the same set."""
        return self.drop.ndim == 1


def quarter_sets(pairs: int, random_draws: int, generator: torch.Generator) -> list[AblationSet]:
    """The four contiguous quarters of the pairs (fastest first), then ``random_draws``
    random quarters (the same pairs in every head), named ``"random quarter"``."""
    size = pairs // 4
    index = torch.arange(pairs)
    sets = [
        AblationSet(f"pairs {start}-{start + size - 1}", (index >= start) & (index < start + size))
        for start in range(0, pairs, size)
    ]
    for _ in range(random_draws):
        chosen = torch.randperm(pairs, generator=generator)[:size]
        sets.append(AblationSet("random quarter", torch.isin(index, chosen)))
    return sets


def norm_matched_sets(
    shares: torch.Tensor,
    quarter: Sequence[int],
    draws: int,
    generator: torch.Generator,
    tolerance: float = 0.9,
) -> list[AblationSet]:
    """Per draw, a quarter and its norm-matched control, both limited to the heads where
    the control reaches the quarter's share.

    :func:`~rope_lessons.chapters.spectrum.norm_matched_pairs` draws, per head, pairs
    outside the quarter until they hold the quarter's share of the query
    norm². Where the other pairs together hold less than the quarter (a head
    that keeps most of its norm in the quarter), no draw can match it, and a
    control over every head would remove less norm than the quarter does.
    Here both sets are restricted to the heads whose control reaches at
    least ``tolerance`` of the quarter's share, so that the two rows remove
    matched norm from the same heads.

    Args:
        shares: ``(L, H, P)`` each pair's share of the query norm² (e.g.
            :func:`~rope_lessons.chapters.spectrum.pair_energy_shares`).
        quarter: the pair indices to match.
        draws: how many controls to draw.
        generator: the random generator (seeded by the caller).
        tolerance: the fraction of the quarter's share a head's control must reach.

    Returns:
        ``2 * draws`` sets: for each draw the quarter (named ``"pairs a-b, matched
        heads"``) then its control (``"norm-matched to pairs a-b"``), each with
        the share it removes (mean over the heads kept).
    """
    target = shares[..., list(quarter)].sum(-1)  # (L, H)
    quarter_mask = torch.zeros(shares.shape, dtype=torch.bool)
    quarter_mask[..., list(quarter)] = True
    label = f"pairs {min(quarter)}-{max(quarter)}"
    sets = []
    for _ in range(draws):
        control = norm_matched_pairs(shares, quarter, generator).cpu()  # (L, H, P)
        achieved = (shares * control).sum(-1)  # (L, H)
        heads = achieved >= tolerance * target  # (L, H)
        if not bool(heads.any()):
            raise ValueError(f"no head's control reaches {tolerance:.0%} of the share of {label}")
        for name, mask, share in (
            (f"{label}, matched heads", quarter_mask, target),
            (f"norm-matched to {label}", control, achieved),
        ):
            sets.append(AblationSet(name, mask & heads[..., None], float(share[heads].mean())))
    return sets


class Ablate(Protocol):
    """A model's ablation context: :func:`pairs_ablated` bound to a toy, or
    :meth:`rope_lessons.real.pretrained.Pretrained.pairs_ablated`."""

    def __call__(
        self, drop: torch.Tensor, *, side: Side, fill: Fill, means: torch.Tensor | None
    ) -> AbstractContextManager[None]: ...


@dataclass(frozen=True)
class AblationCost:
    """What removing one set costs, in loss above the intact model's.

    Attributes:
        name, share: the set's (see :class:`AblationSet`).
        zero: the queries' pairs set to zero (the same as the keys', for the scores).
        mean_query: the queries' pairs set to their means.
        mean_key: the keys' pairs set to their means; None for a set that is not
            the same in every head (query heads share key heads).
    """

    name: str
    share: float | None
    zero: float
    mean_query: float
    mean_key: float | None


def ablation_costs(
    loss: Callable[[], float],
    intact: float,
    ablate: Ablate,
    sets: Sequence[AblationSet],
    means: tuple[torch.Tensor, torch.Tensor],
    *,
    keys: bool = True,
) -> list[AblationCost]:
    """Zero- and mean-ablation of every set, each as the loss above the intact loss.

    Args:
        loss: the model's loss on the evaluation data, as the model is now.
        intact: ``loss()`` of the intact model (every caller reports it anyway).
        ablate: the model's ablation context.
        sets: the sets to remove.
        means: ``(query_means, key_means)``, see :func:`projection_means`.
        keys: also mean-ablate the keys of the sets that are the same in every
            head; ``False`` leaves their ``mean_key`` None and saves one
            evaluation per such set.
    """

    def cost(drop: torch.Tensor, side: Side, fill: Fill) -> float:
        chosen = means[SIDES.index(side)] if fill == "mean" else None
        with ablate(drop, side=side, fill=fill, means=chosen):
            return loss() - intact

    return [
        AblationCost(
            one.name,
            one.share,
            cost(one.drop, "query", "zero"),
            cost(one.drop, "query", "mean"),
            cost(one.drop, "key", "mean") if keys and one.uniform else None,
        )
        for one in sets
    ]


def cost_table(costs: Sequence[AblationCost]) -> dict[str, dict[str, list[float]]]:
    """The costs grouped by set name, then by kind (``"zero"``, ``"mean_query"``,
    ``"mean_key"``, ``"share"``): one value per draw (or per run), in order."""
    table: dict[str, dict[str, list[float]]] = {}
    for cost in costs:
        row = table.setdefault(cost.name, {})
        for kind in ("zero", "mean_query", "mean_key", "share"):
            value = getattr(cost, kind)
            if value is not None:
                row.setdefault(kind, []).append(value)
    return table


def interval(values: Sequence[float]) -> str:
    """``mean ± half-width`` of a 95% t-interval over ``values`` (draws or seeds), then the
    range and the count; a single value alone."""
    summary = summarise(values)
    if summary.n == 1:
        return f"{summary.mean:.3f}"
    spread = f"{summary.low:.3f} to {summary.high:.3f}, n={summary.n}"
    return f"{summary.mean:.3f} ± {summary.half_width:.3f} ({spread})"
