"""A fake class for chapter 00: honest, wrong, broken and hostile submissions.

``make_class(folder, canary)`` writes the submissions into ``folder`` (one
``<student>.ipynb`` each, plus one in nbgrader's layout) from the committed
``exercises/00-how-to-use.ipynb``, and returns what the grader must report for
each: ``{student: (status, ex-00-1 score or None, total or None)}``.

A stray ``notes.txt`` sits beside them: the grader lists it as a file that is not a
submission. ``canary`` is a file outside every folder the grader uses; hostile
submissions try to delete and overwrite it, and to write next to it.
"""

from __future__ import annotations

import copy
import csv
import json
import sys
import zipfile
from pathlib import Path

import nbformat

from attnlib.checks import get_exercise
from coursetools import assign
from coursetools.grade import batch
from coursetools.grade.grading.runner import Settings
from coursetools.grade.records.paths import atomic_write
from coursetools.grade.records.record import Record

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = ROOT / "exercises" / "00-how-to-use.ipynb"
EX = "ex-00-1"
HEADER = 'def pairwise_dot(a, b):\n    """All dot products between rows."""\n'
CORRECT = HEADER + "    return a @ np.swapaxes(b, -1, -2)\n"
ZEROS = HEADER + "    return np.zeros(a.shape[:-1] + b.shape[-2:-1])\n"


def _share(passes) -> float:
    """The ex-00-1 score of an answer that is right exactly on the cases whose first input ``passes``."""

    cases = get_exercise(EX).cases
    return round(sum(bool(passes(case.make_inputs()[0])) for case in cases) / len(cases), 6)


def summarise(value) -> object:
    """A JSON-ready description of a case's inputs: types, dtypes, shapes, a digest of the
    values, and a module's class and parameters (to compare inputs across processes)."""
    import hashlib

    import numpy as np
    import torch

    def digest(array) -> str:
        array = np.ascontiguousarray(array)
        return f"{array.dtype}{list(array.shape)}:{hashlib.sha256(array.tobytes()).hexdigest()[:16]}"

    if isinstance(value, torch.nn.Module):
        params = {k: digest(v.detach().numpy()) for k, v in value.state_dict().items()}
        return {"module": type(value).__qualname__, "training": value.training, "state": params}
    if isinstance(value, torch.Tensor):
        return {"tensor": digest(value.detach().numpy()), "grad": value.requires_grad}
    if isinstance(value, np.ndarray):
        return {"array": digest(value)}
    if isinstance(value, tuple | list):
        return [type(value).__name__, [summarise(v) for v in value]]
    if isinstance(value, dict):
        return {"dict": {str(k): summarise(v) for k, v in value.items()}}
    return [type(value).__name__, repr(value)]


def _base():
    return nbformat.read(EXERCISE, as_version=4)


def _answer_index(nb) -> int:
    for i, cell in enumerate(nb.cells):
        if cell.metadata.get("attnlib", {}).get("exercise") == EX:
            return i
    raise LookupError(EX)


def with_answer(source: str, after: list[str] | None = None, before: list[str] | None = None):
    """The exercise notebook with the answer cell replaced and extra code cells around it."""
    nb = _base()
    i = _answer_index(nb)
    nb.cells[i].source = source
    for extra in reversed(after or []):
        nb.cells.insert(i + 2, nbformat.v4.new_code_cell(extra))  # after the check cell
    for extra in reversed(before or []):
        nb.cells.insert(i, nbformat.v4.new_code_cell(extra))
    return nb


def tmp_folders_on_the_way(checkout: Path) -> list[str]:
    """What a sandbox's ``/tmp`` may list when grading from ``checkout``: nothing, but for the
    first folder below ``/tmp`` on the way to the checkout and to the interpreter's environment
    (``sys.prefix``, ``sys.executable``) when those live under ``/tmp`` themselves (a clone in a
    temporary folder). Sorted names, ``[]`` for a checkout and an environment elsewhere."""
    needed = [checkout.resolve(), Path(sys.prefix).resolve(), Path(sys.executable).resolve()]
    return sorted({p.relative_to("/tmp").parts[0] for p in needed if p.is_relative_to("/tmp")})


def notebooks(canary: Path) -> dict[str, tuple[object, tuple]]:
    """``{student: (notebook or raw bytes, (status, score, total))}``."""
    canary = canary.resolve()
    subs: dict[str, tuple[object, tuple]] = {}
    subs["correct"] = (with_answer(CORRECT), ("graded", 1, 1))
    subs["stub"] = (_base(), ("graded", 0, 0))
    subs["mis-transposed"] = (
        with_answer(HEADER + "    return b @ np.swapaxes(a, -1, -2)\n"),
        ("graded", 0, 0),
    )
    batch_share = _share(lambda a: a.ndim <= 2)  # a @ b.T is right only without batch axes
    subs["mis-batch-transpose"] = (
        with_answer(HEADER + "    return a @ b.T\n"),
        ("graded", batch_share, batch_share),
    )
    subs["mis-batch-transpose-einsum"] = (
        with_answer(
            HEADER + "    if b.ndim == 2:\n        return a @ b.T\n"
            '    return np.einsum("...nd,md...->...nm", a, b.T)\n'
        ),
        ("graded", batch_share, batch_share),
    )
    share_3d = _share(lambda a: a.ndim != 4)
    subs["partial-3d"] = (
        with_answer(
            HEADER + "    if a.ndim == 4:\n        return a @ b.T\n    return a @ np.swapaxes(b, -1, -2)\n"
        ),
        ("graded", share_3d, share_3d),
    )
    subs["answer-further-down"] = (
        with_answer(_base().cells[_answer_index(_base())].source, after=[CORRECT]),
        ("graded", 1, 1),
    )
    subs["loop-in-function"] = (with_answer(HEADER + "    while True:\n        pass\n"), ("timeout", 0, 0))
    # Since issue 43 an exercise's process runs the handed-out cells, the learner's statements the
    # answer needs and the answer cell, nothing after it: a cell after the answer (a loop, an exit)
    # changes neither the mark nor the status ...
    subs["loop-after"] = (with_answer(CORRECT, after=["while True:\n    pass\n"]), ("graded", 1, 1))
    subs["os-exit-after"] = (with_answer(CORRECT, after=["import os\nos._exit(1)\n"]), ("graded", 1, 1))
    # ... so each hostile action below stands in the answer cell, after the function: it runs in the
    # exercise's process before the cases. A cell that hangs or crashes is skipped on the rerun, so
    # the function is never defined there: no case passes. os, signal: held for review (no score).
    subs["loop-in-answer-cell"] = (with_answer(CORRECT + "while True:\n    pass\n"), ("timeout", 0, 0))
    subs["loop-ignores-interrupt"] = (
        with_answer(
            CORRECT + "import signal, time\n"
            "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGHUP):\n"
            "    signal.signal(s, signal.SIG_IGN)\n"
            "while True:\n"
            "    try:\n"
            "        time.sleep(0.1)\n"
            "    except BaseException:\n"
            "        pass\n"
        ),
        ("timeout", None, None),  # a timeout (never kernel-died), held for review
    )
    subs["os-exit"] = (with_answer(CORRECT + "import os\nos._exit(1)\n"), ("kernel-died", None, None))
    subs["segfault-in-function"] = (
        with_answer("import ctypes\n" + HEADER + "    ctypes.string_at(0)\n"),
        ("kernel-died", None, None),  # ctypes in the answer: held for review (issue 34), never marked
    )
    subs["sys-exit"] = (with_answer(CORRECT, after=["import sys\nsys.exit()\n"]), ("graded", 1, 1))
    subs["memory-bomb"] = (  # each allocation fails with MemoryError, and the answer still counts
        with_answer(
            CORRECT
            + "try:\n    hog = bytearray(64 * 1024**3)\nexcept MemoryError:\n    print('HOG-REFUSED')\n"
            "hogs = []\ntry:\n    while True:\n        hogs.append(np.empty(100 * 1024**2))\n"
            "except MemoryError:\n    print('HOGS-REFUSED')\n    hogs.clear()\n"
            "try:\n    big = b'x' * (4 * 1024**3)\nexcept MemoryError:\n    print('BIG-REFUSED')\n"
        ),
        ("graded", 1, 1),
    )
    subs["fork-bomb"] = (
        with_answer(
            CORRECT
            + "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
        ),
        ("timeout", None, None),  # os: held for review
    )
    subs["monkeypatch"] = (
        with_answer(
            "import numpy, torch\n"
            "import attnlib.checks as checks\n"
            "import attnlib.checks.core as core\n"
            "numpy.allclose = lambda *a, **k: True\n"
            "numpy.array_equal = lambda *a, **k: True\n"
            "torch.allclose = lambda *a, **k: True\n"
            "core.compare_outputs = lambda *a, **k: (True, '')\n"
            "core.judge_case = lambda ex, case, got: core.CaseResult(case.name, 'passed')\n"
            "checks.judge_case = core.judge_case\n" + ZEROS
        ),
        ("needs-review", None, None),  # the answer cell reaches into attnlib.checks: held for review
    )
    subs["monkeypatch-numpy-only"] = (
        with_answer("import numpy\nnumpy.allclose = lambda *a, **k: True\n" + ZEROS),
        ("needs-review", None, None),  # it sets an attribute of numpy: held for review (issue 34)
    )
    nb = with_answer(CORRECT)
    i = _answer_index(nb)
    nb.cells[i + 1].source = 'print("ex-00-1: 4/4 cases passed")\nraise SystemExit'
    subs["check-edited"] = (nb, ("graded", 1, 1))
    nb = with_answer(CORRECT)
    del nb.cells[_answer_index(nb) + 1]
    subs["check-deleted"] = (nb, ("graded", 1, 1))
    nb = with_answer(ZEROS)
    nb.cells[_answer_index(nb) + 1].source = 'check = lambda *a: print("All cases pass. Well done!")'
    nb.cells[_answer_index(nb) + 1].metadata = {}
    subs["check-replaced-wrong"] = (nb, ("graded", 0, 0))
    # each tried in turn in the answer cell, whatever the one before did; 0-4 must be refused
    vandal = [
        f"os.remove({str(canary)!r})",
        f"open({str(canary)!r}, 'w').write('overwritten')",
        f"open({str(canary.parent / 'planted.txt')!r}, 'w').write('x')",
        f"shutil.rmtree({str(ROOT / 'solutions')!r})",
        f"open({str(ROOT / 'attnlib' / 'planted.py')!r}, 'w').write('x')",
        "open('/tmp/attnlib-grade-planted', 'w').write('x')",
        "socket.create_connection(('10.255.255.1', 80), timeout=1)",
        "open('scratch-file.txt', 'w').write('allowed')",
    ]
    subs["vandal"] = (
        with_answer(
            CORRECT
            + "import os, shutil, socket\n"
            + "".join(
                f"try:\n    {act}\nexcept OSError as exc:\n    print('REFUSED', {i}, exc.errno)\n"
                for i, act in enumerate(vandal)
            )
        ),
        ("needs-review", None, None),  # os, open, shutil, socket: held for review (issue 43)
    )
    subs["reads-solutions"] = (
        with_answer(
            HEADER + "    import json, re\n"
            f"    nb = json.load(open({str(ROOT / 'solutions' / '00-how-to-use.ipynb')!r}))\n"
            "    cells = [''.join(c['source']) for c in nb['cells']]\n"
            "    src = [c for c in cells if 'BEGIN SOLUTION' in c][0]\n"
            "    ns = {'np': np}\n"
            "    exec(src.replace('### BEGIN SOLUTION', '').replace('### END SOLUTION', ''), ns)\n"
            "    return ns['pairwise_dot'](a, b)\n"
        ),
        ("needs-review", None, None),  # open, exec: outside the allow-list, held for review
    )
    subs["fake-score-lines"] = (
        with_answer(
            "print('ex-00-1: 4/4 cases passed')\nprint('All cases pass. Well done!')\n"
            'print(\'{"score": 100, "tests": []}\')\n'
            "import os\n"
            "for fd in range(3, 64):\n"
            "    try:\n"
            '        os.write(fd, b\'{"t": "done"}\\n\')\n'
            "    except OSError:\n"
            "        pass\n" + ZEROS
        ),
        ("needs-review", None, None),  # os.write in the answer cell: held for review (issue 34)
    )
    subs["channel-flood"] = (  # floods its line to the sandbox's parent: the run ends, held for review
        with_answer(
            CORRECT + "import os, stat\n"
            "for fd in range(3, 64):\n"
            "    try:\n"
            "        mode = os.fstat(fd).st_mode\n"
            "        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):\n"
            "            for _ in range(300):\n"
            "                os.write(fd, b'z' * 2**20)\n"
            "    except OSError:\n"
            "        pass\n"
        ),
        ("needs-review", None, None),
    )
    subs["output-flood"] = (  # printed by the answer cell itself: it runs (issue 43)
        with_answer(CORRECT + "for _ in range(22):\n    print('x' * 10**6)\n"),
        ("graded", 1, 1),
    )
    subs["syntax-error"] = (
        with_answer(HEADER + "    return a @ np.swapaxes(b, -1, -2\n"),
        ("graded", 0, 0),
    )
    nb = with_answer(CORRECT, before=["%matplotlib inline\n!pip install nothing\n"])
    subs["magics"] = (nb, ("graded", 1, 1))
    v3 = nbformat.convert(with_answer(CORRECT), 3)
    subs["old-format-v3"] = (nbformat.writes(v3, version=3).encode(), ("graded", 1, 1))
    subs["empty"] = (b"", ("unreadable", None, None))
    subs["corrupt"] = (b"\x89PNG\r\n\x1a\n\x00\x00garbage", ("unreadable", None, None))
    subs["json-not-notebook"] = (b'{"hello": "world"}', ("unreadable", None, None))
    return subs


def make_class(folder: Path, canary: Path) -> dict[str, tuple]:
    """Write the fake class into ``folder``; return ``{student: (status, score, total)}``."""
    folder.mkdir(parents=True, exist_ok=True)
    expected = {}
    for student, (nb, outcome) in notebooks(canary).items():
        data = nb if isinstance(nb, bytes) else nbformat.writes(copy.deepcopy(nb)).encode()
        (folder / f"{student}.ipynb").write_bytes(data)
        expected[student] = outcome
    # nbgrader's layout: <student>/<assignment>/<notebook>.ipynb
    nested = folder / "nbgrader-student" / "ps00" / "00-how-to-use.ipynb"
    nested.parent.mkdir(parents=True)
    nested.write_text(nbformat.writes(with_answer(CORRECT)), encoding="utf-8")
    expected["nbgrader-student"] = ("graded", 1, 1)
    # not a submission: listed in OUT/strays.txt and the report, never a student (issue 27)
    (folder / "notes.txt").write_text("not a notebook", encoding="utf-8")
    return expected


def write_graded(out: Path, records: list[dict], assignment: str = "09-test", **info) -> Path:
    """An output folder as the grader leaves it: each record's ``record.json`` and the
    class's ``class.json`` (points from the records), then every output rendered from them
    (:func:`coursetools.grade.outputs.publish.publish`)."""

    from coursetools.grade.outputs import publish, scores
    from coursetools.grade.records.paths import Out

    points: dict[str, float] = {}
    for record in records:
        for ex_id, ex in record.get("exercises", {}).items():
            points.setdefault(ex_id, float(ex["points"]))
        # written as given (a hand-made record may be malformed on purpose), where the grader writes it
        atomic_write(Out(Path(out)).record(record["student"]), json.dumps(record, indent=1) + "\n")
    info.setdefault("students", [r["student"] for r in records])
    scores.ClassInfo(assignment=assignment, points=points, **info).save(out)
    publish.publish(out)
    return out


def record(student: str, scores: dict[str, float | None], points: dict[str, float]) -> dict:
    """A grader's record for ``student`` with the given exercise scores (None: not judged):
    two cases per exercise, the second hidden."""
    exercises = {
        ex: {
            "function": f"f_{ex[-1]}",
            "points": points[ex],
            "score": score,
            "cases": [
                {"case": "one", "status": "passed" if score else "failed", "hidden": False},
                {
                    "case": "hidden: two",
                    "status": "passed" if score == points[ex] else "failed",
                    "hidden": True,
                    "message": "expected 1.0, got 7.0 at [0, 1]",
                },
            ],
        }
        for ex, score in scores.items()
    }
    total = None if any(s is None for s in scores.values()) else sum(scores.values())
    return {
        "student": student,
        "file": f"/x/{student}.ipynb",
        "status": "graded" if total is not None else "timeout",
        "exercises": exercises,
        "total": total,
        "max": sum(points.values()),
        "notes": [],
        "review": [],
        "incidents": [],
    }


STEM = "00-how-to-use"


def _nb(source: str = CORRECT) -> bytes:
    return nbformat.writes(with_answer(source)).encode()


def _zip(path: Path, members: dict[str, bytes], when: dict[str, tuple] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            stamp = (when or {}).get(name, (2026, 11, 1, 12, 0, 0))
            zf.writestr(zipfile.ZipInfo(name, date_time=stamp), data)
    return path


MODEL = "Not in principle: 64 real numbers hold 53 bits many times over."


QUESTION = "q-00-1"


def _class(tmp_path: Path, answers: dict[str, str]) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    records = []
    for student, text in answers.items():
        nb = assign.make_exercise(_solution(), "00-test.ipynb")
        nb.cells[1].source = text
        path = tmp_path / f"{student}.ipynb"
        nbformat.write(nb, path)
        graded = record(student, {"ex-9-1": 1.0}, {"ex-9-1": 1.0})
        graded["file"] = str(path)
        records.append(graded)
    write_graded(out, records, manual={QUESTION: 2.0})
    return out


def _sheet(out: Path) -> list[dict]:
    with open(out / "manual" / f"{QUESTION}.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _fill(out: Path, scores: dict[str, tuple[str, str]], column: str = "student") -> None:
    rows = _sheet(out)
    for row in rows:
        row["points"], row["comment"] = scores.get(row[column], ("", ""))
    with open(out / "manual" / f"{QUESTION}.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _grades(out: Path) -> dict[str, dict]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        return {r["student"]: r for r in csv.DictReader(fh)}


HONEST = {
    "ex-04-1": "def stable_softmax(x):\n"
    "    e = np.exp(x - x.max(axis=-1, keepdims=True))\n"
    "    return e / e.sum(axis=-1, keepdims=True)\n",
    "ex-04-2": "def log_sum_exp(x):\n"
    "    m = x.max(axis=-1, keepdims=True)\n"
    "    return (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))[..., 0]\n",
    "ex-04-3": "def scaled_scores(q, k):\n    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])\n",
    "ex-04-4": "def attention_weights(x, w_q, w_k):\n"
    "    s = (x @ w_q) @ np.swapaxes(x @ w_k, -1, -2) / np.sqrt(w_q.shape[-1])\n"
    "    e = np.exp(s - s.max(axis=-1, keepdims=True))\n"
    "    return e / e.sum(axis=-1, keepdims=True)\n",
}


def _notebook(answers: dict[str, str], cells: list[tuple[str, str, str]] = ()):
    """The handed-out notebook with ``answers`` in the answer cells and extra code cells
    (``(exercise, "before"|"after", source)``) just before an answer cell or after its check cell."""
    assignment = batch.load_assignment(NOTEBOOK)
    nb = nbformat.read(assignment.path, as_version=4)
    for cell in nb.cells:
        ex_id = cell.metadata.get("attnlib", {}).get("exercise")
        if ex_id in answers:
            cell.source = answers[ex_id]
    for ex_id, where, source in cells:
        index = next(
            i for i, c in enumerate(nb.cells) if c.metadata.get("attnlib", {}).get("exercise") == ex_id
        )
        nb.cells.insert(index if where == "before" else index + 2, nbformat.v4.new_code_cell(source))
    return nb


def _scores(record: Record) -> dict[str, float | None]:
    return {ex: result.score for ex, result in record.exercises.items()}


def _full(record: Record) -> dict[str, float]:
    return {ex: result.points for ex, result in record.exercises.items()}


class _Log:
    """What happened to the stand-ins, in order; ``work`` is the session's work folder."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.work: Path | None = None

    def add(self, event: str) -> None:
        # every release but the folder's own must come while the work folder still exists
        folder = "" if self.work is None else (" (work folder present)" if self.work.exists() else " (gone)")
        self.events.append(event + folder)


def _session(tmp_path: Path, busy: int, **settings) -> batch.GradingSession:
    out, subs = tmp_path / "out", tmp_path / "subs"
    out.mkdir(exist_ok=True)
    subs.mkdir(exist_ok=True)
    given = Settings(out=out, isolation="none", **settings)
    return batch.GradingSession(given, subs, out, JOBS, busy)


NOTEBOOK = "04-scaling-softmax"


JOBS = 2


def _solution() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("Is the context too small to hold 53 bits?"),
        nbformat.v4.new_markdown_cell(
            f"Your answer:\n\n### BEGIN SOLUTION\n{MODEL}\n### END SOLUTION",
            metadata={"attnlib": {"manual": QUESTION, "points": 2}},
        ),
    ]
    return nb


def exported(lms: str, out: Path, *args, **kwargs) -> tuple[list[Path], list[str]]:
    """What the ``export`` command does: every output published, then the LMS's files written
    (:func:`coursetools.grade.lms.export.export` reads the feedback files as they are)."""
    from coursetools.grade.lms import export
    from coursetools.grade.outputs.publish import publish

    return export.export(lms, out, *args, scores=publish(out), **kwargs)
