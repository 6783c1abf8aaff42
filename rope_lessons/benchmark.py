"""Time the forms of RoPE on one input, in one run, and report ratios.

Used by ``benchmarks/rope_speed.py`` and by the chapter-3 notebook. Absolute
times depend on the machine; ratios measured in the same run are what the
course quotes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils import benchmark as torch_benchmark

from rope_lessons.rope import (
    apply_rope,
    apply_rope_complex,
    apply_rope_loop,
    cos_sin,
    layout_permutation,
    rotate,
)

HALF = "apply_rope: half, cached tables"


@dataclass(frozen=True)
class Timing:
    """Median seconds per call of one form, and its ratio to the reference form."""

    name: str
    seconds: float
    ratio: float


def rope_forms(x: torch.Tensor) -> dict[str, Callable[[], torch.Tensor]]:
    """The forms to compare, each a zero-argument call on the same ``x``.

    The reference (first) form is :func:`apply_rope` as the course's models
    run it: interleaved layout, cached table, one complex multiplication. The
    half-layout form runs on ``x`` with its dimensions permuted into that
    layout, so that it computes the same rotation.
    """
    positions = torch.arange(x.shape[-2], device=x.device)
    x_half = x[..., layout_permutation(x.shape[-1])].contiguous()
    cos, sin = cos_sin(x.shape[:-1], x.shape[-1], device=x.device)
    return {
        "apply_rope: interleaved, cached table": lambda: apply_rope(x),
        HALF: lambda: apply_rope(x_half, layout="half"),
        "elementwise real form (eq. 34), cached": lambda: rotate(x, cos, sin, "interleaved"),
        "apply_rope: explicit positions": lambda: apply_rope(x, positions),
        "complex form, angles every call": lambda: apply_rope_complex(x),
        "per-pair Python loop": lambda: apply_rope_loop(x),
    }


def time_rope_forms(
    batch: int = 2,
    heads: int = 4,
    seq_len: int = 128,
    dim: int = 64,
    *,
    min_run_time: float = 0.5,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> list[Timing]:
    """Check that every form gives the same result, then time each one.

    Args:
        batch, heads, seq_len, dim: the input ``(batch, heads, seq_len, dim)``.
        min_run_time: seconds of repeated calls per form (torch's
            ``Timer.blocked_autorange``); the median call time is reported.
        device: where the input lives.
        seed: seed of the random input.

    Returns:
        One :class:`Timing` per form, the reference form first (ratio 1).
    """
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, heads, seq_len, dim, generator=generator).to(device)
    forms = rope_forms(x)
    reference = apply_rope(x)
    for name, form in forms.items():
        expected = reference[..., layout_permutation(dim)] if name == HALF else reference
        torch.testing.assert_close(form(), expected, rtol=1e-5, atol=1e-5, msg=name)
    timings = []
    for form in forms.values():
        timer = torch_benchmark.Timer(stmt="form()", globals={"form": form}, num_threads=1)
        timings.append(timer.blocked_autorange(min_run_time=min_run_time).median)
    return [
        Timing(name=name, seconds=seconds, ratio=seconds / timings[0])
        for name, seconds in zip(forms, timings, strict=True)
    ]


def format_timings(timings: list[Timing]) -> str:
    """A plain-text table of the timings, in the order given."""
    lines = [f"{'form':42s} {'time per call':>14s} {'x reference':>12s}"]
    for t in timings:
        lines.append(f"{t.name:42s} {t.seconds * 1e3:11.3f} ms {t.ratio:12.1f}")
    return "\n".join(lines)
