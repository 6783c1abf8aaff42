"""The built book in a real browser: every page of _build/html in headless Chromium.

One crawl visits every page once (served on 127.0.0.1) and records what the
browser saw; the tests below check the records: links and images resolve,
figures load and have alt text, math is typeset by the vendored MathJax, no
request leaves 127.0.0.1, previous/next follow the table of contents,
solutions are collapsed dropdowns, and search finds "rotary". A screenshot of
every page of the table of contents goes to _build/screenshots/.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote, unquote, urldefrag, urljoin, urlsplit

import pytest

from .site_pages import SCREENSHOTS, SITE, built_pages, toc_files

# Waits until the page is loaded, every image has loaded or failed, the web
# fonts are in, and MathJax (where the page loads it) has typeset the page.
# MathJax's script is deferred, so it has run by the time the page is complete:
# if MathJax.startup is missing then, the script did not load.
WAIT_UNTIL_READY = """
const done = arguments[arguments.length - 1];
const deadline = Date.now() + 45000;
const pause = () => new Promise((resolve) => setTimeout(resolve, 50));
async function ready() {
  for (const img of document.images) img.loading = "eager";
  while (document.readyState !== "complete" && Date.now() < deadline) await pause();
  const usesMathJax = [...document.scripts].some((s) => /mathjax/i.test(s.src));
  if (usesMathJax) {
    if (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) {
      return "MathJax did not load";
    }
    await MathJax.startup.promise;
  }
  while ([...document.images].some((i) => !i.complete) && Date.now() < deadline) await pause();
  await document.fonts.ready;
  return Date.now() < deadline ? "ready" : "timed out";
}
ready().then(done, (error) => done("error: " + error));
"""

# What the page shows, read from the live DOM.
COLLECT = """
const body = document.body.cloneNode(true);
body.querySelectorAll("pre, code, script, style, textarea, mjx-container")
    .forEach((e) => e.remove());
const maths = [...document.querySelectorAll("span.math, div.math")];
return {
  title: document.title,
  links: [...document.querySelectorAll("a[href]")].map((a) => a.href),
  images: [...document.images].map((i) => ({
      src: i.currentSrc || i.src, width: i.naturalWidth, alt: i.getAttribute("alt")})),
  math: maths.length,
  untypeset: maths.filter((e) => !e.querySelector("mjx-container"))
      .map((e) => e.textContent.slice(0, 80)),
  mjx: document.querySelectorAll("mjx-container").length,
  math_errors: [...document.querySelectorAll("mjx-merror")]
      .map((e) => e.getAttribute("data-mjx-error") || e.textContent),
  text: body.textContent,
  prev: document.querySelector("a.left-prev") ? document.querySelector("a.left-prev").href : null,
  next: document.querySelector("a.right-next") ? document.querySelector("a.right-next").href
                                                : null,
  resources: performance.getEntriesByType("resource").map((e) => e.name),
  exercises: document.querySelectorAll("div.exercise").length,
  solutions: [...document.querySelectorAll("div.solution")].map((s) => {
      const body = [...s.children].filter((c) => !c.classList.contains("admonition-title"));
      return {id: s.id, dropdown: s.classList.contains("dropdown"),
              hidden: body.length > 0 && body.every(
                  (c) => getComputedStyle(c).visibility === "hidden" || c.offsetParent === null),
              button: s.querySelector("button.toggle-button") !== null};
  }),
};
"""

# The sizes every page is measured at: a desktop and a phone (CSS pixels).
SIZES = ((1280, 900), (390, 844))
# Full-page screenshots of the table of contents at both sizes, for a person to look
# at (no test reads them); about two minutes, so only on request.
SAVE_SCREENSHOTS = os.environ.get("ROPE_LESSONS_SCREENSHOTS") == "1"

# How the page lays out at the current size: its width against the viewport's, the
# display equations that neither fit their box nor scroll inside it, the widget
# controls and values outside the viewport, and where each figure image links to.
LAYOUT = """
const vw = document.documentElement.clientWidth;
const scrolls = (e) => e && ["auto", "scroll"].includes(getComputedStyle(e).overflowX)
    && e.getBoundingClientRect().right <= vw + 1;
const clipped = [...document.querySelectorAll('mjx-container[display="true"]')].filter((m) => {
  const math = m.querySelector("mjx-math");
  const fits = !math || (math.getBoundingClientRect().width <= m.clientWidth + 1
      && m.getBoundingClientRect().right <= vw + 1);
  return !(fits || scrolls(m) || scrolls(m.closest("div.math")));
}).map((m) => m.textContent.slice(0, 60));
const offscreen = [...document.querySelectorAll(
    ".rope-widget input, .rope-widget select, .rope-widget output, .rope-widget dd")]
  .filter((e) => { const r = e.getBoundingClientRect(); return r.left < -1 || r.right > vw + 1; })
  .map((e) => e.getAttribute("data-in") || e.getAttribute("data-out") || e.tagName);
return {
  viewport: vw,
  width: document.documentElement.scrollWidth,
  clipped: clipped,
  offscreen: offscreen,
  figures: [...document.querySelectorAll(
      ".bd-article figure img, .bd-article div.cell_output img")].map((i) => ({
    src: i.currentSrc || i.src,
    link: i.closest("a") ? i.closest("a").href : null})),
};
"""

# Raw TeX that escaped MathJax: display or inline delimiters, or a $...$ span
# with a TeX command in it (code, pre and typeset math are removed first).
RAW_TEX = re.compile(r"\$\$|\\\(|\\\)|\\\[|\\\]|\$[^$\n]*\\[A-Za-z]+[^$\n]*\$")


@dataclass
class Page:
    """What the browser saw on one page."""

    path: str
    url: str
    state: str
    seen: dict[str, Any]
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    layouts: dict[int, dict[str, Any]] = field(default_factory=dict)  # by viewport width


def _requests_from_performance_log(driver: Any) -> list[str]:
    """URLs of the requests (and web sockets) that the browser started since the last read."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
        elif message["method"] == "Network.webSocketCreated":
            urls.append(message["params"]["url"])
    return urls


def _screenshot(driver: Any, path: str, suffix: str = "") -> None:
    """Save a full-page PNG of the current page under _build/screenshots/ (``suffix``
    before ``.png`` names the size when it is not the desktop one)."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 20000)}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {"format": "png", "captureBeyondViewport": True, "clip": clip | {"scale": 1}},
    )
    target = SCREENSHOTS / (path.removesuffix(".html").replace("/", "__") + suffix + ".png")
    target.write_bytes(base64.b64decode(shot["data"]))


@pytest.fixture(scope="session")
def crawl(browser: Any, server: str) -> dict[str, Page]:
    """Visit every built page once; with ROPE_LESSONS_SCREENSHOTS=1, screenshot the pages
    of the table of contents."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS.glob("*.png"):
        old.unlink()
    toc_pages = {f"{f}.html" for f in toc_files()}
    pages = {}
    for path in built_pages():
        url = urljoin(server, path)
        browser.get(url)
        state = browser.execute_async_script(WAIT_UNTIL_READY)
        seen = browser.execute_script(COLLECT)
        page = Page(path=path, url=browser.current_url, state=state, seen=seen)
        page.requests = _requests_from_performance_log(browser)
        page.console_errors = [
            e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"
        ]
        for width, height in SIZES:
            browser.set_window_size(width, height)
            page.layouts[width] = browser.execute_script(LAYOUT)
            if SAVE_SCREENSHOTS and path in toc_pages:
                _screenshot(browser, path, "" if width == SIZES[0][0] else f"__{width}px")
        browser.set_window_size(*SIZES[0])
        pages[path] = page
    return pages


def test_every_page_of_the_table_of_contents_is_built(crawl: dict[str, Page]) -> None:
    missing = [f for f in toc_files() if f"{f}.html" not in crawl]
    assert not missing
    assert len(crawl) >= len(toc_files()) + 2  # plus the index and search pages


def test_every_page_loads_completely(crawl: dict[str, Page]) -> None:
    """Loaded, images settled, fonts in, and MathJax done where the page uses it."""
    not_ready = {p.path: p.state for p in crawl.values() if p.state != "ready"}
    assert not not_ready


def test_the_site_root_leads_to_the_landing_page(crawl: dict[str, Page], server: str) -> None:
    root = (SITE / "index.html").read_text(encoding="utf-8")
    target = re.search(r'http-equiv="Refresh" content="0; url=([^"]+)"', root)
    assert target and target.group(1) == f"{toc_files()[0]}.html"
    assert crawl["index.html"].url == urljoin(server, target.group(1))


def test_no_request_leaves_loopback(crawl: dict[str, Page], server: str) -> None:
    """The site works offline: every script, style, font and image comes from the build."""
    outside = {}
    for page in crawl.values():
        urls = page.requests + page.seen["resources"]
        bad = [u for u in urls if urlsplit(u).scheme in {"http", "https", "ws", "wss"}]
        bad = [u for u in bad if not u.startswith(server)]
        if bad:
            outside[page.path] = sorted(set(bad))
    assert not outside
    assert sum(len(p.requests) for p in crawl.values()) > len(crawl)  # the log did record


def test_no_errors_in_the_browser_console(crawl: dict[str, Page]) -> None:
    errors = {p.path: p.console_errors for p in crawl.values() if p.console_errors}
    assert not errors


class _Ids(HTMLParser):
    """Collects the id and name attributes of an HTML page: the targets of #fragments."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in {"id", "name"} and value:
                self.ids.add(value)


def _fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


def test_internal_links_resolve(crawl: dict[str, Page], server: str) -> None:
    """Every link to the site itself reaches a page or file, and its #fragment exists there."""
    links = {link for page in crawl.values() for link in page.seen["links"]}
    internal = sorted(link for link in links if link.startswith(server))
    documents: dict[str, tuple[int, set[str]]] = {}
    broken = []
    for link in internal:
        document, fragment = urldefrag(link)
        if document not in documents:
            status, body = _fetch(document)
            parser = _Ids()
            if status == 200 and document.endswith(".html"):
                parser.feed(body.decode("utf-8", errors="replace"))
            documents[document] = (status, parser.ids)
        status, ids = documents[document]
        if status != 200:
            broken.append(f"{link} (HTTP {status})")
        elif fragment and unquote(fragment) not in ids:
            broken.append(f"{link} (no #{unquote(fragment)} there)")
    assert not broken
    assert len(internal) > 10 * len(toc_files())
    print(f"{len(internal)} internal links to {len(documents)} documents checked")


IMAGE_FILE = re.compile(r"\.(png|svg|jpe?g|gif|webp)$", re.IGNORECASE)


def _describes(alt: str | None, src: str) -> bool:
    """Alt text that says something: not empty, and not the image's file name, which
    is what docutils and myst-nb write when a figure was given no alt text."""
    alt = (alt or "").strip()
    name = urlsplit(src).path.rsplit("/", 1)[-1]
    return bool(alt) and not IMAGE_FILE.search(alt) and name not in alt


def test_images_load_and_have_alt_text(crawl: dict[str, Page]) -> None:
    images = [(p.path, image) for p in crawl.values() for image in p.seen["images"]]
    unloaded = [(path, i["src"]) for path, i in images if not i["width"]]
    no_alt = [(path, i["src"]) for path, i in images if not _describes(i["alt"], i["src"])]
    assert not unloaded
    assert not no_alt
    assert images, "no image on any page: the figures are missing"
    print(f"{len(images)} images checked")


def test_math_is_typeset(crawl: dict[str, Page]) -> None:
    """Every math element holds MathJax output, with no TeX error and no raw TeX left."""
    problems = {}
    for page in crawl.values():
        seen = page.seen
        issues = [f"not typeset: {t!r}" for t in seen["untypeset"]]
        issues += [f"TeX error: {e!r}" for e in seen["math_errors"]]
        issues += [f"raw TeX: {m.group()!r}" for m in RAW_TEX.finditer(seen["text"])]
        if issues:
            problems[page.path] = issues
    assert not problems
    with_math = [p for p in crawl.values() if p.seen["math"]]
    assert with_math, "no page has math: the check would pass vacuously"
    assert all(p.seen["mjx"] >= p.seen["math"] for p in with_math)


def test_previous_and_next_follow_the_table_of_contents(
    crawl: dict[str, Page], server: str
) -> None:
    order = [urljoin(server, f"{f}.html") for f in toc_files()]
    for before, after in itertools.pairwise(order):
        assert crawl[before.removeprefix(server)].seen["next"] == after
        assert crawl[after.removeprefix(server)].seen["prev"] == before
    assert crawl[order[-1].removeprefix(server)].seen["next"] is None


def test_solutions_are_collapsed_dropdowns(crawl: dict[str, Page]) -> None:
    """Solutions are hidden behind a toggle, on every page, in the same way."""
    solutions = [(p.path, s) for p in crawl.values() for s in p.seen["solutions"]]
    wrong = [
        (path, s["id"])
        for path, s in solutions
        if not (s["dropdown"] and s["hidden"] and s["button"])
    ]
    assert not wrong
    assert solutions, "no solution on any page"
    exercises = sum(p.seen["exercises"] for p in crawl.values())
    assert exercises >= len(solutions) / 2 > 0


def test_a_solution_opens_when_clicked(browser: Any, crawl: dict[str, Page]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    page = next(p for p in crawl.values() if p.seen["solutions"])
    browser.get(page.url)
    browser.execute_async_script(WAIT_UNTIL_READY)
    solution = browser.find_element(By.CSS_SELECTOR, "div.solution.dropdown")
    content = solution.find_element(By.CSS_SELECTOR, ":scope > :not(.admonition-title)")
    assert not content.is_displayed()
    solution.find_element(By.CSS_SELECTOR, "button.toggle-button").click()
    # The theme opens the dropdown in a script after the click: wait for it (a
    # solution that never opens still fails, after the timeout).
    WebDriverWait(browser, 10).until(lambda _: content.is_displayed())


def test_search_finds_rotary(browser: Any, server: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(urljoin(server, "search.html?q=rotary"))
    results = WebDriverWait(browser, 30).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#search-results ul.search li a")
    )
    targets = {urldefrag(r.get_attribute("href"))[0].removeprefix(server) for r in results}
    assert targets & {f"{f}.html" for f in toc_files()}


# Each chapter's subject, and the page a search for it must list first: the chapter
# holds the subject's main index entry (and wins a tie with the glossary, see
# book/_static/search_scorer.js).
SUBJECTS = {
    "p-RoPE": "book/05_frequencies.html",
    "VO-RoPE": "book/06_vo_rope.html",
    "YaRN": "book/08_beyond_trained_length_methods.html",
    "NoPE": "book/01_no_order.html",
    "critical pair": "book/08_beyond_trained_length.html",
}


@pytest.mark.parametrize("subject", list(SUBJECTS))
def test_search_lists_the_chapter_of_a_subject_first(
    browser: Any, server: str, subject: str
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(urljoin(server, "search.html?q=" + quote(subject)))
    results = WebDriverWait(browser, 30).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#search-results ul.search li a")
    )
    first = urldefrag(results[0].get_attribute("href"))[0].removeprefix(server)
    assert first == SUBJECTS[subject], [r.get_attribute("href") for r in results[:5]]


def test_screenshots_of_every_page_of_the_table_of_contents(crawl: dict[str, Page]) -> None:
    if not SAVE_SCREENSHOTS:
        pytest.skip("screenshots are taken with ROPE_LESSONS_SCREENSHOTS=1")
    for f in toc_files():
        shot = SCREENSHOTS / (f.replace("/", "__") + ".png")
        assert shot.stat().st_size > 10_000, shot
    assert (SITE / "index.html").exists()
    for f in toc_files():  # and at the phone's size
        shot = SCREENSHOTS / (f.replace("/", "__") + f"__{SIZES[1][0]}px.png")
        assert shot.stat().st_size > 10_000, shot


def _at_every_size(crawl: dict[str, Page], key: str) -> list[str]:
    """The pages and sizes whose layout record ``key`` is not empty, with what it holds."""
    return [
        f"{path} at {width} px: {layout[key]}"
        for path, page in crawl.items()
        for width, layout in page.layouts.items()
        if layout[key]
    ]


def test_no_page_is_wider_than_the_screen(crawl: dict[str, Page]) -> None:
    """Wide tables, equations and code scroll inside their own boxes, at both sizes."""
    wide = [
        f"{path} at {width} px: {layout['width']} px wide"
        for path, page in crawl.items()
        for width, layout in page.layouts.items()
        if layout["width"] > layout["viewport"]
    ]
    assert not wide, wide
    assert all(set(page.layouts) == {w for w, _ in SIZES} for page in crawl.values())


def test_display_equations_fit_or_scroll(crawl: dict[str, Page]) -> None:
    clipped = _at_every_size(crawl, "clipped")
    assert not clipped, clipped


def test_widget_controls_and_values_are_on_screen(crawl: dict[str, Page]) -> None:
    offscreen = _at_every_size(crawl, "offscreen")
    assert not offscreen, offscreen


def test_figures_open_at_full_size(crawl: dict[str, Page]) -> None:
    """On a phone a figure's text is small: every figure links to its own image file."""
    figures = [f for page in crawl.values() for f in page.layouts[SIZES[0][0]]["figures"]]
    assert len(figures) > 20  # the notebooks' figures are there
    unlinked = [f["src"] for f in figures if f["link"] is None]
    assert not unlinked, unlinked[:5]


def test_the_bibliography_shows_no_tex_and_whole_names(crawl: dict[str, Page]) -> None:
    text = crawl["book/bibliography.html"].seen["text"]
    assert not re.search(r"\\[A-Za-z]+", text), re.findall(r".{30}\\[A-Za-z]+.{30}", text)
    assert "Quesnelle, J" in text or "Jeffrey Quesnelle" in text
    assert "Jeffrey)" not in text
    labels = re.findall(r"^\s*\[([^\]]+)\]\s*$", text, re.M)
    assert labels and all(label.isdigit() for label in labels), labels[:5]
