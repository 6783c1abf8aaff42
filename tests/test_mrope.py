"""Multimodal RoPE: pairs assigned to axes, relative along each axis, plain RoPE for text."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.mrope import apply_rope_nd, multimodal_frequencies, pair_axes
from rope_lessons.rope.spec import Rope


def test_sections_give_blocks_and_interleaving_cycles() -> None:
    assert pair_axes([2, 1, 1], "sections").tolist() == [0, 0, 1, 2]
    interleaved = pair_axes([11, 11, 10], "interleaved")
    assert interleaved[:9].tolist() == [0, 1, 2] * 3
    assert torch.bincount(interleaved).tolist() == [11, 11, 10]
    assert interleaved[30:].tolist() == [0, 1]  # width stops at 3 * 10, height runs on


def test_interleaving_spreads_the_ladder_over_every_axis() -> None:
    """With sections, time takes every fast pair and width only slow ones; interleaved,
    each axis has a pair among the three fastest."""
    theta = frequencies(64)  # (32,), fastest first
    blocks = multimodal_frequencies(theta, [16, 8, 8], "sections")
    cycled = multimodal_frequencies(theta, [16, 8, 8], "interleaved")
    assert torch.equal(blocks.sum(0), theta) and torch.equal(cycled.sum(0), theta)
    fastest = [float(row.max()) for row in blocks]
    assert fastest[0] == 1.0 and fastest[2] < 0.01  # width's fastest pair turns slowly
    assert [bool((row[:3] > 0).any()) for row in cycled] == [True, True, True]


def test_text_tokens_get_plain_rope() -> None:
    x = torch.randn(2, 3, 9, 16, dtype=torch.float64)
    m = torch.arange(9)
    freqs = multimodal_frequencies(frequencies(16), [4, 2, 2], "interleaved")
    spec = Rope(16, layout="half")
    torch.testing.assert_close(apply_rope_nd(x, (m, m, m), freqs, layout="half"), spec.apply(x))


@given(
    st.lists(st.integers(-50, 50), min_size=3, max_size=3),
    st.lists(st.integers(-50, 50), min_size=3, max_size=3),
    st.sampled_from(["sections", "interleaved"]),
)
def test_scores_depend_on_the_offset_along_each_axis(
    first: list[int], second: list[int], assignment: str
) -> None:
    generator = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 1, 16, generator=generator, dtype=torch.float64)
    freqs = multimodal_frequencies(frequencies(16), [3, 3, 2], assignment)  # type: ignore[arg-type]

    def turned(x: torch.Tensor, where: list[int]) -> torch.Tensor:
        return apply_rope_nd(x, [torch.tensor([p]) for p in where], freqs)

    score = (turned(q, first) * turned(k, second)).sum()
    offset = [b - a for a, b in zip(first, second, strict=True)]
    relative = (q * turned(k, offset)).sum()
    assert float(score) == pytest.approx(float(relative), abs=1e-9)


def test_bad_sections_and_frequencies_are_refused() -> None:
    with pytest.raises(ValueError, match="sections must be positive integers"):
        pair_axes([4, 0, 2], "sections")
    with pytest.raises(ValueError, match="interleaving 8 pairs gives the axes"):
        pair_axes([2, 5, 1], "interleaved")
    with pytest.raises(ValueError, match="three axes"):
        pair_axes([4, 4], "interleaved")
    with pytest.raises(ValueError, match="theta must have shape"):
        multimodal_frequencies(frequencies(16), [4, 4, 4], "sections")
    with pytest.raises(ValueError, match=r"freqs must have shape \(A, d/2\) = \(3, 8\)"):
        apply_rope_nd(torch.randn(4, 16), [torch.arange(4)] * 3, torch.ones(2, 8))
