"""Chapter 3's prose: numbers read from the page and computed afresh, and what apply_rope does.

Each test reads its numbers from the chapter's pages, ``book/03_deriving_rope.md`` and
its section pages ``book/03_deriving_rope_*.md`` (so a page that says something else
fails), and recomputes them with the package.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch

from rope_lessons.rope.kernels import apply_rope
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.precision import angle_error, round_to_dtype
from rope_lessons.rope.rope2d import mixed_frequencies

BOOK = Path(__file__).resolve().parents[1] / "book"
PAGES = [BOOK / "03_deriving_rope.md", *sorted(BOOK.glob("03_deriving_rope_*.md"))]


def page_text() -> str:
    """The chapter's pages, one after the other, with line breaks folded into spaces."""
    return " ".join(" ".join(page.read_text().split()) for page in PAGES)


def quoted(pattern: str) -> tuple[str, ...]:
    found = re.search(pattern, page_text())
    assert found, f"the page no longer says: {pattern}"
    return found.groups()


def stored_bf16(values: torch.Tensor) -> torch.Tensor:
    return round_to_dtype(values.to(torch.float64), torch.bfloat16)


def test_neighbours_merge_in_bfloat16_from_the_position_the_page_gives() -> None:
    (start,) = quoted(r"Neighbours merge from (\d+) on")
    m = torch.arange(1, 4096)
    shared = stored_bf16(m) == stored_bf16(m + 1)
    assert int(m[shared][0]) == int(start) == 256
    octave = torch.arange(256, 512)
    assert (stored_bf16(octave) == stored_bf16(octave + 1)).double().mean() == 0.5


def test_bfloat16_angle_errors_above_a_radian_from_where_the_page_says() -> None:
    first, always = (
        int(v) for v in quoted(r"from position (\d+) on, and at every position from (\d+) on")
    )
    positions = torch.arange(1, 20_001)
    above = angle_error(positions, 64, torch.bfloat16).max(-1).values > 1
    assert int(positions[above][0]) == first
    assert int(positions[~above][-1]) + 1 == always


def test_distance_100_near_1e4_becomes_64_or_128_as_the_page_says() -> None:
    low, low_share, high, high_share = (
        int(v) for v in quoted(r"stored distance is (\d+) \((\d+)% .*?\) or (\d+) \((\d+)%\)")
    )
    queries = torch.arange(9000, 11_001)
    distorted = stored_bf16(queries) - stored_bf16(queries - 100)
    values, counts = torch.unique(distorted, return_counts=True)
    assert values.tolist() == [low, high] == [64, 128]
    shares = [round(100 * c / queries.numel()) for c in counts.tolist()]
    assert shares == [low_share, high_share]


def test_apply_rope_on_bfloat16_is_the_float32_rotation_rounded_once() -> None:
    """The page says the result, not the tables, is rounded to the input's dtype."""
    text = page_text()
    assert "rounds only the cosines and sines" not in text
    assert "rounds only the result to the input's dtype" in text
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, 5, 64, generator=generator).to(torch.bfloat16)
    positions = torch.tensor([0, 7, 1000, 99_999, 1_000_000])
    expected = apply_rope(x.float(), positions).to(torch.bfloat16)
    assert torch.equal(apply_rope(x, positions), expected)


def test_small_grid_frequency_numbers() -> None:
    still, total, wavelength = quoted(
        r"(\d+) of the (\d+) pairs of each axis turn by less than 0\.1 radian over 13 "
        r"patches; the slowest has a wavelength of ([\d,]+) patches"
    )
    theta = frequencies(2 * int(total), 10000.0)
    assert int((13 * theta < 0.1).sum()) == int(still)
    assert round(2 * math.pi / theta.min().item()) == int(wavelength.replace(",", ""))
    (base_10,) = quoted(r"with base 10 the slowest wavelength is (\d+) patches")
    magnitudes = mixed_frequencies(64, 10.0)[0][:16]  # direction 0: the x pairs
    assert round(2 * math.pi / magnitudes.min().item()) == int(base_10)
