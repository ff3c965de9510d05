/* Shared pieces of the course's explorers: labelled controls, tables whose cells carry their
 * exact values (data-value, read by tests/site/test_explorers.py), a live region, the stable
 * softmax and a seeded random generator. Loaded by loader.js when the first explorer opens. */
(function () {
  "use strict";
  var C = (window.CourseExplorers = window.CourseExplorers || {});
  C.registry = C.registry || {};
  var uid = 0;

  C.el = function (tag, attrs) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "html") node.innerHTML = attrs[k];
      else if (k === "class") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    for (var i = 2; i < arguments.length; i++) if (arguments[i]) node.appendChild(arguments[i]);
    return node;
  };

  C.fmt = function (x, digits) {
    if (x === Infinity) return "inf";
    if (x === -Infinity) return "\u2212inf";
    if (Number.isNaN(x)) return "NaN";
    var d = digits === undefined ? 4 : digits;
    var s = Math.abs(x) >= 1e5 || (Math.abs(x) < 1e-3 && x !== 0) ? x.toExponential(d - 1) : x.toFixed(d);
    return s.replace(/-/g, "\u2212"); /* minus signs, the exponent's too */
  };

  /* A range slider with its label and the value shown beside it. */
  C.slider = function (parent, o) {
    var id = "ce-" + ++uid;
    var input = C.el("input", { type: "range", id: id, min: o.min, max: o.max, step: o.step, value: o.value,
      "data-knob": o.name });
    var out = C.el("output", { for: id, class: "ce-value" });
    var show = function () {
      var text = (o.format || function (v) { return String(v); })(Number(input.value));
      out.textContent = text;
      input.setAttribute("aria-valuetext", text);
    };
    input.addEventListener("input", function () { show(); o.onInput(Number(input.value)); });
    show();
    parent.appendChild(C.el("div", { class: "ce-control" }, C.el("label", { for: id, text: o.label }), input, out));
    return input;
  };

  C.select = function (parent, o) {
    var id = "ce-" + ++uid;
    var sel = C.el("select", { id: id, "data-knob": o.name });
    o.options.forEach(function (opt) {
      var option = C.el("option", { value: opt[0], text: opt[1] });
      if (String(opt[0]) === String(o.value)) option.selected = true;
      sel.appendChild(option);
    });
    sel.addEventListener("change", function () { o.onInput(sel.value); });
    parent.appendChild(C.el("div", { class: "ce-control" }, C.el("label", { for: id, text: o.label }), sel));
    return sel;
  };

  C.checkbox = function (parent, o) {
    var id = "ce-" + ++uid;
    var box = C.el("input", { type: "checkbox", id: id, "data-knob": o.name });
    box.checked = !!o.value;
    box.addEventListener("change", function () { o.onInput(box.checked); });
    parent.appendChild(C.el("div", { class: "ce-control ce-check" }, box, C.el("label", { for: id, text: o.label })));
    return box;
  };

  C.button = function (parent, label, onClick, name) {
    var b = C.el("button", { type: "button", class: "ce-button", text: label, "data-knob": name || label });
    b.addEventListener("click", onClick);
    parent.appendChild(b);
    return b;
  };

  C.live = function (parent) {
    var p = C.el("p", { class: "ce-live", role: "status", "aria-live": "polite" });
    parent.appendChild(p);
    return p;
  };

  /* A table of numbers: rows x cols, each cell showing the value rounded (or as o.text(v, i, j)
   * writes it) and holding it exactly. */
  C.table = function (o) {
    var wrap = C.el("div", { class: "ce-table-wrap", tabindex: "0", role: "region", "aria-label": o.caption });
    var table = C.el("table", { class: "ce-table", "data-name": o.name });
    /* the caption is read from the table; the one seen sits above the scrolling part, so that a
     * table wider than a phone's screen does not cut its caption off */
    table.appendChild(C.el("caption", { class: "ce-visually-hidden", text: o.caption }));
    if (o.cols) {
      var head = C.el("tr", {}, C.el("td", {}));
      o.cols.forEach(function (c) { head.appendChild(C.el("th", { scope: "col", text: c })); });
      table.appendChild(C.el("thead", {}, head));
    }
    var tbody = C.el("tbody");
    o.values.forEach(function (row, i) {
      var tr = C.el("tr", {}, C.el("th", { scope: "row", text: o.rows ? o.rows[i] : String(i) }));
      row.forEach(function (v, j) {
        var text = o.text ? o.text(v, i, j) : C.fmt(v, o.digits); /* o.text: a column of counts, say */
        var td = C.el("td", { "data-value": String(v), "data-row": i, "data-col": j, text: text });
        if (o.shade) {
          var a = Math.max(0, Math.min(1, o.shade(v, i, j)));
          var bg = C.shadeColor(a);
          td.style.background = "rgb(" + bg.join(",") + ")";
          td.style.color = C.textOn(bg); /* black or white, whichever contrasts more (at least 4.5:1) */
        }
        tr.appendChild(td);
      });
      tbody.appendChild(tr);
    });
    table.appendChild(tbody);
    wrap.appendChild(table);
    return C.el("div", { class: "ce-table-box" }, C.el("p", { class: "ce-caption", "aria-hidden": "true", text: o.caption }), wrap);
  };

  /* The course's blue (#0b5394) at strength a in [0, 1] over white. */
  C.shadeColor = function (a) {
    return [11, 83, 148].map(function (c) { return Math.round(255 + (c - 255) * 0.9 * a); });
  };
  function luminance(rgb) {
    var l = rgb.map(function (c) { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); });
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
  }
  C.textOn = function (rgb) {
    var L = luminance(rgb);
    return (1.05 / (L + 0.05)) > ((L + 0.05) / 0.05) ? "#fff" : "#000";
  };

  C.replace = function (holder, node) {
    holder.innerHTML = "";
    holder.appendChild(node);
  };

  /* The numerically stable softmax of one row (the course's, chapter 04): exp(x - max) / sum.
   * A row of -inf only gives zeros (attnlib's convention for a query that may attend to nothing). */
  C.softmax = function (row) {
    var m = Math.max.apply(null, row);
    if (m === -Infinity) return row.map(function () { return 0; });
    var e = row.map(function (x) { return Math.exp(x - m); });
    var s = e.reduce(function (a, b) { return a + b; }, 0);
    return e.map(function (x) { return x / s; });
  };

  C.dot = function (a, b) {
    var s = 0;
    for (var i = 0; i < a.length; i++) s += a[i] * b[i];
    return s;
  };

  /* mulberry32: a small seeded generator, so the page's "random" vectors are the same for everyone. */
  C.rng = function (seed) {
    var a = seed >>> 0;
    return function () {
      a = (a + 0x6d2b79f5) >>> 0;
      var t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  };
  C.gauss = function (rand) {
    var u = 1 - rand(), v = rand();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  };
  /* Rounded to float32, so that the test's float32 tensors hold exactly the page's inputs. */
  C.f32 = function (x) { return Math.fround(x); };

  C.setInputs = function (root, inputs) { root.dataset.inputs = JSON.stringify(inputs); };
})();
