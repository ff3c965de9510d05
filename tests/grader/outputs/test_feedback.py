"""What a learner and an instructor read: hidden cases without their inputs unless asked, cells
named as the learner sees them, the command line's help (issue 27, items 5 and 6)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import fixtures
import nbformat
import pytest

from coursetools.grade.grading import parse_worker, runner
from coursetools.grade.outputs import feedback
from coursetools.grade.outputs.scores import ClassInfo, Sources, build
from coursetools.grade.records.record import Record

ROOT = Path(__file__).resolve().parents[3]


def _feedback(record: dict, show: bool) -> str:
    info = ClassInfo(assignment="09-test", points={"ex-9-1": 2.0}, students=[record["student"]])
    sources = Sources({}, {}, [], {}, None, [], False)
    grade = build(info, {record["student"]: Record.from_dict(record)}, sources).grades[0]
    return feedback.feedback_markdown(grade, "09-test", show)


def test_hidden_cases_show_their_verdict_but_not_their_inputs_by_default():
    record = fixtures.record("ada", {"ex-9-1": 1.0}, {"ex-9-1": 2.0})
    hidden = record["exercises"]["ex-9-1"]["cases"][1]
    hidden.update(misconception="the result is transposed", hint="put a on the left")
    text = _feedback(record, show=False)
    assert "- **failed**: hidden case 1" in text
    assert "the result is transposed" in text and "put a on the left" in text  # the named mistake stays
    assert "two" not in text and "expected 1.0, got 7.0" not in text  # what it tries and returns: not shown
    assert text.count("hidden") == 1  # "hidden case 1", never "hidden: ... (hidden case)"
    shown = _feedback(record, show=True)
    assert "- **failed**: hidden case 1: two" in shown and "expected 1.0, got 7.0" in shown
    assert "hidden: two" not in shown and "(hidden case)" not in shown


def test_gradescope_results_hide_hidden_inputs_the_same_way():
    from coursetools.grade import gradescope

    record = fixtures.record("ada", {"ex-9-1": 1.0}, {"ex-9-1": 2.0})
    info = ClassInfo(assignment="09-test", points={"ex-9-1": 2.0}, students=["ada"])
    grade = build(info, {"ada": Record.from_dict(record)}, Sources({}, {}, [], {}, None, [], False)).grades[0]
    hidden = [t for t in gradescope.results_json(grade)["tests"] if t["visibility"] == "after_published"]
    assert hidden and "expected 1.0" not in hidden[0]["output"] and "hidden case 1" in hidden[0]["output"]
    hidden = [
        t for t in gradescope.results_json(grade, True)["tests"] if t["visibility"] == "after_published"
    ]
    assert "expected 1.0, got 7.0" in hidden[0]["output"]


def test_a_cell_is_named_by_its_number_among_code_cells_and_its_first_line(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Title"),
        nbformat.v4.new_code_cell("import numpy as np"),
        nbformat.v4.new_markdown_cell("Some text"),
        nbformat.v4.new_markdown_cell("More text"),
        nbformat.v4.new_code_cell("\n# train the model\nwhile True:\n    pass"),
    ]
    path = tmp_path / "ada.ipynb"
    nbformat.write(nb, path)
    record = fixtures.record("ada", {"ex-9-1": 2.0}, {"ex-9-1": 2.0})
    record["incidents"] = ["cell 4: did not finish within 30 s"]
    record["cell_errors"] = [{"cell": 4, "etype": "KeyboardInterrupt", "text": "", "line": 3}]
    labels = parse_worker.code_cell_labels(nbformat.read(path, as_version=4))  # as the reader makes them
    record["cell_labels"] = runner.labels_for(Record.from_dict(record), labels)
    assert record["cell_labels"] == {"4": {"number": 2, "first": "# train the model"}}
    text = _feedback(record, show=False)
    assert "code cell 2 (# train the model): did not finish within 30 s" in text
    assert "- code cell 2 (`# train the model`), line 3: `KeyboardInterrupt`" in text
    assert "cell 4" not in text


def _run(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "coursetools.grade", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_help_lists_every_subcommand_and_each_names_itself(capsys):
    import pytest

    from coursetools.grade.__main__ import SUBCOMMANDS, main

    top = _run("--help")  # the console entry point, once
    assert top.returncode == 0 and "--show-hidden-inputs" in top.stdout
    for name, (_, line) in SUBCOMMANDS.items():
        assert f"python -m coursetools.grade {name}" in top.stdout and line in top.stdout
        with pytest.raises(SystemExit) as stop:  # each subcommand's own --help, in this process
            main([name, "--help"])
        assert stop.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: python -m coursetools.grade {name} "), name


def test_skipped_cells_are_listed_by_their_code_cell_numbers():
    record = fixtures.record("ada", {"ex-9-1": 2.0}, {"ex-9-1": 2.0})
    record["notes"] = ["cells [4, 7] were skipped after they hung or crashed the process"]
    record["cell_labels"] = {"4": {"number": 2, "first": "x = 1"}, "7": {"number": 3, "first": "y"}}
    assert "code cells 2, 3 were skipped" in _feedback(record, show=False)


@pytest.mark.slow
def test_an_upload_that_is_not_a_notebook_is_named_by_the_learners_file(tmp_path):
    import csv

    from fixtures import STEM, _nb, _zip

    from coursetools.grade.lms import intake
    from coursetools.grade.lms.roster import write_roster

    out = tmp_path / "out"
    members = {"knuthdonald_45678_33333_answers.pdf": b"%PDF", f"lovelaceada_12345_67890_{STEM}.ipynb": _nb()}
    result = intake.collect(_zip(tmp_path / "c.zip", members), out / "submissions", STEM)
    write_roster(out, result)
    pdf = fixtures.record("knuthdonald-45678", {"ex-00-1": None}, {"ex-00-1": 1.0})
    pdf.update(status="unreadable", notes=["not a notebook: knuthdonald-45678"])
    ok = fixtures.record("lovelaceada-12345", {"ex-00-1": 1.0}, {"ex-00-1": 1.0})
    fixtures.write_graded(out, [pdf, ok], assignment=STEM)
    with open(out / "grades.csv", newline="") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    assert rows["knuthdonald-45678"]["notes"] == "not a notebook: answers.pdf (the learner's upload)"
    feedback = (out / "feedback" / "knuthdonald-45678.md").read_text()
    assert "You uploaded `answers.pdf`; the grader needs your notebook" in feedback
