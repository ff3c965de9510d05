/* Chapter 08: the online softmax, tile by tile. One query's 12 scores arrive in tiles; after each
 * tile the running maximum m, the running sum l and the unnormalised output acc are rescaled
 * by exp(m_old - m_new). After the last tile acc / l is the full softmax's output. */
(function () {
  "use strict";
  var C = window.CourseExplorers;
  var N = 12;
  C.registry["ch08-online"] = function (root) {
    var rand = C.rng(8);
    var base = [], V = [];
    for (var i = 0; i < N; i++) { base.push(C.f32(C.gauss(rand))); V.push([C.f32(C.gauss(rand)), C.f32(C.gauss(rand))]); }
    var s = { tile: 4, spread: 2, done: 0 };
    var controls = C.el("div", { class: "ce-controls" });
    root.appendChild(controls);
    C.select(controls, { name: "tile", label: "keys per tile", value: s.tile,
      options: [[1, "1"], [2, "2"], [3, "3"], [4, "4"], [6, "6"], [12, "12"]],
      onInput: function (v) { s.tile = Number(v); s.done = 0; update(); } });
    C.slider(controls, { name: "spread", label: "scale of the scores", min: 0.5, max: 10, step: 0.5, value: s.spread,
      format: function (v) { return v.toFixed(1); }, onInput: function (v) { s.spread = v; s.done = 0; update(); } });
    var buttons = C.el("div", { class: "ce-buttons" });
    root.appendChild(buttons);
    var next = C.button(buttons, "Next tile", function () { if (s.done < N) { s.done = Math.min(N, s.done + s.tile); update(); } }, "next");
    C.button(buttons, "All tiles", function () { s.done = N; update(); }, "all");
    C.button(buttons, "Start again", function () { s.done = 0; update(); }, "reset");
    var tables = C.el("div", { class: "ce-tables" });
    root.appendChild(tables);
    var live = C.live(root);

    function update() {
      var scores = base.map(function (x) { return C.f32(x * s.spread); });
      var m = -Infinity, l = 0, acc = [0, 0], rows = [], labels = [];
      for (var start = 0; start < s.done; start += s.tile) {
        var block = scores.slice(start, Math.min(start + s.tile, N));
        var mNew = Math.max(m, Math.max.apply(null, block));
        var factor = Math.exp(m - mNew); /* 0 for the first tile (m = -inf) */
        l = l * factor; acc = acc.map(function (a) { return a * factor; });
        block.forEach(function (x, j) {
          var e = Math.exp(x - mNew);
          l += e; acc[0] += e * V[start + j][0]; acc[1] += e * V[start + j][1];
        });
        m = mNew;
        rows.push([Math.min(start + s.tile, N), m, factor, l, acc[0], acc[1], acc[0] / l, acc[1] / l]);
        labels.push("tile " + (rows.length));
      }
      var w = C.softmax(scores);
      var full = [0, 1].map(function (d) { return w.reduce(function (a, wi, i) { return a + wi * V[i][d]; }, 0); });
      C.setInputs(root, { scores: scores, value: V, tile: s.tile, done: s.done });
      tables.innerHTML = "";
      var keys = []; for (var k = 0; k < N; k++) keys.push("k" + (k + 1));
      tables.appendChild(C.table({ name: "scores", caption: "The 12 scores (shaded: read so far)", cols: keys, rows: ["s"],
        values: [scores], digits: 2, shade: function (v, i, j) { return j < s.done ? 0.35 : 0; } }));
      tables.appendChild(C.table({ name: "steps", caption: "The running state after each tile",
        cols: ["keys read", "m", "rescale exp(m_old \u2212 m)", "l", "acc\u2081", "acc\u2082", "acc\u2081 / l", "acc\u2082 / l"],
        rows: labels, values: rows, text: function (v, i, j) { return j === 0 ? String(v) : C.fmt(v); } }));
      tables.appendChild(C.table({ name: "full", caption: "The full softmax's output (all 12 keys at once)",
        cols: ["first", "second"], rows: ["softmax"], values: [full] }));
      next.disabled = s.done >= N;
      if (!rows.length) live.textContent = "No tile read yet: m = \u2212inf, l = 0. Press Next tile.";
      else {
        var last = rows[rows.length - 1];
        live.textContent = "After " + last[0] + " of 12 keys: m = " + C.fmt(last[1], 4) + ", l = " + C.fmt(last[3], 4) +
          ", output so far (" + C.fmt(last[6], 4) + ", " + C.fmt(last[7], 4) + ")" + (s.done >= N ?
          "; the full softmax gives (" + C.fmt(full[0], 4) + ", " + C.fmt(full[1], 4) + ")." : ".");
      }
    }
    update();
  };
})();
