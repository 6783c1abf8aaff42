"""Vendor MathJax 3 into the book, so that the site typesets math with no network.

    python scripts/vendor_mathjax.py

Fetches the npm package ``mathjax@VERSION`` with ``npm pack`` (the npm registry),
checks its SHA-256, and copies into book/_static/mathjax/ only what the book
loads: the combined component ``tex-mml-chtml.js`` (TeX and MathML input, CHTML
output, the menu), the CHTML web fonts, the TeX extensions that ``autoload``
and ``\\require`` fetch on demand, and the accessibility components (with the
speech rule engine and its locale maps) that the MathJax menu loads when a
reader switches on its explorer or speech options. _config.yml points
``mathjax_path`` at the copy. Writes PROVENANCE.md and the package's licence
beside it. Run it again after changing VERSION (and SHA256).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

VERSION = "3.2.2"
SHA256 = "1b9c0a1c44df864e915690558e72adb9cc5203360daefd385084ced3b6c64c09"
TARGET = Path(__file__).resolve().parent.parent / "book" / "_static" / "mathjax"
# Paths inside the package's es5/ folder that the book needs.
KEEP = [
    "tex-mml-chtml.js",
    "output/chtml/fonts/woff-v2",
    "input/tex/extensions",
    "a11y",
    "sre",
]

PROVENANCE = f"""\
# MathJax {VERSION}, vendored

These files are an unmodified subset of the npm package `mathjax@{VERSION}`
(the MathJax Consortium, <https://www.mathjax.org>), licensed under the Apache
License 2.0; see `LICENSE` beside this file. The package tarball had SHA-256
`{SHA256}`.

They are here so that the book typesets its math with no network: Sphinx's
default is to load MathJax from a CDN. `_config.yml` sets
`mathjax_path: mathjax/tex-mml-chtml.js`, which Sphinx resolves inside
`_static/`, and MathJax loads its fonts and extensions relative to that file.

Kept from the package's `es5/` folder: {", ".join(f"`{k}`" for k in KEEP)}.
Everything else in the package (other combined components, SVG output, the
Node.js entry points) is left out. `scripts/vendor_mathjax.py` made this copy
and remakes it.
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "pack", f"mathjax@{VERSION}"], cwd=tmp, check=True)
        tarball = Path(tmp) / f"mathjax-{VERSION}.tgz"
        digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
        if digest != SHA256:
            raise SystemExit(f"{tarball.name}: SHA-256 {digest}, expected {SHA256}")
        with tarfile.open(tarball) as archive:
            archive.extractall(tmp, filter="data")
        package = Path(tmp) / "package"
        shutil.rmtree(TARGET, ignore_errors=True)
        for relative in KEEP:
            source, target = package / "es5" / relative, TARGET / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target)
            else:
                shutil.copy2(source, target)
        shutil.copy2(package / "LICENSE", TARGET / "LICENSE")
    (TARGET / "PROVENANCE.md").write_text(PROVENANCE)
    count = sum(1 for p in TARGET.rglob("*") if p.is_file())
    print(f"vendored MathJax {VERSION} into {TARGET} ({count} files)")


if __name__ == "__main__":
    main()
