"""Shared fixtures and hypothesis settings for the test suite."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, settings

settings.register_profile(
    "course",
    max_examples=60,
    deadline=None,
    derandomize=True,  # the same examples on every run and machine
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("course")

# One CPU thread, as the notebooks run (rope_lessons.evidence.runtime.setup): on a busy 2-core
# machine several threads are much slower, and one thread repeats results exactly.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
