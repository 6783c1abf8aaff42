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


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
