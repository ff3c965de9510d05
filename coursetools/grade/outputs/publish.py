"""Write every output of a class from its final scores, in one place.

:func:`publish` computes the class's :class:`~coursetools.grade.outputs.scores.ClassScores`
(records + roster + overrides + manual scores + late policy) and renders from it

* ``OUT/grades.csv`` (:func:`coursetools.grade.outputs.gradebook.write_gradebook`),
* ``OUT/<student>/results.json`` (:func:`coursetools.grade.outputs.results.results_json`),
* ``OUT/feedback/<student>.md`` (:func:`coursetools.grade.outputs.feedback.feedback_markdown`),
* ``OUT/report.html`` (:func:`coursetools.grade.outputs.class_report.build_report`),
* ``OUT/strays.txt`` (files of the download that are not submissions).

The grading run (:mod:`.batch`), ``export`` and the commands of :mod:`.commands`
(``report``, ``overrides``, ``manual``) all end by calling it, so whichever ran last, the
files are the same. A file is rewritten only when its text changes. Nothing below this
floor calls it (``tests/test_layering.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

from coursetools.grade.outputs import class_report, feedback, gradebook
from coursetools.grade.outputs.results import results_json
from coursetools.grade.outputs.scores import ClassInfo, ClassScores, Grade, compute
from coursetools.grade.records.escape import visible
from coursetools.grade.records.paths import Out, atomic_write


def _write(path: Path, text: str) -> None:
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    atomic_write(path, text)


def write_learner(out: Path, grade: Grade, scores: ClassScores) -> None:
    """One learner's feedback and Gradescope results (the record itself is the grader's)."""
    layout = Out(Path(out))
    show = scores.info.show_hidden_inputs
    name = scores.info.assignment
    _write(layout.feedback(grade.student), feedback.feedback_markdown(grade, name, show))
    _write(layout.results(grade.student), json.dumps(results_json(grade, show), indent=2) + "\n")


def publish(out: Path, overrides_csv: Path | None = None, report_html: bool = True) -> ClassScores:
    """Render every output of ``out`` from its final scores; return them (with the problems)."""
    out = Path(out)
    layout = Out(out)
    if overrides_csv is not None:
        info = ClassInfo.load(out)
        if info.assignment and str(Path(overrides_csv).resolve()) != str(layout.overrides.resolve()):
            info.overrides = str(Path(overrides_csv).resolve())
            info.save(out)
    scores = compute(out, overrides_csv)
    gradebook.write_gradebook(out, scores)
    for grade in scores.grades:
        if layout.record(grade.student).is_file():
            write_learner(out, grade, scores)
    if scores.info.strays:
        _write(layout.strays, "".join(visible(s) + "\n" for s in scores.info.strays))
    if report_html:
        notebook = Path(scores.info.notebook) if scores.info.notebook else None
        _write(layout.report, class_report.build_report(scores, notebook, folder=out))
    return scores
