"""Figures that a prose page shows: saved by the notebook that draws them.

A chapter's notebook draws its figures; the chapter's prose page shows some of
them as ordinary MyST figures (``{figure}`` with alt text and a caption) of
the files in ``book/images/notebooks/``. The notebook calls :func:`save_figure`
after drawing one, so every execution of the notebook, CI's included, rewrites
the file before the book is built, and the committed file is the figure of the
notebook's last committed execution. Where the package is installed without the
repository around it (Colab, pip), there is no book and nothing is written; nor
in a smoke run (``ROPE_LESSONS_SMOKE_STEPS``), whose few training steps would
put a figure of an untrained model on the page.
"""

from __future__ import annotations

import re
from pathlib import Path

from matplotlib.figure import Figure

from rope_lessons.evidence.runtime import smoke_steps

REPOSITORY = Path(__file__).resolve().parents[2]
FIGURE_FOLDER = Path("book") / "images" / "notebooks"
NAME = re.compile(r"ch\d\d-[a-z0-9-]+")


def save_figure(name: str, figure: Figure, root: Path | None = None) -> Path | None:
    """Save ``figure`` as ``book/images/notebooks/<name>.png`` for a prose page.

    Args:
        name: ``chNN-words`` (e.g. ``"ch04-bound"``): the chapter, then what it shows.
        figure: a Matplotlib figure.
        root: the repository (default: the one this package sits in, if any).

    Returns:
        The path written, or None when ``root`` has no ``book`` folder or this is
        a smoke run.
    """
    if not isinstance(name, str) or NAME.fullmatch(name) is None:
        raise ValueError(f"name must look like 'ch04-bound' (chNN-words), got {name!r}")
    if not isinstance(figure, Figure):
        raise TypeError(f"figure must be a matplotlib Figure, got {type(figure).__name__}")
    root = REPOSITORY if root is None else root
    if not (root / "book").is_dir() or smoke_steps() is not None:
        return None
    path = root / FIGURE_FOLDER / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    # No software version in the file: the same figure gives the same bytes.
    figure.savefig(path, format="png", dpi=100, metadata={"Software": None})
    return path
