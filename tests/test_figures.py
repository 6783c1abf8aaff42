"""Figures saved for the prose pages by the notebooks."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from rope_lessons.chapters.figures import FIGURE_FOLDER, save_figure

ROOT = Path(__file__).resolve().parent.parent


def test_a_saved_figure_lands_in_the_book(tmp_path: Path) -> None:
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    assert save_figure("ch00-test", fig, root=tmp_path) is None  # no book: nothing written
    (tmp_path / "book").mkdir()
    path = save_figure("ch00-test", fig, root=tmp_path)
    again = path.read_bytes() if path else b""
    save_figure("ch00-test", fig, root=tmp_path)
    plt.close(fig)
    assert path == tmp_path / FIGURE_FOLDER / "ch00-test.png"
    assert again.startswith(b"\x89PNG") and path.read_bytes() == again


def test_a_smoke_run_writes_no_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the gpu-preset smoke run executes the notebooks beside nbval: its figures of
    # barely trained models must not replace the ones the book shows
    (tmp_path / "book").mkdir()
    monkeypatch.setenv("ROPE_LESSONS_SMOKE_STEPS", "3")
    fig = plt.figure()
    assert save_figure("ch00-test", fig, root=tmp_path) is None
    plt.close(fig)
    assert not (tmp_path / FIGURE_FOLDER).exists()


def test_a_figure_needs_a_chapter_name() -> None:
    fig = plt.figure()
    with pytest.raises(ValueError, match="chNN"):
        save_figure("bound", fig)
    with pytest.raises(TypeError, match="Figure"):
        save_figure("ch00-test", "not a figure")  # type: ignore[arg-type]
    plt.close(fig)


def test_every_figure_a_page_shows_is_saved_by_a_notebook() -> None:
    """Each book/images/notebooks/NAME.png a page names is saved by some notebook."""
    saved = set()
    for notebook in (ROOT / "notebooks").glob("*.ipynb"):
        saved |= set(re.findall(r'save_figure\(\\n\s*\\"(ch\d\d-[a-z0-9-]+)', notebook.read_text()))
        saved |= set(re.findall(r'save_figure\(\\"(ch\d\d-[a-z0-9-]+)', notebook.read_text()))
    shown = set()
    for page in (ROOT / "book").glob("*.md"):
        shown |= set(re.findall(r"images/notebooks/(ch\d\d-[a-z0-9-]+)\.png", page.read_text()))
    assert shown <= saved, f"shown but saved by no notebook: {sorted(shown - saved)}"
    for name in shown:
        assert (ROOT / FIGURE_FOLDER / f"{name}.png").is_file(), f"execute the notebook: {name}"
