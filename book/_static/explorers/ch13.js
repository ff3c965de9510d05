/* Chapter 13: sparse attention patterns. Choose a pattern (a sliding window, Child et al.'s strided
 * or fixed pattern, a window with global tokens, a window with attention sinks, or full causal
 * attention) and its sizes; see its causal mask, what the last query has read through L stacked
 * layers (the receptive field), and what it costs: the query-key pairs against full causal
 * attention's n(n + 1)/2, and the most keys a generating model must keep cached at once.
 *
 * The pure functions below (window.CourseExplorers.ch13) mirror attnlib.variants.patterns:
 * tests/site/test_explorer_ch13.py runs them in Node over a grid of settings and compares every
 * mask, receptive field and count with attnlib's. The mask grid is one Tab stop; the arrow keys
 * move between its cells (a roving tabindex, as chapter 05's grid). Positions count from 0, as
 * the chapter and attnlib do. */
(function () {
  "use strict";
  var C = window.CourseExplorers;
  var P = (C.ch13 = {});

  /* An n x n causal mask (true: may attend) whose pair (i, j <= i) is allowed when allow(i, j, i - j). */
  function causalGrid(n, allow) {
    var m = [];
    for (var i = 0; i < n; i++) {
      var row = [];
      for (var j = 0; j < n; j++) row.push(j <= i && !!allow(i, j, i - j));
      m.push(row);
    }
    return m;
  }

  /* attnlib.causal_mask(n) */
  P.causal = function (n) { return causalGrid(n, function () { return true; }); };
  /* variants.sliding_window_mask(n, w): 0 <= i - j < w */
  P.slidingWindow = function (n, w) { return causalGrid(n, function (i, j, d) { return d < w; }); };
  /* variants.strided_mask(n, l): the last l keys, and every l-th key before */
  P.strided = function (n, l) { return causalGrid(n, function (i, j, d) { return d < l || d % l === 0; }); };
  /* variants.fixed_mask(n, l, c): the query's own block, and the last c keys of every block */
  P.fixed = function (n, l, c) {
    return causalGrid(n, function (i, j) { return Math.floor(i / l) === Math.floor(j / l) || j % l >= l - c; });
  };
  /* variants.global_token_mask(n, w, positions): a window; a global key is read by every later
   * query, a global query reads every earlier key */
  P.globalTokens = function (n, w, positions) {
    var marked = [];
    for (var k = 0; k < n; k++) marked.push(false);
    positions.forEach(function (p) { marked[p] = true; });
    return causalGrid(n, function (i, j, d) { return d < w || marked[j] || marked[i]; });
  };
  /* variants.sink_mask(n, w, sinks=s): a window plus the first s tokens */
  P.sink = function (n, w, s) { return causalGrid(n, function (i, j, d) { return d < w || j < s; }); };

  /* Where g global tokens sit: the first g positions (global_token_mask(n, w, g)), or spread
   * evenly, position floor((k + 1) n / (g + 1)) for k = 0..g-1 (one token: the middle, n / 2). */
  P.globalPositions = function (n, g, place) {
    var out = [];
    for (var k = 0; k < Math.min(g, n); k++) {
      var p = place === "spread" ? Math.floor(((k + 1) * n) / (g + 1)) : k;
      if (out.indexOf(p) < 0) out.push(p);
    }
    return out;
  };

  /* variants.receptive_field(mask, L): reach_0 = I, reach_{t+1} = reach_t (mask | I), as booleans. */
  P.receptiveField = function (mask, layers) {
    var n = mask.length, reach = [];
    for (var i = 0; i < n; i++) { reach.push([]); for (var j = 0; j < n; j++) reach[i].push(i === j); }
    for (var t = 0; t < layers; t++) reach = reach.map(function (row) { return P.step(mask, row); });
    return reach;
  };
  /* One more layer for one query's row of reached positions: j is reached when a reached p may
   * attend to j, or j was reached (the residual stream keeps it). */
  P.step = function (mask, row) {
    var next = row.slice();
    for (var p = 0; p < row.length; p++) {
      if (!row[p]) continue;
      for (var j = 0; j < row.length; j++) if (mask[p][j]) next[j] = true;
    }
    return next;
  };
  /* The last query's row of receptive_field(mask, L) for L = 1..layers (the page's strips). */
  P.fieldRows = function (mask, layers) {
    var n = mask.length, row = [], rows = [];
    for (var j = 0; j < n; j++) row.push(j === n - 1);
    for (var t = 0; t < layers; t++) { row = P.step(mask, row); rows.push(row); }
    return rows;
  };
  /* Layers after which the last query has read every position; null when it never does. */
  P.layersToAll = function (mask) {
    var n = mask.length, row = [], count = 1;
    for (var j = 0; j < n; j++) row.push(j === n - 1);
    for (var t = 0; count < n; t++) {
      row = P.step(mask, row);
      var now = row.filter(Boolean).length;
      if (now === count) return null; /* no growth: it never will */
      count = now;
    }
    return t;
  };
  P.count = function (row) { return row.filter(Boolean).length; };
  P.pairs = function (mask) { return mask.reduce(function (s, row) { return s + P.count(row); }, 0); };
  /* The most keys a generating model must hold at once: at step t it still needs every key j <= t
   * that query t or a later query reads. */
  P.cache = function (mask) {
    var n = mask.length, most = 0;
    for (var t = 0; t < n; t++) {
      var kept = 0;
      for (var j = 0; j <= t; j++) {
        for (var i = t; i < n; i++) if (mask[i][j]) { kept++; break; }
      }
      most = Math.max(most, kept);
    }
    return most;
  };

  /* Everything the page shows for one setting s. */
  P.build = function (s) {
    var positions = s.pattern === "global" ? P.globalPositions(s.n, s.globals, s.place) : [];
    var mask = {
      causal: function () { return P.causal(s.n); },
      window: function () { return P.slidingWindow(s.n, s.window); },
      strided: function () { return P.strided(s.n, s.stride); },
      fixed: function () { return P.fixed(s.n, s.block, s.summary); },
      global: function () { return P.globalTokens(s.n, s.window, positions); },
      sink: function () { return P.sink(s.n, s.window, s.sinks); },
    }[s.pattern]();
    var rows = P.fieldRows(mask, s.layers);
    var last = rows[rows.length - 1];
    var field = [];
    last.forEach(function (r, j) { if (r) field.push(j); });
    return { mask: mask, positions: positions, rows: rows, field: field, fieldCount: field.length,
      pairs: P.pairs(mask), full: (s.n * (s.n + 1)) / 2, lastKeys: P.count(mask[s.n - 1]),
      cache: P.cache(mask), layersToAll: P.layersToAll(mask) };
  };

  /* "3, 6-9, 15" for the positions [3, 6, 7, 8, 9, 15]. */
  P.ranges = function (positions) {
    var out = [], k = 0;
    while (k < positions.length) {
      var a = positions[k];
      while (k + 1 < positions.length && positions[k + 1] === positions[k] + 1) k++;
      out.push(a === positions[k] ? String(a) : a + "\u2013" + positions[k]);
      k++;
    }
    return out.join(", ");
  };

  var NAMES = {
    window: "Sliding window", strided: "Strided", fixed: "Fixed", global: "Window with global tokens",
    sink: "Window with attention sinks", causal: "Full causal",
  };
  /* which knobs each pattern uses */
  var USES = {
    window: ["window"], strided: ["stride"], fixed: ["block", "summary"],
    global: ["window", "globals", "place"], sink: ["window", "sinks"], causal: [],
  };

  C.registry["ch13-patterns"] = function (root) {
    var s = { pattern: "window", n: 16, window: 4, stride: 4, block: 4, summary: 1, globals: 1,
      place: "spread", sinks: 2, layers: 2 };
    var controls = C.el("div", { class: "ce-controls" });
    root.appendChild(controls);
    var knobs = {};
    knobs.pattern = C.select(controls, { name: "pattern", label: "pattern", value: s.pattern, options: [
      ["window", "sliding window (Mistral, Longformer)"], ["strided", "strided (Child et al. 2019)"],
      ["fixed", "fixed blocks (Child et al. 2019)"], ["global", "window + global tokens (Longformer, BigBird)"],
      ["sink", "window + attention sinks (StreamingLLM)"], ["causal", "full causal (chapter 05)"]],
      onInput: function (v) { s.pattern = v; update(); } });
    function slider(name, label, min, max) {
      knobs[name] = C.slider(controls, { name: name, label: label, min: min, max: max, step: 1, value: s[name],
        format: String, onInput: function (v) { s[name] = v; update(); } });
    }
    slider("n", "length n", 4, 64);
    slider("window", "window w (keys, its own included)", 1, s.n);
    slider("stride", "stride l", 1, s.n);
    slider("block", "block l", 1, s.n);
    slider("summary", "summary keys c per block", 1, s.block);
    slider("globals", "global tokens", 0, 4);
    knobs.place = C.select(controls, { name: "place", label: "global tokens sit", value: s.place, options: [
      ["spread", "spread evenly (one: the middle)"], ["first", "at the start"]],
      onInput: function (v) { s.place = v; update(); } });
    slider("sinks", "sinks (the first tokens)", 0, 8);
    slider("layers", "layers L", 1, 16);
    var controlOf = {};
    Object.keys(knobs).forEach(function (name) { controlOf[name] = knobs[name].closest(".ce-control"); });

    var helpId = "ce13-help-" + Math.random().toString(36).slice(2, 8);
    root.appendChild(C.el("p", { class: "ce-help", id: helpId, text: "The mask: row i is query i, column j is key j " +
      "(dark: may attend; grey: allowed by the causal mask but skipped by the pattern; white: a future key). " +
      "With the keyboard: Tab reaches the grid once, the arrow keys move between its cells, Home and End go to " +
      "the ends of a row." }));
    var gridBox = C.el("div", { class: "ce-pgrid", role: "grid", "aria-describedby": helpId });
    root.appendChild(gridBox);
    var focused = C.el("p", { class: "ce-help ce-focused", text: "" });
    root.appendChild(focused);
    root.appendChild(C.el("p", { class: "ce-caption", text: "What the last query has read after 1, 2, \u2026, L layers " +
      "(dark: read; orange: the last query itself)" }));
    var strips = C.el("div", { class: "ce-pgrid ce-strips", "aria-hidden": "true" });
    root.appendChild(strips);
    var fieldText = C.el("p", { class: "ce-field" });
    root.appendChild(fieldText);
    var tables = C.el("div", { class: "ce-tables" });
    root.appendChild(tables);
    var live = C.live(root);

    var cells = [], size = 0, at = [0, 0];
    function build(n) {
      gridBox.innerHTML = "";
      cells = [];
      gridBox.style.setProperty("--ce-n", n);
      strips.style.setProperty("--ce-n", n);
      for (var i = 0; i < n; i++) {
        var row = C.el("div", { class: "ce-pgrid-row", role: "row" });
        cells.push([]);
        for (var j = 0; j < n; j++) {
          var cell = C.el("span", { class: "ce-pcell", role: "gridcell", "data-row": i, "data-col": j, tabindex: "-1" });
          row.appendChild(cell);
          cells[i].push(cell);
        }
        gridBox.appendChild(row);
      }
      size = n;
      at = [Math.min(at[0], n - 1), Math.min(at[1], n - 1)];
      cells[at[0]][at[1]].tabIndex = 0;
    }
    /* one Tab stop (roving tabindex): the last cell visited keeps tabindex 0, the others -1 */
    function moveTo(i, j) {
      cells[at[0]][at[1]].tabIndex = -1;
      at = [i, j];
      cells[i][j].tabIndex = 0;
      cells[i][j].focus();
    }
    gridBox.addEventListener("keydown", function (e) {
      var t = e.target;
      if (!t.classList || !t.classList.contains("ce-pcell")) return;
      var i = Number(t.dataset.row), j = Number(t.dataset.col), n = cells.length;
      var to = { ArrowUp: [i - 1, j], ArrowDown: [i + 1, j], ArrowLeft: [i, j - 1], ArrowRight: [i, j + 1],
        Home: [i, 0], End: [i, n - 1] }[e.key];
      if (!to) return;
      e.preventDefault();
      moveTo(Math.max(0, Math.min(n - 1, to[0])), Math.max(0, Math.min(n - 1, to[1])));
    });
    gridBox.addEventListener("focusin", function (e) {
      if (e.target.classList && e.target.classList.contains("ce-pcell")) focused.textContent = e.target.getAttribute("aria-label");
    });
    gridBox.addEventListener("click", function (e) {
      var t = e.target;
      if (t.classList && t.classList.contains("ce-pcell")) moveTo(Number(t.dataset.row), Number(t.dataset.col));
    });

    /* Why query i may (or may not) attend to key j under the current pattern. */
    function reason(i, j, ok, marked) {
      var d = i - j;
      if (j > i) return "a future key, masked";
      if (!ok) return "skipped by the pattern";
      if (s.pattern === "causal") return "may attend";
      if (s.pattern === "strided") return "may attend (" + (d < s.stride ? "within the last " + s.stride + " keys" : "on the stride") + ")";
      if (s.pattern === "fixed") {
        return "may attend (" + (Math.floor(i / s.block) === Math.floor(j / s.block) ? "its own block" : "a block's summary key") + ")";
      }
      if (d < s.window) return "may attend (in the window)";
      if (s.pattern === "sink") return "may attend (a sink)";
      return "may attend (" + (marked[j] ? "a global key" : "a global query") + ")";
    }
    /* a slider's bounds follow n (and c follows the block); the browser clamps its value */
    function bound(name, max) {
      var input = knobs[name];
      input.max = max;
      s[name] = Number(input.value);
      var out = input.parentNode.querySelector("output");
      out.textContent = String(s[name]);
      input.setAttribute("aria-valuetext", String(s[name]));
    }

    function update() {
      bound("window", s.n); bound("stride", s.n); bound("block", s.n); bound("summary", s.block);
      bound("globals", Math.min(4, s.n)); bound("sinks", Math.min(8, s.n));
      /* only the pattern's own knobs are in the page (not hidden ones: every control there can take focus) */
      ["window", "stride", "block", "summary", "globals", "place", "sinks", "layers"].forEach(function (name) {
        var control = controlOf[name];
        if (name === "layers" || USES[s.pattern].indexOf(name) >= 0) controls.appendChild(control); /* in this order */
        else if (control.parentNode) control.parentNode.removeChild(control);
      });
      var r = P.build(s), n = s.n;
      if (size !== n) build(n);
      var marked = [];
      for (var k = 0; k < n; k++) marked.push(r.positions.indexOf(k) >= 0);
      gridBox.setAttribute("aria-label", NAMES[s.pattern] + " mask, " + n + " queries by " + n + " keys");
      for (var i = 0; i < n; i++) {
        for (var j = 0; j < n; j++) {
          var ok = r.mask[i][j], cell = cells[i][j];
          cell.className = "ce-pcell " + (ok ? "is-allowed" : j > i ? "is-future" : "is-skipped");
          cell.setAttribute("aria-label", "query " + i + ", key " + j + ": " + reason(i, j, ok, marked));
        }
      }
      if (document.activeElement && document.activeElement.classList.contains("ce-pcell")) {
        focused.textContent = document.activeElement.getAttribute("aria-label");
      }
      strips.innerHTML = "";
      r.rows.forEach(function (row, t) {
        var line = C.el("div", { class: "ce-pgrid-row ce-strip" });
        row.forEach(function (read, j) {
          line.appendChild(C.el("span", { class: "ce-pcell " + (j === n - 1 ? "is-query" : read ? "is-allowed" : "is-future"),
            "data-layer": t + 1, "data-col": j }));
        });
        strips.appendChild(C.el("div", { class: "ce-strip-line" }, C.el("span", { class: "ce-strip-label", text: "L = " + (t + 1) }), line));
      });
      var all = r.layersToAll === null ? "it never reads every position" :
        "it has read every position after " + r.layersToAll + " layer" + (r.layersToAll === 1 ? "" : "s");
      fieldText.textContent = "After " + s.layers + " layer" + (s.layers === 1 ? "" : "s") + " the last query (position " +
        (n - 1) + ") has read " + r.fieldCount + " of " + n + " positions: " + P.ranges(r.field) + "; " + all + "." +
        (s.pattern === "global" ? " Global positions: " + (r.positions.length ? r.positions.join(", ") : "none") + "." : "");
      var share = function (a, b) { return a / b; };
      tables.innerHTML = "";
      tables.appendChild(C.table({ name: "cost", caption: "What the pattern costs (n = " + n + ")",
        cols: ["this pattern", "full causal", "share"],
        rows: ["query\u2013key pairs", "keys the last query reads", "keys cached at once, at most (per layer)"],
        values: [[r.pairs, r.full, share(r.pairs, r.full)], [r.lastKeys, n, share(r.lastKeys, n)], [r.cache, n, share(r.cache, n)]],
        text: function (v, i, j) { return j === 2 ? (100 * v).toFixed(1) + "%" : String(v); } }));
      tables.appendChild(C.table({ name: "field", caption: "The last query's receptive field",
        cols: ["layers L", "positions read", "layers to read all"], rows: ["field"],
        values: [[s.layers, r.fieldCount, r.layersToAll === null ? NaN : r.layersToAll]],
        text: function (v) { return Number.isNaN(v) ? "never" : String(v); } }));
      C.setInputs(root, { pattern: s.pattern, n: n, window: s.window, stride: s.stride, block: s.block,
        summary: s.summary, globals: s.globals, place: s.place, sinks: s.sinks, layers: s.layers,
        positions: r.positions, mask: r.mask, field: r.field, fieldCount: r.fieldCount, pairs: r.pairs,
        full: r.full, lastKeys: r.lastKeys, cache: r.cache, layersToAll: r.layersToAll });
      live.textContent = NAMES[s.pattern] + ", n = " + n + ": " + r.pairs + " of " + r.full + " query\u2013key pairs (" +
        (100 * r.pairs / r.full).toFixed(1) + "%); after " + s.layers + " layer" + (s.layers === 1 ? "" : "s") +
        " the last query has read " + r.fieldCount + " of " + n + " positions; a generating model keeps at most " +
        r.cache + " keys per layer (full causal: " + n + ").";
    }
    update();
  };
})();
