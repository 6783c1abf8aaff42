/* Interactive figures of the course, in plain JavaScript, offline.
 *
 * A page places a widget with <div class="rope-widget" data-widget="NAME"></div>;
 * this script builds its controls (range inputs and selects, so the keyboard
 * moves them), an SVG chart, the numbers it shows and a sentence that says the
 * same in words (aria-live). The formulas are those of the package
 * rope_lessons, each named beside its port; the site tests set the controls
 * and compare the numbers shown with the package's.
 *
 * Every number shown sits in an element with data-out="name"; every control
 * has data-in="name". window.ropeWidgets[id].state() returns the vectors a
 * widget draws (the random query and key of chapter 4's widget).
 */
(function () {
  "use strict";

  var TAU = 2 * Math.PI;
  var SVG = "http://www.w3.org/2000/svg";

  // ---- the package's formulas --------------------------------------------

  // rope.frequencies: theta_k = base^(-2k/d), k < d/2; p-RoPE keeps floor(p d/2).
  function frequencies(d, base, p) {
    var keep = Math.floor((p === undefined ? 1 : p) * d / 2);
    var theta = [];
    for (var k = 0; k < d / 2; k++) theta.push(k < keep ? Math.pow(base, -2 * k / d) : 0);
    return theta;
  }

  // spectrum.partial_rotary_theta: the ladder over r = int(d f) dimensions, then zeros.
  function partialRotaryTheta(d, fraction, base) {
    var r = Math.floor(d * fraction + 1e-9);
    r -= r % 2;
    var ladder = r ? frequencies(r, base) : [];
    var theta = [];
    for (var k = 0; k < d / 2; k++) theta.push(k < r / 2 ? ladder[k] : 0);
    return theta;
  }

  // extension.yarn_attention_factor: 0.1 ln s + 1.
  function yarnAttentionFactor(s) {
    return s <= 1 ? 1 : 0.1 * Math.log(s) + 1;
  }

  // extension.yarn_ramp, ramp="pairs", truncate=True (transformers' ramp).
  function yarnRamp(d, base, L, betaFast, betaSlow) {
    function pairTurning(turns) {
      return d * Math.log(L / (turns * TAU)) / (2 * Math.log(base));
    }
    var low = Math.max(Math.floor(pairTurning(betaFast)), 0);
    var high = Math.min(Math.ceil(pairTurning(betaSlow)), d - 1);
    if (low === high) high += 0.001;
    var w = [];
    for (var k = 0; k < d / 2; k++) w.push(Math.min(Math.max((k - low) / (high - low), 0), 1));
    return w;
  }

  // extension.llama3_weight (low_freq_factor 1, high_freq_factor 4).
  function llama3Weight(d, base, L, low, high) {
    var w = [];
    for (var k = 0; k < d / 2; k++) {
      var wavelength = TAU * Math.pow(base, 2 * k / d);
      var weight;
      if (wavelength > L / low) weight = 1;
      else if (wavelength < L / high) weight = 0;
      else weight = 1 - (L / wavelength - low) / (high - low);
      w.push(weight);
    }
    return w;
  }

  // extension.dynamic_ntk_alpha.
  function dynamicAlpha(s, L, length) {
    return length <= L ? 1 : s * length / L - (s - 1);
  }

  // extension.scaled_frequencies(d, method, factor=s, original_length=L, base=...).
  function scaledFrequencies(method, d, base, s, L, alpha, length) {
    var theta = frequencies(d, base);
    var blend = function (w) {
      return theta.map(function (t, k) { return (1 - w[k]) * t + w[k] * t / s; });
    };
    if (method === "linear") return theta.map(function (t) { return t / s; });
    if (method === "ntk" || method === "dynamic") {
      var a = method === "ntk" ? alpha : dynamicAlpha(s, L, length);
      return a === 1 ? theta : frequencies(d, base * Math.pow(a, d / (d - 2)));
    }
    if (method === "yarn") return blend(yarnRamp(d, base, L, 32, 1));
    return blend(llama3Weight(d, base, L, 1, 4));
  }

  // A pair as a complex number (re, im); the interleaved layout reads (x_2k, x_2k+1).
  function pairsOf(x) {
    var z = [];
    for (var k = 0; k < x.length / 2; k++) z.push([x[2 * k], x[2 * k + 1]]);
    return z;
  }

  // rope.score_at_distance: q . R_{-r} k = Re sum_k z_k(q) conj(z_k(k)) e^{i r theta_k}.
  function scoreAtDistance(h, theta, r) {
    var total = 0;
    for (var k = 0; k < h.length; k++) {
      var c = Math.cos(r * theta[k]), s = Math.sin(r * theta[k]);
      total += h[k][0] * c - h[k][1] * s;
    }
    return total;
  }

  // decay_bounds.abel_bound: max_k |h_{k+1} - h_k| * sum_j |sum_{k<j} e^{i r theta_k}|, h_{d/2} = 0.
  function abelStep(h) {
    var largest = 0;
    for (var k = 0; k < h.length; k++) {
      var next = k + 1 < h.length ? h[k + 1] : [0, 0];
      largest = Math.max(largest, Math.hypot(next[0] - h[k][0], next[1] - h[k][1]));
    }
    return largest;
  }
  function partialSums(theta, r) {
    var re = 0, im = 0, total = 0;
    for (var k = 0; k < theta.length; k++) {
      re += Math.cos(r * theta[k]);
      im += Math.sin(r * theta[k]);
      total += Math.hypot(re, im);
    }
    return total;
  }

  // A seeded uniform generator (mulberry32), for chapter 4's random query and key.
  function mulberry32(seed) {
    return function () {
      seed = (seed + 0x6d2b79f5) | 0;
      var t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  // ---- building blocks ----------------------------------------------------

  function fmt(x) {
    if (!isFinite(x)) return String(x);
    if (x === 0) return "0";
    var a = Math.abs(x);
    return a >= 1e5 || a < 1e-3 ? x.toExponential(3) : String(Number(x.toPrecision(4)));
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svgEl(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    return node;
  }

  // Text that may hold TeX between \( and \): typeset by the page's MathJax (see typeset).
  function texEl(tag, attrs, text) {
    var node = el(tag, attrs, text);
    node.classList.add("mathjax_process");
    return node;
  }

  // Typeset the TeX of a widget's labels once MathJax is ready (it may load after us).
  function typeset(box) {
    var tries = 0;
    (function attempt() {
      var mj = window.MathJax;
      if (mj && mj.startup && mj.startup.promise && mj.typesetPromise) {
        mj.startup.promise.then(function () { return mj.typesetPromise([box]); });
      } else if (tries++ < 200) {
        setTimeout(attempt, 50);
      }
    })();
  }

  // A labelled control: a range input, or a select when `options` is given; a note under
  // it says when the control changes nothing at the present settings (see inert()).
  function control(box, id, spec, onChange) {
    var row = el("div", { class: "rope-widget-row" });
    var inputId = id + "-" + spec.name;
    row.appendChild(texEl("label", { for: inputId }, spec.label));
    var input;
    if (spec.options) {
      input = el("select", { id: inputId, "data-in": spec.name });
      spec.options.forEach(function (option) {
        input.appendChild(el("option", { value: option[0] }, option[1]));
      });
    } else {
      input = el("input", {
        id: inputId, "data-in": spec.name, type: "range",
        min: spec.min, max: spec.max, step: spec.step,
      });
    }
    input.value = spec.value;
    var shown = el("output", { for: inputId, class: "rope-widget-value" });
    row.appendChild(input);
    row.appendChild(shown);
    var note = el("p", { class: "rope-widget-note", id: inputId + "-note", hidden: "" });
    row.appendChild(note);
    input.setAttribute("aria-describedby", note.id);
    box.appendChild(row);
    input.addEventListener("input", onChange);
    input.addEventListener("change", onChange);
    return { input: input, shown: shown, note: note };
  }

  // Say under a control why it changes nothing now (or hide the note): `why` or "".
  function inert(ctrl, why) {
    ctrl.note.textContent = why;
    if (why) ctrl.note.removeAttribute("hidden");
    else ctrl.note.setAttribute("hidden", "");
  }

  // "1 radian", "2 radians".
  function plural(text, word) {
    return text + " " + (text === "1" ? word : word + "s");
  }

  // A legend: one entry per [class, TeX-able text], the class giving the colour and mark.
  function legend(box, entries) {
    var node = texEl("p", { class: "rope-widget-legend" });
    entries.forEach(function (entry) {
      node.appendChild(el("span", { class: "rope-key " + entry[0] }, entry[1] + " "));
    });
    box.appendChild(node);
    return node;
  }

  function outputs(box, names) {
    var table = el("dl", { class: "rope-widget-out" });
    var cells = {};
    names.forEach(function (pair) {
      table.appendChild(texEl("dt", {}, pair[1]));
      cells[pair[0]] = el("dd", { "data-out": pair[0] });
      table.appendChild(cells[pair[0]]);
    });
    box.appendChild(table);
    return cells;
  }

  // A line chart: series = [{points: [[x, y], ...], cls}], axes linear or log.
  function chart(svg, series, opts) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var W = 520, H = 236, left = 66, bottom = 36, top = 8, right = 26;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    var tx = opts.logX ? Math.log10 : function (v) { return v; };
    var ty = opts.logY ? Math.log10 : function (v) { return v; };
    var xs = [], ys = [];
    series.forEach(function (s) {
      s.points.forEach(function (p) {
        if (!opts.logY || p[1] > 0) { xs.push(tx(p[0])); ys.push(ty(p[1])); }
      });
    });
    (opts.extraY || []).forEach(function (y) { ys.push(ty(y)); });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) { y0 -= 1; y1 += 1; }
    var X = function (v) { return left + (tx(v) - x0) / (x1 - x0) * (W - left - right); };
    var Y = function (v) { return H - bottom - (ty(v) - y0) / (y1 - y0) * (H - top - bottom); };
    svg.appendChild(svgEl("rect", { x: left, y: top, width: W - left - right,
      height: H - top - bottom, class: "rope-plot-frame" }));
    series.forEach(function (s) {
      var pts = s.points.filter(function (p) { return !opts.logY || p[1] > 0; });
      if (s.dots) {
        pts.forEach(function (p) {
          svg.appendChild(svgEl("circle", { cx: X(p[0]), cy: Y(p[1]), r: 2.6, class: s.cls }));
        });
      } else {
        svg.appendChild(svgEl("polyline", { class: s.cls, points: pts.map(function (p) {
          return X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1);
        }).join(" ") }));
      }
    });
    var label = function (text, x, y, anchor, cls) {
      var t = svgEl("text", { x: x, y: y, "text-anchor": anchor || "middle",
        class: "rope-plot-label" + (cls ? " " + cls : "") });
      t.textContent = text;
      svg.appendChild(t);
    };
    var tick = function (x1, y1, x2, y2) {
      svg.appendChild(svgEl("line", { x1: x1, y1: y1, x2: x2, y2: y2, class: "rope-plot-tick" }));
    };
    ticks(x0, x1, opts.logX).forEach(function (v) {
      var x = X(opts.logX ? Math.pow(10, v) : v);
      tick(x, H - bottom, x, H - bottom + 4);
      label(fmt(opts.logX ? Math.pow(10, v) : v), x, H - bottom + 14, "middle", "rope-tick-x");
    });
    ticks(y0, y1, opts.logY).forEach(function (v) {
      var y = Y(opts.logY ? Math.pow(10, v) : v);
      tick(left - 4, y, left, y);
      label(fmt(opts.logY ? Math.pow(10, v) : v), left - 6, y + 4, "end", "rope-tick-y");
    });
    label(opts.xLabel, (left + W - right) / 2, H - 2);
    return { X: X, Y: Y, top: top, bottom: H - bottom };
  }

  // Tick positions on an axis from lo to hi (in log10 units when `log`): whole decades on
  // a log axis (every other one when there are many), else 1, 2 or 5 times a power of ten.
  function ticks(lo, hi, log) {
    var out = [], v;
    if (log) {
      var every = hi - lo > 8 ? 2 : 1;
      for (v = Math.ceil(lo); v <= hi + 1e-9; v += every) out.push(v);
      return out.length ? out : [lo, hi];
    }
    var raw = (hi - lo) / 4, power = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) { return m * power; })
      .filter(function (st) { return st >= raw; })[0];
    for (v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
      out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    }
    return out;
  }

  // ---- the widgets ----------------------------------------------------------

  var WIDGETS = {};

  // Chapter 3: one pair of a query and a key, turning with their positions.
  WIDGETS.pair = function (box, id) {
    var q0 = [1, 0], k0 = [0.6, 0.8];  // the pair's query and key before turning
    var c = {};
    var update = function () {
      var d = +c.d.input.value;
      c.pair.input.max = d / 2 - 1;
      if (+c.pair.input.value > d / 2 - 1) c.pair.input.value = d / 2 - 1;
      var base = Math.pow(10, +c.log_base.input.value), k = +c.pair.input.value;
      var m = +c.m.input.value, n = +c.n.input.value;
      var theta = frequencies(d, base)[k];
      var turn = function (v, pos) {
        var a = pos * theta;
        return [v[0] * Math.cos(a) - v[1] * Math.sin(a), v[0] * Math.sin(a) + v[1] * Math.cos(a)];
      };
      var qm = turn(q0, m), kn = turn(k0, n);
      var score = qm[0] * kn[0] + qm[1] * kn[1];
      var moved = turn(q0, 0), kShift = turn(k0, n - m);  // the same offset, query at 0
      var shifted = moved[0] * kShift[0] + moved[1] * kShift[1];
      c.log_base.shown.textContent = fmt(base);
      c.d.shown.textContent = d;
      c.pair.shown.textContent = k;
      var still = k === 0 ? "At pair 0, θ₀ = 1 whatever the base and d: choose k > 0 to "
        + "see this control act." : "";
      inert(c.log_base, still);
      inert(c.d, still);
      c.m.shown.textContent = m;
      c.n.shown.textContent = n;
      out.theta.textContent = fmt(theta);
      out.wavelength.textContent = fmt(TAU / theta);
      out.score.textContent = fmt(score);
      out.score_at_offset.textContent = fmt(shifted);
      summary.textContent = "Pair " + k + " turns by " + plural(fmt(theta), "radian") + " per position. "
        + "The query at " + m + " and the key at " + n + " score " + fmt(score)
        + "; moved to positions 0 and " + (n - m) + " they score " + fmt(shifted)
        + ": the score depends only on the offset.";
      while (svg.firstChild) svg.removeChild(svg.firstChild);
      svg.setAttribute("viewBox", "-1.3 -1.3 2.6 2.6");
      svg.appendChild(svgEl("circle", { cx: 0, cy: 0, r: 1, class: "rope-plot-frame" }));
      [[qm, "rope-q"], [kn, "rope-k"]].forEach(function (v) {
        svg.appendChild(svgEl("line", { x1: 0, y1: 0, x2: v[0][0], y2: -v[0][1], class: v[1] }));
      });
    };
    [
      { name: "log_base", label: "base (log scale)", min: 1, max: 7, step: 0.1, value: 4 },
      { name: "d", label: "head dimension \\(d\\)", min: 4, max: 256, step: 2, value: 64 },
      { name: "pair", label: "pair \\(k\\)", min: 0, max: 31, step: 1, value: 0 },
      { name: "m", label: "query position \\(m\\)", min: 0, max: 100, step: 1, value: 5 },
      { name: "n", label: "key position \\(n\\)", min: 0, max: 100, step: 1, value: 2 },
    ].forEach(function (spec) { c[spec.name] = control(box, id, spec, update); });
    var svg = svgEl("svg", { class: "rope-plot rope-plot-square", role: "img",
      "aria-label": "The query (blue) and the key (orange) of one pair on the unit circle" });
    box.appendChild(svg);
    legend(box, [["rope-m0", "— query pair, turned by \\(m\\theta_k\\)"],
      ["rope-m1", "— key pair, turned by \\(n\\theta_k\\)"]]);
    var out = outputs(box, [["theta", "\\(\\theta_k\\)"],
      ["wavelength", "wavelength \\(2\\pi/\\theta_k\\)"],
      ["score", "score \\(q_m \\cdot k_n\\)"],
      ["score_at_offset", "score at positions 0 and \\(n - m\\)"]]);
    var summary = el("p", { class: "rope-widget-summary", "aria-live": "polite" });
    box.appendChild(summary);
    update();
    return { state: function () { return { q0: q0, k0: k0 }; } };
  };

  // Chapter 4: the score against distance, and RoFormer's bound, for three keys.
  WIDGETS.decay = function (box, id) {
    var c = {}, q = [], k = [];
    var update = function () {
      var d = +c.d.input.value, base = Math.pow(10, +c.log_base.input.value);
      var kind = c.key.input.value, peak = +c.peak.input.value;
      var far = Math.round(Math.pow(10, +c.log_far.input.value)), r = +c.r.input.value;
      c.r.input.max = far;
      if (r > far) { r = far; c.r.input.value = far; }
      var theta = frequencies(d, base);
      var rand = mulberry32(2024);
      q = []; k = [];
      for (var i = 0; i < d; i++) q.push(kind === "ones" ? 1 : 2 * rand() - 1);
      if (kind === "ones") k = q.slice();
      else if (kind === "random") for (i = 0; i < d; i++) k.push(2 * rand() - 1);
      else {  // decay_bounds.peaked_key: k = R_peak q, whose score peaks at distance `peak`
        for (i = 0; i < d / 2; i++) {
          var a = peak * theta[i], x = q[2 * i], y = q[2 * i + 1];
          k.push(x * Math.cos(a) - y * Math.sin(a), x * Math.sin(a) + y * Math.cos(a));
        }
      }
      var zq = pairsOf(q), zk = pairsOf(k);
      var h = zq.map(function (a, j) {  // z(q) conj(z(k))
        var b = zk[j];
        return [a[0] * b[0] + a[1] * b[1], a[1] * b[0] - a[0] * b[1]];
      });
      var step = abelStep(h);
      var distances = [r];  // a log grid, with the distance read and the peak on it
      if (kind === "peaked" && peak >= 1 && peak <= far) distances.push(peak);
      for (var j = 0; j <= 240; j++) distances.push(Math.round(Math.pow(far, j / 240)));
      distances = distances.filter(function (v) { return v >= 1; })
        .sort(function (a, b) { return a - b; });
      var points = [], bound = [];
      distances.forEach(function (dist) {
        points.push([dist, scoreAtDistance(h, theta, dist)]);
        bound.push([dist, step * partialSums(theta, dist)]);
      });
      var score = scoreAtDistance(h, theta, r), limit = step * partialSums(theta, r);
      c.log_base.shown.textContent = fmt(base);
      c.d.shown.textContent = d;
      c.peak.shown.textContent = peak;
      c.log_far.shown.textContent = far;
      c.r.shown.textContent = r;
      out.score.textContent = fmt(score);
      out.bound.textContent = fmt(limit);
      out.score0.textContent = fmt(scoreAtDistance(h, theta, 0));
      inert(c.peak, kind === "peaked" ? "" : "Only the peaked key reads this distance.");
      // The bound can stand orders of magnitude above every score: the score has a panel
      // of its own, and the bound is drawn beside |score| on a log scale below it.
      chart(svg, [
        { points: points, cls: "rope-q" },
        { points: [[Math.max(r, 1), score]], cls: "rope-read", dots: true },
      ], { logX: true, xLabel: "distance (log scale)" });
      var floor = 1e-3 * Math.max.apply(null, bound.map(function (p) { return p[1]; }));
      var magnitude = points.map(function (p) { return [p[0], Math.max(Math.abs(p[1]), floor)]; });
      chart(boundSvg, [
        { points: bound, cls: "rope-bound" },
        { points: magnitude, cls: "rope-q" },
        { points: [[Math.max(r, 1), Math.max(Math.abs(score), floor)]], cls: "rope-read",
          dots: true },
      ], { logX: true, logY: true, xLabel: "distance (log scale); |score| and the bound, log scale" });
      summary.textContent = "At distance " + r + " the score is " + fmt(score)
        + " and RoFormer's bound " + fmt(limit) + "; at distance 0 the score is "
        + fmt(scoreAtDistance(h, theta, 0)) + ".";
    };
    [
      { name: "key", label: "key", options: [["ones", "all ones (q = k)"],
        ["random", "random q and k"], ["peaked", "peaked: k = Rᵣ q"]], value: "ones" },
      { name: "log_base", label: "base (log scale)", min: 1, max: 7, step: 0.1, value: 4 },
      { name: "d", label: "head dimension \\(d\\)", min: 8, max: 256, step: 8, value: 128 },
      { name: "peak", label: "peak distance \\(r\\) (peaked key)", min: 0, max: 2000, step: 10,
        value: 100 },
      { name: "log_far", label: "farthest distance (log scale)", min: 1, max: 5, step: 0.5,
        value: 4 },
      { name: "r", label: "distance read", min: 0, max: 10000, step: 1, value: 100 },
    ].forEach(function (spec) { c[spec.name] = control(box, id, spec, update); });
    var svg = svgEl("svg", { class: "rope-plot", role: "img",
      "aria-label": "The score (blue) against distance" });
    box.appendChild(svg);
    var boundSvg = svgEl("svg", { class: "rope-plot", role: "img",
      "aria-label": "RoFormer's bound (grey) and the score's size (blue) against distance, "
        + "log scales" });
    box.appendChild(boundSvg);
    legend(box, [["rope-m0", "— the score \\(q^\\top R_{-r}\\, k\\) (above), its size (below)"],
      ["rope-bound-key", "- - RoFormer's bound"], ["rope-read-key", "● the distance read"]]);
    var out = outputs(box, [["score", "score at the distance read"],
      ["bound", "RoFormer's bound there"], ["score0", "score at distance 0"]]);
    var summary = el("p", { class: "rope-widget-summary", "aria-live": "polite" });
    box.appendChild(summary);
    update();
    return { state: function () { return { q: q.slice(), k: k.slice() }; } };
  };

  // Chapters 5 and 8: the wavelength ladder against a context length.
  WIDGETS.ladder = function (box, id) {
    var c = {};
    var update = function () {
      var d = +c.d.input.value, base = Math.pow(10, +c.log_base.input.value);
      var L = Math.round(Math.pow(2, +c.log2_context.input.value));
      var mode = c.mode.input.value, f = +c.fraction.input.value;
      var theta = mode === "prope" ? frequencies(d, base, f)
        : mode === "partial" ? partialRotaryTheta(d, f, base) : frequencies(d, base);
      var kept = 0, full = 0, critical = -1, slowest = 0;
      var fullPts = [], partPts = [];
      theta.forEach(function (t, j) {
        if (t <= 0) return;
        kept += 1;
        var wavelength = TAU / t;
        slowest = Math.max(slowest, wavelength);
        // spectrum.turn_counts: a full turn within the largest distance, T - 1
        if ((L - 1) * t >= TAU) { full += 1; fullPts.push([j, wavelength]); }
        else { partPts.push([j, wavelength]); if (critical < 0) critical = j; }
      });
      c.log_base.shown.textContent = fmt(base);
      c.d.shown.textContent = d;
      c.log2_context.shown.textContent = L;
      c.fraction.shown.textContent = f;
      c.fraction.input.disabled = mode === "rope";
      inert(c.fraction, mode === "rope" ? "RoPE turns every pair: the fraction is read by "
        + "p-RoPE and partial rotary." : "");
      out.kept.textContent = kept;
      out.full.textContent = full;
      out.critical.textContent = critical < 0 ? "none" : critical;
      out.slowest.textContent = fmt(slowest);
      var axes = chart(svg, [
        { points: [[0, L - 1], [d / 2 - 1, L - 1]], cls: "rope-bound" },
        { points: fullPts, cls: "rope-full", dots: true },
        { points: partPts, cls: "rope-partial", dots: true },
      ], { logY: true, xLabel: "pair k", extraY: [L - 1] });
      if (critical >= 0) {
        svg.appendChild(svgEl("line", { x1: axes.X(critical), x2: axes.X(critical), y1: axes.top,
          y2: axes.bottom, class: "rope-critical" }));
      }
      summary.textContent = kept + " of " + d / 2 + " pairs turn; " + full
        + " of them complete a turn within a context of " + L + " tokens"
        + (critical < 0 ? "." : ", and from pair " + critical + " on they turn only partly.");
    };
    [
      { name: "mode", label: "which pairs turn", options: [["rope", "RoPE (all)"],
        ["prope", "p-RoPE (fastest fraction)"], ["partial", "partial rotary (fraction)"]],
        value: "rope" },
      { name: "fraction", label: "fraction \\(p\\) or \\(f\\)", min: 0.125, max: 1, step: 0.125,
        value: 0.5 },
      { name: "log_base", label: "base (log scale)", min: 1, max: 7, step: 0.1, value: 4 },
      { name: "d", label: "head dimension \\(d\\)", min: 16, max: 256, step: 16, value: 64 },
      { name: "log2_context", label: "context length \\(T\\) (log scale)", min: 4, max: 20,
        step: 0.5, value: 12 },
    ].forEach(function (spec) { c[spec.name] = control(box, id, spec, update); });
    var svg = svgEl("svg", { class: "rope-plot", role: "img",
      "aria-label": "Wavelength of each pair on a log scale, with the context length as a line" });
    box.appendChild(svg);
    legend(box, [["rope-full-key", "● turns fully within the context"],
      ["rope-partial-key", "● turns only partly"], ["rope-bound-key", "- - \\(T - 1\\)"],
      ["rope-critical-key", "┆ first pair turning only partly"]]);
    var out = outputs(box, [["kept", "pairs that turn"], ["full", "complete a turn in context"],
      ["critical", "first pair turning only partly"], ["slowest", "slowest wavelength"]]);
    var summary = el("p", { class: "rope-widget-summary", "aria-live": "polite" });
    box.appendChild(summary);
    update();
    return { state: function () { return {}; } };
  };

  // Chapter 8: each extension method's division factor per pair.
  var METHODS = [["linear", "PI"], ["ntk", "NTK-aware"], ["dynamic", "dynamic NTK"],
    ["yarn", "YaRN"], ["llama3", "Llama 3"]];
  // The pairs whose factors the table prints.
  function probesOf(d) { return [0, d / 8, d / 4, 3 * d / 8, d / 2 - 1]; }

  WIDGETS.extension = function (box, id) {
    var c = {}, rowsFor = 0;
    var update = function () {
      var s = +c.factor.input.value, d = +c.d.input.value;
      if (d !== rowsFor) { rebuildRows(d); rowsFor = d; }
      var base = Math.pow(10, +c.log_base.input.value), L = +c.original.input.value;
      var alpha = +c.alpha.input.value, length = Math.round(+c.length.input.value * L);
      var theta = frequencies(d, base), series = [];
      METHODS.forEach(function (method, i) {
        var scaled = scaledFrequencies(method[0], d, base, s, L, alpha, length);
        var ratio = theta.map(function (t, k) { return t / scaled[k]; });
        series.push({ points: ratio.map(function (v, k) { return [k, v]; }), cls: "rope-m" + i });
        probesOf(d).forEach(function (k) {
          out[method[0] + "_" + k].textContent = fmt(ratio[k]);
        });
      });
      c.factor.shown.textContent = s;
      c.d.shown.textContent = d;
      c.log_base.shown.textContent = fmt(base);
      c.alpha.shown.textContent = alpha;
      c.length.shown.textContent = length;
      out.yarn_attention.textContent = fmt(yarnAttentionFactor(s));
      out.dynamic_alpha.textContent = fmt(dynamicAlpha(s, L, length));
      chart(svg, series, { logY: true, xLabel: "pair k", extraY: [1, s] });
      summary.textContent = s === 1
        ? "With s = 1 no method changes any frequency, and YaRN's attention factor is 1."
        : "Read " + s + " times further than " + L + " tokens: PI divides every pair's "
          + "frequency by " + s + "; YaRN keeps the fastest pairs and divides the slowest by "
          + s + ", with attention factor " + fmt(yarnAttentionFactor(s)) + ".";
    };
    [
      { name: "factor", label: "extension factor \\(s\\)", min: 1, max: 64, step: 1, value: 8 },
      { name: "alpha", label: "NTK-aware \\(\\alpha\\)", min: 1, max: 128, step: 1, value: 8 },
      { name: "length", label: "dynamic NTK: length read (\\(\\times L\\))", min: 1, max: 64,
        step: 0.5, value: 4 },
      { name: "original", label: "trained length \\(L\\)", options: [["2048", "2048"],
        ["4096", "4096"], ["8192", "8192"]], value: "4096" },
      { name: "log_base", label: "base (log scale)", min: 4, max: 7, step: 0.1, value: 4 },
      { name: "d", label: "head dimension \\(d\\)", min: 16, max: 256, step: 16, value: 128 },
    ].forEach(function (spec) { c[spec.name] = control(box, id, spec, update); });
    var svg = svgEl("svg", { class: "rope-plot", role: "img",
      "aria-label": "Division factor of each pair's frequency, one line per method, log scale" });
    box.appendChild(svg);
    legend(box, METHODS.map(function (method, i) { return ["rope-m" + i, "— " + method[1]]; }));
    var table = el("table", { class: "rope-widget-table" });
    var head = el("tr");
    head.appendChild(el("th", {}, "θ / θ′ at pair"));
    var out = {};
    ["0", "d/8", "d/4", "3d/8", "d/2 − 1"].forEach(function (name) {
      head.appendChild(el("th", {}, name));
    });
    table.appendChild(head);
    var scroller = el("div", { class: "rope-scroll" });  // scrolls sideways on a phone
    scroller.appendChild(table);
    box.appendChild(scroller);
    var rebuildRows = function (d) {
      while (table.rows.length > 1) table.deleteRow(1);
      METHODS.forEach(function (method) {
        var row = el("tr");
        row.appendChild(el("th", {}, method[1]));
        probesOf(d).forEach(function (k) {
          out[method[0] + "_" + k] = el("td", { "data-out": method[0] + "_" + k });
          row.appendChild(out[method[0] + "_" + k]);
        });
        table.appendChild(row);
      });
    };
    var extra = outputs(box, [["yarn_attention", "YaRN attention factor"],
      ["dynamic_alpha", "dynamic NTK's \\(\\alpha\\) at that length"]]);
    out.yarn_attention = extra.yarn_attention;
    out.dynamic_alpha = extra.dynamic_alpha;
    var summary = el("p", { class: "rope-widget-summary", "aria-live": "polite" });
    box.appendChild(summary);
    update();
    return { state: function () { return {}; } };
  };

  function start() {
    window.ropeWidgets = window.ropeWidgets || {};
    var boxes = document.querySelectorAll(".rope-widget[data-widget]");
    Array.prototype.forEach.call(boxes, function (box, i) {
      var make = WIDGETS[box.getAttribute("data-widget")];
      if (!make || box.getAttribute("data-ready")) return;
      var id = box.id || "rope-widget-" + i;
      box.id = id;
      box.setAttribute("role", "group");
      window.ropeWidgets[id] = make(box, id);
      box.setAttribute("data-ready", "true");
      typeset(box);
      skipLink(box, i);
    });
  }

  // A link at the top of the page's main content (right after the theme's "Skip to main
  // content") that moves the keyboard focus to the widget's first control, so that a
  // keyboard reader reaches the figure in four keys: Tab, Enter, Tab, Enter.
  function skipLink(box, i) {
    var main = document.getElementById("main-content") || document.querySelector("main");
    var first = box.querySelector("input, select");
    if (!main || !first) return;
    var link = el("a", { class: "rope-skip", href: "#" + box.id, "data-widget-link": box.id },
      "Skip to the interactive figure" + (i ? " " + (i + 1) : ""));
    link.addEventListener("click", function (event) {
      event.preventDefault();
      box.scrollIntoView();
      first.focus();
    });
    var links = main.querySelectorAll(":scope > a.rope-skip");
    main.insertBefore(link, links.length ? links[links.length - 1].nextSibling : main.firstChild);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
