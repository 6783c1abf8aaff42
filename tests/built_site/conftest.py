"""Fixtures for the tests of the built site: the book in _build/html, served on loopback.

These tests read what `python3 tasks.py book` built. `python3 tasks.py test`
builds the book and then runs them with ROPE_LESSONS_SITE_TESTS=required, so a
missing or stale build, or a missing browser, fails there; run on their own
(`pytest tests/built_site`) they skip with the reason instead.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from .site_pages import ROOT, SITE, source_paths


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("ROPE_LESSONS_SITE_TESTS") == "required":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def site() -> Path:
    """The built HTML site, checked to exist and to be newer than every source."""
    if not (SITE / "index.html").exists():
        _unavailable(f"no built book in {SITE}: run `python3 tasks.py book` first")
    newest_page = max(p.stat().st_mtime for p in SITE.rglob("*.html"))
    stale = [p for p in source_paths() if p.stat().st_mtime > newest_page]
    if stale:
        names = ", ".join(str(p.relative_to(ROOT)) for p in stale[:5])
        _unavailable(f"the built book is older than {names}: run `python3 tasks.py book`")
    return SITE


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def server(site: Path) -> Iterator[str]:
    """Serve the site on 127.0.0.1 (a free port) for the session; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


# This machine has no network: without these flags Chromium keeps trying to
# reach Google's services. The resolver rule makes any host but 127.0.0.1
# unresolvable, so a page that asks for a CDN fails fast instead of hanging;
# the request is still logged, and the tests fail on it.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--window-size=1280,1000",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """Headless Chromium driven by ChromeDriver, with a fresh profile and performance logs."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if not (chromium and chromedriver):
        _unavailable(
            "Chromium and ChromeDriver are needed (Debian: apt-get install chromium "
            "chromium-driver); `python3 tasks.py test` installs them when it can"
        )
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    service = webdriver.ChromeService(executable_path=chromedriver)
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    yield driver
    driver.quit()
