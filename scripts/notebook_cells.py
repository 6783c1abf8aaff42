"""Write a notebook from a list of cells: an authoring aid for maintainers.

    from notebook_cells import write_notebook, md, code
    write_notebook("notebooks/00_setup.ipynb", [md("# Title"), code("print(1)")])

It writes the cells with the course's metadata (kernel python3, Colab) and
no outputs; execute it afterwards with

    jupyter nbconvert --to notebook --execute --inplace notebooks/00_setup.ipynb

The set-up cell every notebook starts with is SETUP_CELL below, written as
`ruff format` leaves it, so that formatting a notebook keeps it identical
(tests/test_notebooks.py checks both).
"""

from __future__ import annotations

import textwrap

import nbformat

REPOSITORY = "https://github.com/rope-lessons/rope-lessons"

SETUP_CELL = f"""\
# Set-up. In Google Colab, install the course package from GitHub; anywhere else
# this cell does nothing and the notebook uses the rope_lessons installed with
# the repository (see its README).
import sys

if "google.colab" in sys.modules:
    import subprocess

    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "git+{REPOSITORY}@main",
        ],
        check=True,
    )"""


def md(text: str) -> nbformat.NotebookNode:
    """A markdown cell; the text is dedented."""
    cell: nbformat.NotebookNode = nbformat.v4.new_markdown_cell(textwrap.dedent(text).strip())
    return cell


def code(text: str, tags: list[str] | None = None) -> nbformat.NotebookNode:
    """A code cell; the text is dedented. ``tags`` go to the cell metadata."""
    cell: nbformat.NotebookNode = nbformat.v4.new_code_cell(textwrap.dedent(text).strip())
    if tags:
        cell.metadata["tags"] = tags
    return cell


def write_notebook(path: str, cells: list[nbformat.NotebookNode]) -> None:
    """Write ``cells`` to ``path`` as an unexecuted notebook with the course's metadata."""
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "colab": {"provenance": []},
    }
    nbformat.write(notebook, path)
