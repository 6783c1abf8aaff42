"""Draw the map of the course on the landing page: book/images/course_map.svg.

    .venv/bin/python scripts/course_map.py

The map is the plan of book/intro.md's chapter table: one box per chapter and
an arrow from each chapter to those that build on it. Edit CHAPTERS and
PREREQUISITES with the table and run this again; the output is deterministic
for a given matplotlib (no date, fixed hash salt), so an unchanged map gives an
unchanged file.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

OUTPUT = Path(__file__).resolve().parent.parent / "book" / "images" / "course_map.svg"

# number: (title, what it shows, (x, y) centre of its box)
CHAPTERS = {
    0: ("Set-up and a tour", "the package; a tiny model", (1.2, 4.5)),
    1: ("No sense of order", "permutations; causal masks", (3.7, 4.5)),
    2: ("Absolute encodings", "integer, binary, sinusoidal", (6.2, 4.5)),
    3: ("Deriving RoPE", "rotations; layouts; precision", (6.2, 3.0)),
    4: ("Decay with distance?", "the RoFormer bound, tested", (1.2, 1.5)),
    5: ("Frequencies, p-RoPE", "what each pair is used for", (3.7, 1.5)),
    6: ("VO-RoPE", "values and outputs rotated", (6.2, 1.5)),
    7: ("Complex linear RNNs", "VO-RoPE as a recurrence", (6.2, 0.0)),
    8: ("Beyond trained length", "PI, NTK, YaRN; NoPE layers", (3.7, 0.0)),
    9: ("A real model", "chapters 3-5 on SmolLM2", (1.2, 0.0)),
    10: ("Models of 2025-2026", "production designs, proven", (3.7, -1.5)),
}
PREREQUISITES = [
    (0, 1), (1, 2), (2, 3), (3, 4), (3, 5), (3, 6), (6, 7), (5, 8), (4, 9), (5, 9), (8, 9),
    (7, 10), (8, 10), (9, 10),
]  # fmt: skip
# (label, x, y of the label, colour of the stage's boxes, its chapters)
STAGES = [
    ("Why attention needs positions", 3.7, 5.35, "#dbe8f5", (0, 1, 2)),
    ("RoPE and what it does", 1.9, 3.0, "#f6e3cf", (3, 4, 5, 6, 7, 8, 9, 10)),
]
BOX_W, BOX_H = 2.3, 1.0


def draw() -> Figure:
    fig, ax = plt.subplots(figsize=(7.6, 7.9))
    ax.set_xlim(-0.05, 7.45)
    ax.set_ylim(-2.1, 5.6)
    ax.axis("off")
    colours: dict[int, str] = {}
    for label, x, y, colour, chapters in STAGES:
        ax.text(x, y, label, ha="center", va="center", fontsize=11, style="italic", color="#444")
        colours |= dict.fromkeys(chapters, colour)
    boxes = {}
    for number, (title, shows, (x, y)) in CHAPTERS.items():
        box = FancyBboxPatch(
            (x - BOX_W / 2, y - BOX_H / 2),
            BOX_W,
            BOX_H,
            boxstyle="round,pad=0.02,rounding_size=0.12",
            facecolor=colours[number],
            edgecolor="#1f5f99" if number == 3 else "#555",
            linewidth=2.2 if number == 3 else 1.0,
        )
        boxes[number] = ax.add_patch(box)
        ax.text(x, y + 0.17, f"{number}. {title}", ha="center", va="center", fontsize=10.5)
        ax.text(x, y - 0.22, shows, ha="center", va="center", fontsize=8.5, color="#333")
    for before, after in PREREQUISITES:
        ax.annotate(
            "",
            xy=CHAPTERS[after][2],
            xytext=CHAPTERS[before][2],
            arrowprops={  # clipped to the two boxes' outlines
                "arrowstyle": "-|>",
                "color": "#555",
                "linewidth": 1.3,
                "patchA": boxes[before],
                "patchB": boxes[after],
                "shrinkA": 2,
                "shrinkB": 2,
            },
        )
    ax.set_title("Map of the course", fontsize=13)
    fig.tight_layout()
    return fig


def write(path: Path = OUTPUT) -> None:
    """Save the map as SVG at ``path``, byte for byte the same on every run."""
    plt.rcParams["svg.hashsalt"] = "rope-lessons"
    path.parent.mkdir(parents=True, exist_ok=True)
    figure = draw()
    figure.savefig(path, format="svg", metadata={"Date": None})
    plt.close(figure)


def main() -> None:
    write()
    print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main()
