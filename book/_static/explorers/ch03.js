/* Chapter 03: one query against four keys. Move the query or a key, change the temperature:
 * scores q.k / T, softmax weights and the output sum_i w_i v_i move together. */
(function () {
  "use strict";
  var C = window.CourseExplorers;
  C.registry["ch03-query-keys"] = function (root) {
    var keys = [[2, 0], [0, 2], [-1.5, 0.5], [1, 1]];
    var values = [[1, 0], [0, 1], [-1, -1], [0.5, 0.5]];
    var s = { q: [1, 0.5], T: 1, key: 0 };
    var controls = C.el("div", { class: "ce-controls" });
    root.appendChild(controls);
    var svgHolder = C.el("div", { class: "ce-figure" });
    var tables = C.el("div", { class: "ce-tables" });
    root.appendChild(svgHolder);
    root.appendChild(tables);
    var live = C.live(root);
    var fmt1 = function (v) { return v.toFixed(1); };
    C.slider(controls, { name: "qx", label: "query, first coordinate", min: -3, max: 3, step: 0.1, value: s.q[0], format: fmt1,
      onInput: function (v) { s.q[0] = v; update(); } });
    C.slider(controls, { name: "qy", label: "query, second coordinate", min: -3, max: 3, step: 0.1, value: s.q[1], format: fmt1,
      onInput: function (v) { s.q[1] = v; update(); } });
    C.slider(controls, { name: "T", label: "temperature T", min: 0.1, max: 5, step: 0.1, value: s.T, format: fmt1,
      onInput: function (v) { s.T = v; update(); } });
    var kx, ky;
    C.select(controls, { name: "key", label: "key to move", value: 0,
      options: keys.map(function (_, i) { return [i, "key " + (i + 1)]; }),
      onInput: function (v) {
        s.key = Number(v);
        kx.value = keys[s.key][0];
        ky.value = keys[s.key][1];
        /* both sliders show the chosen key's coordinates (their input events redraw the numbers) */
        kx.dispatchEvent(new Event("input"));
        ky.dispatchEvent(new Event("input"));
      } });
    kx = C.slider(controls, { name: "kx", label: "that key, first coordinate", min: -3, max: 3, step: 0.1, value: keys[0][0],
      format: fmt1, onInput: function (v) { keys[s.key][0] = v; update(); } });
    ky = C.slider(controls, { name: "ky", label: "that key, second coordinate", min: -3, max: 3, step: 0.1, value: keys[0][1],
      format: fmt1, onInput: function (v) { keys[s.key][1] = v; update(); } });

    /* Labels are drawn last, each with a white halo, so that no arrow, circle or cross covers them;
     * the query's label sits beyond the arrow's tip, away from the origin. */
    function label(x, y, text, color) {
      return '<text x="' + x + '" y="' + y + '" font-size="13" fill="' + color + '" stroke="#fff" stroke-width="3" ' +
        'paint-order="stroke" stroke-linejoin="round">' + text + "</text>";
    }
    function beyond(v, by) { /* a point past v, away from the origin, in pixels */
      var n = Math.sqrt(v[0] * v[0] + v[1] * v[1]) || 1;
      return [v[0] / n * by, -v[1] / n * by];
    }
    function draw(weights, out) {
      var W = 260, S = 40, c = W / 2, p = function (v) { return c + S * v; }, q = function (v) { return c - S * v; };
      var parts = ['<svg viewBox="0 0 ' + W + " " + W + '" width="100%" role="img" aria-label="The query as an arrow, ' +
        'the keys as circles sized by their weight, the output as a cross">',
        '<line x1="0" y1="' + c + '" x2="' + W + '" y2="' + c + '" stroke="#aaa"/>',
        '<line x1="' + c + '" y1="0" x2="' + c + '" y2="' + W + '" stroke="#aaa"/>'];
      var labels = [];
      keys.forEach(function (k, i) {
        parts.push('<circle cx="' + p(k[0]) + '" cy="' + q(k[1]) + '" r="' + (4 + 14 * weights[i]) +
          '" fill="rgba(31,119,180,0.5)" stroke="#1f77b4"/>');
        labels.push(label(p(k[0]) + 8, q(k[1]) - 8, "k" + (i + 1), "#000"));
      });
      parts.push('<line x1="' + c + '" y1="' + c + '" x2="' + p(s.q[0]) + '" y2="' + q(s.q[1]) +
        '" stroke="#d62728" stroke-width="3"/>');
      var dq = beyond(s.q, 12);
      labels.push(label(p(s.q[0]) + dq[0] - 4, q(s.q[1]) + dq[1] + 5, "q", "#b01f1f"));
      parts.push('<path d="M' + (p(out[0]) - 6) + " " + (q(out[1]) - 6) + "l12 12m0 -12l-12 12" +
        '" stroke="#2a7d2a" stroke-width="3"/>');
      /* below the cross: the query's label sits beyond the arrow's tip, usually above it */
      labels.push(label(p(out[0]) + (out[0] > 1.5 ? -52 : 8), q(out[1]) + 20, "output", "#2a7d2a"));
      svgHolder.innerHTML = parts.concat(labels).join("") + "</svg>";
    }

    function update() {
      var scores = keys.map(function (k) { return C.dot(s.q, k) / s.T; });
      var w = C.softmax(scores);
      var out = [0, 1].map(function (j) { return w.reduce(function (a, wi, i) { return a + wi * values[i][j]; }, 0); });
      C.setInputs(root, { query: s.q, keys: keys, values: values, temperature: s.T });
      tables.innerHTML = "";
      var names = keys.map(function (_, i) { return "key " + (i + 1); });
      tables.appendChild(C.table({ name: "scores", caption: "Scores q\u00b7k / T", cols: names, rows: ["q"], values: [scores] }));
      tables.appendChild(C.table({ name: "weights", caption: "Softmax weights", cols: names, rows: ["q"], values: [w],
        shade: function (v) { return v; } }));
      tables.appendChild(C.table({ name: "output", caption: "Output \u03a3 w\u1d62 v\u1d62", cols: ["first", "second"],
        rows: ["q"], values: [out] }));
      draw(w, out);
      var best = w.indexOf(Math.max.apply(null, w));
      live.textContent = "Temperature " + s.T.toFixed(1) + ": key " + (best + 1) + " has the largest weight, " +
        C.fmt(w[best], 3) + "; output (" + C.fmt(out[0], 3) + ", " + C.fmt(out[1], 3) + ").";
    }
    update();
  };
})();
