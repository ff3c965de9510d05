/* Chapter 10: the chapter's trained model in the page, or the reader's own.
 *
 * A hand-written forward pass of attnlib.chapters.tiny_lm.TinyDecoderLM (token embedding +
 * learned positions + causal Transformer blocks + LayerNorm + head; common.js's C.lm, which
 * chapter 12's explorer runs too) that decodes one token at a time with a KV cache: each new
 * token appends its keys and values to every layer's cache and attends to all of them. Weights
 * are float32 (exported by attnlib.chapters.web_export); the arithmetic is float64. */
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

  /* A model from an exported file, checked against its own config before anything runs: a file
   * that is not one, a missing tensor or one whose shape disagrees with the config is an Error
   * that says so in words (the page then keeps the model it had). */
  function Model(data) {
    if (!data || typeof data !== "object" || data.format !== "attnlib-tiny-lm") throw new Error("it is not a file written by attnlib.chapters.web_export");
    if (data.version !== 1) throw new Error("it has file version " + data.version + "; this page reads version 1");
    var c = data.config;
    C.lm.checkConfig(c);
    var v = data.vocabulary;
    if (!v || v.letters !== "abcdefgh" || c.vocab_size !== 12 || [v.pad, v.bos, v.sep, v.eos].join() !== "8,9,10,11")
      throw new Error("its vocabulary is not the copy language's (letters a\u2013h and 4 special tokens, 12 in all)");
    if (!data.tensors || typeof data.tensors !== "object") throw new Error("it has no tensors");
    this.name = data.name || "a model";
    this.c = c;
    this.vocab = v;
    var want = C.lm.shapes(c);
    this.params = Number.isInteger(data.parameters) ? data.parameters : Object.keys(want).reduce(function (a, k) {
      return a + want[k].reduce(function (x, y) { return x * y; }, 1); }, 0);
    this.t = C.lm.read(c, function (k) { return data.tensors[k]; }, function (k, got, n) {
      var values = decode(k, got.data);
      if (values.length !== n) throw new Error("tensor " + k + " holds " + values.length + " numbers; shape " + JSON.stringify(want[k]) + " needs " + n);
      return values;
    });
  }
  /* A fresh decoding state: one KV cache per layer; the logits and every head's attention at
   * every position fed. */
  Model.prototype.start = function () {
    var st = C.lm.start(this.c);
    st.logits = [];
    st.attention = st.caches.map(function () { return []; });
    return st;
  };
  /* Feed one token at the next position: append to the caches, return its logits. */
  Model.prototype.feed = function (st, token) {
    var out = C.lm.step(this.c, this.t, st, token);
    out.attention.forEach(function (heads, l) { st.attention[l].push(heads); }); /* [position][head][key] */
    st.logits.push(out.logits);
    return out.logits;
  };
  Model.prototype.tokenName = function (t) {
    var v = this.vocab;
    if (t < v.letters.length) return v.letters[t];
    return { 8: "<pad>", 9: "<bos>", 10: "|", 11: "<eos>" }[t] || ("#" + t);
  };

  var argmax = C.argmax;

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

    C.lm.ownFile({ root: root, file: file, status: status, text: true, current: function () { return model; },
      trial: function (text) {
        var data;
        try { data = JSON.parse(text); } catch (err) { throw new Error("it is not JSON text (a file from web_export.export_model is)"); }
        var candidate = new Model(data);
        return { model: candidate, st: prompt(candidate, s.word) }; /* a trial run before the swap: it must give numbers */
      },
      use: function (candidate, message) { use(candidate, "own", message); } });

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
