"""The reader's aids around the chapters: the course map, the notation page, the glossary."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import pytest
import torch

from rope_lessons.rope.ladder import frequencies

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"


def test_course_map_is_what_its_script_draws(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("course_map", ROOT / "scripts" / "course_map.py")
    assert spec and spec.loader
    course_map = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(course_map)
    course_map.write(tmp_path / "map.svg")
    committed = BOOK / "images" / "course_map.svg"
    assert (tmp_path / "map.svg").read_bytes() == committed.read_bytes(), (
        "run scripts/course_map.py and commit book/images/course_map.svg"
    )


def test_course_map_is_on_the_landing_page_with_alt_text() -> None:
    intro = (BOOK / "intro.md").read_text()
    figure = re.search(r"```\{figure\} images/course_map\.svg\n(.*?)```", intro, re.DOTALL)
    assert figure
    alt = re.search(r"^:alt: (.+)$", figure.group(1), re.MULTILINE)
    assert alt and len(alt.group(1)) > 80


@pytest.mark.parametrize(
    "term",
    [
        "RoPE",
        "NoPE",
        "Interleaved layout",
        "Half layout",
        "Placement",
        "p-RoPE",
        "VO-RoPE",
        "Base",
        "Frequency",
        "Wavelength",
        "Causal mask",
        "Permutation equivariance",
    ],
)
def test_glossary_defines(term: str) -> None:
    glossary = (BOOK / "glossary.md").read_text()
    block = glossary.split("```{glossary}")[1].split("\n```")[0]
    assert re.search(rf"^{re.escape(term)}\n  \S", block, re.MULTILINE)


def test_notation_numbers() -> None:
    """The wavelengths quoted on the notation page and in the glossary, read from the pages."""
    notation = " ".join((BOOK / "notation.md").read_text().split())
    glossary = " ".join((BOOK / "glossary.md").read_text().split())
    wavelength = 2 * math.pi / frequencies(64, 10000.0)  # (32,)
    fastest = re.search(r"wavelength is \$2\\pi \\approx ([\d.]+)\$ positions", notation)
    slowest = re.search(r"about \$([\d\\,]+)\$ positions for \$d = 64\$", notation)
    in_glossary = re.search(r"about \$([\d.]+)\$ positions for pair \$0\$", glossary)
    assert fastest and slowest and in_glossary, "the quoted wavelengths moved: update this test"
    assert float(fastest.group(1)) == round(wavelength[0].item(), 1) == 6.3
    assert float(in_glossary.group(1)) == round(wavelength[0].item(), 1)
    # "about 47 100": 2 pi b^((d-2)/d), rounded to hundreds, is below 2 pi b as the page says
    quoted = int(slowest.group(1).replace("\\,", ""))
    assert quoted == round(wavelength[-1].item(), -2) == 47_100
    assert wavelength[-1].item() < 2 * math.pi * 10000
    assert bool((torch.diff(wavelength) > 0).all())  # pair 0 turns fastest


def test_notation_agrees_with_the_conventions() -> None:
    intro = " ".join((BOOK / "intro.md").read_text().split())  # line breaks as spaces
    notation = " ".join((BOOK / "notation.md").read_text().split())
    for formula in (r"b^{-2k/d}", r"R_m^\top R_n = R_{n-m}", "(2k, 2k+1)", "(k, k + d/2)"):
        assert formula in intro
        assert formula in notation
    placements = "`nope`, `q`, `k`, `v`, `o`, `qk`, `vo`, `qkv`, `qkvo`"
    assert placements in intro
    assert placements in notation


def _math_spans(markdown: str) -> list[str]:
    """The `$...$` and `$$...$$` formulas of a page, without code (fences not opening with `{`)."""
    markdown = re.sub(r"^```(?!\{).*?^```", "", markdown, flags=re.DOTALL | re.MULTILINE)
    markdown = re.sub(r"`[^`\n]*`", "", markdown)
    displays = re.findall(r"\$\$(.*?)\$\$", markdown, re.DOTALL)
    inline = re.findall(r"\$([^$]+)\$", re.sub(r"\$\$.*?\$\$", "", markdown, flags=re.DOTALL))
    return [" ".join(span.split()) for span in displays + inline]


# The pages issues 15 and 17 went through; chapters 5-8 and the other notebooks are not
# checked yet.
CHECKED_PAGES = [
    "intro",
    "notation",
    "01_no_order",
    "02_absolute_encodings",
    "03_deriving_rope",
    "03_deriving_rope_layouts",
    "03_deriving_rope_images",
    "03_deriving_rope_precision",
    "03_deriving_rope_experiment",
    "04_decay",
    "04_decay_critique",
    "04_decay_trained",
]
CHECKED_NOTEBOOKS = ["01_no_order", "02_absolute_encodings", "04_decay"]
# Chapter 4 writes one query and one key in bold (\mathbf q, \mathbf k), a symbol of its
# own, so that the plain k of the same formulas is always the pair index.
BOLD_KEY = re.compile(r"\\mathbf\s*\{?k\}?(?![A-Za-z])")


def _pages() -> dict[str, str]:
    pages = {f"{name}.md": (BOOK / f"{name}.md").read_text() for name in CHECKED_PAGES}
    for path in (ROOT / "notebooks" / f"{name}.ipynb" for name in CHECKED_NOTEBOOKS):
        cells = json.loads(path.read_text())["cells"]
        pages[path.name] = "\n\n".join(
            "".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown"
        )
    return pages


def _letter(name: str) -> str:
    """A single-letter symbol: not part of a longer name or of a command like `\\beta`."""
    return rf"(?<![\\A-Za-z]){name}(?![A-Za-z])"


def _k_roles(span: str) -> set[str]:
    """How the bare letter k is used in a formula: 'pair' (index) or 'key'."""
    roles = set()
    for found in re.finditer(_letter("k"), span):
        before, after = span[: found.start()], span[found.end() :]
        if re.search(r"W_\{?$", before):
            roles.add("key")  # W_k, the key projection
        elif re.search(r"(_|_\{[^}]*|\^\{\()$", before) or re.search(r"\d$", before):
            roles.add("pair")  # theta_k, z_k, x_{2k}, psi^{(k)}, 2k
        elif re.match(r"(, k)?\s*\+\s*d/2|\s*=\s*0\b", after):
            roles.add("pair")  # (k, k + d/2), k = 0, ...
        else:
            roles.add("key")  # k_n, k', or a plain key in chapter 3's derivation
    return roles


def symbol_clashes(page: str, markdown: str) -> list[str]:
    """Formulas of one page that use k, b, d, R or phi with a meaning other than notation.md's.

    Scope: the pages in CHECKED_PAGES and CHECKED_NOTEBOOKS, and the clashes
    issue 15 fixed there, each as a pattern, in `$...$` math only
    (prose such as "pair $k$" is a formula `k` on its own and counts for nothing):

    - k as an offset between positions: added to a position (`p + k`), as the
      subscript of a rotation or shift matrix (`R_k`, `M_k`), or times a
      frequency (`k\\omega_j`); the offset is r;
    - k as a key and as the pair index in one formula;
    - outside chapter 3's derivation, a rotated key without its position
      (`R_n k` rather than `R_n k_n`);
    - b other than the base: b must be raised to a power (`b^{-2k/d}`), be set
      to a base (`b = 10000`), follow `2\\pi`, or carry 2D RoPE's subscript
      (`b_j`); so `2^b`, `b/(...)`, `+ b`, `b_0` fail;
    - d other than the dimension: as a summand in an equation (`a + d = b + c`)
      or an argument (`f(d)`);
    - R other than a rotation: R always carries a subscript (`R\\cos` fails);
    - phi other than the angles of the general solution: `\\phi` never,
      `\\varphi` only as `\\varphi_j` or in `B(\\varphi)`.

    Other letters, and meanings these patterns do not describe, are not checked.
    """
    found = []
    chapter_3 = page.startswith("03_deriving_rope")
    chapter_4 = page.startswith("04_decay")
    for span in _math_spans(markdown):
        problems = []
        if chapter_4:
            if span != "k" and "key" in _k_roles(BOLD_KEY.sub("", span)):
                problems.append("a plain k as a key in chapter 4 (the key is bold there)")
            span = BOLD_KEY.sub(r"\\mathbf{x}", span)  # the bold key is not the letter k
        if re.search(
            r"[pmn]\s*[+-]\s*k(?![A-Za-z_])|[MR]_\{?-?k(?![A-Za-z])|(?<![\\A-Za-z])k\s*(\\,)?\s*\\(omega|theta)",
            span,
        ):
            problems.append("k as an offset (use r)")
        if _k_roles(span) == {"pair", "key"}:
            problems.append("k as a key and as the pair index")
        if not chapter_3 and re.search(r"R_(\w|\{[^}]*\})\s*k(?![_'A-Za-z])", span):
            problems.append("a rotated key without its position")
        for b in re.finditer(_letter("b"), span):
            before, after = span[: b.start()], span[b.end() :]
            is_base = (
                (after.startswith("^") and not re.search(r"\^\{?[^}]*$", before))
                or re.match(r"\s*=\s*\d{2}", after)
                or re.search(r"\\pi\s*$", before)
                or re.match(r"_(j|\{j)", after)
                or re.search(r"(_|\\log_)$", before)  # B_b, log_b: functions of the base
                or re.match(r"\\,\s*s\b", after)  # b s, a base scaled by s
                or span == "b"
            )
            if not is_base:
                problems.append(f"b other than the base: {span!r}")
                break
        if re.search(r"[a-z]\s*\+\s*d\s*=|[a-z]\(d\)", span):
            problems.append("d other than the dimension")
        if (
            re.search(r"(?<![\\A-Za-z{])R(?![A-Za-z_]|\^\{(\\text\{\w+\}|[^}]*)\}_)", span)
            and span != "R"
        ):
            problems.append("R without a subscript")
        if re.search(r"\\phi(?![A-Za-z])|\\varphi(?![_)A-Za-z])|(?<!B\()\\varphi\)", span):
            problems.append("phi other than the angles phi_j")
        found += [f"{page}: ${span}$: {problem}" for problem in problems]
    return found


def test_one_meaning_per_symbol() -> None:
    """notation.md's promise, checked on the pages of issue 15: see `symbol_clashes`."""
    clashes = [clash for page, text in _pages().items() for clash in symbol_clashes(page, text)]
    assert not clashes, "\n".join(clashes)


def _reader_texts() -> dict[str, str]:
    """Every prose page and every notebook's markdown, by file name."""
    texts = {page.name: page.read_text() for page in BOOK.glob("*.md")}
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text())["cells"]
        texts[notebook.name] = "\n".join(
            "".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown"
        )
    return texts


def test_no_control_characters_in_what_readers_read() -> None:
    # A "\t" or "\b" written through a non-raw Python string turns \theta, \top, \text
    # or \bigl into a tab or a backspace, and the formula renders broken.
    damaged = {
        name: sorted({repr(char) for char in re.findall(r"[\x00-\x09\x0b-\x1f]", text)})
        for name, text in _reader_texts().items()
    }
    assert {name: chars for name, chars in damaged.items() if chars} == {}


API_LAYERS = ("rope", "toy", "evidence", "chapters", "real", "sweeps", "practice")
# Bottom modules documented on a layer's page: the checkers' report, with the checkers.
API_SHARED = {"practice": ["rope_lessons._grading"]}


def test_the_api_pages_document_every_public_module() -> None:
    """book/api/ has one page per folder of the package, which opens with the folder's
    docstring and runs autodoc on each of its modules (a new module must be added there);
    the index documents the top level and links to every page, and the book's
    configuration loads autodoc and napoleon for them."""
    package = ROOT / "rope_lessons"
    assert sorted(path.parent.name for path in package.glob("*/__init__.py")) == sorted(API_LAYERS)
    assert [path.stem for path in package.glob("*.py") if not path.stem.startswith("_")] == []
    index = (BOOK / "api" / "index.md").read_text(encoding="utf-8")
    assert ".. automodule:: rope_lessons\n" in index  # the top level, its list of layers
    for layer in API_LAYERS:
        page = (BOOK / "api" / f"{layer}.md").read_text(encoding="utf-8")
        documented = re.findall(r"\.\. automodule:: (rope_lessons\.[\w.]+)", page)
        assert documented[0] == f"rope_lessons.{layer}", f"{layer}.md opens with its folder"
        for shared in API_SHARED.get(layer, []):
            documented.remove(shared)
        modules = {
            f"rope_lessons.{layer}.{path.stem}"
            for path in (package / layer).glob("*.py")
            if path.stem == "__main__" or not path.stem.startswith("_")
        }
        assert sorted(documented[1:]) == sorted(modules), f"book/api/{layer}.md"
        assert f"]({layer}.md)" in index
    config = (ROOT / "_config.yml").read_text(encoding="utf-8")
    assert "sphinx.ext.autodoc" in config and "sphinx.ext.napoleon" in config
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    assert all(f"file: book/api/{name}\n" in toc for name in ("index", *API_LAYERS))
