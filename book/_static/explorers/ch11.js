/* Chapter 11: the chapter's Vision Transformer in the page, on a test digit or one you draw.
 *
 * A hand-written forward pass of attnlib.chapters.vit.TinyViT: the 8x8 image cut into 2x2
 * patches (attnlib.patchify's order), each patch mapped linearly to a token, the class token
 * put first, learned positions added, the pre-norm Transformer blocks (no mask), a LayerNorm
 * and the linear head on the class token. It shows the class token's attention in every head
 * and the attention rollout (attnlib.attention_rollout: each block's heads averaged, half
 * identity for the residual path, multiplied through the blocks) beside the mean maps: the
 * same maps averaged over the chapter's 360 test images, what position alone would give.
 * Weights, test digits and mean maps come from attnlib.chapters.vit_export (written at the
 * build); the arithmetic is float64 on the float32 weights. */
(function () {
  "use strict";
  var C = window.CourseExplorers;

  function decode(name, t, shape) {
    if (!t || !Array.isArray(t.shape) || typeof t.data !== "string") throw new Error("it has no tensor " + name);
    if (JSON.stringify(t.shape) !== JSON.stringify(shape))
      throw new Error("tensor " + name + " has shape " + JSON.stringify(t.shape) + " but its config needs " + JSON.stringify(shape));
    var bin = atob(t.data), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var values = new Float32Array(bytes.buffer), n = shape.reduce(function (a, b) { return a * b; }, 1);
    if (values.length !== n) throw new Error("tensor " + name + " holds " + values.length + " numbers, not " + n);
    for (var j = 0; j < n; j++) if (!isFinite(values[j])) throw new Error("tensor " + name + " holds a NaN or infinite value");
    return values;
  }

  /* The tensors of a TinyViT of this config (attnlib.chapters.vit), with their shapes. */
  function expectedTensors(c) {
    var D = c.d_model, F = c.d_ff, N = Math.pow(c.image_size / c.patch_size, 2), P = c.in_channels * c.patch_size * c.patch_size;
    var out = { cls_token: [1, 1, D], "patches.proj.weight": [D, P], "patches.proj.bias": [D] };
    if (c.positions) out["positions.weight"] = [N + 1, D];
    for (var l = 0; l < c.num_layers; l++) {
      var pre = "blocks." + l + ".";
      ["q_proj", "k_proj", "v_proj", "out_proj"].forEach(function (n) {
        out[pre + "attn." + n + ".weight"] = [D, D];
        out[pre + "attn." + n + ".bias"] = [D];
      });
      out[pre + "linear1.weight"] = [F, D]; out[pre + "linear1.bias"] = [F];
      out[pre + "linear2.weight"] = [D, F]; out[pre + "linear2.bias"] = [D];
      ["norm1", "norm2"].forEach(function (n) { out[pre + n + ".weight"] = [D]; out[pre + n + ".bias"] = [D]; });
    }
    out["norm.weight"] = [D]; out["norm.bias"] = [D];
    out["head.weight"] = [c.num_classes, D]; out["head.bias"] = [c.num_classes];
    return out;
  }

  function Model(data) {
    if (!data || data.format !== "attnlib-tiny-vit" || data.version !== 1) throw new Error("it is not a file written by attnlib.chapters.vit_export");
    var c = data.config;
    ["image_size", "patch_size", "in_channels", "d_model", "num_heads", "d_ff", "num_layers", "num_classes"].forEach(function (k) {
      if (!(Number.isInteger(c[k]) && c[k] > 0)) throw new Error("its config gives " + k + " = " + JSON.stringify(c[k]));
    });
    if (c.d_model % c.num_heads || c.image_size % c.patch_size || c.in_channels !== 1) throw new Error("its config does not describe one-channel square patches and whole heads");
    this.c = c;
    this.name = data.name || "the chapter's ViT";
    this.side = c.image_size / c.patch_size; /* patches per row */
    this.N = this.side * this.side;
    var want = expectedTensors(c), t = {};
    Object.keys(want).forEach(function (k) { t[k] = { shape: want[k], data: decode(k, data.tensors[k], want[k]) }; });
    this.t = t;
    var test = data.test, L = c.num_layers, H = c.num_heads;
    this.levels = data.grey_levels;
    this.test = {
      n: test.n_images,
      accuracy: test.accuracy,
      examples: test.examples,
      attention: decode("mean_attention", test.mean_attention, [L, H, this.N + 1]),
      rollout: decode("mean_rollout", test.mean_rollout, [this.N + 1]),
      rolloutNormalised: decode("mean_rollout_normalised", test.mean_rollout_normalised, [this.N])
    };
  }
  Model.prototype.linear = function (name, x) { /* torch's Linear: W (out, in), y = W x + b */
    var W = this.t[name + ".weight"], b = this.t[name + ".bias"], n = W.shape[1], out = new Array(W.shape[0]);
    for (var o = 0; o < W.shape[0]; o++) {
      var s = b.data[o], off = o * n;
      for (var i = 0; i < n; i++) s += W.data[off + i] * x[i];
      out[o] = s;
    }
    return out;
  };
  Model.prototype.norm = function (name, x) { /* LayerNorm over the features */
    var n = x.length, mean = 0, v = 0, g = this.t[name + ".weight"].data, b = this.t[name + ".bias"].data;
    for (var i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (var j = 0; j < n; j++) v += (x[j] - mean) * (x[j] - mean);
    var r = 1 / Math.sqrt(v / n + this.c.layer_norm_eps);
    return x.map(function (xi, k) { return (xi - mean) * r * g[k] + b[k]; });
  };
  /* The patches of an image (rows of grey levels): patch n is patch-row n / side, patch-column
   * n % side, its pixels row by row (attnlib.patchify, one channel). */
  Model.prototype.patchify = function (pixels) {
    var p = this.c.patch_size, side = this.side, levels = this.levels, out = [];
    for (var n = 0; n < this.N; n++) {
      var r0 = Math.floor(n / side) * p, c0 = (n % side) * p, patch = [];
      for (var r = 0; r < p; r++) for (var q = 0; q < p; q++) patch.push(pixels[r0 + r][c0 + q] / levels);
      out.push(patch);
    }
    return out;
  };
  /* The forward pass: logits, every head's attention (layer, head, query, key), the rollout. */
  Model.prototype.run = function (pixels) {
    var c = this.c, D = c.d_model, H = c.num_heads, hd = D / H, T = this.N + 1, self = this;
    var patches = this.patchify(pixels);
    var x = [Array.prototype.slice.call(this.t.cls_token.data)].concat(patches.map(function (pt) { return self.linear("patches.proj", pt); }));
    if (c.positions) {
      var P = this.t["positions.weight"].data;
      x = x.map(function (row, i) { return row.map(function (v, d) { return v + P[i * D + d]; }); });
    }
    var attention = [];
    for (var l = 0; l < c.num_layers; l++) {
      var pre = "blocks." + l + ".";
      var y = x.map(function (row) { return self.norm(pre + "norm1", row); });
      var q = y.map(function (row) { return self.linear(pre + "attn.q_proj", row); });
      var k = y.map(function (row) { return self.linear(pre + "attn.k_proj", row); });
      var v = y.map(function (row) { return self.linear(pre + "attn.v_proj", row); });
      var heads = [], concat = x.map(function () { return new Array(D).fill(0); });
      for (var h = 0; h < H; h++) {
        var weights = [];
        for (var i = 0; i < T; i++) {
          var scores = [];
          for (var j = 0; j < T; j++) {
            var s = 0;
            for (var d = 0; d < hd; d++) s += q[i][h * hd + d] * k[j][h * hd + d];
            scores.push(s / Math.sqrt(hd));
          }
          var w = C.softmax(scores);
          weights.push(w);
          for (var d2 = 0; d2 < hd; d2++) {
            var acc = 0;
            for (var j2 = 0; j2 < T; j2++) acc += w[j2] * v[j2][h * hd + d2];
            concat[i][h * hd + d2] = acc;
          }
        }
        heads.push(weights);
      }
      attention.push(heads);
      x = x.map(function (row, i2) {
        var a = self.linear(pre + "attn.out_proj", concat[i2]), r = row.map(function (xi, m) { return xi + a[m]; });
        var hidden = self.linear(pre + "linear1", self.norm(pre + "norm2", r)).map(function (u) { return u > 0 ? u : 0; });
        var f = self.linear(pre + "linear2", hidden);
        return r.map(function (xi, m) { return xi + f[m]; });
      });
    }
    var logits = this.linear("head", this.norm("norm", x[0]));
    return { patches: patches, logits: logits, attention: attention, rollout: rolloutRow(attention, T) };
  };

  /* attnlib.attention_rollout's class-token row: A_l = 0.5 mean_h W_h + 0.5 I, R = A_n ... A_1. */
  function rolloutRow(attention, T) {
    var R = null;
    attention.forEach(function (heads) {
      var A = [];
      for (var i = 0; i < T; i++) {
        A.push([]);
        for (var j = 0; j < T; j++) {
          var m = 0;
          for (var h = 0; h < heads.length; h++) m += heads[h][i][j];
          A[i].push(0.5 * (m / heads.length) + (i === j ? 0.5 : 0));
        }
      }
      if (!R) { R = A; return; }
      var next = [];
      for (var i2 = 0; i2 < T; i2++) {
        next.push([]);
        for (var j2 = 0; j2 < T; j2++) {
          var s = 0;
          for (var k = 0; k < T; k++) s += A[i2][k] * R[k][j2];
          next[i2].push(s);
        }
      }
      R = next;
    });
    return R[0];
  }

  /* three decimals, a minus sign for a minus (no exponents: these are shares between 0 and 1) */
  function fixed(v) { return v.toFixed(3).replace(/-/g, "\u2212"); }

  var argmax = C.argmax;
  function grid(values, side) { /* a row of N patch values -> side x side rows */
    var out = [];
    for (var r = 0; r < side; r++) out.push(Array.prototype.slice.call(values, r * side, (r + 1) * side));
    return out;
  }

  C.ch11 = { Model: Model }; /* the forward pass alone, for tests/site/test_explorer_ch11.py (run in Node) */

  C.registry["ch11-vit"] = function (root, ctx) {
    var status = C.el("p", { class: "ce-live", role: "status", "aria-live": "polite", text: "Loading the chapter's ViT\u2026" });
    root.appendChild(status);
    return fetch(ctx.base + "models/ch11-vit.json").then(function (r) {
      if (!r.ok) throw new Error("the chapter's model file is missing (" + r.status + ")");
      return r.json();
    }).then(function (data) { build(root, new Model(data), status); });
  };

  function build(root, model, status) {
    var c = model.c, size = c.image_size, side = model.side, p = c.patch_size, full = model.levels;
    var examples = model.test.examples;
    var axis = []; /* a map's rows and columns: the patch grid's */
    for (var a = 0; a < side; a++) axis.push(String(a + 1));
    var s = { pixels: examples[0].pixels.map(function (row) { return row.slice(); }), example: 0, drawn: false, r: 0, col: 0 };

    var controls = C.el("div", { class: "ce-controls" });
    root.insertBefore(controls, status);
    var pick = C.select(controls, { name: "digit", label: "a test digit", value: 0,
      options: examples.map(function (e, i) { return [i, "a " + e.label + " (test image " + e.index + ")"]; }).concat([["drawn", "your drawing"]]),
      /* "your drawing" chosen before anything is drawn starts one from a blank grid */
      onInput: function (v) { if (v !== "drawn") load(Number(v)); else if (!s.drawn) clearGrid(false); } });
    var buttons = C.el("div", { class: "ce-buttons" });
    root.insertBefore(buttons, status);
    function clearGrid(focus) {
      s.pixels = s.pixels.map(function (row) { return row.map(function () { return 0; }); });
      s.drawn = true;
      update();
      if (focus) focusCell(s.r, s.col);
    }
    C.button(buttons, "Clear the grid (draw your own)", function () { clearGrid(true); }, "clear");

    var helpId = "ce-draw-help-" + Math.random().toString(36).slice(2, 8);
    root.insertBefore(C.el("p", { class: "ce-help", id: helpId, text: "Draw on the " + size + "\u00d7" + size + " grid: press a pixel to ink it fully or rub it out. " +
      "With the keyboard: Tab reaches the grid once, the arrow keys move, Space or Enter switches the pixel. The thicker lines cut it into the model's " +
      side * side + " patches of " + p + "\u00d7" + p + " pixels." }), status);
    var draw = C.el("div", { class: "ce-pixels", role: "group", "aria-label": "the image, " + size + " by " + size + " pixels", "aria-describedby": helpId });
    root.insertBefore(draw, status);
    var cells = [];
    for (var r = 0; r < size; r++) {
      cells.push([]);
      for (var q = 0; q < size; q++) {
        (function (i, j) {
          var cls = "ce-pixel" + (j % p === p - 1 && j < size - 1 ? " is-patch-right" : "") + (i % p === p - 1 && i < size - 1 ? " is-patch-bottom" : "");
          var b = C.el("button", { type: "button", class: cls, "data-row": i, "data-col": j, tabindex: i + j === 0 ? "0" : "-1" });
          b.addEventListener("click", function () {
            s.pixels[i][j] = s.pixels[i][j] > 0 ? 0 : full;
            s.drawn = true;
            s.r = i; s.col = j;
            update();
            focusCell(i, j);
          });
          draw.appendChild(b);
          cells[i].push(b);
        })(r, q);
      }
    }
    /* one Tab stop (roving tabindex): the pixel last used keeps tabindex 0 */
    function focusCell(i, j) {
      cells.forEach(function (row) { row.forEach(function (b) { b.tabIndex = -1; }); });
      cells[i][j].tabIndex = 0;
      if (draw.contains(document.activeElement)) cells[i][j].focus();
    }
    draw.addEventListener("keydown", function (e) {
      var t = e.target;
      if (!t.classList || !t.classList.contains("ce-pixel")) return;
      var i = Number(t.dataset.row), j = Number(t.dataset.col);
      var to = { ArrowUp: [i - 1, j], ArrowDown: [i + 1, j], ArrowLeft: [i, j - 1], ArrowRight: [i, j + 1], Home: [i, 0], End: [i, size - 1] }[e.key];
      if (!to) return;
      e.preventDefault();
      s.r = Math.max(0, Math.min(size - 1, to[0]));
      s.col = Math.max(0, Math.min(size - 1, to[1]));
      focusCell(s.r, s.col);
    });

    var view = C.el("div", { class: "ce-vit" });
    root.appendChild(view);

    function load(i) {
      s.example = i;
      s.pixels = examples[i].pixels.map(function (row) { return row.slice(); });
      s.drawn = false;
      update();
    }

    function pair(o) { /* a map of this image beside the mean map, on one scale */
      var top = Math.max.apply(null, o.mine.concat(o.mean).concat([1e-12]));
      var shade = function (v) { return v / top; };
      var box = C.el("div", { class: "ce-pair" });
      box.appendChild(C.table({ name: o.name, caption: o.caption + ": this image", values: grid(o.mine, side), cols: axis, rows: axis, text: fixed, shade: shade }));
      box.appendChild(C.table({ name: "mean-" + o.name, caption: o.caption + ": mean over the test set", values: grid(o.mean, side), cols: axis, rows: axis, text: fixed, shade: shade }));
      return box;
    }

    function update() {
      var px = s.pixels;
      cells.forEach(function (row, i) {
        row.forEach(function (b, j) {
          var a = px[i][j] / full, bg = Math.round(255 * (1 - a));
          b.style.background = "rgb(" + bg + "," + bg + "," + bg + ")";
          b.setAttribute("aria-pressed", px[i][j] > 0 ? "true" : "false");
          b.setAttribute("aria-label", "row " + (i + 1) + ", column " + (j + 1) + ": " + (px[i][j] > 0 ? "ink " + px[i][j] + " of " + full : "blank") +
            " (patch " + (Math.floor(i / p) * side + Math.floor(j / p) + 1) + ")");
        });
      });
      var ex = examples[s.example];
      pick.value = s.drawn ? "drawn" : String(s.example);
      C.setInputs(root, { pixels: px, source: s.drawn ? "drawn" : "test", index: s.drawn ? null : ex.index, label: s.drawn ? null : ex.label });
      var out = model.run(px), T = model.N + 1;
      var probs = C.softmax(out.logits), best = argmax(out.logits);
      var wasOpen = !!view.querySelector("details.ce-patches[open]");
      view.innerHTML = "";

      var classes = out.logits.map(function (_, k) { return String(k); });
      view.appendChild(C.el("h4", { class: "ce-subtitle", text: "What the model says" }));
      view.appendChild(C.table({ name: "classes", caption: "Each class: its probability and its logit", cols: ["probability", "logit"],
        rows: classes, values: probs.map(function (v, k) { return [v, out.logits[k]]; }), text: fixed,
        shade: function (v, i, j) { return j === 0 ? v : 0; } }));

      var patchBox = C.el("details", { class: "ce-patches" }, C.el("summary", { text: "The " + model.N + " patches as the model reads them (" + p * p + " pixels each, 0 to 1)" }));
      patchBox.appendChild(C.table({ name: "patches", caption: "Patch n is patch-row n / " + side + ", patch-column n % " + side + "; its pixels row by row",
        cols: out.patches[0].map(function (_, k) { return "pixel " + (k + 1); }), rows: out.patches.map(function (_, n) { return "patch " + (n + 1); }),
        values: out.patches, digits: 4, shade: function (v) { return v; } }));
      patchBox.open = wasOpen;
      view.appendChild(patchBox);
      view.appendChild(C.el("h4", { class: "ce-subtitle", text: "The class token's attention on the " + model.N + " patches, head by head" }));
      view.appendChild(C.el("p", { class: "ce-help", text: "Each " + side + "\u00d7" + side + " map is one row of attention weights laid on the patch grid, " +
        "beside the same row averaged over the " + model.test.n + " test images: what position alone gives. " +
        "The rest of each row is the class token's weight on itself (the table after the maps)." }));
      var selfRows = [], meanSelf = [];
      out.attention.forEach(function (heads, l) {
        var layerBox = C.el("div", { class: "ce-tables" });
        selfRows.push([]); meanSelf.push([]);
        heads.forEach(function (w, h) {
          var row = w[0], off = (l * c.num_heads + h) * T;
          var mean = Array.prototype.slice.call(model.test.attention, off, off + T);
          selfRows[l].push(row[0]); meanSelf[l].push(mean[0]);
          layerBox.appendChild(pair({ name: "attn-" + l + "-" + h, caption: "Block " + (l + 1) + ", head " + (h + 1), mine: row.slice(1), mean: mean.slice(1) }));
        });
        view.appendChild(C.el("p", { class: "ce-col-title", text: "Block " + (l + 1) }));
        view.appendChild(layerBox);
      });
      var heads = out.attention[0].map(function (_, h) { return "head " + (h + 1); });
      var blocks = out.attention.map(function (_, l) { return "block " + (l + 1); });
      view.appendChild(C.el("div", { class: "ce-tables" },
        C.table({ name: "attn-self", caption: "The class token's weight on itself: this image", cols: heads, rows: blocks, values: selfRows, text: fixed }),
        C.table({ name: "mean-attn-self", caption: "The class token's weight on itself: mean over the test set", cols: heads, rows: blocks, values: meanSelf, text: fixed })));

      view.appendChild(C.el("h4", { class: "ce-subtitle", text: "The attention rollout" }));
      var roll = out.rollout, meanRoll = Array.prototype.slice.call(model.test.rollout);
      view.appendChild(C.el("div", { class: "ce-tables" },
        pair({ name: "rollout", caption: "Rollout of the class token", mine: roll.slice(1), mean: meanRoll.slice(1) }),
        C.table({ name: "rollout-minus-mean", caption: "This image's rollout minus the mean", cols: axis, rows: axis, text: fixed,
          values: grid(roll.slice(1).map(function (v, n) { return v - meanRoll[n + 1]; }), side) })));
      /* the share on ink, as attnlib.chapters.vit_controls measures it: maps normalised over the patches */
      var mass = roll.slice(1).reduce(function (a, b) { return a + b; }, 0);
      var ink = model.patchify(px).map(function (pt) { return pt.some(function (v) { return v > 0; }) ? 1 : 0; });
      var inked = ink.reduce(function (a, b) { return a + b; }, 0);
      var own = 0, byMean = 0;
      ink.forEach(function (on, n) { if (on) { own += roll[n + 1] / mass; byMean += model.test.rolloutNormalised[n]; } });
      var shares = [[own, byMean, inked / model.N]];
      view.appendChild(C.table({ name: "ink", caption: "Share of the rollout on patches with ink (rollout over the patches scaled to sum to 1)",
        cols: ["this image's map", "the mean map", "an even spread"], rows: ["on ink"], values: shares, text: fixed }));

      var what = s.drawn ? "Your drawing" : "Test image " + ex.index + " (labelled " + ex.label + ")";
      status.textContent = what + ": the model says " + best + " with probability " + C.fmt(probs[best], 3) + ". " +
        "Rollout on this image's ink " + C.fmt(own, 3) + ", the mean map's " + C.fmt(byMean, 3) + ", an even spread's " + C.fmt(inked / model.N, 3) +
        (inked ? "." : " (the grid is blank: nothing is ink).") + " The model: " + model.name + ", test accuracy " + C.fmt(model.test.accuracy, 3) + ".";
    }
    update();
  }
})();
