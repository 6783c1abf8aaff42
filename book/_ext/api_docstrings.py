"""Sphinx extension: read the package's attribute docstrings as prose on the API page.

The package's docstrings are Google style, which ``sphinx.ext.napoleon`` turns
into field lists. For an attribute, a property or a module constant napoleon
reads a first line ``X: Y`` as "of type X: Y", so a docstring such as
"Tokens processed in training and evaluation: a machine-independent size." would
name a type "Tokens processed in training and evaluation". Those docstrings are
prose: their lines are kept before napoleon runs and put back after it.

A ``NamedTuple``'s fields are documented once, by its docstring's Attributes:
the generated "Alias for field number k" members are skipped.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx

_ATTRIBUTE_KINDS = ("attribute", "property", "data")
_KEPT: dict[str, list[str]] = {}


def _keep(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    if what in _ATTRIBUTE_KINDS:
        _KEPT[name] = list(lines)


def _restore(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    if what in _ATTRIBUTE_KINDS and name in _KEPT:
        lines[:] = _KEPT.pop(name)


def _skip_field_aliases(
    app: Sphinx, what: str, name: str, obj: Any, skip: bool, options: Any
) -> bool | None:
    doc = getattr(obj, "__doc__", None) or ""
    if what == "class" and doc.startswith("Alias for field number"):
        return True
    return None


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("autodoc-process-docstring", _keep, priority=100)  # napoleon: 500
    app.connect("autodoc-process-docstring", _restore, priority=900)
    app.connect("autodoc-skip-member", _skip_field_aliases)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
