"""Small helpers shared by the tests."""

from __future__ import annotations

import torch


def random_features(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Standard normal features from a private generator (independent of global state)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype)
