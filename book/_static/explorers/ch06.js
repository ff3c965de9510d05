/* Chapter 06: split into heads. x has L tokens of D features; value t.f is token t's feature f.
 * The right split is reshape (L, h, d) then transpose to (h, L, d); the wrong one reshapes to
 * (h, L, d) directly and mixes tokens inside a head. */
(function () {
  "use strict";
  var C = window.CourseExplorers;
  var L = 3, D = 8;
  C.registry["ch06-heads"] = function (root) {
    var x = [];
    for (var t = 0; t < L; t++) { var row = []; for (var f = 0; f < D; f++) row.push(C.f32(t + 1 + f / 10)); x.push(row); }
    var s = { h: 2 };
    var controls = C.el("div", { class: "ce-controls" });
    root.appendChild(controls);
    C.select(controls, { name: "heads", label: "heads h (d = D / h features each)", value: 2,
      options: [[1, "1"], [2, "2"], [4, "4"], [8, "8"]], onInput: function (v) { s.h = Number(v); update(); } });
    var input = C.el("div", { class: "ce-tables" });
    root.appendChild(input);
    var cols2 = C.el("div", { class: "ce-columns" });
    var right = C.el("div", { class: "ce-column" }), wrong = C.el("div", { class: "ce-column" });
    cols2.appendChild(right); cols2.appendChild(wrong);
    root.appendChild(cols2);
    var live = C.live(root);
    var names = []; for (var f2 = 0; f2 < D; f2++) names.push("f" + f2);
    var tokens = []; for (var t2 = 0; t2 < L; t2++) tokens.push("token " + (t2 + 1));
    input.appendChild(C.table({ name: "x", caption: "x, shape (L, D) = (3, 8): the value t.f is token t, feature f",
      cols: names, rows: tokens, values: x, digits: 1, shade: function (v) { return Math.floor(v) / (L + 1); } }));

    function update() {
      var h = s.h, d = D / h, flat = [].concat.apply([], x);
      var good = [], bad = [], mixed = 0;
      for (var a = 0; a < h; a++) {
        var g = [], b = [];
        for (var t = 0; t < L; t++) {
          var gr = [], br = [];
          for (var c = 0; c < d; c++) { gr.push(x[t][a * d + c]); br.push(flat[a * L * d + t * d + c]); }
          g.push(gr); b.push(br);
          if (br.some(function (v) { return Math.floor(v) !== Math.floor(br[0]); }) ||
              Math.floor(br[0]) !== t + 1) mixed += 0;
        }
        good.push(g); bad.push(b);
      }
      var badRows = 0;
      bad.forEach(function (head) { head.forEach(function (row, t) {
        if (row.some(function (v) { return Math.floor(v) !== t + 1; })) badRows++; }); });
      C.setInputs(root, { x: x, heads: h });
      right.innerHTML = ""; wrong.innerHTML = "";
      right.appendChild(C.el("p", { class: "ce-col-title", text: "Right: x.view(L, h, d).transpose(0, 1)" }));
      wrong.appendChild(C.el("p", { class: "ce-col-title", text: "Wrong: x.view(h, L, d)" }));
      var cn = []; for (var c2 = 0; c2 < d; c2++) cn.push("c" + c2);
      for (var a2 = 0; a2 < h; a2++) {
        right.appendChild(C.table({ name: "right-" + a2, caption: "head " + (a2 + 1), cols: cn, rows: tokens, values: good[a2],
          digits: 1, shade: function (v) { return Math.floor(v) / (L + 1); } }));
        wrong.appendChild(C.table({ name: "wrong-" + a2, caption: "head " + (a2 + 1), cols: cn, rows: tokens, values: bad[a2],
          digits: 1, shade: function (v) { return Math.floor(v) / (L + 1); } }));
      }
      live.textContent = h + (h === 1 ? " head of " : " heads of ") + d + " features. Right split: every row of every head is one token. Wrong split: " +
        badRows + " of " + h * L + " rows hold another token's features" + (badRows ? "." : " (with one head the two agree).");
    }
    update();
  };
})();
