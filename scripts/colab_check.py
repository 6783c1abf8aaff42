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

Every cell must run without error. Afterwards the versions of Colab's own
packages must be unchanged: installing the course must not replace them.
"""

from __future__ import annotations

import argparse
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
from notebook_cells import REPOSITORY, SETUP_CELL

COLAB_SHIPS = ("torch", "numpy", "matplotlib", "tqdm")
IMPORT_COLAB = (
    "import sys, types\n"
    "sys.modules['google.colab'] = types.ModuleType('google.colab')  # Colab imports it at start"
)
CHECK_INSTALL = (
    "import rope_lessons\n"
    "assert 'site-packages' in rope_lessons.__file__, rope_lessons.__file__\n"
    "print('rope_lessons from', rope_lessons.__file__)"
)


def versions() -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in COLAB_SHIPS}


def run_notebook(path: Path, content: Path) -> float:
    """Execute one notebook as Colab would; return its wall time in seconds."""
    notebook = nbformat.read(path, as_version=4)
    first_code = next(c for c in notebook.cells if c.cell_type == "code")
    if first_code.source != SETUP_CELL:
        raise SystemExit(f"{path}: the first code cell is not SETUP_CELL")
    notebook.cells.insert(0, nbformat.v4.new_code_cell(IMPORT_COLAB))
    notebook.cells.append(nbformat.v4.new_code_cell(CHECK_INSTALL))
    shutil.copy2(path, content / path.name)
    start = time.perf_counter()
    client = NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": content}}
    )
    client.execute()
    seconds = time.perf_counter() - start
    print(f"[colab] {path.name}: ran in {seconds:.0f} s; {notebook.cells[-1].outputs[0].text}")
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
    after = versions()
    if after != before:
        raise SystemExit(f"installing the course changed Colab's packages: {before} -> {after}")
    print(f"[colab] {len(args.notebooks)} notebooks ran in {total:.0f} s; packages unchanged")


if __name__ == "__main__":
    main()
