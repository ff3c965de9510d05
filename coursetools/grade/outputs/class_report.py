"""The class at a glance: ``OUT/report.html``, one self-contained page.

:func:`build_report` renders, from the class's final scores,
a page that opens from disk with no network: inline CSS, and figures drawn with
matplotlib as SVG embedded in ``data:`` URIs (each with its alt text), no
script. It shows

* the score distribution of each exercise, with a table of the same numbers;
* the statuses (graded, needs-review, timeout, kernel-died, unreadable, ...);
* the most frequent named mistakes of each exercise (the misconceptions the
  checks recognised in the learners' outputs), counted in students;
* the grading time of each submission;
* pairs of submissions whose answer to an exercise is near-identical after
  normalising names, comments and whitespace (:mod:`.similarity`): for a
  person to look at, never a grade change.

``python -m coursetools.grade report OUT`` rewrites it from the records
already there; grading writes it at the end of every run.
"""

from __future__ import annotations

import base64
import html
import io
import statistics
from collections import Counter
from collections.abc import Collection, Iterable
from pathlib import Path

from coursetools.grade.grading import similarity
from coursetools.grade.grading.parse_worker import read_record_answers
from coursetools.grade.outputs.feedback import STATUS_MEANING
from coursetools.grade.outputs.scores import ClassScores
from coursetools.grade.records import record as record_module
from coursetools.grade.records.escape import visible
from coursetools.grade.records.record import Record, Status

REPORT = "report.html"
STATUS_ORDER = [s.value for s in record_module.STATUS_ORDER]
TOP_MISTAKES = 5
SLOWEST = 10

CSS = """
:root { --ink: #1d1d1f; --muted: #55595f; --line: #c9ccd1; --band: #f2f4f7; --accent: #1f5fa8; }
* { box-sizing: border-box; }
body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
       margin: 0 auto; max-width: 64rem; padding: 1.5rem; }
h1 { font-size: 1.8rem; margin-bottom: .25rem; }
h2 { font-size: 1.35rem; margin-top: 2.2rem; border-bottom: 2px solid var(--line); padding-bottom: .2rem; }
h3 { font-size: 1.1rem; margin-top: 1.4rem; }
p.lead, .note { color: var(--muted); }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .95rem; }
caption { text-align: left; font-weight: 600; padding-bottom: .3rem; }
th, td { border: 1px solid var(--line); padding: .3rem .6rem; text-align: left; vertical-align: top; }
thead th { background: var(--band); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: .9rem; }
nav ul { padding-left: 1.2rem; }
a { color: var(--accent); }
.skip { position: absolute; left: -999px; }
.skip:focus { left: 1rem; top: 1rem; background: #fff; padding: .3rem; }
.flag { background: #fff4e5; border-left: 4px solid #c77700; padding: .5rem .8rem; }
"""


def _number(value: float | None, digits: int = 2) -> str:
    if value is None:
        return ""
    text = f"{float(value):.{digits}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _e(text) -> str:
    return html.escape(visible(str(text)), quote=True)


# --------------------------------------------------------------------------- figures


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "class-report", "font.size": 10})
    return plt


def _svg_img(fig, alt: str) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    _pyplot().close(fig)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img src="data:image/svg+xml;base64,{data}" alt="{_e(alt)}">'


def _safe(figure, *args) -> str:
    """A figure, or a note when it cannot be drawn (the table beside it has the same numbers)."""
    try:
        return figure(*args)
    except Exception as exc:  # noqa: BLE001 - one figure must never cost the whole report
        why = _e(type(exc).__name__)
        return f'<p class="note">This figure could not be drawn ({why}); the table has its numbers.</p>'


def _score_figure(exercises: list[str], scores: dict[str, list[float]], points: dict[str, float]) -> str:
    plt = _pyplot()
    n = max(1, len(exercises))
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.4 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax, ex in zip(axes.flat, exercises, strict=False):
        values = scores.get(ex, [])
        top = points.get(ex, 1.0) or 1.0
        bins = [top * k / 8 for k in range(9)]
        ax.hist(values, bins=bins, color="#1f5fa8", edgecolor="white")
        ax.set_title(f"{ex} ({_number(top)} point{'' if top == 1 else 's'})", fontsize=10)
        ax.set_xlim(0, top)
        ax.set_xlabel("score")
        ax.set_ylabel("submissions")
    fig.tight_layout()
    parts = []
    for ex in exercises:
        values = scores.get(ex, [])
        full = sum(v >= points.get(ex, 0) - 1e-9 for v in values)
        parts.append(f"{ex}: {full} of {len(values)} judged submissions have full marks")
    return _svg_img(fig, "Histograms of the score of each exercise. " + "; ".join(parts) + ".")


def _status_figure(counts: Counter) -> str:
    plt = _pyplot()
    labels = [s for s in STATUS_ORDER if counts.get(s)] + sorted(set(counts) - set(STATUS_ORDER))
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(labels) + 0.8))
    colours = [
        "#2e7d32" if s == Status.GRADED else "#c77700" if s == Status.NEEDS_REVIEW else "#b3261e"
        for s in labels
    ]
    ax.barh(labels[::-1], [counts[s] for s in labels][::-1], color=colours[::-1])
    ax.set_xlabel("submissions")
    for y, s in enumerate(labels[::-1]):
        ax.text(counts[s], y, f" {counts[s]}", va="center")
    fig.tight_layout()
    alt = "Bar chart of the statuses: " + ", ".join(f"{s} {counts[s]}" for s in labels) + "."
    return _svg_img(fig, alt)


def _time_figure(seconds: list[float]) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 2.6))
    ax.hist(seconds, bins=min(30, max(5, len(seconds) // 3)), color="#55595f", edgecolor="white")
    ax.set_xlabel("seconds to grade one submission")
    ax.set_ylabel("submissions")
    fig.tight_layout()
    alt = (
        f"Histogram of the grading time of {len(seconds)} submissions: median "
        f"{_number(statistics.median(seconds))} s, longest {_number(max(seconds))} s."
    )
    return _svg_img(fig, alt)


# --------------------------------------------------------------------------- tables


def _table(caption: str, header: list[str], rows: list[list], numeric: Collection[int] = frozenset()) -> str:
    head = "".join(
        f'<th scope="col"{" class=num" if i in numeric else ""}>{_e(h)}</th>' for i, h in enumerate(header)
    )
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            if i == 0:
                cells.append(f'<th scope="row">{_e(cell)}</th>')
            else:
                cells.append(f"<td{' class=num' if i in numeric else ''}>{_e(cell)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f"<table><caption>{_e(caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _starters(assignment: Path | None, functions: dict[str, str]) -> dict[str, str]:
    if assignment is None or not Path(assignment).is_file():
        return {}
    return similarity.answer_sources(Path(assignment), functions)


def _written_rows(final: ClassScores, submissions: int) -> list[list]:
    """The rows of the written questions (graded by hand) in the table of scores."""
    rows: list[list] = []
    for question, top in final.info.manual.items():
        values = [float(v) for g in final.grades if (v := g.scores.get(question)) is not None]
        rows.append(
            [
                question,
                "written answer, graded by hand",
                _number(top),
                _number(statistics.mean(values)) if values else "-",
                _number(statistics.median(values)) if values else "-",
                sum(v >= top - 1e-9 for v in values),
                sum(v <= 1e-9 for v in values),
                submissions - len(values),
            ]
        )
    return rows


def _written_note(final: ClassScores) -> str:
    """What is left to score by hand, and the commands that do it (empty when nothing is)."""
    left = {q: sum(g.scores.get(q) is None for g in final.grades) for q in final.info.manual}
    left = {q: n for q, n in left.items() if n}
    if not left:
        return ""
    which = ", ".join(f"{q} ({n} of {len(final.grades)} not scored yet)" for q, n in left.items())
    return (
        f"<p class=note>Written questions: {_e(which)}. Their totals are not final: run "
        "<code>python -m coursetools.grade manual OUT</code>, fill the points and comments of "
        "<code>OUT/manual/&lt;question&gt;.csv</code>, then <code>python -m coursetools.grade "
        "overrides OUT</code>.</p>"
    )


def mistakes_by_exercise(records: Iterable[Record]) -> dict[str, Counter]:
    """``{exercise: Counter({misconception: number of students who showed it})}``."""
    found: dict[str, Counter] = {}
    for record in records:
        for ex_id, ex in record.exercises.items():
            named = {c.misconception for c in ex.cases if c.misconception}
            # sorted: a tie between two mistakes is listed in one order, whatever the hash seed
            found.setdefault(ex_id, Counter()).update(sorted(named))
    return found


def build_report(
    final: ClassScores,
    assignment: Path | None = None,
    flags: list[similarity.Flag] | None = None,
    folder: Path | None = None,
) -> str:
    """The page for a class's final scores (:class:`coursetools.grade.outputs.scores.ClassScores`):
    every number on it is the one of grades.csv and the feedback. ``assignment``: the exercise
    notebook (its starter code is left out of the near-identical answers); ``flags``: those
    answers' pairs, when already found (by default the answers are read again and compared:
    with ``folder``, the class's output folder, only the notebooks not read before, within the
    class's budget, :func:`~coursetools.grade.grading.parse_worker.read_record_answers`)."""
    grades = final.grades
    records = [grade.record for grade in grades]
    assignment_name = final.info.assignment
    exercises: list[str] = []
    points: dict[str, float] = {}
    functions: dict[str, str] = {}
    for record in records:
        for ex_id, result in record.exercises.items():
            if ex_id not in points:
                exercises.append(ex_id)
                points[ex_id] = float(result.points)
            if result.function:
                functions[ex_id] = result.function
    scores: dict[str, list[float]] = {
        ex: [
            float(score)
            for grade in grades
            if ex in grade.record.exercises and (score := grade.scores.get(ex)) is not None
        ]
        for ex in exercises
    }
    statuses = Counter(grade.status.value for grade in grades)
    seconds = [float(r.seconds) for r in records if isinstance(r.seconds, (int, float))]
    totals = [float(grade.total) for grade in grades if grade.total is not None]
    max_total = max((float(grade.max or 0) for grade in grades), default=0.0)
    mean_text = final.mean_text()
    strays = final.info.strays
    adjusted = sum(bool(grade.changes) for grade in grades)
    similar_note = ""
    if flags is None:
        try:
            read, skipped = read_record_answers(records, functions, out=folder)
            answers = {student: got["normal"] for student, got in read.items()}
            flags = similarity.flag_normals(answers, _starters(assignment, functions))
            if skipped:
                similar_note = (
                    "Not every notebook was read again for this search (changed since grading, a link, "
                    "too large or too slow to read, or the class's time for it spent): "
                    + "; ".join(skipped[:20])
                )
        except Exception as exc:  # noqa: BLE001 - one section must never cost the whole report
            flags = []
            similar_note = (
                f"The search for near-identical answers failed ({type(exc).__name__}); no pair is listed."
            )
    title = f"Class report: {assignment_name}" if assignment_name else "Class report"
    plural = "" if len(records) == 1 else "s"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        '<a class="skip" href="#main">Skip to the report</a>',
        f'<header><h1>{_e(title)}</h1><p class="lead">{len(records)} submission{plural}; '
        f"{statuses.get(Status.GRADED.value, 0)} graded to the end; "
        + _e(
            mean_text
            or f"class mean {_number(statistics.mean(totals)) if totals else '-'} of {_number(max_total)} "
            f"(over {len(totals)} submissions with a total)"
        )
        + (f"; {adjusted} with a score changed by the instructor" if adjusted else "")
        + ".</p>",
        "<nav aria-label='Sections'><ul>"
        "<li><a href='#scores'>Scores per exercise</a></li><li><a href='#statuses'>Statuses</a></li>"
        "<li><a href='#mistakes'>Most frequent named mistakes</a></li>"
        "<li><a href='#time'>Grading time</a></li><li><a href='#similar'>Near-identical answers</a></li>"
        "</ul></nav></header>",
        '<main id="main">',
    ]
    # scores
    out.append('<section aria-labelledby="scores"><h2 id="scores">Scores per exercise</h2>')
    if exercises:
        out.append("<figure>" + _safe(_score_figure, exercises, scores, points))
        out.append(
            "<figcaption>Score of each exercise over the submissions that have one.</figcaption></figure>"
        )
        rows = []
        for ex in exercises:
            values = scores[ex]
            rows.append(
                [
                    ex,
                    functions.get(ex, ""),
                    _number(points[ex]),
                    _number(statistics.mean(values)) if values else "-",
                    _number(statistics.median(values)) if values else "-",
                    sum(v >= points[ex] - 1e-9 for v in values),
                    sum(v <= 1e-9 for v in values),
                    len(records) - len(values),
                ]
            )
        rows += _written_rows(final, len(records))
        out.append(
            _table(
                "Scores per exercise",
                ["exercise", "function", "points", "mean", "median", "full marks", "zero", "not judged"],
                rows,
                {2, 3, 4, 5, 6, 7},
            )
        )
    else:
        out.append("<p>No exercise was graded.</p>")
    out.append(_written_note(final))
    out.append("</section>")
    # statuses
    out.append('<section aria-labelledby="statuses"><h2 id="statuses">Statuses</h2>')
    if records:
        out.append("<figure>" + _safe(_status_figure, statuses))
        out.append("<figcaption>How each submission's run ended.</figcaption></figure>")
        meaning = STATUS_MEANING
        ordered = [s for s in STATUS_ORDER if statuses.get(s)] + sorted(set(statuses) - set(STATUS_ORDER))
        out.append(
            _table(
                "Statuses",
                ["status", "submissions", "meaning"],
                [[s, statuses[s], meaning.get(s, "")] for s in ordered],
                {1},
            )
        )
        look = [r for r in records if r.status is not Status.GRADED]
        if look:
            out.append("<h3>Submissions to look at</h3><ul>")
            for r in look[:50]:
                out.append(f"<li>{_e(r.student)}: {_e(r.status.value)}</li>")
            if len(look) > 50:
                out.append(f"<li>... and {len(look) - 50} more (see grades.csv)</li>")
            out.append("</ul>")
    out.append("</section>")
    # mistakes
    out.append('<section aria-labelledby="mistakes"><h2 id="mistakes">Most frequent named mistakes</h2>')
    out.append(
        '<p class="note">The known mistakes (misconceptions) the checks recognised in the '
        "learners' outputs, counted once per student.</p>"
    )
    found = mistakes_by_exercise(records)
    for ex in exercises:
        counter = found.get(ex, Counter())
        judged = len(scores.get(ex, []))
        out.append(f"<h3>{_e(ex)} <code>{_e(functions.get(ex, ''))}</code></h3>")
        if not counter:
            out.append("<p>No named mistake recognised.</p>")
            continue
        rows = [
            [m, n, f"{100 * n / judged:.0f}%" if judged else "-"]
            for m, n in counter.most_common(TOP_MISTAKES)
        ]
        out.append(
            _table(f"Named mistakes in {ex}", ["mistake", "students", "share of judged"], rows, {1, 2})
        )
    out.append("</section>")
    # time
    out.append('<section aria-labelledby="time"><h2 id="time">Grading time per submission</h2>')
    if seconds:
        out.append("<figure>" + _safe(_time_figure, seconds))
        out.append(
            "<figcaption>Wall-clock seconds from the start of a submission's first run to its verdict"
            " (on a loaded machine, a slow one is not always a slow notebook).</figcaption></figure>"
        )
        by_time = sorted(seconds)
        p90 = by_time[min(len(by_time) - 1, int(0.9 * len(by_time)))]
        out.append(
            _table(
                "Grading time",
                ["statistic", "seconds"],
                [
                    ["median", _number(statistics.median(seconds))],
                    ["90th percentile", _number(p90)],
                    ["longest", _number(max(seconds))],
                    ["sum over submissions", _number(sum(seconds))],
                ],
                {1},
            )
        )
        slow = sorted(records, key=lambda r: -float(r.seconds or 0))[:SLOWEST]
        out.append(
            _table(
                "The slowest submissions",
                ["student", "seconds", "status"],
                [[r.student, _number(r.seconds), r.status.value] for r in slow],
                {1},
            )
        )
    else:
        out.append("<p>No timing recorded.</p>")
    out.append("</section>")
    # similarity
    out.append('<section aria-labelledby="similar"><h2 id="similar">Near-identical answers</h2>')
    out.append(
        '<p class="flag">These pairs wrote answers that are the same, or nearly, once names, comments '
        "and layout are set aside. It is a list for a person to look at, not a finding: similar "
        "answers have innocent causes, and <strong>no grade is changed</strong>. Short answers, the "
        "starter code and answers shared by many are never listed.</p>"
    )
    if similar_note:
        out.append(f'<p class="note">{_e(similar_note)}</p>')
    if flags:
        rows = [
            [
                f.exercise,
                f.first,
                f.second,
                "identical" if f.similarity >= 1 else f"{100 * f.similarity:.0f}%",
                f.tokens,
            ]
            for f in flags
        ]
        out.append(
            _table(
                "Pairs of near-identical answers",
                ["exercise", "submission", "submission", "similarity", "tokens"],
                rows,
                {3, 4},
            )
        )
    else:
        out.append("<p>No pair found.</p>")
    out.append("</section>")
    if strays:
        out.append('<section aria-labelledby="strays"><h2 id="strays">Files that are not submissions</h2>')
        out.append(
            "<p>Found in the download and not graded (not a notebook and not a learner's upload):</p><ul>"
        )
        out += [f"<li><code>{_e(visible(s))}</code></li>" for s in strays]
        out.append("</ul></section>")
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"
