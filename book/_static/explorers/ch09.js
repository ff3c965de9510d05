/* Chapter 09: RoPE rotates a query at position m and a key at position n; their score depends on
 * m - n only. ALiBi adds -lambda_r * (i - j) to head r's scores, lambda_r = 2^(-8 (r + 1) / h) for
 * the h heads r = 0, ..., h - 1 (the chapter's notation: h counts the heads, r names one). */
(function () {
  "use strict";
  var C = window.CourseExplorers;
  function rotate(v, p) { /* one pair, angle p * base^0 = p radians (attnlib.positions.apply_rope, E = 2) */
    var c = Math.cos(p), s = Math.sin(p);
    return [v[0] * c - v[1] * s, v[0] * s + v[1] * c];
  }

  C.registry["ch09-rope"] = function (root) {
    var q = [1, 0.5], k = [0.8, -0.6];
    var s = { m: 5, n: 2, shift: 0 };
    var controls = C.el("div", { class: "ce-controls" });
    root.appendChild(controls);
    C.slider(controls, { name: "m", label: "query position m", min: 0, max: 20, step: 1, value: s.m, format: String,
      onInput: function (v) { s.m = v; update(); } });
    C.slider(controls, { name: "n", label: "key position n", min: 0, max: 20, step: 1, value: s.n, format: String,
      onInput: function (v) { s.n = v; update(); } });
    C.slider(controls, { name: "shift", label: "shift both positions by", min: 0, max: 40, step: 1, value: s.shift, format: String,
      onInput: function (v) { s.shift = v; update(); } });
    var fig = C.el("div", { class: "ce-figure" });
    root.appendChild(fig);
    var tables = C.el("div", { class: "ce-tables" });
    root.appendChild(tables);
    var live = C.live(root);

    function update() {
      var pm = s.m + s.shift, pn = s.n + s.shift;
      var rq = rotate(q, pm), rk = rotate(k, pn), score = C.dot(rq, rk);
      var offsets = [], byOffset = [];
      for (var o = -4; o <= 4; o++) { offsets.push(String(o)); byOffset.push(C.dot(rotate(q, pn + o), rk)); }
      C.setInputs(root, { query: q, key: k, m: pm, n: pn });
      var W = 260, c = W / 2, S = 70, X = function (v) { return c + S * v; }, Y = function (v) { return c - S * v; };
      fig.innerHTML = '<svg viewBox="0 0 ' + W + " " + W + '" width="100%" role="img" aria-label="The rotated query and key as arrows">' +
        '<circle cx="' + c + '" cy="' + c + '" r="' + S * 1.1 + '" fill="none" stroke="#ccc"/>' +
        '<line x1="' + c + '" y1="' + c + '" x2="' + X(rq[0]) + '" y2="' + Y(rq[1]) + '" stroke="#d62728" stroke-width="3"/>' +
        '<line x1="' + c + '" y1="' + c + '" x2="' + X(rk[0]) + '" y2="' + Y(rk[1]) + '" stroke="#1f77b4" stroke-width="3"/>' +
        /* the labels last, with a white halo, beyond each arrow's tip: no arrow covers them */
        label(rq, "q at " + pm, "#b01f1f") + label(rk, "k at " + pn, "#17537e") + "</svg>";
      function label(v, text, color) {
        var n = Math.sqrt(v[0] * v[0] + v[1] * v[1]) || 1, x = X(v[0]) + 10 * v[0] / n, y = Y(v[1]) - 10 * v[1] / n + 4;
        return '<text x="' + x + '" y="' + y + '" font-size="13" fill="' + color + '" text-anchor="' + (v[0] < 0 ? "end" : "start") +
          '" stroke="#fff" stroke-width="3" paint-order="stroke" stroke-linejoin="round">' + text + "</text>";
      }
      tables.innerHTML = "";
      tables.appendChild(C.table({ name: "rotated", caption: "Rotated query and key", cols: ["first", "second"],
        rows: ["q at m", "k at n"], values: [rq, rk] }));
      tables.appendChild(C.table({ name: "score", caption: "Their score", cols: ["m \u2212 n", "score"], rows: ["q\u00b7k"],
        values: [[pm - pn, score]], text: function (v, i, j) { return j === 0 ? C.fmt(v, 0) : C.fmt(v); } }));
      tables.appendChild(C.table({ name: "by-offset", caption: "The score for the key at n and the query at n + offset",
        cols: offsets, rows: ["score"], values: [byOffset], digits: 3 }));
      live.textContent = "Query at " + pm + ", key at " + pn + ", offset " + (pm - pn) + ": score " + C.fmt(score, 4) +
        ". Shift both and the score stays the same.";
    }
    update();
  };

  C.registry["ch09-alibi"] = function (root) {
    var s = { heads: 8, L: 6, head: 0 };
    var controls = C.el("div", { class: "ce-controls" });
    root.appendChild(controls);
    var headSel;
    C.slider(controls, { name: "heads", label: "number of heads h", min: 1, max: 16, step: 1, value: s.heads, format: String,
      onInput: function (v) { s.heads = v; s.head = Math.min(s.head, v - 1); fillHeads(); update(); } });
    C.slider(controls, { name: "L", label: "sequence length", min: 1, max: 8, step: 1, value: s.L, format: String,
      onInput: function (v) { s.L = v; update(); } });
    headSel = C.select(controls, { name: "head", label: "head shown, r", value: 0, options: [[0, "r = 0"]],
      onInput: function (v) { s.head = Number(v); update(); } });
    function fillHeads() {
      headSel.innerHTML = "";
      for (var r = 0; r < s.heads; r++) {
        var o = C.el("option", { value: r, text: "r = " + r });
        if (r === s.head) o.selected = true;
        headSel.appendChild(o);
      }
    }
    fillHeads();
    var tables = C.el("div", { class: "ce-tables" });
    root.appendChild(tables);
    var live = C.live(root);

    function update() {
      var slopes = [];
      for (var r = 0; r < s.heads; r++) slopes.push(C.f32(Math.pow(2, -8 * (r + 1) / s.heads)));
      var m = slopes[s.head], bias = [], names = [];
      for (var i = 0; i < s.L; i++) {
        var row = [];
        for (var j = 0; j < s.L; j++) row.push(j > i ? -Infinity : -m * (i - j));
        bias.push(row); names.push("pos " + i);
      }
      C.setInputs(root, { heads: s.heads, L: s.L, head: s.head });
      tables.innerHTML = "";
      tables.appendChild(C.table({ name: "slopes", caption: "Slope of each head r, \u03bb\u1d63 = 2^(\u22128(r + 1)/h) with h = " + s.heads,
        cols: slopes.map(function (_, r) { return "r = " + r; }), rows: ["\u03bb\u1d63"], values: [slopes] }));
      tables.appendChild(C.table({ name: "bias", caption: "Head r = " + s.head + ": its bias \u2212\u03bb\u1d63\u00b7(i \u2212 j) (rows: queries i; columns: keys j; above the diagonal: masked)",
        cols: names, rows: names, values: bias, digits: 3,
        shade: function (v) { return isFinite(v) ? Math.min(1, -v / 4) : 0; } }));
      live.textContent = "h = " + s.heads + " heads; head r = " + s.head + " has slope \u03bb = " + C.fmt(m, 4) +
        ": a key " + (s.L - 1) + " places back costs " + C.fmt(m * (s.L - 1), 4) + " in the score.";
    }
    update();
  };
})();
