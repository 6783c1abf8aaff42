r"""Port a model between the interleaved and the half RoPE layouts.

The two layouts pair different coordinates (see :mod:`rope_lessons.rope`), and
:func:`~rope_lessons.rope.forms.layout_permutation` maps one onto the other:
``apply_rope(x, layout="interleaved")[perm] == apply_rope(x[perm], layout="half")``.
A model trained with one layout runs identically with the other once the rows
of its query and key projections are permuted the same way within every
head, which is what Hugging Face's conversion of Meta's Llama weights does
(see huggingface/transformers#25199). Forgetting to permute (loading the
weights as they are) raises no error and silently changes every score.

Shapes: ``C`` model width, ``H`` heads, ``D = C / H`` head dimension.
"""

from __future__ import annotations

import copy
import dataclasses

import torch

from rope_lessons._checks import Layout, check_layout, check_positive_int
from rope_lessons.rope.forms import layout_permutation
from rope_lessons.toy.model import Block, TinyTransformer


def head_permutation(n_heads: int, head_dim: int, to: Layout = "half") -> torch.Tensor:
    """Permutation of the ``C = n_heads * head_dim`` features of a projection, head by head.

    Args:
        n_heads: number of heads ``H``.
        head_dim: their dimension ``D`` (even).
        to: the target layout; ``"half"`` applies
            :func:`~rope_lessons.rope.forms.layout_permutation` in every head,
            ``"interleaved"`` its inverse.

    Returns:
        Long tensor ``(C,)``: new feature ``i`` is old feature ``perm[i]``.
    """
    n_heads = check_positive_int(n_heads, "n_heads")
    check_layout(to)
    within = layout_permutation(head_dim)  # (D,)
    if to == "interleaved":
        within = torch.argsort(within)
    offsets = torch.arange(n_heads)[:, None] * head_dim  # (H, 1)
    return (offsets + within).flatten()  # (C,)


def convert_layout(model: TinyTransformer, to: Layout) -> TinyTransformer:
    """A copy of ``model`` that uses layout ``to`` and computes exactly the same function.

    Where queries or keys are rotated, the output rows of ``W_q`` and ``W_k``
    are permuted by :func:`head_permutation`; where values or outputs are
    rotated, the rows of ``W_v`` and the input columns of the output
    projection are permuted too, so that the permuted value space is read
    back correctly.

    Args:
        model: a :class:`~rope_lessons.toy.model.TinyTransformer`.
        to: ``"interleaved"`` or ``"half"``.

    Returns:
        A new model whose ``config.rope`` is in layout ``to``; ``model`` is unchanged.
    """
    if not isinstance(model, TinyTransformer):
        raise TypeError(f"model must be a TinyTransformer, got {type(model).__name__}")
    to = check_layout(to)
    config = model.config
    if config.key_value_heads != config.n_heads or config.shared_kv:
        raise ValueError(
            "convert_layout permutes the rows of separate query, key and value heads; "
            f"got kv_heads={config.kv_heads} of n_heads={config.n_heads}, "
            f"shared_kv={config.shared_kv}"
        )
    converted = copy.deepcopy(model)
    if config.rope is None or config.rope.layout == to:
        return converted
    converted.config = dataclasses.replace(config, rope=config.rope.with_layout(to))
    blocks = [block for block in converted.blocks if isinstance(block, Block)]
    for block in blocks:
        block.attn.config = converted.config
    if config.placement == "nope":
        return converted
    perm = head_permutation(config.n_heads, config.head_dim, to).to(model.embed.weight.device)
    rotated = set(config.placement)  # e.g. {"q", "k"}
    width = config.dim
    with torch.no_grad():
        for block in blocks:
            w_qkv = block.attn.qkv.weight  # (3C, C): rows of W_q, then W_k, then W_v
            if rotated & {"q", "k"}:
                w_qkv[:width] = w_qkv[:width][perm]
                w_qkv[width : 2 * width] = w_qkv[width : 2 * width][perm]
            if rotated & {"v", "o"}:
                w_qkv[2 * width :] = w_qkv[2 * width :][perm]
                w_proj = block.attn.proj.weight  # (C, C)
                w_proj.copy_(w_proj[:, perm])
    return converted
