#!/usr/bin/env python3
"""The course's commands. Each sets up what it needs, then runs.

    python3 tasks.py book        build the HTML book, executing every notebook
    python3 tasks.py test        lint, unit and property tests, then nbval on every notebook
    python3 tasks.py notebooks [PATH ...]
                                 re-execute notebooks in place (to refresh committed outputs)

Set-up, shared by all commands: a virtual environment in .venv is created if
missing and filled from requirements.txt plus the package itself (editable); it
is reused while requirements.txt and pyproject.toml stay unchanged. Only the
standard library is used here, so a bare Python 3.10+ can run this file.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".rope-lessons-requirements.sha256"
NOTEBOOKS = ROOT / "notebooks"


def say(message: str) -> None:
    print(f"[tasks] {message}", flush=True)


def run(*args: str | Path) -> None:
    """Run a command from the repository root with the environment's tools first on PATH."""
    env = os.environ | {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        # Kernels from .venv take precedence over any the user registered elsewhere.
        "JUPYTER_PATH": str(VENV / "share" / "jupyter"),
        "PYTHONUNBUFFERED": "1",
    }
    say("$ " + " ".join(str(a) for a in args))
    subprocess.run([str(a) for a in args], cwd=ROOT, env=env, check=True)


def requirements_digest() -> str:
    digest = hashlib.sha256()
    for name in ("requirements.txt", "pyproject.toml"):
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
    STAMP.write_text(requirements_digest())


def notebook_paths(names: list[str] | None = None) -> list[Path]:
    """The named notebooks, or every notebook of the course."""
    if names:
        return [Path(name).resolve() for name in names]
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def test(_: list[str]) -> None:
    run(PYTHON, "-m", "ruff", "check", ".")
    run(PYTHON, "-m", "ruff", "format", "--check", ".")
    run(PYTHON, "-m", "pytest", "tests")
    run(
        PYTHON,
        "-m",
        "pytest",
        "--nbval-lax",
        "--nbval-current-env",
        *(str(p.relative_to(ROOT)) for p in notebook_paths()),
    )


def book(_: list[str]) -> None:
    jupyter_book = BIN / ("jupyter-book.exe" if os.name == "nt" else "jupyter-book")
    run(jupyter_book, "build", ".", "-W", "-n", "--keep-going")
    index = ROOT / "_build" / "html" / "index.html"
    say(f"the book is at {index}")
    say(f"open it with: python3 -m webbrowser file://{index}")


def refresh_notebooks(names: list[str]) -> None:
    """Execute notebooks in place (all, or those named) so that their saved outputs are current."""
    script = (
        "import sys, nbformat\n"
        "from nbclient import NotebookClient\n"
        "for path in sys.argv[1:]:\n"
        "    nb = nbformat.read(path, as_version=4)\n"
        "    NotebookClient(nb, timeout=600, kernel_name='python3',\n"
        "                   resources={'metadata': {'path': 'notebooks'}}).execute()\n"
        "    nbformat.write(nb, path)\n"
        "    print('executed', path, flush=True)\n"
    )
    run(PYTHON, "-c", script, *(str(p.relative_to(ROOT)) for p in notebook_paths(names)))


COMMANDS = {"book": book, "test": test, "notebooks": refresh_notebooks}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=sorted(COMMANDS), help="what to do")
    parser.add_argument("notebooks", nargs="*", help="with 'notebooks': which ones (default all)")
    args = parser.parse_args()
    start = time.perf_counter()
    ensure_environment()
    COMMANDS[args.command](args.notebooks)
    say(f"'{args.command}' finished in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
