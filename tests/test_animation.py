"""Offline animation player: no link to another host, every button labelled."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.animation import FuncAnimation

from rope_lessons.chapters.animation import offline_jshtml


def test_the_player_loads_nothing_from_another_host() -> None:
    fig, ax = plt.subplots()
    line = ax.plot([0, 1], [0, 0])[0]
    animation = FuncAnimation(fig, lambda i: line.set_ydata([i, i]), frames=3)
    online = animation.to_jshtml(default_mode="loop")
    assert "https://" in online  # what the plain player does
    html = offline_jshtml(animation, "a line moving up", default_mode="loop")
    plt.close(fig)
    assert "https://" not in html and "http://" not in html
    assert 'class="fa' not in html
    assert html.count("<button") == online.count("<button") and "\u25b6" in html
    assert '<img alt="a line moving up" ' in html
