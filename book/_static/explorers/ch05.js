/* Chapter 05: a mask you can click. Padding (a key length), causal, single cells; a query that
 * may attend to nothing, and what each way of masking gives for it. Chapter 07 opens the same
 * explorer without the causal mask (its settings in book/_quizzes/explorers.yml): cross
 * attention has none. The grid is one Tab stop; the arrow keys move between its cells. */
(function () {
  "use strict";
  var C = window.CourseExplorers;
  var L = 4, S = 5, D = 2;
  C.registry["ch05-mask"] = function (root, ctx) {
    var settings = (ctx && ctx.settings) || {};
    var rand = C.rng(5);
    var mat = function (r, c) { var m = []; for (var i = 0; i < r; i++) { var row = []; for (var j = 0; j < c; j++) row.push(C.f32(C.gauss(rand))); m.push(row); } return m; };
    var Q = mat(L, D), K = mat(S, D), V = mat(S, D);
    var s = { length: 4, causal: settings.causal === undefined ? true : !!settings.causal, policy: "attnlib", blocked: [] };
    for (var i = 0; i < L; i++) { s.blocked.push([]); for (var j = 0; j < S; j++) s.blocked[i].push(false); }
    s.blocked[1][0] = true; s.blocked[1][1] = true; /* with causal, query 2 may attend to nothing */
    var controls = C.el("div", { class: "ce-controls" });
    root.appendChild(controls);
    C.slider(controls, { name: "length", label: "real keys (the rest is padding)", min: 0, max: S, step: 1, value: s.length,
      format: String, onInput: function (v) { s.length = v; update(); } });
    C.checkbox(controls, { name: "causal", label: "causal (query i sees keys 1..i)", value: s.causal,
      onInput: function (v) { s.causal = v; update(); } });
    C.select(controls, { name: "policy", label: "how the mask is applied", value: s.policy, options: [
      ["attnlib", "attnlib: masked keys get weight 0; a row with no key gets all zeros"],
      ["neg-inf", "fill the masked scores with \u2212inf, then softmax"],
      ["neg-large", "fill the masked scores with \u22121e9, then softmax"],
      ["after", "softmax first, then zero the masked weights (the named mistake)"]],
      onInput: function (v) { s.policy = v; update(); } });
    var grid = C.el("div", { class: "ce-mask", role: "group", "aria-label": "The mask: press a cell to forbid or allow that query-key pair" });
    root.appendChild(C.el("p", { class: "ce-help", text: "Press a cell to forbid or allow one query\u2013key pair (on top of padding and causal). " +
      "With the keyboard: Tab reaches the grid once, the arrow keys move between its cells, Enter or Space switches one." }));
    root.appendChild(grid);
    var tables = C.el("div", { class: "ce-tables" });
    root.appendChild(tables);
    var live = C.live(root);
    var buttons = [];
    for (var a = 0; a < L; a++) {
      var tr = C.el("div", { class: "ce-mask-row" });
      tr.appendChild(C.el("span", { class: "ce-mask-label", text: "q" + (a + 1) }));
      buttons.push([]);
      for (var b = 0; b < S; b++) {
        (function (i, j) {
          var btn = C.el("button", { type: "button", class: "ce-cell", "data-row": i, "data-col": j, tabindex: i + j === 0 ? "0" : "-1" });
          btn.addEventListener("click", function () { s.blocked[i][j] = !s.blocked[i][j]; update(); moveTo(i, j); });
          tr.appendChild(btn);
          buttons[i].push(btn);
        })(a, b);
      }
      grid.appendChild(tr);
    }
    /* one Tab stop (roving tabindex): the last cell used keeps tabindex 0, the others -1 */
    function moveTo(i, j) {
      buttons.forEach(function (row) { row.forEach(function (b) { b.tabIndex = -1; }); });
      buttons[i][j].tabIndex = 0;
      buttons[i][j].focus();
    }
    grid.addEventListener("keydown", function (e) {
      var t = e.target;
      if (!t.classList || !t.classList.contains("ce-cell")) return;
      var i = Number(t.dataset.row), j = Number(t.dataset.col);
      var to = { ArrowUp: [i - 1, j], ArrowDown: [i + 1, j], ArrowLeft: [i, j - 1], ArrowRight: [i, j + 1],
        Home: [i, 0], End: [i, S - 1] }[e.key];
      if (!to) return;
      e.preventDefault();
      moveTo(Math.max(0, Math.min(L - 1, to[0])), Math.max(0, Math.min(S - 1, to[1])));
    });
    var keyRow = C.el("div", { class: "ce-mask-row", "aria-hidden": "true" }, C.el("span", { class: "ce-mask-label" }));
    for (var k = 0; k < S; k++) keyRow.appendChild(C.el("span", { class: "ce-mask-key", text: "k" + (k + 1) }));
    grid.appendChild(keyRow);

    function allowed(i, j) { return j < s.length && (!s.causal || j <= i) && !s.blocked[i][j]; }

    function update() {
      var mask = [], scores = [], weights = [], out = [], empty = [];
      var scale = 1 / Math.sqrt(D);
      for (var i = 0; i < L; i++) {
        mask.push([]); scores.push([]);
        for (var j = 0; j < S; j++) {
          mask[i].push(allowed(i, j));
          scores[i].push(C.dot(Q[i], K[j]) * scale);
          var btn = buttons[i][j], ok = mask[i][j];
          var why = j >= s.length ? "padding" : s.causal && j > i ? "future" : s.blocked[i][j] ? "forbidden by you" : "";
          btn.textContent = ok ? "\u2713" : "\u00d7";
          btn.className = "ce-cell " + (ok ? "is-allowed" : "is-masked");
          btn.setAttribute("aria-pressed", s.blocked[i][j] ? "true" : "false");
          btn.setAttribute("aria-label", "query " + (i + 1) + ", key " + (j + 1) + ": " + (ok ? "may attend" : "masked, " + why));
        }
        if (!mask[i].some(Boolean)) empty.push(i + 1);
        var row = scores[i], w;
        if (s.policy === "attnlib") w = C.softmax(row.map(function (x, j) { return mask[i][j] ? x : -Infinity; }));
        else if (s.policy === "neg-inf") {
          var filled = row.map(function (x, j) { return mask[i][j] ? x : -Infinity; });
          var m = Math.max.apply(null, filled);
          var e = filled.map(function (x) { return Math.exp(x - m); }); /* all -inf: exp(nan) */
          var sum = e.reduce(function (p, q) { return p + q; }, 0);
          w = e.map(function (x) { return x / sum; });
        } else if (s.policy === "neg-large") w = C.softmax(row.map(function (x, j) { return mask[i][j] ? x : C.f32(-1e9); }));
        else w = C.softmax(row).map(function (x, j) { return mask[i][j] ? x : 0; });
        weights.push(w);
        out.push([0, 1].map(function (d) { return w.reduce(function (p, wj, j) { return p + wj * V[j][d]; }, 0); }));
      }
      C.setInputs(root, { query: Q, key: K, value: V, mask: mask, policy: s.policy });
      tables.innerHTML = "";
      var keys = []; for (var j2 = 0; j2 < S; j2++) keys.push("k" + (j2 + 1));
      var qs = []; for (var i2 = 0; i2 < L; i2++) qs.push("q" + (i2 + 1));
      tables.appendChild(C.table({ name: "weights", caption: "Attention weights (rows: queries)", cols: keys, rows: qs,
        values: weights, digits: 3, shade: function (v) { return isFinite(v) ? v : 0; } }));
      tables.appendChild(C.table({ name: "sums", caption: "Each row's sum of weights", cols: ["sum"], rows: qs,
        values: weights.map(function (w) { return [w.reduce(function (p, q) { return p + q; }, 0)]; }), digits: 3 }));
      tables.appendChild(C.table({ name: "output", caption: "Output (rows: queries)", cols: ["first", "second"], rows: qs,
        values: out, digits: 3 }));
      var policyText = { "attnlib": "all-zero weights and output", "neg-inf": "NaN weights (0/0)",
        "neg-large": "uniform weights over every key, masked ones included", "after": "weights that no longer sum to 1" };
      live.textContent = (empty.length ? "Queries that may attend to nothing: " + empty.join(", ") + "; this way of masking gives them " +
        policyText[s.policy] + "." : "Every query may attend to some key.") + " Real keys: " + s.length + (s.causal ? ", causal." : ".");
    }
    update();
  };
})();
