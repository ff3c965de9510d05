"""Explorers and self-checks in the chapter pages, added from files outside the notebooks.

Progressive enhancement: a chapter's page is complete without JavaScript (its figures stay);
where JavaScript runs, the reader can turn the knobs of an explorer and check answers.

* ``book/_quizzes/explorers.yml`` says which explorer goes after which section of which
  chapter, and with which ``settings`` (optional: what that page's copy starts with). Each
  becomes a closed ``<details class="course-explorer">`` there: nothing of the explorer loads
  until the reader opens it (``_static/explorers/loader.js``, a few kB, then fetches
  ``common.js`` and the explorer's own script).
* ``attnlib/quizzes/chNN.yml`` (package data: the exercise notebooks read it too) holds a
  chapter's concept questions (the one source for the page
  and for the exercise notebook, :mod:`attnlib.checks.quiz`). They are drawn as a form at
  the end of the section the file names (``section``), each question linking back to the
  section it tests; ``_static/explorers/loader.js`` (the one script the page loads) checks an
  answer and explains it. Without JavaScript every question has an "Answer and explanations"
  disclosure.
* Chapter 10's explorer runs the chapter's trained model: at the end of the build
  :func:`attnlib.chapters.web_export.export_chapter_model` trains it (the chapter's seed and
  configuration, one thread) and writes ``_static/explorers/models/ch10-copy.json``; the result
  is cached beside the build, keyed by the code that trains it. Chapter 11's ViT is written the
  same way (:func:`attnlib.chapters.vit_export.export_chapter_model`, ``ch11-vit.json``).

A declared section that a chapter no longer has is a build warning (the strict build fails),
so that a renamed heading cannot silently drop an explorer or a quiz.

tests/site/test_explorers.py drives every explorer and question in Chromium.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
from pathlib import Path

import yaml
from sphinx.util import logging

LOG = logging.getLogger(__name__)
QUIZ_DIR = "book/_quizzes"  # explorers.yml: where each explorer goes
QUESTIONS_DIR = "attnlib/quizzes"  # chNN.yml: a chapter's questions, shipped with attnlib
PLACEMENT = "explorers.yml"
CHAPTER = re.compile(r"^book/(?P<stem>\d\d-[a-z0-9-]+)$")
MODEL_FILE = "ch10-copy.json"


# --- the declarations ---------------------------------------------------------------------------


def load_placements(root: Path) -> dict[str, list[dict]]:
    """``{chapter stem: [explorer declarations]}`` from ``book/_quizzes/explorers.yml``."""
    data = yaml.safe_load((root / QUIZ_DIR / PLACEMENT).read_text(encoding="utf-8")) or []
    out: dict[str, list[dict]] = {}
    for item in data:
        for key in ("chapter", "after", "explorer", "title", "describes"):
            if not item.get(key):
                raise ValueError(f"{PLACEMENT}: an explorer without {key!r}: {item}")
        out.setdefault(item["chapter"], []).append(item)
    return out


def load_quiz(root: Path, number: str) -> dict | None:
    """The quiz of chapter ``number`` ("03"), or None when it has none (read by
    :func:`attnlib.checks.quiz.load_quiz`, as the exercise notebooks read it)."""
    from attnlib.checks.quiz import QuizUnavailable
    from attnlib.checks.quiz import load_quiz as load_questions

    try:
        return load_questions(number, quiz_dir=root / QUESTIONS_DIR)
    except QuizUnavailable:
        return None


# --- HTML ---------------------------------------------------------------------------------------

_INLINE = re.compile(r"`([^`]+)`|\$([^$]+)\$|\*\*([^*]+)\*\*|(?<![*\w])\*(?!\s)([^*]+?)(?<!\s)\*(?![*\w])")


def inline(text: str) -> str:
    """A question's text as HTML: `code`, $math$ (typeset by the page's MathJax), **bold**,
    *emphasis* (no asterisk is left for the reader to see)."""
    out, last = [], 0
    text = " ".join(str(text).split())
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[last : match.start()]))
        code, math, bold, emphasis = match.groups()
        if code is not None:
            out.append(f'<code class="docutils literal notranslate">{html.escape(code)}</code>')
        elif math is not None:
            out.append(f'<span class="math notranslate nohighlight">\\({html.escape(math)}\\)</span>')
        elif bold is not None:
            out.append(f"<strong>{html.escape(bold)}</strong>")
        else:
            out.append(f"<em>{html.escape(emphasis)}</em>")
        last = match.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


_SPOKEN = (
    (r"\\times", " times "),
    (r"\\cdot", " dot "),
    (r"\\approx", " about "),
    (r"\\leftarrow", " becomes "),
    (r"\\sum_\{?([^ }]*)\}?", r" sum over \1 "),
    (r"\\sqrt\{([^}]*)\}", r" square root of \1 "),
    (r"\\(?:text|mathrm|operatorname)\{([^}]*)\}", r"\1"),
    (r"\\infty", "infinity"),
    (r"\\([a-zA-Z]+)", r"\1"),
    (r"\^\{([^}]*)\}", r" to the \1 "),
    (r"\^([A-Za-z0-9])", r" to the \1"),
    (r"_\{([^}]*)\}", r" \1"),
    (r"_([A-Za-z0-9])", r" \1"),
    (r"\\[,;!]", " "),
    (r"[{}$`\\]", ""),
)


def spoken_text(text: str) -> str:
    """A question's option in words for a screen reader: the LaTeX of its math read out plainly."""
    out = " ".join(str(text).split())
    for pattern, repl in _SPOKEN:
        out = re.sub(pattern, repl, out)
    return " ".join(out.split())


def explorer_html(item: dict, number: str, index: int) -> str:
    name = html.escape(item["explorer"])
    # settings: what this page's copy of an explorer starts with (chapter 07: no causal mask)
    settings = item.get("settings")
    data = f' data-settings="{html.escape(json.dumps(settings), quote=True)}"' if settings else ""
    return (
        f'<details class="course-explorer" id="explorer-{name}" data-explorer="{name}"{data}>'
        f'<summary><span class="course-explorer-label">Try it</span> {inline(item["title"])}</summary>'
        f'<div class="course-explorer-body" data-state="closed">'
        f"<p>{inline(item['describes'])}</p>"
        "<noscript><p>This explorer needs JavaScript; the figures and code above show the same "
        "computation.</p></noscript>"
        "</div></details>"
    )


def question_html(number: str, q: dict, sections: dict[str, str]) -> str:
    qid = f"{number}-{q['id']}"
    anchor = q["section"]
    section_title = sections.get(anchor, anchor)
    back = f'<a class="course-back" href="#{html.escape(anchor)}">Back to “{section_title}”</a>'
    parts = [
        f'<form class="course-question" id="question-{qid}" data-question="{qid}" '
        f'data-kind="{q["kind"]}" onsubmit="return false">'
    ]
    number_html = f'<span class="course-qnum">Question {html.escape(str(q["id"]))}.</span>'
    legend = f"<legend>{number_html} {inline(q['prompt'])}</legend>"
    explanations = []
    if q["kind"] == "choice":
        parts.append(f"<fieldset>{legend}")
        for i, option in enumerate(q["options"]):
            key = "abcdefgh"[i]
            oid = f"q{qid}-{key}"
            correct = "true" if option.get("correct") else "false"
            # an option written in math only has no text a screen reader's label can name: say it in words
            spoken = (
                f' aria-label="{html.escape(spoken_text(option["text"]))}"'
                if "$" in str(option["text"])
                else ""
            )
            parts.append(
                f'<div class="course-option"><input type="radio" name="q{qid}" id="{oid}" value="{key}" '
                f'data-correct="{correct}"{spoken}><label for="{oid}">{inline(option["text"])}</label></div>'
            )
            verdict = "Right." if option.get("correct") else "Not this one."
            explanations.append(
                f'<li class="course-why" data-option="{key}" data-correct="{correct}">'
                f"<strong>{key.upper()}: {verdict}</strong> {inline(option['why'])}"
                f"<template>{inline(option['why'])}</template></li>"
            )
        parts.append("</fieldset>")
    else:
        answer = q["answer"]
        tol = q.get("tolerance", 0)
        parts.append(f"<fieldset>{legend}")
        parts.append(
            f'<label for="q{qid}-n">Your answer</label> '
            f'<input type="text" inputmode="decimal" id="q{qid}-n" name="q{qid}" autocomplete="off" '
            f'data-answer="{answer!r}" data-tolerance="{tol!r}" size="10">'
        )
        parts.append("</fieldset>")
        explanations.append(
            '<li class="course-why" data-option="right" data-correct="true">'
            f"<strong>{html.escape(str(answer))}: "
            f"right.</strong> {inline(q['why'])}<template>{inline(q['why'])}</template></li>"
        )
        for mistake in q.get("mistakes", []):
            explanations.append(
                f'<li class="course-why" data-option="value" data-value="{mistake["value"]!r}" '
                f'data-correct="false"><strong>{html.escape(str(mistake["value"]))}: not quite.</strong> '
                f"{inline(mistake['why'])}<template>{inline(mistake['why'])}</template></li>"
            )
        other = inline(q.get("other", "work it out again from the section this question links to."))
        explanations.append(
            '<li class="course-why" data-option="other" data-correct="false">'
            "<strong>Another number:</strong> "
            f"{other}<template>{other}</template></li>"
        )
    parts.append(
        '<div class="course-question-actions"><button type="button" class="course-check">Check</button> '
        f"{back}</div>"
        '<p class="course-feedback" role="status" aria-live="polite"></p>'
        '<details class="course-answer"><summary>Answer and explanations</summary>'
        f"<ul>{''.join(explanations)}</ul></details>"
        "</form>"
    )
    return "".join(parts)


def quiz_html(number: str, quiz: dict, sections: dict[str, str]) -> str:
    questions = "".join(question_html(number, q, sections) for q in quiz["questions"])
    return (
        f'<section class="course-quiz" id="self-check-{number}" aria-labelledby="self-check-{number}-title">'
        f'<p class="course-quiz-title" id="self-check-{number}-title" role="heading" aria-level="3">'
        f"Self-check: {len(quiz['questions'])} questions</p>"
        "<p>Choose an answer and press <em>Check</em>: each answer, right or wrong, is explained. "
        f"The exercise notebook asks the same questions and counts them.</p>{questions}</section>"
    )


# --- the doctree --------------------------------------------------------------------------------


def _section_titles(doctree) -> dict[str, str]:
    from docutils import nodes

    titles = {}
    for section in doctree.findall(nodes.section):
        title = next((c for c in section.children if isinstance(c, nodes.title)), None)
        for sid in section["ids"]:
            titles[sid] = _title_html(title) if title is not None else html.escape(sid)
    return titles


def _title_html(title) -> str:
    """A section title as HTML: its text escaped, its inline math typeset by the page's MathJax."""
    from docutils import nodes

    out = []
    for child in title.children:
        if isinstance(child, nodes.math):
            out.append(
                f'<span class="math notranslate nohighlight">\\({html.escape(child.astext())}\\)</span>'
            )
        else:
            out.append(html.escape(child.astext()))
    return "".join(out)


def _find_section(doctree, sid: str):
    from docutils import nodes

    for section in doctree.findall(nodes.section):
        if sid in section["ids"]:
            return section
    return None


def _insert_at_end_of_own_text(section, node) -> None:
    """Before the section's first subsection (the end of its own text), else at its end."""
    from docutils import nodes

    for i, child in enumerate(section.children):
        if isinstance(child, nodes.section):
            section.insert(i, node)
            return
    section.append(node)


def add_to_doctree(app, doctree) -> None:
    from docutils import nodes

    match = CHAPTER.match(app.env.docname)
    if not match:
        return
    stem = match["stem"]
    number = stem[:2]
    root = Path(app.confdir)
    placements = load_placements(root).get(stem, [])
    quiz = load_quiz(root, number)
    titles = _section_titles(doctree)
    added = []
    for index, item in enumerate(placements):
        section = _find_section(doctree, item["after"])
        if section is None:
            LOG.warning(
                f"course_explorers: {stem} has no section {item['after']!r} for explorer {item['explorer']!r}"
                f" ({QUIZ_DIR}/{PLACEMENT}); its sections: {sorted(titles)}",
                location=app.env.docname,
            )
            continue
        _insert_at_end_of_own_text(section, nodes.raw("", explorer_html(item, number, index), format="html"))
        added.append("explorer")
    if quiz:
        missing = [q["section"] for q in quiz["questions"] if q["section"] not in titles]
        target = _find_section(doctree, quiz.get("at", "check-your-understanding"))
        if missing or target is None:
            LOG.warning(
                f"course_explorers: {QUESTIONS_DIR}/ch{number}.yml names sections that {stem} does not have: "
                f"{missing or quiz.get('at')}; its sections: {sorted(titles)}",
                location=app.env.docname,
            )
        else:
            _insert_at_end_of_own_text(target, nodes.raw("", quiz_html(number, quiz, titles), format="html"))
            added.append("quiz")
    if added:
        app.env.course_explorer_pages = getattr(app.env, "course_explorer_pages", set()) | {app.env.docname}


def add_scripts(app, pagename, templatename, context, doctree) -> None:
    """Only the pages with an explorer or a quiz load the (small) loader and the stylesheet."""
    if pagename in getattr(app.env, "course_explorer_pages", set()):
        app.add_js_file("explorers/loader.js", loading_method="defer")
        app.add_css_file("explorers/explorers.css")


def merge_env(app, env, docnames, other) -> None:
    env.course_explorer_pages = getattr(env, "course_explorer_pages", set()) | getattr(
        other, "course_explorer_pages", set()
    )


def purge_env(app, env, docname) -> None:
    pages = getattr(env, "course_explorer_pages", set())
    pages.discard(docname)


# --- chapter 10's model -------------------------------------------------------------------------


def _model_cache_key(root: Path) -> str:
    import torch

    digest = hashlib.sha256()
    for rel in (
        "attnlib/chapters/tiny_lm.py",
        "attnlib/chapters/web_export.py",
        "attnlib/transformer.py",
        "attnlib/modules.py",
        "attnlib/positions.py",
    ):
        path = root / rel
        digest.update(path.read_bytes() if path.is_file() else b"")
    digest.update(torch.__version__.encode())
    digest.update(torch.backends.cpu.get_cpu_capability().encode())
    return digest.hexdigest()[:16]


def write_model(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from attnlib.chapters import web_export

    root = Path(app.confdir)
    target = Path(app.outdir) / "_static" / "explorers" / "models" / MODEL_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    cache = Path(app.outdir).parent / ".course-explorers-cache" / f"{_model_cache_key(root)}-{MODEL_FILE}"
    if not cache.is_file():
        cache.parent.mkdir(parents=True, exist_ok=True)
        web_export.export_chapter_model(cache)
        LOG.info(f"course_explorers: trained chapter 10's model for the page -> {cache.name}")
    shutil.copy2(cache, target)
    _write_cached(app, root, CH11_MODEL_FILE, CH11_SOURCES, "attnlib.chapters.vit_export")
    # chapter 12's checkpoint, whatever weights are shipped now (no training: about 1 s)
    web_export.export_chapter_char_model(target.parent / web_export.CHAR_MODEL_FILE)
    # the quizzes as JSON beside the explorers, for tests and tools that read the site
    quizzes = {}
    for path in sorted((root / QUESTIONS_DIR).glob("ch[0-9][0-9].yml")):
        quizzes[path.stem] = load_quiz(root, path.stem[2:])
    (target.parent.parent / "quizzes.json").write_text(json.dumps(quizzes), encoding="utf-8")


# --- chapter 11's ViT (attnlib.chapters.vit_export), cached as chapter 10's model is --------------

CH11_MODEL_FILE = "ch11-vit.json"
CH11_SOURCES = ("attnlib/chapters/vit.py", "attnlib/chapters/vit_export.py", "attnlib/vision.py")


def _write_cached(app, root: Path, name: str, sources, module: str) -> None:
    """``module.export_chapter_model`` written to ``_static/explorers/models/name``, cached beside
    the build, keyed by ``sources``, the code chapter 10's key names and torch's version."""
    import importlib

    digest = hashlib.sha256(_model_cache_key(root).encode())
    for rel in sources:
        path = root / rel
        digest.update(path.read_bytes() if path.is_file() else b"")
    target = Path(app.outdir) / "_static" / "explorers" / "models" / name
    cache = Path(app.outdir).parent / ".course-explorers-cache" / f"{digest.hexdigest()[:16]}-{name}"
    if not cache.is_file():
        cache.parent.mkdir(parents=True, exist_ok=True)
        importlib.import_module(module).export_chapter_model(cache)
        LOG.info(f"course_explorers: trained {name} for the page -> {cache.name}")
    shutil.copy2(cache, target)


def setup(app) -> dict:
    app.connect("doctree-read", add_to_doctree)
    app.connect("html-page-context", add_scripts)
    app.connect("env-merge-info", merge_env)
    app.connect("env-purge-doc", purge_env)
    app.connect("build-finished", write_model)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
