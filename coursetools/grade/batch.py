"""Grade every submission of a folder, in parallel, resumably."""

from __future__ import annotations

import hashlib
import os
import queue
import re
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import nbformat

from attnlib.checks import get_exercise
from coursetools import assign
from coursetools.grade import manual, publish, report, sandbox, scores
from coursetools.grade.escape import key_ok
from coursetools.grade.paths import ROOT
from coursetools.grade.process import needed_paths
from coursetools.grade.record import Record, Status
from coursetools.grade.runner import Settings, base_env, grade_submission
from coursetools.grade.submission import (
    Assignment,
    Submission,
    find_submissions,
    read_notebook,
    resolve_assignment,
)
from coursetools.grade.zygote import Zygote


def load_assignment(spec: str) -> Assignment:
    path = resolve_assignment(spec, ROOT)
    nb = nbformat.read(path, as_version=4)
    points = {k: float(v) for k, v in assign.exercise_ids(nb).items()}
    if not points:
        raise ValueError(f"{path} has no exercise cells (metadata attnlib.exercise)")
    functions = {ex_id: get_exercise(ex_id).function for ex_id in points}
    forbidden = {ex_id: tuple(get_exercise(ex_id).forbidden or ()) for ex_id in points}
    return Assignment(path, points, functions, forbidden, assignment_digest(path, points))


SYSTEM_TOPS = [
    [name]
    for name in (
        "usr",
        "lib",
        "lib64",
        "lib32",
        "etc",
        "bin",
        "sbin",
        "proc",
        "sys",
        "dev",
        "run",
        "var",
        "opt",
        "nix",
        "snap",
    )
]


def _sweep_work_dirs() -> None:
    """Remove the scratch parents of graders that ended without cleaning up (``kill -9``)."""
    for path in Path(tempfile.gettempdir()).glob("coursetools-grade-*-*"):
        pid = path.name.split("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists() and path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)


def _hidden_folders(submissions: Path, out: Path, extra) -> set[str]:
    """Folders covered by an empty tmpfs in the sandbox: the submissions, the output, and
    every folder beside the grader's own code in the repository (.git, solutions, _build,
    tests, ...) and beside the submissions folder, and ``attnlib/checks`` (the check modules
    hold the references and the known wrong answers: the harness imports the checker's
    machinery before the folder is covered, the cases' inputs come in the plan), and the
    system's temporary folders (other checkouts of the course, other graders' work; the
    sandbox makes its scratch folder inside the covering tmpfs). The sandbox skips any
    folder that holds what the interpreter needs (the attnlib and coursetools packages,
    the virtual env)."""
    hide = {
        str(submissions),
        str(out),
        str(ROOT / "solutions"),
        str(ROOT / ".git"),
        str(ROOT / "attnlib" / "checks"),
        *(str(Path(p).resolve()) for p in {tempfile.gettempdir(), "/tmp", "/var/tmp"} if Path(p).is_dir()),
        *map(str, extra),
    }
    for top in (ROOT, submissions.parent, out.parent):
        if top == Path(top.anchor) or str(top).split("/")[1:2] in SYSTEM_TOPS:
            continue  # never cover the system's own folders (/usr, /lib, /etc, ...)
        try:
            children = [p for p in top.iterdir() if p.is_dir() and not p.is_symlink()]
        except OSError:
            continue
        hide.update(str(p) for p in children if p.name not in ("attnlib", "coursetools"))
    return hide


def assignment_digest(path: Path, points: dict[str, float]) -> str:
    """A fingerprint of what a grade depends on besides the submission: the exercise notebook,
    the points and, per exercise, its cases (names, hidden flags) and forbidden calls."""
    h = hashlib.sha256()
    h.update(Path(path).read_bytes())
    for ex_id, pts in points.items():
        exercise = get_exercise(ex_id)
        h.update(repr((ex_id, pts, exercise.function, tuple(exercise.forbidden or ()))).encode())
        h.update(repr([(c.name, c.hidden) for c in exercise.cases]).encode())
    return h.hexdigest()[:16]


GRADEBOOK_EVERY = 2.0  # seconds between two rewrites of grades.csv while grading


def split_strays(subs: list[Submission], folder: Path) -> tuple[list[Submission], list[str]]:
    """The submissions, and the files at the top of ``folder`` that are not (a stray
    ``notes.txt``: not a notebook, and not a learner's upload staged from an LMS download,
    which ``roster.csv`` lists). A folder is always a learner's."""
    from coursetools.grade.intake import STAGED_MARK, staged_uploads

    uploads = staged_uploads(folder) if (folder / STAGED_MARK).is_file() else set()
    kept, strays = [], []
    for sub in subs:
        path = sub.path
        top = path.parent == folder
        if (
            top
            and path.is_file()
            and not path.is_symlink()
            and path.suffix != ".ipynb"
            and path.name not in uploads
        ):
            strays.append(path.name)
        else:
            kept.append(sub)
    return kept, strays


def safe_keys(subs: list[Submission]) -> None:
    """Every key begins with a letter or a digit (a key ``-1-1`` or ``=cmd`` is a formula in a
    spreadsheet and an option on a command line): such a key gets the prefix ``s``, and a
    fingerprint of the original name when that collides."""
    taken = {s.student.lower() for s in subs}
    for sub in subs:
        if key_ok(sub.student):
            continue
        stem = "s" + "".join(
            ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "-" for ch in sub.student
        )
        key = stem[:100]
        if key.lower() in taken:
            digest = hashlib.sha256(sub.student.encode("utf-8", "surrogateescape")).hexdigest()[:8]
            key = f"{stem[:90]}-{digest}"
        taken.add(key.lower())
        sub.student = key


def cell_labels(record: dict, path: Path) -> dict[str, dict]:
    """``{notebook index: {"number": n, "first": line}}`` for the cells a record names: the
    number of the cell among the notebook's code cells (from 1) and its first line, as the
    learner sees it in Jupyter (the grader's indices count every cell from 0)."""
    wanted = {str(e.get("cell")) for e in record.get("cell_errors") or [] if isinstance(e, dict)}
    for text in list(record.get("incidents") or []) + list(record.get("notes") or []):
        wanted.update(report.CELL_REF.findall(str(text)))
        wanted.update(n for group in re.findall(r"cells \[([\d, ]+)\]", str(text)) for n in group.split(", "))
    wanted.discard("None")
    if not wanted:
        return {}
    try:
        nb = read_notebook(path)
    except Exception:  # noqa: BLE001 - labels are a courtesy (Unreadable included)
        return {}
    labels = {}
    number = 0
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        number += 1
        if str(index) in wanted:
            source = cell.get("source", "")
            lines = [ln.strip() for ln in str(source).splitlines() if ln.strip()]
            labels[str(index)] = {"number": number, "first": (lines[0] if lines else "")[:80]}
    return labels


def grade(
    assignment_spec: str,
    submissions: Path,
    out: Path,
    jobs: int | None = None,
    force: bool = False,
    settings: Settings | None = None,
    progress_stream=None,
    quiet: bool = False,
    zygotes: list | None = None,
    show_hidden_inputs: bool = False,
    overrides_csv: Path | None = None,
) -> list[dict]:
    """Grade ``submissions`` against the exercise notebook ``assignment_spec``; return the records.

    Writes ``out/grades.csv`` (first with every student pending, then after
    each finished student), ``out/feedback/<student>.md`` and
    ``out/<student>/results.json``. A student whose ``record.json`` exists and
    whose submission file and assignment are unchanged is kept unless ``force``.
    ``zygotes``: pre-warmed processes a caller lends (for several assignments);
    by default the grader starts one per job slot and closes them at the end.
    ``show_hidden_inputs``: the feedback shows what the hidden cases try and what came back
    (by default only their verdict, the named mistake and the hint). At the end every output
    is rendered from the class's final scores (:func:`coursetools.grade.publish.publish`:
    overrides, manual scores, late policy) and, unless ``quiet``, the summary is printed.
    """
    started = time.monotonic()
    assignment = load_assignment(assignment_spec)
    exercises = {ex_id: get_exercise(ex_id) for ex_id in assignment.points}
    out = Path(out).resolve()
    submissions = Path(submissions).resolve()
    out.mkdir(parents=True, exist_ok=True)
    given = settings if settings is not None else Settings(out=out)
    jobs = max(1, jobs or min(2, os.cpu_count() or 1))
    own_work = given.work_dir is None
    if own_work:
        _sweep_work_dirs()
    work_dir = (
        Path(tempfile.mkdtemp(prefix=f"coursetools-grade-{os.getpid()}-")) if own_work else given.work_dir
    )
    work_dir.chmod(0o711)  # traversable by the sandbox uids, not listable
    own_uids = os.geteuid() == 0 and given.uid_base is None
    settings = replace(
        given,
        out=out,
        isolation=sandbox.probe() if given.isolation == "auto" else given.isolation,
        hide=tuple(sorted(_hidden_folders(submissions, out, given.hide))),
        work_dir=work_dir,
        uid_base=sandbox.allocate_uids(jobs) if own_uids else given.uid_base,
    )

    found = [s for s in find_submissions(submissions, assignment.path.stem) if s.path.resolve() != out]
    subs, strays = split_strays(found, submissions)
    safe_keys(subs)
    nb = nbformat.read(assignment.path, as_version=4)
    info = scores.ClassInfo(
        assignment=assignment.path.stem,
        notebook=str(assignment.path.resolve()),
        points=dict(assignment.points),
        functions=dict(assignment.functions),
        manual=manual.questions(nb),
        students=[s.student for s in subs],
        strays=strays,
        show_hidden_inputs=show_hidden_inputs,
        overrides=str(Path(overrides_csv).resolve()) if overrides_csv else "",
    )
    info.save(out)
    sources = scores.Sources.load(out, info)
    records: dict[str, dict] = {}
    todo = []
    for sub in subs:
        old = None if force else report.load_record(out, sub.student)
        kept = old is not None and Status.parse(old.get("status")).final
        if kept and old.get("digest") == sub.digest and old.get("assignment") == assignment.digest:
            records[sub.student] = old
        else:
            records[sub.student] = report.pending_record(sub.student, str(sub.path), assignment.points)
            todo.append(sub)
    order = [s.student for s in subs]
    lock = threading.Lock()

    typed = {k: Record.from_dict(v) for k, v in records.items()}  # kept in step with records

    written = [0.0]  # when grades.csv was last written

    def write_csv(every: float = 0.0):
        """grades.csv with every learner (pending ones too), at most once per ``every`` seconds:
        a class of a thousand is not rewritten a thousand times; publish() writes the last."""
        if time.monotonic() - written[0] >= every:
            report.write_gradebook(out, scores.build(info, typed, sources))
            written[0] = time.monotonic()

    write_csv()
    progress = report.Progress(len(subs), progress_stream)
    if not quiet:
        for sub in subs:
            if sub not in todo:
                progress.update(records[sub.student], skipped=True)
    stop = threading.Event()
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(jobs):
        slots.put(slot)

    def work(sub):
        if stop.is_set():
            return
        slot = slots.get()
        try:
            try:
                group = groups[slot] if groups else None
                record = grade_submission(sub, assignment, exercises, settings, slot, stop, zygotes, group)
                record["memory_group"] = group.kind if group else None
                record["assignment"] = assignment.digest
                record["cell_labels"] = cell_labels(record, sub.path)
                if Status.parse(record.get("status")) is not Status.INTERRUPTED:
                    graded = scores.build(info, {sub.student: Record.from_dict(record)}, sources)
                    publish.write_learner(out, graded.by_student()[sub.student], graded)
                    report.write_record(out, record)
            except Exception as exc:  # noqa: BLE001 - one submission must never stop the class
                record = report.pending_record(sub.student, str(sub.path), assignment.points)
                record.update(
                    status=Status.GRADER_ERROR.value, incidents=[f"{type(exc).__name__}: {exc}"[:300]]
                )
                record["digest"] = sub.digest
        finally:
            slots.put(slot)
        with lock:
            records[sub.student] = record
            typed[sub.student] = Record.from_dict(record)
            write_csv(every=GRADEBOOK_EVERY)
            if not quiet:
                progress.update(record)

    # one memory cgroup per job slot (where writable): a submission's processes share one limit
    limit_mb = settings.group_mb or settings.memory_mb
    sandbox.sweep_memory_groups()
    made = [
        sandbox.MemoryGroup.create(
            f"coursetools-grade-{os.getpid()}-{settings.uid_base or 0}-{slot}", limit_mb
        )
        for slot in range(jobs)
    ]
    groups = [g for g in made if g is not None]
    if len(groups) != jobs:  # all slots or none: a grade must not depend on the slot
        for group in groups:
            group.remove()
        groups = []
    own_zygotes = zygotes is None  # a caller may lend its own, for several assignments
    if own_zygotes and settings.zygote and settings.isolation in ("namespaces", "none") and todo:
        isolate = settings.isolation == "namespaces"
        zygotes = [
            Zygote(settings.python, str(ROOT), base_env(), isolate) for _ in range(min(jobs, len(todo)))
        ]
        for zygote in zygotes:
            zygote.warm()
    pool = ThreadPoolExecutor(max_workers=jobs)
    futures = [pool.submit(work, sub) for sub in todo]
    try:
        for future in futures:
            while True:
                try:
                    future.result(timeout=0.5)
                    break
                except TimeoutError:
                    continue
    except KeyboardInterrupt:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        with lock:
            write_csv()
        raise
    finally:
        if own_work:
            shutil.rmtree(work_dir, ignore_errors=True)
        if own_uids:
            sandbox.release_uids(settings.uid_base)
        if own_zygotes:
            for zygote in zygotes or []:
                zygote.close()
        for group in groups:
            group.remove()
    pool.shutdown(wait=True)
    try:
        (out / ".work").rmdir()
    except OSError:
        pass
    final = [records[s] for s in order]
    published = publish.publish(out)
    if not quiet:
        isolation = sandbox.describe(
            settings.isolation,
            settings.uid_base,
            jobs,
            groups[0].kind if groups else None,
            needed_paths(settings.python),
        )
        print(report.summary(published, isolation, time.monotonic() - started), flush=True)
    return final
