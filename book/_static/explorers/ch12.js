/* Chapter 12: the longer-trained character model (the shipped checkpoint) in the page, or the
 * reader's own.
 *
 * The same hand-written forward pass as chapter 10's explorer (common.js's C.lm): token
 * embedding + learned positions + causal Transformer blocks + LayerNorm + head of
 * attnlib.chapters.tiny_lm.TinyDecoderLM, one character at a time with a KV cache. The weights
 * come in the binary file of attnlib.chapters.web_export.export_char_model ("ATTNCHAR", a JSON
 * header, float32 little-endian), fetched only when the explorer opens; the arithmetic is
 * float64. Sampling draws from the page's own seeded generator (common.js, mulberry32), not
 * torch's: a seed gives the same text here every time, not the text torch draws; greedy
 * decoding needs no generator and writes attnlib's text. */
(function () {
  "use strict";
  var C = window.CourseExplorers;
  var MAGIC = "ATTNCHAR";
  var FILE = "ch12-char-model.bin";
  var RUN_LENGTH = 100;

  /* A model from the bytes of an exported file, checked against its own config before anything
   * runs: anything the page cannot run is an Error that says so in words. */
  function Model(buffer) {
    var size = buffer && buffer.byteLength;
    if (!(buffer instanceof ArrayBuffer) || size < 12) throw new Error("it is too short to be a model file (" + (size || 0) + " bytes)");
    var bytes = new Uint8Array(buffer), magic = "";
    for (var i = 0; i < 8; i++) magic += String.fromCharCode(bytes[i]);
    if (magic !== MAGIC) {
      if (bytes[0] === 0x7b) throw new Error("it is JSON text (chapter 10's copy models are); this explorer reads the .bin files of web_export.export_char_model");
      throw new Error("it is not a file written by web_export.export_char_model (it does not start with " + MAGIC + ")");
    }
    var view = new DataView(buffer), n = view.getUint32(8, true), start = 12 + n;
    if (start > size) throw new Error("its header should take " + n + " bytes but the file ends after " + size);
    var header;
    try { header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(12, start))); } catch (err) {
      throw new Error("its header is not readable JSON text");
    }
    if (!header || header.format !== "attnlib-char-lm") throw new Error("its header is not that of web_export.export_char_model");
    if (header.version !== 1) throw new Error("it has file version " + header.version + "; this page reads version 1");
    var c = header.config;
    C.lm.checkConfig(c);
    var chars = header.vocabulary && header.vocabulary.chars;
    if (!Array.isArray(chars) || chars.length !== c.vocab_size)
      throw new Error("its vocabulary has " + (Array.isArray(chars) ? chars.length : "no") + " characters but its config needs " + c.vocab_size);
    var index = {};
    chars.forEach(function (ch, k) {
      if (typeof ch !== "string" || ch.length !== 1) throw new Error("token " + k + " of its vocabulary is not one character");
      if (index[ch] !== undefined) throw new Error("its vocabulary has the character " + JSON.stringify(ch) + " twice");
      index[ch] = k;
    });
    if (start % 4) throw new Error("its weights do not start on a 4-byte boundary, as export_char_model writes them");
    if ((size - start) % 4) throw new Error("its weights end in the middle of a float32 value: the file is cut short or has bytes added");
    var count = (size - start) / 4, listed = {};
    (Array.isArray(header.tensors) ? header.tensors : []).forEach(function (t) { if (t && t.name) listed[t.name] = t; });
    var t = C.lm.read(c, function (k) { return listed[k]; }, function (k, got, len) {
      if (!(Number.isInteger(got.offset) && got.offset >= 0 && got.offset + len <= count))
        throw new Error("tensor " + k + " lies past the end of the file (it holds " + count + " numbers): the file is cut short");
      var values = new Float32Array(len);
      for (var j = 0; j < len; j++) values[j] = view.getFloat32(start + 4 * (got.offset + j), true);
      return values;
    });
    this.name = typeof header.name === "string" && header.name ? header.name : "a model";
    this.c = c;
    this.chars = chars;
    this.index = index;
    this.t = t;
    this.params = Number.isInteger(header.parameters) ? header.parameters : 0;
  }
  /* A fresh decoding state: one KV cache per layer; the logits of the newest token and, per
   * layer, every head's weights over the cache for it. */
  Model.prototype.start = function () {
    var st = C.lm.start(this.c);
    st.logits = null;
    st.attention = st.caches.map(function () { return null; });
    return st;
  };
  /* Feed one token at the next position (common.js's C.lm.step): append to the caches; the state
   * keeps its logits and, per layer, every head's weights over the cache for this query. */
  Model.prototype.feed = function (st, token) {
    var out = C.lm.step(this.c, this.t, st, token);
    st.attention = out.attention; /* [layer][head][key] for the newest query */
    st.logits = out.logits;
    return st.logits;
  };
  /* The ids of a text, or an Error naming the characters the model does not have. */
  Model.prototype.encode = function (text) {
    var self = this, missing = [];
    var ids = Array.from(text).map(function (ch) {
      if (self.index[ch] === undefined) { if (missing.indexOf(ch) < 0) missing.push(ch); return -1; }
      return self.index[ch];
    });
    if (missing.length) throw new Error(this.name + " has no character " + missing.map(show).join(", ") + " in its vocabulary");
    return ids;
  };

  /* A character as the reader can see it (a space, a new line). */
  function show(ch) {
    if (ch === " ") return "\u2423";
    if (ch === "\n") return "\u21b5";
    return ch;
  }
  var argmax = C.argmax;

  /* attnlib.chapters.char_lm.top_k_logits then softmax(logits / T): the k largest logits (ties with
   * the k-th kept), the others get probability 0. */
  function sampling(logits, temperature, k) {
    var kept = logits;
    if (k < logits.length) {
      var kth = logits.slice().sort(function (a, b) { return b - a; })[k - 1];
      kept = logits.map(function (x) { return x < kth ? -Infinity : x; });
    }
    return C.softmax(kept.map(function (x) { return x / temperature; }));
  }
  function draw(probs, rand) {
    var u = rand(), s = 0;
    for (var i = 0; i < probs.length; i++) { s += probs[i]; if (u < s && probs[i] > 0) return i; }
    for (var j = probs.length - 1; j >= 0; j--) if (probs[j] > 0) return j; /* u at the rounding edge */
    return 0;
  }

  C.registry["ch12-char-model"] = function (root, ctx) {
    var status = C.el("p", { class: "ce-live", role: "status", "aria-live": "polite", text: "Loading the chapter's model (3.3 MB)\u2026" });
    root.appendChild(status);
    return fetch(ctx.base + "models/" + FILE).then(function (r) {
      if (!r.ok) throw new Error("the chapter's model file is missing (" + r.status + ")");
      return r.arrayBuffer();
    }).then(function (buffer) { build(root, new Model(buffer), status); });
  };

  function build(root, model, status) {
    var chapterModel = model;
    root.dataset.model = "chapter";
    root.dataset.running = "false";
    /* ids: the whole text (prompt and what was written); from: where the model's window starts */
    var s = { prompt: "ROMEO:\n", ids: [], promptLength: 0, from: 0, st: null, rand: null, timer: null, left: 0 };
    var uid = Math.random().toString(36).slice(2, 8);

    var promptBox = C.el("textarea", { id: "ce-prompt-" + uid, rows: "3", class: "ce-prompt", spellcheck: "false",
      autocomplete: "off", "data-knob": "prompt", "aria-describedby": "ce-prompt-" + uid + "-help" });
    promptBox.value = s.prompt;
    root.insertBefore(C.el("div", { class: "ce-control ce-prompt-control" },
      C.el("label", { for: promptBox.id, text: "Prompt (the text the model continues)" }), promptBox,
      C.el("span", { id: promptBox.id + "-help", class: "ce-help", "data-name": "prompt-help" })), status);

    var sampleBox = C.el("div", { class: "ce-controls" });
    root.insertBefore(sampleBox, status);
    var greedy = C.checkbox(sampleBox, { name: "greedy", label: "greedy: always the most likely character", value: false,
      onInput: function () { syncSampling(); render(); } });
    var temperature = C.slider(sampleBox, { name: "temperature", label: "temperature", min: 0.1, max: 2, step: 0.05, value: 0.8,
      format: function (v) { return v.toFixed(2); }, onInput: function () { render(); } });
    var topk = C.slider(sampleBox, { name: "top-k", label: "top-k", min: 1, max: model.c.vocab_size, step: 1, value: model.c.vocab_size,
      format: function (v) { return v >= model.c.vocab_size ? "all " + model.c.vocab_size : String(v); }, onInput: function () { render(); } });
    var seedId = "ce-seed-" + uid;
    var seed = C.el("input", { type: "number", id: seedId, min: "0", max: "4294967295", step: "1", value: "1", "data-knob": "seed", class: "ce-seed" });
    sampleBox.appendChild(C.el("div", { class: "ce-control" }, C.el("label", { for: seedId, text: "seed of the page's generator" }), seed));

    var buttons = C.el("div", { class: "ce-buttons" });
    root.insertBefore(buttons, status);
    C.button(buttons, "Start from the prompt", function () { restart(); }, "start");
    var stepBtn = C.button(buttons, "Write one character", function () { if (!running()) { write(); render(); } }, "step");
    var runBtn = C.button(buttons, "Write " + RUN_LENGTH + " characters", function () { if (running()) stop(); else run(RUN_LENGTH); }, "run");

    var pick = C.el("div", { class: "ce-controls" });
    root.insertBefore(pick, status);
    var layerSel = C.select(pick, { name: "layer", label: "attention of block", value: 0, onInput: function () { render(); },
      options: range(model.c.num_layers).map(function (l) { return [l, String(l + 1)]; }) });
    var headSel = C.select(pick, { name: "head", label: "head", value: 0, onInput: function () { render(); },
      options: range(model.c.num_heads).map(function (h) { return [h, String(h + 1)]; }) });

    var fileId = "ce-file-" + uid;
    var file = C.el("input", { type: "file", id: fileId, accept: ".bin,application/octet-stream", "data-knob": "file" });
    root.insertBefore(C.el("div", { class: "ce-control ce-file" },
      C.el("label", { for: fileId, text: "Your own model (a .bin file from web_export.export_char_model in the exercise notebook)" }), file), status);
    var back = C.button(C.el("div"), "Back to the chapter's model", function () { stop(); use(chapterModel, "chapter"); }, "chapter-model");
    root.insertBefore(C.el("div", { class: "ce-buttons" }, back), status);
    var modelLine = C.el("p", { class: "ce-model" });
    root.insertBefore(modelLine, status);
    var helpLine = C.el("p", { class: "ce-help", "data-name": "help" });
    root.insertBefore(helpLine, status);
    /* what the texts say of the model is rebuilt for each model: a reader's own may have another window */
    function describe(m) {
      root.querySelector("[data-name='prompt-help']").textContent = "Enter starts from the prompt; Shift+Enter makes a new line. " +
        "The model knows " + m.c.vocab_size + " characters" + (m === chapterModel ? ", those of Tiny Shakespeare." : ".");
      helpLine.textContent = "Sampling draws from this page's own seeded generator (mulberry32), from the seed set when the text " +
        "starts from the prompt: the same seed gives the same text here, but not the text torch.multinomial draws in a notebook. " +
        "Greedy text is attnlib's while it fits the model's window of " + m.c.max_len + " characters; when the text grows past it, " +
        "the model keeps the last half and reads it again.";
    }
    var view = C.el("div", { class: "ce-lm" });
    root.appendChild(view);

    function range(n) { var out = []; for (var i = 0; i < n; i++) out.push(i); return out; }
    function running() { return s.timer !== null; }
    /* Greedy ignores the temperature and top-k; they stay operable (a disabled control takes no focus,
       and a keyboard reader could not reach it to read its value), marked as not in use. */
    function syncSampling() {
      [temperature, topk].forEach(function (e) {
        var box = e.closest(".ce-control");
        if (box) box.classList.toggle("ce-unused", greedy.checked);
        e.setAttribute("aria-description", greedy.checked ? "not used while greedy is ticked" : "");
      });
    }

    C.lm.ownFile({ root: root, file: file, status: status, before: stop, current: function () { return model; },
      trial: function (buffer) {
        var candidate = new Model(buffer);
        return { model: candidate, st: prompt(candidate, s.prompt) }; /* a trial run before the swap: it must give numbers */
      },
      use: function (candidate, message, st) { use(candidate, "own", message, st); } });

    /* A model run on a prompt: its decoding state, or an Error in words. */
    function prompt(m, text) {
      if (!text.length) throw new Error("Type a prompt of at least one character");
      var ids = m.encode(text);
      var from = Math.max(0, ids.length - m.c.max_len);
      var st = m.start();
      for (var i = from; i < ids.length; i++) m.feed(st, ids[i]);
      if (!st.logits.every(isFinite)) throw new Error(m.name + " gives NaN or infinite logits");
      return { st: st, ids: ids, from: from };
    }
    function setLayers(m) {
      [[layerSel, m.c.num_layers], [headSel, m.c.num_heads]].forEach(function (pair) {
        var sel = pair[0], keep = Math.min(Number(sel.value), pair[1] - 1);
        sel.innerHTML = "";
        range(pair[1]).forEach(function (i) { sel.appendChild(C.el("option", { value: String(i), text: String(i + 1) })); });
        sel.value = String(keep);
      });
      topk.max = String(m.c.vocab_size);
      if (Number(topk.value) > m.c.vocab_size) topk.value = String(m.c.vocab_size);
      topk.dispatchEvent(new Event("input"));
    }
    function use(next, which, message, trial) {
      var run;
      try { run = trial || prompt(next, s.prompt); } catch (err) {
        /* the chapter's model lacks a character of the prompt: start it from its default prompt */
        s.prompt = "ROMEO:\n"; promptBox.value = s.prompt; run = prompt(next, s.prompt);
      }
      model = next;
      root.dataset.model = which;
      adopt(run);
      setLayers(next); /* after the state: its layers and heads are the new model's */
      describe(next);
      render(message || (which === "chapter" ? "Back to the chapter's model. " : ""));
    }
    function adopt(run) {
      s.st = run.st; s.ids = run.ids; s.from = run.from; s.promptLength = run.ids.length;
      s.seedUsed = Number(seed.value) >>> 0;
      s.rand = C.rng(s.seedUsed);
      promptBox.removeAttribute("aria-invalid");
    }
    promptBox.addEventListener("keydown", function (e) { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); restart(); } });

    function restart() {
      stop();
      var run;
      try { run = prompt(model, promptBox.value); } catch (err) {
        promptBox.setAttribute("aria-invalid", "true");
        status.textContent = err.message + ".";
        return;
      }
      s.prompt = promptBox.value;
      adopt(run);
      render();
    }
    /* The next character: drawn (or the argmax), appended, fed; past the window the model
     * keeps the last half of it and reads it again. */
    function write() {
      var logits = s.st.logits, next;
      if (greedy.checked) next = argmax(logits);
      else next = draw(sampling(logits, Number(temperature.value), Number(topk.value)), s.rand);
      s.ids.push(next);
      if (s.st.tokens.length >= model.c.max_len) {
        s.from = s.ids.length - Math.max(1, Math.floor(model.c.max_len / 2));
        s.st = model.start();
        for (var i = s.from; i < s.ids.length; i++) model.feed(s.st, s.ids[i]);
      } else {
        model.feed(s.st, next);
      }
    }
    function run(n) {
      s.left = n;
      root.dataset.running = "true";
      runBtn.textContent = "Stop";
      stepBtn.disabled = true;
      s.timer = -1; /* running until stop() */
      (function tick() {
        var t0 = Date.now();
        while (s.left > 0 && Date.now() - t0 < 30) { write(); s.left--; }
        render();
        if (s.left > 0 && s.timer !== null) s.timer = setTimeout(tick, 0);
        else stop();
      })();
    }
    function stop() {
      if (s.timer !== null && s.timer > 0) clearTimeout(s.timer);
      var was = s.timer !== null;
      s.timer = null;
      s.left = 0;
      root.dataset.running = "false";
      runBtn.textContent = "Write " + RUN_LENGTH + " characters";
      stepBtn.disabled = false;
      if (was) render();
    }

    function render(prefix) {
      var st = s.st, layer = Number(layerSel.value), head = Number(headSel.value), n = st.tokens.length;
      var weights = st.attention[layer][head], current = s.ids.length - 1;
      C.setInputs(root, { ids: s.ids, from: s.from, layer: layer, head: head, greedy: greedy.checked,
        temperature: Number(temperature.value), top_k: Number(topk.value) });
      modelLine.textContent = "Running " + model.name + " (" + model.params + " parameters, " + model.c.num_layers + " blocks of " +
        model.c.num_heads + " heads, " + model.c.vocab_size + " characters).";
      view.innerHTML = "";
      view.appendChild(C.el("h4", { class: "ce-subtitle", text: "The text, shaded by block " + (layer + 1) + ", head " + (head + 1) +
        "'s attention from the last character" }));
      var text = C.el("p", { class: "ce-text", "data-name": "text" });
      s.ids.forEach(function (id, i) {
        var ch = model.chars[id], inWindow = i >= s.from, w = inWindow ? weights[i - s.from] : 0;
        var cls = "ce-char" + (i >= s.promptLength ? " is-generated" : "") + (inWindow ? "" : " is-outside") + (i === current ? " is-current" : "");
        var span = C.el("span", { class: cls, "data-pos": String(i), text: ch === "\n" ? "\u21b5\n" : ch });
        if (inWindow) {
          span.dataset.value = String(w);
          var bg = C.shadeColor(Math.min(1, w * 2));
          span.style.background = "rgb(" + bg.join(",") + ")";
          span.style.color = C.textOn(bg);
        }
        text.appendChild(span);
      });
      view.appendChild(text);
      var order = range(weights.length).sort(function (a, b) { return weights[b] - weights[a]; }).slice(0, 3);
      view.appendChild(C.el("p", { class: "ce-attn-summary", text: "Block " + (layer + 1) + ", head " + (head + 1) + ", reading from \u201c" +
        show(model.chars[s.ids[current]]) + "\u201d (character " + (current + 1) + "), looks most at " + order.map(function (j) {
          return "\u201c" + show(model.chars[s.ids[s.from + j]]) + "\u201d " + (j === weights.length - 1 ? "(itself)" : (weights.length - 1 - j) + " back") +
            " " + C.fmt(weights[j], 2);
        }).join(", ") + (s.from > 0 ? ". The first " + s.from + " characters are outside the model's window." : ".") }));
      var probs = greedy.checked ? null : sampling(st.logits, Number(temperature.value), Number(topk.value));
      var shownProbs = probs || C.softmax(st.logits);
      var top = range(shownProbs.length).sort(function (a, b) { return shownProbs[b] - shownProbs[a]; }).slice(0, 8);
      view.appendChild(C.table({ name: "next", caption: "The 8 likeliest next characters " + (greedy.checked ? "(temperature 1, no top-k; greedy takes the first)" :
        "(temperature " + Number(temperature.value).toFixed(2) + ", top-k " + topk.value + ")"),
        cols: top.map(function (i) { return show(model.chars[i]); }), rows: ["p"], values: [top.map(function (i) { return shownProbs[i]; })],
        digits: 3, shade: function (x) { return x; } }));
      var more = C.el("details", { class: "ce-more" }, C.el("summary", { text: "Every logit for the next character" }));
      more.appendChild(C.table({ name: "logits", caption: "Logits for the character after position " + (current + 1),
        cols: model.chars.map(show), rows: ["logit"], values: [st.logits], digits: 3 }));
      view.appendChild(more);
      var written = s.ids.length - s.promptLength;
      /* a live region read aloud: while writing, speak every 20th character's line only */
      if (running() && written % 20 !== 0) return;
      status.textContent = (prefix || "") + (running() ? "Writing\u2026 " : "") + written + " characters written after the prompt" +
        (greedy.checked ? " (greedy)" : " (sampled, seed " + s.seedUsed + ")") + "; the model's window holds " + n + " of " + model.c.max_len + ".";
    }
    syncSampling();
    describe(model);
    restart();
  }
})();
