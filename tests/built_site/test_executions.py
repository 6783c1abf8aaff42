"""The built notebook pages show the outputs of this CI run's one execution of each notebook.

`python3 tasks.py test` runs nbval once over the notebooks with the plugin
tests/notebook_ci.py, which writes each executed notebook into the book's
jupyter-cache tagged with the run's id (ROPE_LESSONS_NOTEBOOK_RUN), and then
builds the book, which must take every notebook from that cache.
"""

from __future__ import annotations

import html
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_cache import get_cache

from .site_pages import ROOT, notebook_toc_files, source_of

sys.path.insert(0, str(ROOT / "tests"))
from notebook_ci import RUN_KEY

CACHE = ROOT / "_build" / ".jupyter_cache"


def stdout_lines(notebook: nbformat.NotebookNode) -> set[str]:
    """Every non-blank line the notebook's code cells printed on standard output."""
    return {
        line.strip()
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "stream" and output.get("name") == "stdout"
        for line in output.get("text", "").splitlines()
        if line.strip()
    }


def page_text(path: Path) -> str:
    """The page's text: tags (syntax-highlighting spans too) removed, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8")))


def test_every_notebook_page_shows_this_runs_execution(site: Path) -> None:
    run_id = os.environ.get("ROPE_LESSONS_NOTEBOOK_RUN")
    if not run_id:
        reason = "ROPE_LESSONS_NOTEBOOK_RUN names the notebook run; `tasks.py test` sets it"
        if os.environ.get("ROPE_LESSONS_SITE_TESTS") == "required":
            pytest.fail(reason)
        pytest.skip(reason)
    cache = get_cache(str(CACHE))
    shown_new_lines = 0
    for toc_file in notebook_toc_files():
        committed = nbformat.read(source_of(toc_file), as_version=4)
        try:
            record = cache.match_cache_notebook(committed)
        except KeyError:
            pytest.fail(f"{toc_file}: not in the book's cache; the book build executed it again")
        assert record.data.get(RUN_KEY) == run_id, (
            f"{toc_file}: the cached execution is not this run's nbval execution "
            f"(record {record.data})"
        )
        executed = cache.get_cache_bundle(record.pk).nb
        page = page_text(site / f"{toc_file}.html")
        # Lines that only this execution printed (wall times, ...): the page must show them.
        new = stdout_lines(executed) - stdout_lines(committed)
        missing = [line for line in new if line not in page]
        assert not missing, f"{toc_file}: the page lacks lines this run printed: {missing[:3]}"
        shown_new_lines += len(new)
    assert shown_new_lines > 0, "no notebook printed anything new; nothing shows the page is fresh"
