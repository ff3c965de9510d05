/* Chapter 04: d_k and the scale, and a logit that overflows the naive softmax in float32. */
(function () {
  "use strict";
  var C = window.CourseExplorers;
  var N = 8; /* keys */

  function vectors(dk) {
    var rand = C.rng(1234 + dk);
    var row = function () { var v = []; for (var i = 0; i < dk; i++) v.push(C.f32(C.gauss(rand))); return v; };
    var q = row(), K = [];
    for (var i = 0; i < N; i++) K.push(row());
    return { q: q, K: K };
  }

  C.registry["ch04-scale"] = function (root) {
    var s = { logdk: 4, scaled: true, x: 80 };
    var controls = C.el("div", { class: "ce-controls" });
    root.appendChild(controls);
    var out = C.el("div", { class: "ce-tables" });
    root.appendChild(out);
    var live = C.live(root);
    C.slider(controls, { name: "dk", label: "d_k (entries of q and k, drawn from N(0, 1))", min: 0, max: 10, step: 1,
      value: s.logdk, format: function (v) { return String(Math.pow(2, v)); }, onInput: function (v) { s.logdk = v; update(); } });
    C.checkbox(controls, { name: "scaled", label: "divide the scores by \u221ad_k", value: s.scaled,
      onInput: function (v) { s.scaled = v; update(); } });

    var overflow = C.el("div", { class: "ce-part" });
    root.appendChild(C.el("h4", { class: "ce-subtitle", text: "A logit that overflows the naive softmax" }));
    var controls2 = C.el("div", { class: "ce-controls" });
    root.appendChild(controls2);
    root.appendChild(overflow);
    var live2 = C.live(root);
    C.slider(controls2, { name: "x", label: "largest logit x (row x, x \u2212 1, x \u2212 2)", min: 0, max: 120, step: 1,
      value: s.x, format: String, onInput: function (v) { s.x = v; update2(); } });

    function update() {
      var dk = Math.pow(2, s.logdk), v = vectors(dk), scale = s.scaled ? 1 / Math.sqrt(dk) : 1;
      var scores = v.K.map(function (k) { return C.dot(v.q, k) * scale; });
      var mean = scores.reduce(function (a, b) { return a + b; }, 0) / N;
      var sd = Math.sqrt(scores.reduce(function (a, b) { return a + (b - mean) * (b - mean); }, 0) / N);
      var w = C.softmax(scores);
      var entropy = -w.reduce(function (a, p) { return a + (p > 0 ? p * Math.log(p) : 0); }, 0);
      /* the softmax's Jacobian d w_i / d s_j = w_i (delta_ij - w_j); its largest entry is the
       * largest w_i (1 - w_i): near 0 when one weight takes everything */
      var grad = Math.max.apply(null, w.map(function (p) { return p * (1 - p); }));
      C.setInputs(root, { d_k: dk, scaled: s.scaled, query: v.q, keys: v.K, x: s.x });
      out.innerHTML = "";
      var names = []; for (var i = 0; i < N; i++) names.push("k" + (i + 1));
      out.appendChild(C.table({ name: "scores", caption: "Scores of one query against 8 keys", cols: names, rows: ["q"],
        values: [scores], digits: 3 }));
      out.appendChild(C.table({ name: "weights", caption: "Softmax weights", cols: names, rows: ["q"], values: [w], digits: 3,
        shade: function (x) { return x; } }));
      out.appendChild(C.table({ name: "summary", caption: "The row at a glance", rows: ["value"],
        cols: ["spread of the scores (sd)", "entropy (nats; log 8 = 2.079)", "largest w(1\u2212w)"],
        values: [[sd, entropy, grad]] }));
      live.textContent = "d_k " + dk + (s.scaled ? ", scaled" : ", not scaled") + ": scores spread " + C.fmt(sd, 3) +
        ", entropy " + C.fmt(entropy, 3) + " nats, largest weight " + C.fmt(Math.max.apply(null, w), 3) + ".";
    }

    function update2() {
      var row = [s.x, s.x - 1, s.x - 2];
      /* float32, as torch computes it: exp(89) is already inf in float32 */
      var e = row.map(function (x) { return C.f32(Math.exp(x)); });
      var sum = C.f32(e[0] + e[1] + e[2]);
      var naive = e.map(function (x) { return C.f32(x / sum); });
      var stable = C.softmax(row);
      C.setInputs(root, Object.assign(JSON.parse(root.dataset.inputs || "{}"), { x: s.x }));
      overflow.innerHTML = "";
      overflow.appendChild(C.table({ name: "overflow", caption: "Softmax of (x, x \u2212 1, x \u2212 2) in float32",
        cols: ["x", "x \u2212 1", "x \u2212 2"], rows: ["exp(x) (naive)", "naive: exp / sum", "stable: exp(x \u2212 max) / sum"],
        values: [e, naive, stable] }));
      /* exp overflows to inf for each logit of 89 or more; then the sum is inf, inf / inf is NaN
       * and a finite exp / inf is 0: say how many weights are NaN, not "the weights" */
      var infs = e.filter(function (p) { return p === Infinity; }).length;
      var nans = naive.filter(function (p) { return Number.isNaN(p); }).length;
      var words = ["no weight", "one weight", "two weights", "all three weights"];
      var broken = infs > 0
        ? "overflows: exp is inf in float32 for " + (infs === 1 ? "x" : infs === 2 ? "x and x \u2212 1" : "all three logits") +
          ", so the sum is inf and " + words[nans] + (nans === 1 ? " is" : " are") + " NaN (inf / inf)" +
          (nans < 3 ? ", the " + (3 - nans === 1 ? "other" : "others") + " 0 (a finite number / inf)" : "")
        : "still works";
      live2.dataset.nan = String(nans);
      live2.textContent = "x = " + s.x + ": the naive softmax " + broken + "; the stable one gives " +
        stable.map(function (p) { return C.fmt(p, 3); }).join(", ") + ".";
    }
    update();
    update2();
  };
})();
