"""The grader's own process, reading learner data, stays bounded whatever one submission holds
(issue 34, item 4).

Every command is run as the instructor runs it (a subprocess), and its own peak memory
(``VmHWM``) and wall time are measured beside the same command on a control class: one
hostile submission may cost at most a bounded time (the reader worker's limits) and no
memory of the grader's own process beyond a small margin. The hostile bank:

* the similarity pass: 1,500 legal code cells of blank lines (a regex quadratic in them
  stalled ``report.html`` for minutes);
* a notebook of millions of empty JSON objects (parsed in the grader's own process: GBs);
* an unreadable record whose file is a 150 MB notebook (the report read it whole);
* a symbolic link, refused by the grader or swapped in after grading, to a classmate's
  notebook (``manual`` followed it and showed the classmate's written answer);
* a graded file replaced after grading (its digest no longer matches);
* on the channel: lines of empty objects, a run that sends millions of them over many lines,
  an answer returning a million ``None``, and a learner's JSON encoder that pads every reply.
"""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import fixtures
import nbformat
import pytest

from coursetools.grade.grading.process import MAX_RUN_CONTAINERS, Run
from coursetools.grade.records import wire
from coursetools.grade.records.events import RunPlan

pytestmark = pytest.mark.grader

ROOT = Path(__file__).resolve().parents[3]
QUESTION = "q-00-1"
SECRET = "ADA-WROTE-THIS-WRITTEN-ANSWER"
TOKEN = "0123456789abcdef0123456789abcdef"
PREFIX = b'{"k": "' + TOKEN.encode() + b'"'

# the grader's own process on a hostile class may use this much more memory than on the same
# class without it (a 12 MB notebook of empty objects parsed in the grader took 400 MB and more)
MEMORY_MARGIN_MB = 80
# ... and this much more time: the reader worker's limit per notebook (10 s) and its start
TIME_MARGIN_S = 45.0

MEASURE = textwrap.dedent(
    """
    import json, os, resource, sys, time
    os.environ.setdefault("MPLBACKEND", "Agg")
    from coursetools.grade.__main__ import main
    start = time.monotonic()
    try:
        rc = main(sys.argv[1:])
    except SystemExit as exc:
        rc = exc.code
    wall = time.monotonic() - start
    hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print("MEASURED " + json.dumps({"rc": rc, "wall": wall, "peak_mb": hwm / 1024, "child_mb": kids / 1024}))
    """
)


def measure(*argv: str, timeout: float = 600) -> tuple[dict, str]:
    """Run ``python -m coursetools.grade ARGV`` and return its exit code, wall time, peak memory
    of the grader's own process (MB) and of its largest child (the reader worker), and output."""
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("MEASURED ")), None)
    assert line is not None, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(line.removeprefix("MEASURED ")), proc.stdout + proc.stderr


def _notebook(written: str = "my own words") -> nbformat.NotebookNode:
    nb = fixtures.with_answer(fixtures.CORRECT)
    cell = nbformat.v4.new_markdown_cell(written)
    cell.metadata["attnlib"] = {"manual": QUESTION, "points": 1}
    nb.cells.append(cell)
    return nb


def _write(path: Path, nb) -> str:
    data = nbformat.writes(nb).encode()
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def _record(student: str, file: Path, digest: str | None, status: str = "graded") -> dict:
    record = fixtures.record(student, {fixtures.EX: 1.0}, {fixtures.EX: 1.0})
    record["exercises"][fixtures.EX]["function"] = "pairwise_dot"
    record.update(file=str(file), digest=digest, status=status, seconds=1.0)
    if status == "unreadable":
        record.update(total=None)
        record["exercises"][fixtures.EX]["score"] = None
    return record


def hostile_class(folder: Path, hostile: bool) -> Path:
    """An output folder as the grader leaves it, with (``hostile``) or without the hostile bank."""
    subs = folder / "subs"
    subs.mkdir(parents=True)
    records = []
    for name in ("ada", "grace"):
        path = subs / f"{name}.ipynb"
        digest = _write(path, _notebook(SECRET if name == "ada" else "grace's words"))
        records.append(_record(name, path, digest))
    if hostile:
        # 1,500 legal code cells of blank lines (each within the reader's 4,000-line limit)
        nb = _notebook()
        nb.cells[1:1] = [nbformat.v4.new_code_cell("x = 1" + "\n" * 3_000 + "y = 2") for _ in range(1_500)]
        records.append(_record("blanks", subs / "blanks.ipynb", _write(subs / "blanks.ipynb", nb)))
        # a notebook of 6 million empty objects (12 MB) in a cell's metadata: legal JSON
        raw = json.loads(nbformat.writes(_notebook()))
        raw["metadata"]["pad"] = "@PAD@"
        data = json.dumps(raw).replace('"@PAD@"', "[" + "{}," * 6_000_000 + "{}]").encode()
        (subs / "objects.ipynb").write_bytes(data)
        records.append(_record("objects", subs / "objects.ipynb", hashlib.sha256(data).hexdigest()))
        # an unreadable record whose file is a 150 MB notebook (sparse: no disk is used)
        with open(subs / "huge.ipynb", "wb") as fh:
            fh.truncate(150 << 20)
        records.append(_record("huge", subs / "huge.ipynb", None, "unreadable"))
        # a symbolic link to a classmate's notebook: refused by the grader, or swapped in after grading
        (subs / "mallory.ipynb").symlink_to(subs / "ada.ipynb")
        records.append(_record("mallory", subs / "mallory.ipynb", "missing", "unreadable"))
        (subs / "eve.ipynb").symlink_to(subs / "ada.ipynb")
        records.append(_record("eve", subs / "eve.ipynb", records[0]["digest"]))
        # a graded file replaced after grading by a classmate's
        (subs / "trudy.ipynb").write_bytes((subs / "ada.ipynb").read_bytes())
        records.append(_record("trudy", subs / "trudy.ipynb", "0" * 64))
    out = folder / "out"
    fixtures.write_graded(out, records, assignment="00-how-to-use", manual={QUESTION: 1.0})
    return out


@pytest.fixture(scope="module")
def classes(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("bounded")
    return {kind: hostile_class(base / kind, kind == "hostile") for kind in ("control", "hostile")}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["report", "manual", "overrides"])
def test_a_hostile_submission_costs_the_grader_bounded_memory_and_time(classes, command):
    control, _ = measure(command, str(classes["control"]))
    hostile, output = measure(command, str(classes["hostile"]))
    assert control["rc"] == 0 and hostile["rc"] == 0, output[-2000:]
    assert hostile["peak_mb"] <= control["peak_mb"] + MEMORY_MARGIN_MB, (control, hostile)
    assert hostile["wall"] <= control["wall"] + TIME_MARGIN_S, (control, hostile)
    # the reader worker's memory is capped too (its RLIMIT_AS: its imports and 1 GiB)
    assert hostile["child_mb"] < 1536, hostile


@pytest.mark.slow
def test_manual_never_follows_a_link_nor_reads_a_refused_or_changed_file(classes):
    out = classes["hostile"]
    _, output = measure("manual", str(out))
    page = (out / "manual" / f"{QUESTION}.md").read_text(encoding="utf-8")
    sections = {
        part.split("\n", 1)[0].strip(): part for part in page.split("\n## ")[1:]
    }  # "## <student>" sections of the review page
    assert SECRET in sections["ada"]
    for thief in ("mallory", "eve", "trudy", "huge"):
        assert SECRET not in sections[thief] and "*(no answer)*" in sections[thief], thief
    assert "my own words" in sections["objects"] and "my own words" in sections["blanks"]  # read, in bounds
    assert page.count(SECRET) == 1
    # what was not read again is said, per learner, never silently
    for said in ("eve: answers not read again", "trudy: answers not read again (the file changed"):
        assert said in output, output[-3000:]
    assert "mallory" not in " ".join(
        ln for ln in output.splitlines() if "not read again" in ln
    )  # never opened


@pytest.mark.slow
def test_the_report_of_a_hostile_class_is_written(classes):
    out = classes["hostile"]
    measured, output = measure("report", str(out))
    assert measured["rc"] == 0, output
    page = (out / "report.html").read_text(encoding="utf-8")
    section = page.split('<h2 id="similar">', 1)[1]
    assert "The search for near-identical answers failed" not in section
    # what was not read again is said on the page, with the reason
    assert "eve: answers not read again (not opened" in section
    assert "trudy: answers not read again (the file changed since it was graded)" in section
    assert "mallory" not in section and "huge" not in section  # refused records are never opened


# --------------------------------------------------------------------------- the channel


@pytest.mark.parametrize(
    "payload",
    [
        b"{}," * 4_000_000 + b"{}",  # 12 MB of empty objects
        b"[]," * 60_000 + b"[]",  # just past the line's bound, shallow
        b'{"a": {}, "b": [[], {}]},' * 20_000 + b"{}",
    ],
)
def test_a_line_of_many_containers_is_refused_before_parsing(payload):
    line = PREFIX + b', "t": "value", "pad": [' + payload + b"]}"
    start = time.monotonic()
    assert wire.containers(line) > wire.MAX_LINE_CONTAINERS
    assert not wire.check_line(line, PREFIX)
    assert time.monotonic() - start < 3


def test_brackets_inside_strings_are_not_containers():
    line = PREFIX + b', "text": "' + b"{}[]" * 100_000 + b'"}'
    assert wire.containers(line) == 1 and wire.check_line(line, PREFIX)


def test_an_output_of_the_course_fits_with_room_to_spare():
    import numpy as np

    value = wire.encode(tuple({"w": np.ones((4, 4)), "b": [np.zeros(3), None]} for _ in range(50)))
    line = PREFIX + b', "t": "value", "value": ' + json.dumps(value).encode() + b"}"
    assert wire.check_line(line, PREFIX) and wire.containers(line) < wire.MAX_LINE_CONTAINERS // 50


@pytest.mark.parametrize(
    "value", [(None,) * 1_000_000, [[None] * 5_000, [None] * 5_001], {str(i): None for i in range(20_000)}]
)
def test_an_output_with_too_many_values_is_a_wrong_answer_not_a_huge_message(value):
    with pytest.raises(TypeError, match="more than"):
        wire.encode(value)


def test_a_run_that_sends_too_many_containers_over_many_lines_is_cut(tmp_path):
    plan = RunPlan([[0, "x = 1"]], {}, [], [])
    run = Run(plan, None, tmp_path, 0, time.monotonic() + 10, None)
    run.token = TOKEN
    line = PREFIX + b', "t": "hello", "isolation": {}, "pad": [' + b"{}," * 40_000 + b"{}]}"
    assert wire.check_line(line, PREFIX)  # each line alone is within the bound
    lines = 0
    while run.containers <= MAX_RUN_CONTAINERS:
        run._parse(line)
        lines += 1
    assert lines == MAX_RUN_CONTAINERS // 40_003 + 1
    assert run._parse(PREFIX + b', "t": "hello", "isolation": {}}') is None  # nothing parsed any more


ENCODER_PAD = textwrap.dedent(
    """
    import json
    _encode = json._default_encoder.encode
    json._default_encoder.encode = lambda o: _encode(o)[:-1] + ', "pad": [' + '{},' * 4_000_000 + '{}]}'
    """
)
MILLION_NONES = fixtures.HEADER + "    return (None,) * 1_000_000\n"


@pytest.mark.slow
def test_grading_a_learner_whose_replies_are_padded_stays_bounded(tmp_path):
    def grade(folder: Path, notebooks: dict) -> tuple[dict, str]:
        folder.mkdir()
        for name, nb in notebooks.items():
            (folder / f"{name}.ipynb").write_text(nbformat.writes(nb), encoding="utf-8")
        return measure(
            "00-how-to-use",
            str(folder),
            "--out",
            str(folder.parent / f"{folder.name}-out"),
            "--timeout-cell",
            "5",
            "--timeout-total",
            "60",
            "--jobs",
            "1",
            "--quiet",
        )

    correct = fixtures.with_answer(fixtures.CORRECT)
    control, _ = grade(tmp_path / "control", {"ada": correct})
    hostile, output = grade(
        tmp_path / "hostile",
        {
            "ada": correct,
            "padder": fixtures.with_answer(fixtures.CORRECT, before=[ENCODER_PAD]),
            "nones": fixtures.with_answer(MILLION_NONES),
        },
    )
    assert control["rc"] == 0 and hostile["rc"] == 0, output[-3000:]
    assert hostile["peak_mb"] <= control["peak_mb"] + MEMORY_MARGIN_MB, (control, hostile)
    with open(tmp_path / "hostile-out" / "grades.csv", encoding="utf-8", newline="") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    assert rows["ada"]["status"] == "graded" and rows["ada"]["total"] == "1"  # the class goes on
    assert rows["padder"]["status"] not in ("grader-error", "not-graded"), rows["padder"]
    assert rows["nones"]["total"] == "0", rows["nones"]  # a wrong answer, judged
