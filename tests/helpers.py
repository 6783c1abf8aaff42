"""Small helpers shared by the tests."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import torch

from rope_lessons.toy.model import Block, SelfAttention, TinyTransformer

# The bases of the comparisons with Hugging Face transformers' rotary tables: RoFormer's and
# Llama 2's 1e4, Llama 3's 5e5, and Code Llama's and Qwen2's 1e6.
HF_BASES = (1e4, 5e5, 1e6)
# transformers builds the tables in float32: the rounding of the exponent 2k/d is multiplied
# by ln(base ** (2k/d)), up to ln(1e6) = 14, and on the pairs that YaRN and Llama 3 blend, the
# rounding of the float32 blend weight by up to the factor s. The tests' cases stay below
# 1e-6 relative on the machine that wrote them, 2.1e-6 was reported at base 5e5, and larger
# factors with narrow Llama 3 bands reach 1.4e-5 (factor 64, bounds 2 and 4): 5e-6 leaves
# room for other machines' rounding, while a changed parameter moves the tables far more.
HF_RTOL = 5e-6
ROOT = Path(__file__).resolve().parent.parent


def repository_module(name: str, relative_path: str) -> types.ModuleType:
    """A module of the repository outside the package, loaded from its file (``tasks.py``,
    ``scripts/notebook_cells.py``), whatever is on ``sys.path``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative_path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_features(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Standard normal features from a private generator (independent of global state)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype)


def attention_of(model: TinyTransformer, layer: int) -> SelfAttention:
    """The attention module of one layer, typed (``model.blocks[layer]`` is an nn.Module)."""
    block = model.blocks[layer]
    assert isinstance(block, Block)
    return block.attn
