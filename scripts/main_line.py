"""Main-line words of a MyST page: what a reader reads at the top level.

Words outside tables, code, figures, math blocks, directives (dropdowns, admonitions,
figures, code cells: anything fenced with backticks or colons), HTML comments and
front matter. Inline math counts as one word. A chapter page or section should stay
under :data:`MAX_WORDS` (about 15 minutes of careful reading).

    python scripts/main_line.py book/*.md     # words per page
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

MAX_WORDS = 2500
WORDS_PER_MINUTE = 170  # careful reading of technical prose with formulas
_FENCE = re.compile(r"^\s*(`{3,}|:{3,})")
_INLINE_MATH = re.compile(r"\$[^$\n]+\$")
_WORD = re.compile(r"[A-Za-z0-9][\w'’.-]*")


def main_line(text: str) -> str:
    """The page's main-line text (see the module)."""
    kept: list[str] = []
    fence: str | None = None
    in_math = in_comment = False
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":  # front matter
        end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), 0)
        lines = lines[end + 1 :]
    for line in lines:
        stripped = line.strip()
        if in_comment:
            in_comment = "-->" not in stripped
            continue
        if stripped.startswith("<!--"):
            in_comment = "-->" not in stripped
            continue
        match = _FENCE.match(line)
        if fence is not None:
            closing = match and match.group(1)[0] == fence[0] and stripped == match.group(1)
            if closing and len(stripped) >= len(fence):
                fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        if stripped.startswith("$$"):
            in_math = not (in_math or (stripped.endswith("$$") and len(stripped) > 2))
            continue
        if in_math or stripped.startswith("|") or stripped.startswith("("):
            if stripped.startswith("(") and not stripped.endswith(")="):
                kept.append(line)
            continue
        kept.append(line)
    return "\n".join(kept)


def count_words(text: str) -> int:
    """Main-line words of a page's text."""
    return len(_WORD.findall(_INLINE_MATH.sub(" x ", main_line(text))))


def reading_minutes(text: str) -> int:
    """Minutes of careful reading of the main line, rounded up to a whole minute."""
    return -(-count_words(text) // WORDS_PER_MINUTE)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{count_words(Path(name).read_text(encoding='utf-8')):6d}  {name}")
