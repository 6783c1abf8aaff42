"""What the built site should contain, read from the sources: _toc.yml, _config.yml, notebooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
# Folders of the built site that hold assets and copies, not pages.
NON_PAGE_DIRS = ("_static", "_sources", "_images", "_sphinx_design_static")


def _toc_entries(entries: list[dict[str, Any]]) -> list[str]:
    files: list[str] = []
    for entry in entries:
        if "file" in entry:
            files.append(entry["file"])
        for key in ("chapters", "sections"):
            files.extend(_toc_entries(entry.get(key, [])))
    return files


def toc_files() -> list[str]:
    """Every file of _toc.yml in reading order, without suffix (e.g. 'book/intro')."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    files.extend(_toc_entries(toc.get("parts", [])))
    files.extend(_toc_entries(toc.get("chapters", [])))
    return [str(Path(f).with_suffix("")) if Path(f).suffix else f for f in files]


def source_of(toc_file: str) -> Path:
    """The source file (.md or .ipynb) of a toc entry."""
    for suffix in (".md", ".ipynb"):
        path = ROOT / f"{toc_file}{suffix}"
        if path.exists():
            return path
    raise FileNotFoundError(f"no .md or .ipynb source for toc entry {toc_file!r}")


def notebook_toc_files() -> list[str]:
    """The toc entries whose source is a notebook."""
    return [f for f in toc_files() if source_of(f).suffix == ".ipynb"]


def source_paths() -> list[Path]:
    """Every file whose change should change the built site."""
    paths = [ROOT / name for name in ("_config.yml", "_toc.yml", "references.bib")]
    paths.extend(source_of(f) for f in toc_files())
    # Images on the pages; static files (book/_static) are copied on every
    # build without rewriting pages, so they cannot make the pages stale.
    paths.extend(p for p in (ROOT / "book" / "images").rglob("*") if p.is_file())
    return paths


def built_pages() -> list[str]:
    """Every HTML page of the built site, as paths relative to its root (e.g. 'book/intro.html')."""
    return sorted(
        str(p.relative_to(SITE))
        for p in SITE.rglob("*.html")
        if p.relative_to(SITE).parts[0] not in NON_PAGE_DIRS
    )


def config() -> dict[str, Any]:
    """The book's _config.yml."""
    loaded = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded
