"""Run notebooks the way Google Colab would; `python3 tasks.py colab` calls this.

    python scripts/colab_check.py --repository SNAPSHOT --content DIR notebooks/NAME.ipynb ...

Run it with the Python of an environment that holds only what Colab ships (and
nbclient/ipykernel to run notebooks), with no rope_lessons installed. For each
notebook, as when a reader opens it from GitHub in Colab:

- the notebook is copied into an empty folder (Colab's /content) and its
  kernel starts there, so the repository is not importable from the folder;
- ``google.colab`` is in ``sys.modules`` before the first cell, as in Colab, so
  the set-up cell runs its ``pip install git+https://github.com/...@main``;
- git rewrites that GitHub address to the local snapshot SNAPSHOT (a repository
  whose branch main is the work tree), since this machine cannot reach GitHub;
- a last cell checks that rope_lessons was imported from site-packages.

The first code cell must be SETUP_CELL and, in a notebook that loads chapter
9's model (calls ``load_smollm2``), the second must be WEIGHTS_CELL, in one
that runs transformers' own layers (imports ``rope_lessons.real.production_checks``)
TRANSFORMERS_CELL (all from scripts/notebook_cells.py). Every cell must run
without error. After each notebook the versions of Colab's own packages
(COLAB_SHIPS) must be unchanged:
installing the course must not replace them. The one exception is declared:
in a notebook that loads the model or runs transformers' layers, the second cell
installs transformers 5 in place of Colab's older one, and with it the newer
huggingface-hub, tokenizers and safetensors it requires (WEIGHTS_UPGRADES);
there, and only there, these may change, and transformers must then be the
version the cell pins.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from notebook_cells import (
    REPOSITORY,
    SETUP_CELL,
    TRANSFORMERS_CELL,
    WEIGHTS_CELL,
    WEIGHTS_READERS,
)

COLAB_SHIPS = (
    "torch",
    "numpy",
    "matplotlib",
    "tqdm",
    "transformers",
    "huggingface-hub",
    "tokenizers",
    "safetensors",
)
# What the second cell of a notebook that loads chapter 9's model or runs transformers'
# layers may upgrade: the transformers it pins, and the packages that this transformers
# requires newer.
WEIGHTS_UPGRADES = frozenset({"transformers", "huggingface-hub", "tokenizers", "safetensors"})
TRANSFORMERS_PIN = next(p for p in WEIGHTS_READERS if p.startswith("transformers==")).split("==")[1]
# Colab imports google.colab at start. It is a real module there, with a __spec__:
# importlib.util.find_spec("google.colab"), which accelerate calls when transformers
# loads the GGUF file, raises ValueError for a module whose __spec__ is None.
IMPORT_COLAB = (
    "import importlib.machinery, sys, types\n"
    "colab = types.ModuleType('google.colab')\n"
    "colab.__spec__ = importlib.machinery.ModuleSpec('google.colab', None)\n"
    "sys.modules['google.colab'] = colab"
)
CHECK_INSTALL = (
    "import rope_lessons\n"
    "assert 'site-packages' in rope_lessons.__file__, rope_lessons.__file__\n"
    "print('rope_lessons from', rope_lessons.__file__)"
)


def versions() -> dict[str, str]:
    importlib.invalidate_caches()  # the kernels' pip changed site-packages meanwhile
    return {name: importlib.metadata.version(name) for name in COLAB_SHIPS}


def loads_the_model(notebook: nbformat.NotebookNode) -> bool:
    """Whether a code cell calls chapter 9's load_smollm2 (as tests/test_notebooks.py asks)."""
    return any(c.cell_type == "code" and "load_smollm2(" in c.source for c in notebook.cells)


def runs_transformers_layers(notebook: nbformat.NotebookNode) -> bool:
    """Whether a code cell imports chapter 10's checks of transformers' own layers."""
    return any(
        c.cell_type == "code" and "rope_lessons.real.production_checks" in c.source
        for c in notebook.cells
    )


def run_notebook(path: Path, content: Path) -> float:
    """Execute one notebook as Colab would; return its wall time in seconds.

    Colab's packages must be unchanged afterwards, except WEIGHTS_UPGRADES in a
    notebook that loads the model, runs transformers' layers or opens with the cell
    that installs them, where transformers must be TRANSFORMERS_PIN.
    """
    notebook = nbformat.read(path, as_version=4)
    code_cells = [c for c in notebook.cells if c.cell_type == "code"]
    if code_cells[0].source != SETUP_CELL:
        raise SystemExit(f"{path}: the first code cell is not SETUP_CELL")
    loads = loads_the_model(notebook)
    if loads and code_cells[1].source != WEIGHTS_CELL:
        raise SystemExit(f"{path}: loads the model, but its second code cell is not WEIGHTS_CELL")
    layers = runs_transformers_layers(notebook)
    if layers and code_cells[1].source != TRANSFORMERS_CELL:
        raise SystemExit(
            f"{path}: runs transformers' layers; its second cell is not TRANSFORMERS_CELL"
        )
    # either second cell may upgrade transformers, to one pin: where the notebook needs it
    # (above), or where it declares it without loading the model or the layers (a
    # practice notebook that reads the weights' file or transformers' configurations)
    upgrades = loads or layers or code_cells[1].source in (WEIGHTS_CELL, TRANSFORMERS_CELL)
    before = versions()
    notebook.cells.insert(0, nbformat.v4.new_code_cell(IMPORT_COLAB))
    notebook.cells.append(nbformat.v4.new_code_cell(CHECK_INSTALL))
    shutil.copy2(path, content / path.name)
    start = time.perf_counter()
    client = NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": content}}
    )
    client.execute()
    seconds = time.perf_counter() - start
    after = versions()
    changed = sorted(name for name in COLAB_SHIPS if after[name] != before[name])
    changes = ", ".join(f"{name} {before[name]} -> {after[name]}" for name in changed)
    if set(changed) - (WEIGHTS_UPGRADES if upgrades else set()):
        raise SystemExit(f"{path}: installing the course changed Colab's packages: {changes}")
    if upgrades and after["transformers"] != TRANSFORMERS_PIN:
        raise SystemExit(
            f"{path}: after its second cell transformers is {after['transformers']}, "
            f"not {TRANSFORMERS_PIN}"
        )
    print(f"[colab] {path.name}: ran in {seconds:.0f} s; {notebook.cells[-1].outputs[0].text}")
    if changed:
        print(f"[colab] {path.name}: its second cell upgraded {changes}", flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", type=Path, required=True, help="stands in for GitHub")
    parser.add_argument("--content", type=Path, required=True, help="an empty working folder")
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args()
    if importlib.util.find_spec("rope_lessons") is not None:
        raise SystemExit("rope_lessons is already installed: the environment is not fresh")
    # Every git process the kernels start (pip's clone) fetches the snapshot instead.
    os.environ |= {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{args.repository.resolve().as_uri()}.insteadOf",
        "GIT_CONFIG_VALUE_0": REPOSITORY,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    args.content.mkdir(parents=True, exist_ok=True)
    before = versions()
    print(f"[colab] Python {sys.version.split()[0]}, Colab's packages: {before}", flush=True)
    total = sum(run_notebook(path, args.content) for path in args.notebooks)
    print(
        f"[colab] {len(args.notebooks)} notebooks ran in {total:.0f} s; Colab's packages "
        "unchanged (but for the weights cells' declared upgrade of transformers)"
    )


if __name__ == "__main__":
    main()
