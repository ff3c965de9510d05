/* Chapter 10: the chapter's trained model in the page, or the reader's own.
 *
 * A hand-written forward pass of attnlib.chapters.tiny_lm.TinyDecoderLM (token embedding +
 * learned positions + causal Transformer blocks + LayerNorm + head) that decodes one token
 * at a time with a KV cache: each new token appends its keys and values to every layer's
 * cache and attends to all of them. Weights are float32 (exported by
 * attnlib.chapters.web_export); the arithmetic is float64. */
(function () {
  "use strict";
  var C = window.CourseExplorers;

  function decode(name, b64) {
    var bin;
    try { bin = atob(b64); } catch (err) { throw new Error("tensor " + name + " is not base64 text"); }
    if (bin.length % 4) throw new Error("tensor " + name + " has " + bin.length + " bytes, not a whole number of float32 values");
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Float32Array(bytes.buffer);
  }

  function positiveInt(c, key) {
    if (!(Number.isInteger(c[key]) && c[key] > 0)) throw new Error("its config gives " + key + " = " + JSON.stringify(c[key]) + ", not a positive whole number");
    return c[key];
  }

  /* The tensors a model of this config has, with their shapes (attnlib.chapters.tiny_lm.TinyDecoderLM). */
  function expectedTensors(c) {
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
  }

  /* A model from an exported file, checked against its own config before anything runs: a file
   * that is not one, a missing tensor or one whose shape disagrees with the config is an Error
   * that says so in words (the page then keeps the model it had). */
  function Model(data) {
    if (!data || typeof data !== "object" || data.format !== "attnlib-tiny-lm") throw new Error("it is not a file written by attnlib.chapters.web_export");
    if (data.version !== 1) throw new Error("it has file version " + data.version + "; this page reads version 1");
    var c = data.config;
    if (!c || typeof c !== "object") throw new Error("it has no config");
    ["d_model", "num_heads", "num_layers", "max_len", "vocab_size"].forEach(function (k) { positiveInt(c, k); });
    if (c.d_model % c.num_heads) throw new Error("its config splits d_model = " + c.d_model + " into " + c.num_heads + " heads, which does not divide");
    if (c.feed_forward) positiveInt(c, "d_ff");
    if (c.layer_norm && !(c.layer_norm_eps > 0)) throw new Error("its config has no LayerNorm eps");
    var v = data.vocabulary;
    if (!v || v.letters !== "abcdefgh" || c.vocab_size !== 12 || [v.pad, v.bos, v.sep, v.eos].join() !== "8,9,10,11")
      throw new Error("its vocabulary is not the copy language's (letters a\u2013h and 4 special tokens, 12 in all)");
    if (!data.tensors || typeof data.tensors !== "object") throw new Error("it has no tensors");
    this.name = data.name || "a model";
    this.c = c;
    this.vocab = v;
    var want = expectedTensors(c), t = {};
    this.params = Number.isInteger(data.parameters) ? data.parameters : Object.keys(want).reduce(function (a, k) {
      return a + want[k].reduce(function (x, y) { return x * y; }, 1); }, 0);
    Object.keys(want).forEach(function (k) {
      var got = data.tensors[k];
      if (!got) throw new Error("it has no tensor " + k + ", which its config needs");
      if (JSON.stringify(got.shape) !== JSON.stringify(want[k]))
        throw new Error("tensor " + k + " has shape " + JSON.stringify(got.shape) + " but its config needs " + JSON.stringify(want[k]));
      var values = decode(k, got.data), n = want[k].reduce(function (a, b) { return a * b; }, 1);
      if (values.length !== n) throw new Error("tensor " + k + " holds " + values.length + " numbers; shape " + JSON.stringify(want[k]) + " needs " + n);
      for (var i = 0; i < n; i++) if (!isFinite(values[i])) throw new Error("tensor " + k + " holds a NaN or infinite value");
      t[k] = { shape: want[k], data: values };
    });
    this.t = t;
  }
  Model.prototype.linear = function (name, x) { /* torch's Linear: W (out, in), y = W x + b */
    var W = this.t[name + ".weight"], b = this.t[name + ".bias"], n = W.shape[1], out = new Array(W.shape[0]);
    for (var o = 0; o < W.shape[0]; o++) {
      var s = b ? b.data[o] : 0, off = o * n;
      for (var i = 0; i < n; i++) s += W.data[off + i] * x[i];
      out[o] = s;
    }
    return out;
  };
  Model.prototype.norm = function (name, x) {
    if (!this.t[name + ".weight"]) return x; /* nn.Identity (no LayerNorm; checked against the config) */
    var n = x.length, mean = 0, v = 0, eps = this.c.layer_norm_eps, g = this.t[name + ".weight"].data, b = this.t[name + ".bias"].data;
    for (var i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (var j = 0; j < n; j++) v += (x[j] - mean) * (x[j] - mean);
    v /= n;
    var r = 1 / Math.sqrt(v + eps);
    return x.map(function (xi, k) { return (xi - mean) * r * g[k] + b[k]; });
  };
  /* A fresh decoding state: one KV cache per layer. */
  Model.prototype.start = function () {
    var caches = [];
    for (var l = 0; l < this.c.num_layers; l++) caches.push({ k: [], v: [] });
    return { tokens: [], caches: caches, logits: [], attention: caches.map(function () { return []; }) };
  };
  /* Feed one token at the next position: append to the caches, return its logits. */
  Model.prototype.feed = function (st, token) {
    var c = this.c, D = c.d_model, H = c.num_heads, hd = D / H, p = st.tokens.length;
    if (p >= c.max_len) throw new Error("the model has positions 0.." + (c.max_len - 1) + " only");
    var E = this.t["embed.weight"].data, P = this.t["positions.weight"].data, x = new Array(D);
    for (var i = 0; i < D; i++) x[i] = E[token * D + i] + P[p * D + i];
    for (var l = 0; l < c.num_layers; l++) {
      var pre = "blocks." + l + ".", cache = st.caches[l];
      var y = c.norm_first ? this.norm(pre + "norm1", x) : x;
      var q = this.linear(pre + "attn.q_proj", y), k = this.linear(pre + "attn.k_proj", y), v = this.linear(pre + "attn.v_proj", y);
      cache.k.push(k); cache.v.push(v);
      var heads = [], concat = new Array(D).fill(0);
      for (var h = 0; h < H; h++) {
        var scores = cache.k.map(function (key) {
          var s = 0;
          for (var d = 0; d < hd; d++) s += q[h * hd + d] * key[h * hd + d];
          return s / Math.sqrt(hd);
        });
        var w = C.softmax(scores);
        heads.push(w);
        for (var d2 = 0; d2 < hd; d2++) {
          var s2 = 0;
          for (var j = 0; j < w.length; j++) s2 += w[j] * cache.v[j][h * hd + d2];
          concat[h * hd + d2] = s2;
        }
      }
      st.attention[l].push(heads); /* [position][head][key] */
      var a = this.linear(pre + "attn.out_proj", concat);
      x = c.residual ? x.map(function (xi, m) { return xi + a[m]; }) : a;
      if (!c.norm_first) x = this.norm(pre + "norm1", x);
      if (c.feed_forward) {
        var y2 = c.norm_first ? this.norm(pre + "norm2", x) : x;
        var hdn = this.linear(pre + "linear1", y2).map(function (u) { return u > 0 ? u : 0; });
        var f = this.linear(pre + "linear2", hdn);
        x = c.residual ? x.map(function (xi, m) { return xi + f[m]; }) : f;
        if (!c.norm_first) x = this.norm(pre + "norm2", x);
      }
    }
    var logits = this.linear("head", c.final_norm ? this.norm("norm", x) : x);
    st.tokens.push(token);
    st.logits.push(logits);
    return logits;
  };
  Model.prototype.tokenName = function (t) {
    var v = this.vocab;
    if (t < v.letters.length) return v.letters[t];
    return { 8: "<pad>", 9: "<bos>", 10: "|", 11: "<eos>" }[t] || ("#" + t);
  };

  function argmax(row) { var b = 0; for (var i = 1; i < row.length; i++) if (row[i] > row[b]) b = i; return b; }

  C.registry["ch10-model"] = function (root, ctx) {
    var status = C.el("p", { class: "ce-live", role: "status", "aria-live": "polite", text: "Loading the chapter's model\u2026" });
    root.appendChild(status);
    return fetch(ctx.base + "models/ch10-copy.json").then(function (r) {
      if (!r.ok) throw new Error("the chapter's model file is missing (" + r.status + ")");
      return r.json();
    }).then(function (data) { build(root, new Model(data), status); });
  };

  /* Run a model on <bos> word | : its decoding state, or an Error in words (no number may be NaN). */
  function prompt(model, word) {
    if (word.length + 2 > model.c.max_len)
      throw new Error(model.name + " has positions 0.." + (model.c.max_len - 1) + " only: too few for <bos>, " + word.length + " letters and |");
    var st = model.start();
    model.feed(st, model.vocab.bos);
    word.split("").forEach(function (ch) { model.feed(st, model.vocab.letters.indexOf(ch)); });
    var last = model.feed(st, model.vocab.sep);
    if (!last.every(isFinite)) throw new Error(model.name + " gives NaN or infinite logits");
    return st;
  }

  function build(root, model, status) {
    var chapterModel = model;
    root.dataset.model = "chapter";
    var s = { word: "abcde", st: null };
    var controls = C.el("div", { class: "ce-controls" });
    root.insertBefore(controls, status);
    var wordId = "ce-word-" + Math.random().toString(36).slice(2, 8);
    var word = C.el("input", { type: "text", id: wordId, value: s.word, maxlength: "8", autocomplete: "off", spellcheck: "false",
      "data-knob": "word", pattern: "[a-h]{1,8}", "aria-describedby": wordId + "-help" });
    controls.appendChild(C.el("div", { class: "ce-control" }, C.el("label", { for: wordId, text: "a word of letters a\u2013h (up to 8)" }), word,
      C.el("span", { id: wordId + "-help", class: "ce-help", text: "The chapter trained on words of 3 to 8 letters." })));
    var buttons = C.el("div", { class: "ce-buttons" });
    root.insertBefore(buttons, status);
    C.button(buttons, "Start: <bos> word |", function () { restart(); }, "start");
    var stepBtn = C.button(buttons, "Next token (greedy)", function () { step(); }, "step");
    var runBtn = C.button(buttons, "Run to <eos>", function () { var n = 0; while (!finished() && n++ < 32) step(true); render(); }, "run");
    var off = C.el("div", { class: "ce-buttons" });
    root.insertBefore(off, status);
    var forceSel = C.select(off, { name: "force", label: "put it off track: write instead", value: 0,
      options: model.vocab.letters.split("").map(function (ch, i) { return [i, ch]; }).concat([[model.vocab.eos, "<eos>"]]),
      onInput: function () {} });
    var forceBtn = C.button(off, "Write this token", function () { force(Number(forceSel.value)); }, "write");
    var fileId = "ce-file-" + Math.random().toString(36).slice(2, 8);
    var file = C.el("input", { type: "file", id: fileId, accept: ".json,application/json", "data-knob": "file" });
    root.insertBefore(C.el("div", { class: "ce-control ce-file" },
      C.el("label", { for: fileId, text: "Your own model (a file from web_export.export_model in the exercise notebook)" }), file), status);
    /* always enabled (a disabled button cannot take focus): on the chapter's model it restarts it */
    var back = C.button(C.el("div"), "Back to the chapter's model", function () { use(chapterModel, "chapter"); }, "chapter-model");
    root.insertBefore(C.el("div", { class: "ce-buttons" }, back), status);
    var modelLine = C.el("p", { class: "ce-model" });
    root.insertBefore(modelLine, status);
    var view = C.el("div", { class: "ce-lm" });
    root.appendChild(view);

    file.addEventListener("change", function () {
      var f = file.files && file.files[0];
      if (!f) return;
      var reader = new FileReader();
      reader.onload = function () {
        var data, candidate;
        try {
          try { data = JSON.parse(reader.result); } catch (err) { throw new Error("it is not JSON text (a file from web_export.export_model is)"); }
          candidate = new Model(data);
          prompt(candidate, s.word); /* a trial run before the swap: it must give numbers */
        } catch (err) {
          status.textContent = "Could not load " + f.name + ": " + err.message + ". Still running " + model.name + ".";
          root.dataset.loadError = err.message;
          file.value = "";
          return;
        }
        delete root.dataset.loadError;
        use(candidate, "own", "Loaded " + f.name + ": " + candidate.name + ", " + candidate.params + " parameters. ");
        file.value = "";
      };
      reader.onerror = function () { status.textContent = "Could not read " + f.name + ". Still running " + model.name + "."; };
      reader.readAsText(f);
    });

    /* Swap in a model (already checked) and run it on the current word. */
    function use(next, which, message) {
      var st = prompt(next, s.word);
      model = next;
      root.dataset.model = which;
      word.value = s.word;
      word.removeAttribute("aria-invalid");
      s.st = st;
      render(message || (which === "chapter" ? "Back to the chapter's model. " : ""));
    }
    word.addEventListener("keydown", function (e) { if (e.key === "Enter") { e.preventDefault(); restart(); } });

    function finished() {
      var st = s.st;
      return !st || st.tokens.length >= model.c.max_len || st.tokens[st.tokens.length - 1] === model.vocab.eos;
    }
    function restart() {
      var w = word.value.trim().toLowerCase();
      if (!/^[a-h]{1,8}$/.test(w)) {
        word.setAttribute("aria-invalid", "true");
        status.textContent = "Type 1 to 8 letters from a to h (not \u201c" + w + "\u201d).";
        return;
      }
      var st;
      try { st = prompt(model, w); } catch (err) {
        word.setAttribute("aria-invalid", "true");
        status.textContent = err.message + ".";
        return;
      }
      word.removeAttribute("aria-invalid");
      s.word = w;
      s.st = st;
      render();
    }
    function step(quiet) {
      if (finished()) return;
      var st = s.st, next = argmax(st.logits[st.logits.length - 1]);
      if (st.tokens.length >= model.c.max_len) return;
      model.feed(st, next);
      if (!quiet) render();
    }
    function force(tok) {
      if (finished()) return;
      model.feed(s.st, tok);
      render("You wrote " + model.tokenName(tok) + " in its place. ");
    }
    function render(prefix) {
      var st = s.st, n = st.tokens.length;
      var names = st.tokens.map(function (t, i) { return model.tokenName(t) + " (" + i + ")"; });
      C.setInputs(root, { tokens: st.tokens });
      modelLine.textContent = "Running " + model.name + " (" + model.params + " parameters, " + model.c.num_layers + " layers of " +
        model.c.num_heads + " heads).";
      view.innerHTML = "";
      var seq = C.el("p", { class: "ce-seq" });
      seq.appendChild(C.el("strong", { text: "Sequence: " }));
      st.tokens.forEach(function (t, i) {
        seq.appendChild(C.el("span", { class: "ce-token" + (i > s.word.length + 1 ? " is-generated" : ""), text: model.tokenName(t) }));
      });
      view.appendChild(seq);
      var cacheLen = st.caches[0].k.length;
      view.appendChild(C.el("p", { class: "ce-cache", "data-cache": String(cacheLen), text: "KV cache: " + cacheLen +
        " positions in each of the " + model.c.num_layers + " layers (" + 2 * model.c.num_layers * cacheLen * model.c.d_model +
        " numbers: a key and a value of " + model.c.d_model + " per position and layer)." }));
      var last = st.logits[n - 1], probs = C.softmax(last), vocabNames = [];
      for (var v = 0; v < last.length; v++) vocabNames.push(model.tokenName(v));
      view.appendChild(C.table({ name: "next", caption: "Next token after \u201c" + model.tokenName(st.tokens[n - 1]) + "\u201d: probabilities",
        cols: vocabNames, rows: ["p"], values: [probs], digits: 2, shade: function (x) { return x; } }));
      var heads = C.el("div", { class: "ce-heads" });
      for (var l = 0; l < model.c.num_layers; l++) {
        for (var h = 0; h < model.c.num_heads; h++) {
          var m = st.attention[l].map(function (row) { return row[h].concat(new Array(n - row[h].length).fill(0)); });
          heads.appendChild(C.table({ name: "attn-" + l + "-" + h, caption: "Layer " + (l + 1) + ", head " + (h + 1) +
            " (rows: queries, columns: keys)", cols: st.tokens.map(function (t) { return model.tokenName(t); }),
            rows: st.tokens.map(function (t) { return model.tokenName(t); }), values: m, digits: 2,
            shade: function (x) { return x; } }));
        }
      }
      view.appendChild(C.el("h4", { class: "ce-subtitle", text: "Every head of every layer (each row was added to the cache when its token arrived)" }));
      view.appendChild(heads);
      var all = C.el("details", { class: "ce-more" }, C.el("summary", { text: "All logits (rows: positions)" }));
      all.appendChild(C.table({ name: "logits", caption: "Logits at every position", cols: vocabNames, rows: names, values: st.logits, digits: 3 }));
      view.appendChild(all);
      var done = finished();
      stepBtn.disabled = done; runBtn.disabled = done; forceBtn.disabled = done;
      var gen = st.tokens.slice(s.word.length + 2).map(function (t) { return model.tokenName(t); }).join("");
      status.textContent = (prefix || "") + "Copy so far: \u201c" + gen + "\u201d" + (done ? " (finished)" : "; next greedy token: " +
        model.tokenName(argmax(last)) + " with probability " + C.fmt(Math.max.apply(null, probs), 3)) + ". Cache: " + cacheLen + " positions.";
    }
    restart();
  }
})();
