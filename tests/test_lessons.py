"""The chapters read as lessons (issue 43's rules, checked on the pages as they are).

* every chapter page and section page stays under :data:`main_line.MAX_WORDS`
  main-line words (``scripts/main_line.py``: prose outside tables, code, figures,
  math and collapsed blocks);
* every chapter opens with its brief: the question, one to five key results each
  linked to the section or notebook behind it, what to read first, the notebooks,
  and a reading time that is the main line's (within a fifth);
* the ledger: every number the chapter pages printed before they were rewritten
  (``tests/data/ledger_before.json``) is still on the chapter's pages, in its
  notebooks (sources or outputs), or listed with the reason it went in
  ``tests/data/ledger_reasons.json``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from main_line import MAX_WORDS, count_words, reading_minutes  # noqa: E402

BOOK = ROOT / "book"
LEDGER = json.loads((ROOT / "tests" / "data" / "ledger_before.json").read_text(encoding="utf-8"))
REASONS: dict[str, dict[str, str]] = json.loads(
    (ROOT / "tests" / "data" / "ledger_reasons.json").read_text(encoding="utf-8")
)
NUMBER = re.compile(r"(?<![\w.])[-−+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?%?")
CHAPTERS = sorted(LEDGER["pages"])  # "01_no_order", ...


def _toc_chapters() -> dict[str, list[str]]:
    """Each chapter page of ``_toc.yml`` with the book pages among its sections."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    found: dict[str, list[str]] = {}
    for part in toc["parts"]:
        for chapter in part["chapters"]:
            name = chapter["file"]
            if re.fullmatch(r"book/\d\d_\w+", name):
                sections = [s["file"] for s in chapter.get("sections", [])]
                found[name] = [s for s in sections if s.startswith("book/")]
    return found


TOC = _toc_chapters()


def _pages(chapter: str) -> list[Path]:
    landing = f"book/{chapter}"
    assert landing in TOC, f"{landing} is not a chapter of _toc.yml"
    return [ROOT / f"{name}.md" for name in [landing, *TOC[landing]]]


def _notebook_text(chapter: str) -> str:
    texts = []
    for path in sorted((ROOT / "notebooks").glob(f"{chapter[:2]}_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            texts.append("".join(cell["source"]))
            for output in cell.get("outputs", []):
                texts.append("".join(output.get("text", "")))
                for kind, value in output.get("data", {}).items():
                    if kind.startswith("text/"):
                        texts.append("".join(value))
    return "\n".join(texts)


def test_the_ledger_covers_every_chapter() -> None:
    assert [f"book/{c}" for c in CHAPTERS] == sorted(TOC)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_page_is_short_enough_to_finish(chapter: str) -> None:
    for page in _pages(chapter):
        words = count_words(page.read_text(encoding="utf-8"))
        assert words <= MAX_WORDS, f"{page.name}: {words} main-line words (at most {MAX_WORDS})"


BRIEF = re.compile(
    r"^:{3,}\{admonition\} [^\n]*\n:class: chapter-brief\n(?P<body>.*?)^:{3,}$", re.M | re.S
)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_opens_with_its_brief(chapter: str) -> None:
    pages = _pages(chapter)
    text = pages[0].read_text(encoding="utf-8")
    match = BRIEF.search(text)
    assert match, f"{pages[0].name} has no ':::{{admonition}} ... :class: chapter-brief' block"
    body = match.group("body")
    if "\n## " in text:
        assert text.index(match.group(0)) < text.index("\n## "), "the brief comes first"
    for label in ("**Question.**", "**Key results.**", "**Read first.**", "**Notebooks.**"):
        assert label in body, f"{pages[0].name}: the brief has no {label}"
    results = body.split("**Key results.**", 1)[1].split("**Read first.**", 1)[0]
    items = re.findall(r"^\d+\. (.+(?:\n {3}.+)*)", results, re.M)
    assert 1 <= len(items) <= 5, f"{pages[0].name}: {len(items)} key results (one to five)"
    for item in items:
        assert re.search(r"\{(ref|doc|numref)\}`|\]\(", item), f"key result without a link: {item}"
        assert re.search(r"\d", item), f"key result without its number: {item}"
    stated = re.search(r"\*\*Reading time\.\*\* About (\d+) minutes", body)
    assert stated, f"{pages[0].name}: no '**Reading time.** About N minutes'"
    minutes = sum(reading_minutes(p.read_text(encoding="utf-8")) for p in pages)
    assert abs(int(stated.group(1)) - minutes) <= max(2, minutes / 5), (
        f"{pages[0].name} says {stated.group(1)} minutes; its main line reads in {minutes}"
    )


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_number_is_lost(chapter: str) -> None:
    now = "\n".join(p.read_text(encoding="utf-8") for p in _pages(chapter))
    present = set(NUMBER.findall(now)) | set(NUMBER.findall(_notebook_text(chapter)))
    reasons = REASONS.get(chapter, {})
    lost = [n for n in LEDGER["pages"][chapter] if n not in present and n not in reasons]
    assert not lost, f"{chapter}: numbers gone from the pages and notebooks: {lost}"
    stale = [n for n in reasons if n in present]
    assert not stale, f"{chapter}: ledger_reasons lists numbers that are still there: {stale}"
