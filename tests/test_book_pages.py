"""The reader's aids around the chapters: the course map, the notation page, the glossary."""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import pytest
import torch

from rope_lessons.rope import frequencies

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"


def test_course_map_is_what_its_script_draws(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("course_map", ROOT / "scripts" / "course_map.py")
    assert spec and spec.loader
    course_map = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(course_map)
    course_map.write(tmp_path / "map.svg")
    committed = BOOK / "images" / "course_map.svg"
    assert (tmp_path / "map.svg").read_bytes() == committed.read_bytes(), (
        "run scripts/course_map.py and commit book/images/course_map.svg"
    )


def test_course_map_is_on_the_landing_page_with_alt_text() -> None:
    intro = (BOOK / "intro.md").read_text()
    figure = re.search(r"```\{figure\} images/course_map\.svg\n(.*?)```", intro, re.DOTALL)
    assert figure
    alt = re.search(r"^:alt: (.+)$", figure.group(1), re.MULTILINE)
    assert alt and len(alt.group(1)) > 80


@pytest.mark.parametrize(
    "term",
    [
        "RoPE",
        "NoPE",
        "Interleaved layout",
        "Half layout",
        "Placement",
        "p-RoPE",
        "VO-RoPE",
        "Base",
        "Frequency",
        "Wavelength",
        "Causal mask",
        "Permutation equivariance",
    ],
)
def test_glossary_defines(term: str) -> None:
    glossary = (BOOK / "glossary.md").read_text()
    block = glossary.split("```{glossary}")[1].split("\n```")[0]
    assert re.search(rf"^{re.escape(term)}\n  \S", block, re.MULTILINE)


def test_notation_numbers() -> None:
    """The wavelengths quoted on the notation page and in the glossary, read from the pages."""
    notation = " ".join((BOOK / "notation.md").read_text().split())
    glossary = " ".join((BOOK / "glossary.md").read_text().split())
    wavelength = 2 * math.pi / frequencies(64, 10000.0)  # (32,)
    fastest = re.search(r"wavelength is \$2\\pi \\approx ([\d.]+)\$ positions", notation)
    slowest = re.search(r"about \$([\d\\,]+)\$ positions for \$d = 64\$", notation)
    in_glossary = re.search(r"about \$([\d.]+)\$ positions for pair \$0\$", glossary)
    assert fastest and slowest and in_glossary, "the quoted wavelengths moved: update this test"
    assert float(fastest.group(1)) == round(wavelength[0].item(), 1) == 6.3
    assert float(in_glossary.group(1)) == round(wavelength[0].item(), 1)
    # "about 47 100": 2 pi b^((d-2)/d), rounded to hundreds, is below 2 pi b as the page says
    quoted = int(slowest.group(1).replace("\\,", ""))
    assert quoted == round(wavelength[-1].item(), -2) == 47_100
    assert wavelength[-1].item() < 2 * math.pi * 10000
    assert bool((torch.diff(wavelength) > 0).all())  # pair 0 turns fastest


def test_notation_agrees_with_the_conventions() -> None:
    intro = " ".join((BOOK / "intro.md").read_text().split())  # line breaks as spaces
    notation = " ".join((BOOK / "notation.md").read_text().split())
    for formula in (r"b^{-2k/d}", r"R_m^\top R_n = R_{n-m}", "(2k, 2k+1)", "(k, k + d/2)"):
        assert formula in intro
        assert formula in notation
    placements = "`nope`, `q`, `k`, `v`, `o`, `qk`, `vo`, `qkv`, `qkvo`"
    assert placements in intro
    assert placements in notation
