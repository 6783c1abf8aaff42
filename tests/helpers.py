"""Small helpers shared by the tests."""

from __future__ import annotations

import torch

from rope_lessons.model import Block, SelfAttention, TinyTransformer


def random_features(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Standard normal features from a private generator (independent of global state)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype)


def attention_of(model: TinyTransformer, layer: int) -> SelfAttention:
    """The attention module of one layer, typed (``model.blocks[layer]`` is an nn.Module)."""
    block = model.blocks[layer]
    assert isinstance(block, Block)
    return block.attn
