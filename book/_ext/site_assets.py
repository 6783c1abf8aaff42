"""Sphinx extension: trim the scripts and stylesheets of every page to what the book uses.

Jupyter Book always loads sphinx-thebe, which puts on every page the sphinx-thebe
script and stylesheet and an inline script declaring
``const THEBE_JS_URL = "https://unpkg.com/..."``. That inline script is added
twice (sphinx-thebe adds it each time its event fires, and the event fires twice
in a Jupyter Book build), so the second copy throws a SyntaxError in the
browser console on every page. This book shows no thebe "live code" button
(``launch_buttons.thebe`` is off), so nothing uses these assets: they are
removed, and with them the last CDN address in the pages' heads. Any script or
stylesheet added more than once (whatever its priority) is kept once.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx


def _is_thebe(asset: Any) -> bool:
    filename = asset.filename or ""
    body = asset.attributes.get("body", "")
    return "thebe" in filename or "THEBE_JS_URL" in body


def _thebe_enabled(app: Sphinx) -> bool:
    options = app.config.html_theme_options or {}
    return bool(options.get("launch_buttons", {}).get("thebe"))


def trim_assets(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """Drop thebe's assets (unless thebe is enabled) and exact duplicates from the page."""
    for key in ("script_files", "css_files"):
        if key not in context:
            continue
        kept, seen = [], set()
        for asset in context[key]:
            identity = (asset.filename or "", tuple(sorted(asset.attributes.items())))
            if identity in seen or (_is_thebe(asset) and not _thebe_enabled(app)):
                continue
            seen.add(identity)
            kept.append(asset)
        context[key] = kept


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("html-page-context", trim_assets, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
