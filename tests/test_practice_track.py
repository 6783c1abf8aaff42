"""The practice track: every chapter from 1 to 10 has a practice notebook in the table of
contents, the intro lists every checker of the package once with its notebook, and each
notebook calls the checkers its row names."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import nbformat

import rope_lessons.practice

ROOT = Path(__file__).resolve().parents[1]
INTRO = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| (\d+) \| .+? \| (.+?) \| \{doc\}`\.\./notebooks/(\d\d_practice)` \|$", re.M)


def _practice_rows() -> dict[int, tuple[list[str], str]]:
    """Chapter -> (checkers' qualified names, notebook), from the intro's Practice table."""
    section = INTRO.split("(practice-track)=", 1)[1].split("\n## ", 2)[1]
    rows: dict[int, tuple[list[str], str]] = {}
    for chapter, checkers, notebook in ROW.findall(section):
        names = re.findall(r"`([\w.]+)`", checkers)
        module = names[0].rsplit(".", 1)[0]  # the others are written short, in that module
        rows[int(chapter)] = ([names[0], *(f"{module}.{n}" for n in names[1:])], notebook)
    return rows


def test_every_chapter_has_a_practice_notebook_in_the_intro_and_the_toc() -> None:
    rows = _practice_rows()
    assert sorted(rows) == list(range(1, 11))
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    for chapter, (_, notebook) in rows.items():
        assert notebook == f"{chapter:02d}_practice"
        assert (ROOT / "notebooks" / f"{notebook}.ipynb").is_file()
        assert f"- file: notebooks/{notebook}\n" in toc


def test_the_intro_names_every_checker_once_and_each_exists() -> None:
    listed = [name for names, _ in _practice_rows().values() for name in names]
    assert len(listed) == len(set(listed))
    for name in listed:
        module, function = name.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(f"rope_lessons.{module}"), function))
    public = {
        f"practice.{info.name}.{name}"
        for info in pkgutil.iter_modules(rope_lessons.practice.__path__)
        for name, member in inspect.getmembers(
            importlib.import_module(f"rope_lessons.practice.{info.name}"), inspect.isfunction
        )
        if name.startswith("check_") and member.__module__ == f"rope_lessons.practice.{info.name}"
    }
    assert public == {name for name in listed if name.startswith("practice.")}


def test_each_practice_notebook_calls_the_checkers_of_its_row() -> None:
    for names, notebook in _practice_rows().values():
        cells = nbformat.read(ROOT / "notebooks" / f"{notebook}.ipynb", as_version=4).cells
        code = "\n".join(c.source for c in cells if c.cell_type == "code")
        for name in names:
            assert f"{name.rsplit('.', 1)[1]}(" in code, f"{notebook} never calls {name}"


def _verdicts(doc: str) -> list[str]:
    """The verdict phrases a checker's docstring lists after "starts with one of these
    phrases", up to its Args; fragments that continue another phrase ("...") left out."""
    listed = re.split(r"starts with one of these phrases[^\n]*\n", doc, maxsplit=1)[1]
    listed = re.sub(r"\s+", " ", re.split(r"\n\s*Args:", listed, maxsplit=1)[0])
    return [p for p in re.findall(r'``"(.+?)"``', listed) if not p.startswith("...")]


def _checkers() -> list[tuple[str, object, Path]]:
    """(name, checker, its test file) for every checker the course ships."""
    import rope_lessons.rope.check

    found: list[tuple[str, object, Path]] = [
        ("check_rope", rope_lessons.rope.check.check_rope, ROOT / "tests" / "test_check_rope.py")
    ]
    for info in pkgutil.iter_modules(rope_lessons.practice.__path__):
        module = importlib.import_module(f"rope_lessons.practice.{info.name}")
        tests = ROOT / "tests" / f"test_practice_{info.name}.py"
        found += [
            (name, member, tests)
            for name, member in inspect.getmembers(module, inspect.isfunction)
            if name.startswith("check_") and member.__module__ == module.__name__
        ]
    return found


def test_every_verdict_a_checker_lists_is_expected_by_its_tests() -> None:
    """Each verdict phrase of each checker's docstring stands in its test file, where a
    planted implementation is checked to produce it (a new diagnosis needs its test)."""
    checkers = _checkers()
    assert len(checkers) == 14
    for name, checker, tests in checkers:
        verdicts = _verdicts(inspect.getdoc(checker) or "")
        assert len(verdicts) >= 5, name
        text = re.sub(r"\s+", " ", tests.read_text(encoding="utf-8"))
        # a trailing one-letter placeholder ("positions wrapped at L", "output scaled by
        # c") stands for the number the message gives
        missing = [v for v in verdicts if re.sub(r" [A-Za-z]( - 1)?$", " ", v) not in text]
        assert not missing, f"{name}: no test expects {missing}"
