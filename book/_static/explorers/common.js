/* Shared pieces of the course's explorers: labelled controls, tables whose cells carry their
 * exact values (data-value, read by tests/site/test_explorers.py), a live region, the stable
 * softmax, a seeded random generator, and the small decoder's checks and forward pass that
 * chapters 10 and 12 run (C.lm). Loaded by loader.js when the first explorer opens. */
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

  C.argmax = function (row) { var b = 0; for (var i = 1; i < row.length; i++) if (row[i] > row[b]) b = i; return b; };

  /* --- attnlib.chapters.tiny_lm.TinyDecoderLM, for chapters 10 and 12 (ch10.js, ch12.js) --------
   * Each chapter reads its own file format into a config and float32 tensors; C.lm checks the
   * config and the tensors' names and shapes, and C.lm.step is the one hand-written forward pass
   * (token embedding + learned positions + causal Transformer blocks + LayerNorm + head), one
   * token at a time with a KV cache, in float64. */
  function positiveInt(c, key) {
    if (!(Number.isInteger(c[key]) && c[key] > 0)) throw new Error("its config gives " + key + " = " + JSON.stringify(c[key]) + ", not a positive whole number");
    return c[key];
  }
  C.lm = {};
  /* A config the page can run, or an Error that says in words why not. */
  C.lm.checkConfig = function (c) {
    if (!c || typeof c !== "object") throw new Error("it has no config");
    ["d_model", "num_heads", "num_layers", "max_len", "vocab_size"].forEach(function (k) { positiveInt(c, k); });
    if (c.d_model % c.num_heads) throw new Error("its config splits d_model = " + c.d_model + " into " + c.num_heads + " heads, which does not divide");
    if (c.feed_forward) positiveInt(c, "d_ff");
    if (c.layer_norm && !(c.layer_norm_eps > 0)) throw new Error("its config has no LayerNorm eps");
  };
  /* The tensors a model of this config has, with their shapes. */
  C.lm.shapes = function (c) {
    var D = c.d_model, V = c.vocab_size, F = c.d_ff, out = {};
    out["embed.weight"] = [V, D];
    out["positions.weight"] = [c.max_len, D];
    for (var l = 0; l < c.num_layers; l++) {
      var pre = "blocks." + l + ".";
      ["q_proj", "k_proj", "v_proj", "out_proj"].forEach(function (n) {
        out[pre + "attn." + n + ".weight"] = [D, D];
        out[pre + "attn." + n + ".bias"] = [D];
      });
      if (c.feed_forward) {
        out[pre + "linear1.weight"] = [F, D]; out[pre + "linear1.bias"] = [F];
        out[pre + "linear2.weight"] = [D, F]; out[pre + "linear2.bias"] = [D];
      }
      if (c.layer_norm) {
        out[pre + "norm1.weight"] = [D]; out[pre + "norm1.bias"] = [D];
        if (c.feed_forward) { out[pre + "norm2.weight"] = [D]; out[pre + "norm2.bias"] = [D]; }
      }
    }
    if (c.final_norm) { out["norm.weight"] = [D]; out["norm.bias"] = [D]; }
    out["head.weight"] = [V, D];
    out["head.bias"] = [V];
    return out;
  };
  /* The model's tensors, checked against config c before anything runs: entry(name) is the file's
   * entry for a tensor ({ shape: [...], ... }) or nothing, read(name, entry, n) its n float32 values
   * (or an Error in words). A missing tensor, a shape that disagrees with the config, a NaN or an
   * infinity is an Error that says so. */
  C.lm.read = function (c, entry, read) {
    var want = C.lm.shapes(c), t = {};
    Object.keys(want).forEach(function (k) {
      var got = entry(k);
      if (!got) throw new Error("it has no tensor " + k + ", which its config needs");
      if (JSON.stringify(got.shape) !== JSON.stringify(want[k]))
        throw new Error("tensor " + k + " has shape " + JSON.stringify(got.shape) + " but its config needs " + JSON.stringify(want[k]));
      var n = want[k].reduce(function (a, b) { return a * b; }, 1), values = read(k, got, n);
      for (var i = 0; i < n; i++) if (!isFinite(values[i])) throw new Error("tensor " + k + " holds a NaN or infinite value");
      t[k] = { shape: want[k], data: values };
    });
    return t;
  };
  /* torch's Linear: W (out, in), y = W x + b; t: the tensors by name. */
  function linear(t, name, x) {
    var W = t[name + ".weight"], b = t[name + ".bias"], n = W.shape[1], rows = W.shape[0], out = new Array(rows), w = W.data;
    for (var o = 0; o < rows; o++) {
      var s = b ? b.data[o] : 0, off = o * n;
      for (var i = 0; i < n; i++) s += w[off + i] * x[i];
      out[o] = s;
    }
    return out;
  }
  function norm(t, eps, name, x) {
    if (!t[name + ".weight"]) return x; /* nn.Identity (no LayerNorm; checked against the config) */
    var n = x.length, mean = 0, v = 0, g = t[name + ".weight"].data, b = t[name + ".bias"].data;
    for (var i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (var j = 0; j < n; j++) v += (x[j] - mean) * (x[j] - mean);
    v /= n;
    var r = 1 / Math.sqrt(v + eps);
    return x.map(function (xi, k) { return (xi - mean) * r * g[k] + b[k]; });
  }
  /* The reader's own model, from the file input o.file: read as text (o.text) or bytes, made into a
   * model and tried by o.trial(contents), which returns { model, st } (st: its trial run) or throws
   * an Error in words; then o.use(model, message, st). A file that fails says why in o.status and
   * in o.root's data-load-error, and the model in use (o.current()) stays. */
  C.lm.ownFile = function (o) {
    o.file.addEventListener("change", function () {
      var f = o.file.files && o.file.files[0];
      if (!f) return;
      if (o.before) o.before();
      var reader = new FileReader();
      reader.onload = function () {
        var tried;
        try { tried = o.trial(reader.result); } catch (err) {
          o.status.textContent = "Could not load " + f.name + ": " + err.message + ". Still running " + o.current().name + ".";
          o.root.dataset.loadError = err.message;
          o.file.value = "";
          return;
        }
        delete o.root.dataset.loadError;
        o.use(tried.model, "Loaded " + f.name + ": " + tried.model.name + ", " + tried.model.params + " parameters. ", tried.st);
        o.file.value = "";
      };
      reader.onerror = function () { o.status.textContent = "Could not read " + f.name + ". Still running " + o.current().name + "."; };
      if (o.text) reader.readAsText(f);
      else reader.readAsArrayBuffer(f);
    });
  };
  /* A fresh decoding state: the tokens fed so far and one KV cache per layer. */
  C.lm.start = function (c) {
    var caches = [];
    for (var l = 0; l < c.num_layers; l++) caches.push({ k: [], v: [] });
    return { tokens: [], caches: caches };
  };
  /* Feed one token at the next position of state st (from C.lm.start) through the model of config
   * c and tensors t: append its keys and values to every layer's cache and the token to st.tokens.
   * Returns its logits and, per layer, every head's weights over the cache ([layer][head][key]). */
  C.lm.step = function (c, t, st, token) {
    var D = c.d_model, H = c.num_heads, hd = D / H, p = st.tokens.length, scale = Math.sqrt(hd);
    if (p >= c.max_len) throw new Error("the model has positions 0.." + (c.max_len - 1) + " only");
    var E = t["embed.weight"].data, P = t["positions.weight"].data, x = new Array(D), attention = [];
    for (var i = 0; i < D; i++) x[i] = E[token * D + i] + P[p * D + i];
    for (var l = 0; l < c.num_layers; l++) {
      var pre = "blocks." + l + ".", cache = st.caches[l];
      var y = c.norm_first ? norm(t, c.layer_norm_eps, pre + "norm1", x) : x;
      var q = linear(t, pre + "attn.q_proj", y), k = linear(t, pre + "attn.k_proj", y), v = linear(t, pre + "attn.v_proj", y);
      cache.k.push(k); cache.v.push(v);
      var heads = [], concat = new Array(D).fill(0);
      for (var h = 0; h < H; h++) {
        var scores = new Array(cache.k.length);
        for (var j = 0; j < cache.k.length; j++) {
          var s = 0, key = cache.k[j];
          for (var d = 0; d < hd; d++) s += q[h * hd + d] * key[h * hd + d];
          scores[j] = s / scale;
        }
        var w = C.softmax(scores);
        heads.push(w);
        for (var d2 = 0; d2 < hd; d2++) {
          var s2 = 0;
          for (var j2 = 0; j2 < w.length; j2++) s2 += w[j2] * cache.v[j2][h * hd + d2];
          concat[h * hd + d2] = s2;
        }
      }
      attention.push(heads);
      var a = linear(t, pre + "attn.out_proj", concat);
      x = c.residual ? x.map(function (xi, m) { return xi + a[m]; }) : a;
      if (!c.norm_first) x = norm(t, c.layer_norm_eps, pre + "norm1", x);
      if (c.feed_forward) {
        var y2 = c.norm_first ? norm(t, c.layer_norm_eps, pre + "norm2", x) : x;
        var hdn = linear(t, pre + "linear1", y2).map(function (u) { return u > 0 ? u : 0; });
        var f = linear(t, pre + "linear2", hdn);
        x = c.residual ? x.map(function (xi, m) { return xi + f[m]; }) : f;
        if (!c.norm_first) x = norm(t, c.layer_norm_eps, pre + "norm2", x);
      }
    }
    var logits = linear(t, "head", c.final_norm ? norm(t, c.layer_norm_eps, "norm", x) : x);
    st.tokens.push(token);
    return { logits: logits, attention: attention };
  };
})();
