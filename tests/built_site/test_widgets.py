"""The interactive figures (book/_static/rope_widgets.js) in Chromium, against the package.

Each test loads the page that carries a widget, sets its controls as a reader
would (a value, then the input event the browser fires), reads every number the
widget shows and compares it with what rope_lessons computes for the same
settings, to the four significant digits shown. Keyboard tests move a slider
and a select with the arrow keys and check that the numbers follow. A
screenshot of every widget goes to _build/screenshots/widgets/.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urljoin

import pytest
import torch

from rope_lessons.chapters.decay_bounds import abel_bound, peaked_key
from rope_lessons.chapters.spectrum import partial_rotary_theta, prope_theta, turn_counts
from rope_lessons.rope.kernels import apply_rope, score_at_distance
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.scaled_specs import scaled_frequencies
from rope_lessons.rope.scaling import ExtensionMethod, dynamic_ntk_alpha
from rope_lessons.rope.spec import Rope

from .site_pages import SCREENSHOTS

# widget id: the page that carries it
PAGES = {
    "widget-ch03-pair": "book/03_deriving_rope.html",
    "widget-ch04-decay": "book/04_decay.html",
    "widget-ch05-ladder": "book/05_frequencies.html",
    "widget-ch08-extension": "book/08_beyond_trained_length_methods.html",
}
SET_CONTROL = """
const [box, name, value] = arguments;
const input = box.querySelector(`[data-in="${name}"]`);
input.value = value;
input.dispatchEvent(new Event("input", {bubbles: true}));
return input.value;
"""
# The slider each keyboard test moves: one that changes the numbers at the defaults.
KEYBOARD_SLIDER = {
    "widget-ch03-pair": "m",
    "widget-ch04-decay": "r",
    "widget-ch05-ladder": "log2_context",
    "widget-ch08-extension": "factor",
}
READ_OUTPUTS = """
const out = {};
for (const e of arguments[0].querySelectorAll("[data-out]")) out[e.dataset.out] = e.textContent;
return out;
"""


def _open(browser: Any, server: str, widget: str) -> Any:
    from selenium.webdriver.common.by import By

    browser.get(urljoin(server, PAGES[widget]))
    box = browser.find_element(By.ID, widget)
    assert box.get_attribute("data-ready") == "true", "the widget script did not run"
    browser.execute_script("arguments[0].scrollIntoView()", box)
    return box


def _set(browser: Any, box: Any, settings: dict[str, float | str]) -> None:
    for name, value in settings.items():
        shown = browser.execute_script(SET_CONTROL, box, name, str(value))
        assert shown == value if isinstance(value, str) else float(shown) == value, name


def _shown(browser: Any, box: Any) -> dict[str, str]:
    outputs: dict[str, str] = browser.execute_script(READ_OUTPUTS, box)
    return outputs


def _close(shown: str, expected: float, name: str) -> None:
    """A number shown to four significant digits against the package's value."""
    value = float(shown)
    assert math.isclose(value, expected, rel_tol=6e-4, abs_tol=6e-4), (
        f"{name}: the widget shows {shown}, the package gives {expected:.6g}"
    )


def _screenshot(box: Any, widget: str) -> None:
    folder = SCREENSHOTS / "widgets"
    folder.mkdir(parents=True, exist_ok=True)
    box.screenshot(str(folder / f"{widget}.png"))


def _pair_values(log_base: float, d: int, pair: int, m: int, n: int) -> dict[str, float]:
    base = 10.0**log_base
    theta = float(frequencies(d, base)[pair])

    def vector(x: float, y: float) -> torch.Tensor:  # (1, 1, 1, d): only pair k set
        v = torch.zeros(1, 1, 1, d, dtype=torch.float64)
        v[..., 2 * pair], v[..., 2 * pair + 1] = x, y
        return v

    def score(at_q: int, at_k: int) -> float:
        turned_q = apply_rope(vector(1.0, 0.0), torch.tensor([at_q]), base=base)
        turned_k = apply_rope(vector(0.6, 0.8), torch.tensor([at_k]), base=base)
        return float((turned_q * turned_k).sum())

    return {
        "theta": theta,
        "wavelength": 2 * math.pi / theta,
        "score": score(m, n),
        "score_at_offset": score(0, n - m),
    }


@pytest.mark.parametrize(
    ("log_base", "d", "pair", "m", "n"),
    [(4, 64, 0, 5, 2), (5.7, 128, 40, 77, 13), (2, 8, 3, 100, 0), (6.3, 256, 127, 31, 99)],
)
def test_the_pair_widget_shows_the_packages_angles_and_scores(
    browser: Any, server: str, log_base: float, d: int, pair: int, m: int, n: int
) -> None:
    box = _open(browser, server, "widget-ch03-pair")
    _set(browser, box, {"log_base": log_base, "d": d, "pair": pair, "m": m, "n": n})
    shown = _shown(browser, box)
    for name, expected in _pair_values(log_base, d, pair, m, n).items():
        _close(shown[name], expected, name)
    assert shown["score"] == shown["score_at_offset"]  # the offset alone decides it
    _screenshot(box, "widget-ch03-pair")


@pytest.mark.parametrize(
    ("key", "log_base", "d", "peak", "log_far", "r"),
    [
        ("ones", 4, 128, 100, 4, 100),
        ("random", 4, 64, 100, 3, 37),
        ("peaked", 4, 128, 500, 4, 500),
        ("peaked", 5, 32, 1200, 4.5, 1200),
    ],
)
def test_the_decay_widget_shows_the_packages_score_and_bound(
    browser: Any, server: str, key: str, log_base: float, d: int, peak: int, log_far: float, r: int
) -> None:
    box = _open(browser, server, "widget-ch04-decay")
    settings: dict[str, float | str] = {"key": key, "log_base": log_base, "d": d}
    _set(browser, box, settings | {"peak": peak, "log_far": log_far, "r": r})
    shown = _shown(browser, box)
    state = browser.execute_script(
        f"return window.ropeWidgets['{box.get_attribute('id')}'].state()"
    )
    q = torch.tensor(state["q"], dtype=torch.float64)
    base = 10.0**log_base
    rope = Rope(d, base)
    if key == "ones":
        assert torch.equal(q, torch.ones(d, dtype=torch.float64))
        k = q
    elif key == "random":
        k = torch.tensor(state["k"], dtype=torch.float64)
    else:  # the widget's key is the package's peaked key for its query
        k = peaked_key(q, peak, rope=rope)
        torch.testing.assert_close(torch.tensor(state["k"], dtype=torch.float64), k)
    distances = torch.tensor([r, 0])
    scores = score_at_distance(q, k, distances, base=base)
    _close(shown["score"], float(scores[0]), "score")
    _close(shown["score0"], float(scores[1]), "score at 0")
    _close(shown["bound"], float(abel_bound(q, k, distances[:1], rope=rope)[0]), "bound")
    if key == "peaked":  # the peak is where it was asked for
        assert float(shown["score0"]) < float(shown["score"]) or r != peak
    _screenshot(box, "widget-ch04-decay")


def _ladder_values(
    mode: str, fraction: float, log_base: float, d: int, log2: float
) -> dict[str, str]:
    base, context = 10.0**log_base, round(2.0**log2)
    if mode == "prope":
        theta = prope_theta(d, fraction, base)
    elif mode == "partial":
        theta = partial_rotary_theta(d, fraction, base)
    else:
        theta = frequencies(d, base)
    counts = turn_counts(theta, context)
    kept = theta > 0
    partly = kept & ((context - 1) * theta < 2 * math.pi)
    critical = int(torch.nonzero(partly)[0]) if bool(partly.any()) else None
    return {
        "kept": str(counts.kept),
        "full": str(counts.full),
        "critical": "none" if critical is None else str(critical),
        "slowest": repr(float((2 * math.pi / theta[kept]).max())),
    }


@pytest.mark.parametrize(
    ("mode", "fraction", "log_base", "d", "log2_context"),
    [
        ("rope", 0.5, 4, 64, 12),
        ("rope", 0.5, 2, 64, 6),
        ("prope", 0.25, 6, 256, 13),
        ("partial", 0.25, 6, 256, 13),
        ("prope", 0.5, 2, 64, 6),
        ("rope", 0.5, 1, 16, 20),
    ],
)
def test_the_ladder_widget_counts_as_the_package_does(
    browser: Any,
    server: str,
    mode: str,
    fraction: float,
    log_base: float,
    d: int,
    log2_context: float,
) -> None:
    box = _open(browser, server, "widget-ch05-ladder")
    settings: dict[str, float | str] = {"mode": mode, "fraction": fraction, "d": d}
    _set(browser, box, settings | {"log_base": log_base, "log2_context": log2_context})
    shown = _shown(browser, box)
    expected = _ladder_values(mode, fraction, log_base, d, log2_context)
    for name in ("kept", "full", "critical"):
        assert shown[name] == expected[name], name
    _close(shown["slowest"], float(expected["slowest"]), "slowest")
    _screenshot(box, "widget-ch05-ladder")


METHODS: tuple[ExtensionMethod, ...] = ("linear", "ntk", "dynamic", "yarn", "llama3")


@pytest.mark.parametrize(
    ("factor", "alpha", "length", "original", "log_base", "d"),
    [(8, 8, 4, "4096", 4, 128), (32, 50, 20, "4096", 5, 64), (4, 1, 1, "8192", 5.7, 128),
     (64, 128, 63.5, "2048", 6, 256)],
)  # fmt: skip
def test_the_extension_widget_shows_the_packages_factors(
    browser: Any,
    server: str,
    factor: int,
    alpha: int,
    length: float,
    original: str,
    log_base: float,
    d: int,
) -> None:
    box = _open(browser, server, "widget-ch08-extension")
    _set(
        browser,
        box,
        {"factor": factor, "alpha": alpha, "length": length, "original": original,
         "log_base": log_base, "d": d},
    )  # fmt: skip
    shown = _shown(browser, box)
    base, trained = 10.0**log_base, int(original)
    read = round(length * trained)
    theta = frequencies(d, base)
    extra: dict[str, dict[str, Any]] = {"ntk": {"alpha": float(alpha)}, "dynamic": {"length": read}}
    for method in METHODS:
        spec = scaled_frequencies(
            d, method, factor=factor, original_length=trained, base=base, **extra.get(method, {})
        )
        for pair in (0, d // 8, d // 4, 3 * d // 8, d // 2 - 1):
            name = f"{method}_{pair}"
            _close(shown[name], float(theta[pair] / spec.theta[pair]), name)
        if method == "yarn":
            _close(shown["yarn_attention"], spec.attention_factor, "YaRN attention factor")
    _close(shown["dynamic_alpha"], dynamic_ntk_alpha(factor, trained, read), "dynamic alpha")
    _screenshot(box, "widget-ch08-extension")


@pytest.mark.parametrize("widget", list(PAGES))
def test_every_widget_answers_the_keyboard_and_says_what_it_shows(
    browser: Any, server: str, widget: str
) -> None:
    """Tab to a slider, move it with the arrow keys: its value and the numbers follow;
    the sentence under the widget (read by screen readers as it changes) follows too."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = _open(browser, server, widget)
    assert box.get_attribute("aria-label")
    summary = box.find_element(By.CSS_SELECTOR, ".rope-widget-summary")
    assert summary.get_attribute("aria-live") == "polite" and len(summary.text) > 40
    sliders = box.find_elements(By.CSS_SELECTOR, "input[type=range]")
    for slider in sliders:  # every slider has a label the browser associates with it
        label = box.find_element(By.CSS_SELECTOR, f"label[for='{slider.get_attribute('id')}']")
        assert label.text
    slider = box.find_element(By.CSS_SELECTOR, f"[data-in='{KEYBOARD_SLIDER[widget]}']")
    slider.click()  # focus, as Tab would
    before_value, before_shown = slider.get_attribute("value"), _shown(browser, box)
    before_summary = summary.text
    slider.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
    assert float(slider.get_attribute("value")) > float(before_value)
    assert _shown(browser, box) != before_shown and summary.text != before_summary
    selects = box.find_elements(By.CSS_SELECTOR, "select")
    if selects:  # a select moves with the keyboard too
        chosen = selects[0].get_attribute("value")
        selects[0].send_keys(Keys.ARROW_DOWN)
        assert selects[0].get_attribute("value") != chosen


# Settings at the ends of every control's range: the numbers still match the package.
PAIR_EXTREMES = {"log_base": 7, "d": 256, "pair": 127, "m": 100, "n": 0}
LADDER_EXTREMES: dict[str, float | str] = {
    "mode": "partial", "fraction": 0.125, "log_base": 7, "d": 256, "log2_context": 4,
}  # fmt: skip


def test_the_extremes_of_the_pair_and_ladder_widgets_match_the_package(
    browser: Any, server: str
) -> None:
    pair = PAIR_EXTREMES
    box = _open(browser, server, "widget-ch03-pair")
    _set(browser, box, dict(pair))
    shown = _shown(browser, box)
    expected = _pair_values(pair["log_base"], pair["d"], pair["pair"], pair["m"], pair["n"])
    for name, value in expected.items():
        _close(shown[name], value, name)
    box = _open(browser, server, "widget-ch05-ladder")
    _set(browser, box, LADDER_EXTREMES)
    shown = _shown(browser, box)
    values = _ladder_values("partial", 0.125, 7, 256, 4)
    assert {n: shown[n] for n in ("kept", "full", "critical")} == {
        n: values[n] for n in ("kept", "full", "critical")
    }


WAIT_FOR_MATH = """
const done = arguments[arguments.length - 1];
const box = arguments[0];
const deadline = Date.now() + 20000;
(function check() {
  const typeset = box.querySelectorAll("label mjx-container, dt mjx-container").length;
  if (typeset > 0 || Date.now() > deadline) done(typeset);
  else setTimeout(check, 100);
})();
"""


@pytest.mark.parametrize("widget", list(PAGES))
def test_every_widget_typesets_its_labels_and_ticks_its_axes(
    browser: Any, server: str, widget: str
) -> None:
    from selenium.webdriver.common.by import By

    box = _open(browser, server, widget)
    assert browser.execute_async_script(WAIT_FOR_MATH, box) > 0
    text = box.text
    assert "\\(" not in text and "\\)" not in text, "TeX left untypeset"
    assert "log10" not in text and "log2" not in text  # the values shown are the quantities
    for svg in box.find_elements(By.CSS_SELECTOR, "svg.rope-plot:not(.rope-plot-square)"):
        assert len(svg.find_elements(By.CSS_SELECTOR, ".rope-tick-x")) >= 3
        assert len(svg.find_elements(By.CSS_SELECTOR, ".rope-tick-y")) >= 2
    assert box.find_elements(By.CSS_SELECTOR, ".rope-widget-legend .rope-key")


BOUND_INSIDE = """
const svg = arguments[0].querySelectorAll("svg.rope-plot")[1];
const frame = svg.querySelector("rect.rope-plot-frame");
const top = +frame.getAttribute("y"), bottom = top + +frame.getAttribute("height");
const ys = svg.querySelector("polyline.rope-bound").getAttribute("points").trim().split(" ")
  .map((p) => +p.split(",")[1]);
return {inside: ys.every((y) => y >= top - 0.5 && y <= bottom + 0.5), count: ys.length};
"""


def test_the_decay_widget_draws_roformers_bound_inside_its_panel(browser: Any, server: str) -> None:
    """At the defaults the bound (1309) is ten times the largest score: it has a log panel
    of its own, and every point of it lies inside that panel's frame."""
    box = _open(browser, server, "widget-ch04-decay")
    for key in ("ones", "random", "peaked"):
        _set(browser, box, {"key": key})
        drawn = browser.execute_script(BOUND_INSIDE, box)
        assert drawn["inside"] and drawn["count"] > 100, (key, drawn)


def test_controls_that_change_nothing_say_so_and_the_wording_fits_the_number(
    browser: Any, server: str
) -> None:
    from selenium.webdriver.common.by import By

    def note(box: Any, name: str) -> str:
        text: str = browser.execute_script(
            "const n = arguments[0].querySelector(`[data-in='${arguments[1]}']`)"
            ".parentElement.querySelector('.rope-widget-note');"
            "return n.hidden ? '' : n.textContent;",
            box,
            name,
        )
        return text

    box = _open(browser, server, "widget-ch03-pair")
    _set(browser, box, {"pair": 0})
    assert "whatever the base and d" in note(box, "log_base") and note(box, "d")
    summary = box.find_element(By.CSS_SELECTOR, ".rope-widget-summary").text
    assert "turns by 1 radian per position" in summary  # theta_0 = 1: singular
    _set(browser, box, {"pair": 3})
    assert note(box, "log_base") == "" and "radians per position" in box.text
    box = _open(browser, server, "widget-ch05-ladder")
    _set(browser, box, {"mode": "rope"})
    fraction = box.find_element(By.CSS_SELECTOR, "[data-in='fraction']")
    assert not fraction.is_enabled() and "RoPE turns every pair" in note(box, "fraction")
    _set(browser, box, {"mode": "prope"})
    assert fraction.is_enabled() and note(box, "fraction") == ""
    box = _open(browser, server, "widget-ch04-decay")
    _set(browser, box, {"key": "ones"})
    assert "Only the peaked key" in note(box, "peak")
    _set(browser, box, {"key": "peaked"})
    assert note(box, "peak") == ""
    box = _open(browser, server, "widget-ch08-extension")
    _set(browser, box, {"factor": 1})
    assert "no method changes any frequency" in box.text and "by 1;" not in box.text


@pytest.mark.parametrize("widget", list(PAGES))
def test_the_keyboard_reaches_each_widget_in_four_keys(
    browser: Any, server: str, widget: str
) -> None:
    """Tab to the theme's "Skip to main content", Enter; Tab to "Skip to the interactive
    figure", Enter: the widget's first control has the focus."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    browser.get(urljoin(server, PAGES[widget]))
    active = "return document.activeElement"
    for key in (Keys.TAB, Keys.ENTER, Keys.TAB):
        ActionChains(browser).send_keys(key).perform()
    link = browser.execute_script(active)
    assert link.get_attribute("data-widget-link") == widget, link.get_attribute("outerHTML")
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    focused = browser.execute_script(active)
    assert focused.get_attribute("data-in") is not None
    assert browser.execute_script("return arguments[0].closest('.rope-widget').id", focused) == (
        widget
    )
