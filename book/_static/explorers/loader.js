/* The course's explorers and self-checks: the only script a chapter page loads for them.
 *
 * Explorers are closed <details class="course-explorer"> elements written by
 * book/_ext/course_explorers.py. Nothing else loads until the reader opens one: then this
 * script fetches common.js and the chapter's explorer (chNN.js) from the same folder and
 * builds the explorer inside the <details>. Self-checks (<form class="course-question">)
 * work without any other file: "Check" says whether the answer is right and why, in a
 * live region that screen readers announce.
 */
(function () {
  "use strict";
  var script = document.currentScript;
  var base = script ? script.src.replace(/loader\.js(\?.*)?$/, "") : "_static/explorers/";
  var loaded = {};

  function load(src) {
    if (!loaded[src]) {
      loaded[src] = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = base + src;
        s.onload = resolve;
        s.onerror = function () { reject(new Error("could not load " + src)); };
        document.head.appendChild(s);
      });
    }
    return loaded[src];
  }

  function openExplorer(details) {
    var body = details.querySelector(".course-explorer-body");
    if (!body || body.dataset.state !== "closed") return;
    body.dataset.state = "loading";
    var name = details.dataset.explorer;
    var file = name.slice(0, 4) + ".js"; /* "ch03-..." -> ch03.js */
    var status = document.createElement("p");
    status.className = "ce-status";
    status.setAttribute("role", "status");
    status.textContent = "Loading the explorer\u2026";
    body.appendChild(status);
    load("common.js").then(function () { return load(file); }).then(function () {
      var make = window.CourseExplorers && window.CourseExplorers.registry[name];
      if (!make) throw new Error("no explorer named " + name);
      status.remove();
      var root = document.createElement("div");
      root.className = "ce-root";
      root.dataset.explorer = name;
      body.appendChild(root);
      return Promise.resolve(make(root, { base: base })).then(function () {
        body.dataset.state = "ready";
      });
    }).catch(function (err) {
      body.dataset.state = "error";
      status.textContent = "The explorer could not start: " + err.message;
    });
  }

  /* --- self-checks ------------------------------------------------------------------------ */

  function parseNumber(text) {
    var t = String(text).trim().replace(/\u2212/g, "-").replace(/,/g, ".");
    if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t)) return NaN;
    return Number(t);
  }

  function checkQuestion(form) {
    var feedback = form.querySelector(".course-feedback");
    var whys = form.querySelectorAll(".course-why");
    var chosen = null, right = false, verdict;
    if (form.dataset.kind === "choice") {
      var picked = form.querySelector("input[type=radio]:checked");
      if (!picked) {
        feedback.textContent = "Choose an answer first.";
        form.dataset.result = "none";
        return;
      }
      right = picked.dataset.correct === "true";
      chosen = Array.prototype.find.call(whys, function (li) { return li.dataset.option === picked.value; });
      verdict = (right ? "Right. " : "Not this one. ");
    } else {
      var input = form.querySelector("input[type=text]");
      var value = parseNumber(input.value);
      if (isNaN(value)) {
        feedback.textContent = "Type a number (for example 3, 0.25 or 1e-3).";
        form.dataset.result = "none";
        return;
      }
      var answer = Number(input.dataset.answer), tol = Number(input.dataset.tolerance || 0);
      right = Math.abs(value - answer) <= tol + 1e-12 * Math.abs(answer);
      chosen = Array.prototype.find.call(whys, function (li) {
        if (right) return li.dataset.option === "right";
        return li.dataset.option === "value" && Math.abs(Number(li.dataset.value) - value) <= tol + 1e-12;
      }) || Array.prototype.find.call(whys, function (li) { return li.dataset.option === "other"; });
      verdict = right ? "Right. " : "Not quite. ";
    }
    /* the explanation's source (a <template>: MathJax has not touched it), typeset afresh below */
    var tpl = chosen && chosen.querySelector("template");
    feedback.innerHTML = "";
    var b = document.createElement("strong");
    b.textContent = verdict;
    feedback.appendChild(b);
    if (tpl) feedback.appendChild(tpl.content.cloneNode(true));
    feedback.className = "course-feedback " + (right ? "is-right" : "is-wrong");
    form.dataset.result = right ? "right" : "wrong";
    if (window.MathJax && window.MathJax.Hub) window.MathJax.Hub.Queue(["Typeset", window.MathJax.Hub, feedback]);
    else if (window.MathJax && window.MathJax.typesetPromise) window.MathJax.typesetPromise([feedback]);
  }

  function start() {
    document.querySelectorAll("details.course-explorer").forEach(function (details) {
      details.addEventListener("toggle", function () { if (details.open) openExplorer(details); });
      if (details.open) openExplorer(details);
    });
    document.querySelectorAll("form.course-question").forEach(function (form) {
      form.querySelector(".course-check").addEventListener("click", function () { checkQuestion(form); });
      form.addEventListener("keydown", function (e) {
        if (e.key === "Enter" && e.target.matches("input")) { e.preventDefault(); checkQuestion(form); }
      });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
