"""The notebook buttons (Colab), and the repository and issue buttons of every page."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from .site_pages import ROOT, config, notebook_toc_files, toc_files

COLAB_LINK = re.compile(r'href="(https://colab\.research\.google\.com/[^"]*)"')


def _colab_links(page: Path) -> list[str]:
    return COLAB_LINK.findall(page.read_text(encoding="utf-8"))


def test_every_notebook_page_opens_its_notebook_in_colab(site: Path) -> None:
    settings = config()
    repository = urlsplit(settings["repository"]["url"])
    assert repository.netloc == "github.com"
    owner_and_name = repository.path.strip("/")
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", owner_and_name)
    branch = settings["repository"]["branch"]
    colab = settings["launch_buttons"]["colab_url"].rstrip("/")
    notebooks = notebook_toc_files()
    assert notebooks
    for name in notebooks:
        links = _colab_links(site / f"{name}.html")
        assert links == [f"{colab}/github/{owner_and_name}/blob/{branch}/{name}.ipynb"], name
        assert (ROOT / f"{name}.ipynb").is_file()  # the path exists in the repository


def test_only_notebook_pages_have_a_colab_button(site: Path) -> None:
    notebooks = set(notebook_toc_files())
    for name in toc_files():
        if name not in notebooks:
            assert _colab_links(site / f"{name}.html") == [], name


def test_every_notebook_of_the_repository_is_in_the_book() -> None:
    """A notebook left out of _toc.yml gets no page, hence no Colab button and no test here."""
    in_toc = set(notebook_toc_files())
    on_disk = {f"notebooks/{p.stem}" for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert on_disk <= in_toc, on_disk - in_toc


def test_every_page_links_to_the_repository_and_its_issues(site: Path) -> None:
    """The repository and issue buttons open the repository that _config.yml names."""
    url = config()["repository"]["url"]
    for name in toc_files():
        text = (site / f"{name}.html").read_text(encoding="utf-8")
        assert f'href="{url}"' in text and f'href="{url}/issues/new?' in text, name
