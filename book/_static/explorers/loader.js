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
      /* an explorer's settings for this page (book/_quizzes/explorers.yml: settings) */
      var settings = details.dataset.settings ? JSON.parse(details.dataset.settings) : {};
      return Promise.resolve(make(root, { base: base, settings: settings })).then(function () {
        body.dataset.state = "ready";
      });
    }).catch(function (err) {
      body.dataset.state = "error";
      status.textContent = "The explorer could not start: " + err.message;
    });
  }

  /* --- self-checks ------------------------------------------------------------------------ */

  /* The numbers a typed answer can mean, most likely first; [] when it is not a number (the same
   * rules as attnlib.checks.quiz.number_readings, for the exercise notebook). Digits may be
   * grouped: "1,050,624", "1 050 624", "1_050_624", "1.050.624"; "0,25" has a decimal comma; a
   * lone comma before three digits ("2,828") reads both ways, 2828 and 2.828. */
  function readings(text) {
    var t = String(text).trim().replace(/[\u00a0\u2009\u202f]/g, " ").replace(/\u2212/g, "-");
    var found = [];
    function add(s) { var v = Number(s); if (isFinite(v) && found.indexOf(v) < 0) found.push(v); }
    if (/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t)) add(t);
    if (/^[-+]?\d+(_\d+)+(\.\d+)?$/.test(t)) add(t.replace(/_/g, ""));
    if (/^[-+]?\d{1,3}(,\d{3})+(\.\d+)?$/.test(t)) add(t.replace(/,/g, ""));
    if (/^[-+]?\d{1,3}( \d{3})+([.,]\d+)?$/.test(t)) add(t.replace(/ /g, "").replace(",", "."));
    if (/^[-+]?\d{1,3}(\.\d{3}){2,}(,\d+)?$/.test(t)) add(t.replace(/\./g, "").replace(",", "."));
    if (/^[-+]?\d*,\d+$/.test(t)) add(t.replace(",", "."));
    return found;
  }
  window.CourseQuiz = { readings: readings };

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
      var values = readings(input.value);
      if (!values.length) {
        feedback.textContent = "Type a number (for example 3, 0.25, 1e-3 or 1,050,624).";
        form.dataset.result = "none";
        return;
      }
      var answer = Number(input.dataset.answer), tol = Number(input.dataset.tolerance || 0);
      right = values.some(function (value) { return Math.abs(value - answer) <= tol + 1e-12 * Math.abs(answer); });
      if (right) chosen = Array.prototype.find.call(whys, function (li) { return li.dataset.option === "right"; });
      for (var v = 0; !right && !chosen && v < values.length; v++) {
        chosen = Array.prototype.find.call(whys, function (li) {
          return li.dataset.option === "value" && Math.abs(Number(li.dataset.value) - values[v]) <= tol + 1e-12;
        });
      }
      chosen = chosen || Array.prototype.find.call(whys, function (li) { return li.dataset.option === "other"; });
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
