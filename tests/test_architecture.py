"""The package's architecture: its layers hold, its imports form no cycle, and no package
``__init__`` hides one of its own submodules behind another object of the same name.

The layers are import-linter contracts in ``pyproject.toml`` ([tool.importlinter]).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "rope_lessons"
# The venv's executables sit next to its python (not resolved: the venv's python is a link).
LINT_IMPORTS = Path(sys.executable).parent / (
    "lint-imports.exe" if os.name == "nt" else "lint-imports"
)


def lint_imports(cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``lint-imports`` with the configuration in ``cwd``'s pyproject.toml."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        env=os.environ | (env or {}),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_layer_contracts_hold() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_an_upward_import_breaks_the_layers(tmp_path: Path) -> None:
    """A planted import of the toy model into the RoPE formulas is caught, in the copy."""
    copy = tmp_path / PACKAGE
    skip = shutil.ignore_patterns("__pycache__", "data", "results")  # only the code matters
    shutil.copytree(ROOT / PACKAGE, copy, ignore=skip)
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    ladder = copy / "rope" / "ladder.py"
    source = ladder.read_text(encoding="utf-8")
    lines = len(source.splitlines())
    ladder.write_text(source + "import rope_lessons.toy.model  # planted\n", encoding="utf-8")
    pythonpath = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    done = lint_imports(tmp_path, {"PYTHONPATH": pythonpath})
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "rope_lessons.rope is not allowed to import rope_lessons.toy" in output, output
    # The planted line is the one named, so the copy was analysed, not the installed package.
    assert "rope_lessons.rope.ladder -> rope_lessons.toy.model" in output, output
    assert f"l.{lines + 1}" in output, output


def find_cycle(graph: grimp.ImportGraph) -> list[str] | None:
    """A cycle of direct imports (its modules, the first repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(module: str) -> list[str] | None:
        path.append(module)
        on_path.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported in on_path:
                return [*path[path.index(imported) :], imported]
            if imported not in done:
                cycle = visit(imported)
                if cycle is not None:
                    return cycle
        path.pop()
        on_path.discard(module)
        done.add(module)
        return None

    for module in sorted(graph.modules):
        if module not in done:
            cycle = visit(module)
            if cycle is not None:
                return cycle
    return None


def test_find_cycle_finds_one() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.d", "p.a")]:
        graph.add_import(importer=importer, imported=imported)
    assert find_cycle(graph) == ["p.a", "p.b", "p.c", "p.a"]
    graph.remove_import(importer="p.c", imported="p.a")
    assert find_cycle(graph) is None


def test_the_package_has_no_import_cycle() -> None:
    graph = grimp.build_graph(PACKAGE)
    assert len(graph.modules) > 50, "the graph holds the whole package"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def shadowed_submodules(package: ModuleType) -> list[str]:
    """Where ``package`` or a package below it binds a submodule's name to another object.

    A package's names are read right after it is imported, before any of its subpackages
    is imported here: that import would set the name to the subpackage, hiding the trap.
    A name bound to anything but the submodule is a fault whether or not the submodule has
    been imported yet, so modules that are not packages need not be imported (some of the
    stored sweeps take seconds).
    """
    problems: list[str] = []
    missing = object()
    children = list(pkgutil.iter_modules(package.__path__))
    for info in children:
        name = f"{package.__name__}.{info.name}"
        value = getattr(package, info.name, missing)
        if value is not missing and value is not sys.modules.get(name):
            problems.append(f"{name} is {value!r}, not the module")
    for info in children:
        if info.ispkg:
            problems.extend(
                shadowed_submodules(importlib.import_module(f"{package.__name__}.{info.name}"))
            )
    return problems


def test_no_package_hides_a_submodule() -> None:
    """``import rope_lessons.x.y as m`` gives the module y, never a function named y."""
    assert shadowed_submodules(importlib.import_module(PACKAGE)) == []
