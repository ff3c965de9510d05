"""Grade every submission of a folder, in parallel, resumably.

:func:`grade` is the class's flow: find the submissions, keep the finished records whose
submission and assignment are unchanged, then grade the others inside one
:class:`GradingSession` (the owner of every resource of the run: work folder, sandbox uids,
memory cgroups, zygotes, notebook readers, job threads), and render every output once from
the final scores (:func:`coursetools.grade.outputs.publish.publish`).
"""

from __future__ import annotations

import hashlib
import os
import queue
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import nbformat

from attnlib.checks import get_exercise
from coursetools import assign
from coursetools.grade.grading.parse_worker import NotebookReader
from coursetools.grade.grading.process import JobSlot, needed_paths
from coursetools.grade.grading.runner import Settings, base_env, grade_submission
from coursetools.grade.grading.submission import Assignment, Submission, find_submissions, resolve_assignment
from coursetools.grade.lms.intake import STAGED_MARK, staged_uploads
from coursetools.grade.outputs import gradebook, publish, scores
from coursetools.grade.outputs.progress import Progress, summary
from coursetools.grade.outputs.shard import Shard
from coursetools.grade.records import record_io, written
from coursetools.grade.records.escape import key_ok
from coursetools.grade.records.paths import ROOT, reserved, unreserved
from coursetools.grade.records.record import Record, Status
from coursetools.grade.sandbox import api as sandbox
from coursetools.grade.sandbox.zygote import Zygote


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
    fingerprint of the original name when that collides. A key the output folder uses for
    itself (``strays.txt``, ``class.json``, ``Feedback``: :data:`.paths.RESERVED`) gets the
    prefix ``learner-``, as the intake gives it."""
    taken = {s.student.lower() for s in subs}
    for sub in subs:
        if key_ok(sub.student) and reserved(sub.student):  # a name the output folder uses itself
            key = unreserved(sub.student)
            while key.lower() in taken:
                key = "learner-" + key
            taken.add(key.lower())
            sub.student = key
            continue
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


class GradingSession:
    """Every resource of one grading run, owned through one context manager.

    ``__enter__`` acquires, in this order: the scratch folders' parent (a fresh folder in the
    system's temporary folder unless ``given.work_dir`` names one), the sandbox uids (as root,
    unless ``given.uid_base`` names them), one memory cgroup per job slot (where writable: all
    slots or none), the pre-warmed zygotes (unless the caller lends its own), one
    :class:`~coursetools.grade.grading.parse_worker.NotebookReader` per job slot and the job threads.
    ``__exit__`` releases them in the reverse order, whatever happened (an interrupt stops the
    job threads first, without starting the submissions not yet begun). :attr:`slots` holds each
    job slot's share of them (its zygote, memory cgroup and reader) as a
    :class:`~coursetools.grade.grading.process.JobSlot`.

    Parameters
    ----------
    given : Settings
        The caller's settings; :attr:`settings` completes them (isolation probed, folders
        hidden from the sandbox, work folder, uids).
    submissions, out : Path
        The class's folder and the output folder (both resolved).
    jobs : int
        Submissions graded at once (one job slot each).
    busy : int
        How many submissions will be graded (0: no process is started).
    zygotes : list, optional
        Pre-warmed zygotes a caller lends (for several assignments); not closed here.
    """

    def __init__(
        self, given: Settings, submissions: Path, out: Path, jobs: int, busy: int, zygotes: list | None = None
    ) -> None:
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
        self.given, self.submissions, self.out, self.jobs, self.busy = given, submissions, out, jobs, busy
        self.zygotes = zygotes
        self.settings = given
        self.groups: list[sandbox.MemoryGroup] = []
        self.readers: list[NotebookReader] = []
        self.slots: list[JobSlot] = []
        self.stop = threading.Event()
        self._free: queue.Queue[int] = queue.Queue()  # the indices of the slots not in use
        self._pool: ThreadPoolExecutor | None = None
        self._stack = ExitStack()

    @property
    def memory_kind(self) -> str | None:
        """The kind of memory cgroup each job slot has (None: none could be made)."""
        return self.groups[0].kind if self.groups else None

    def __enter__(self) -> GradingSession:
        with ExitStack() as stack:  # whatever fails half-way releases what was acquired so far
            work_dir = self._work_dir(stack)
            uid_base = self._uids(stack)
            self.settings = replace(
                self.given,
                out=self.out,
                isolation=sandbox.probe() if self.given.isolation == "auto" else self.given.isolation,
                hide=tuple(sorted(_hidden_folders(self.submissions, self.out, self.given.hide))),
                work_dir=work_dir,
                uid_base=uid_base,
            )
            self._memory_groups(stack)
            self._zygotes(stack)
            self._readers(stack)
            self._pool = stack.enter_context(ThreadPoolExecutor(max_workers=self.jobs))
            stack.callback(self.stop.set)  # released first: the job threads stop taking submissions
            self._stack = stack.pop_all()
        self.slots = [self._slot(index) for index in range(self.jobs)]
        for slot in range(self.jobs):
            self._free.put(slot)
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def _slot(self, index: int) -> JobSlot:
        """Job slot ``index``: its memory cgroup and reader, and a zygote (the slots share the
        zygotes in turn when there are fewer, as when a caller lends them)."""
        return JobSlot(
            index,
            zygote=self.zygotes[index % len(self.zygotes)] if self.zygotes else None,
            memory_group=self.groups[index] if self.groups else None,
            reader=self.readers[index],
        )

    def grade_all(self, todo: list[Submission], grade_one, done) -> None:
        """``grade_one(sub, slot)`` for every submission of ``todo`` on the job threads, then
        ``done(record)``; returns when all are graded. On an interrupt, the job threads stop
        (those running finish their submission as ``interrupted``) before it is raised."""
        pool = self._pool
        if pool is None:
            raise RuntimeError("grade_all() outside the session's with block")

        def work(sub: Submission) -> None:
            if self.stop.is_set():
                return
            slot = self._free.get()
            try:
                record = grade_one(sub, slot)
            finally:
                self._free.put(slot)
            done(record)

        futures = [pool.submit(work, sub) for sub in todo]
        try:
            for future in futures:
                while True:
                    try:
                        future.result(timeout=0.5)  # a short wait: Ctrl-C is seen promptly
                        break
                    except TimeoutError:
                        continue
        except KeyboardInterrupt:
            self.stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise

    def _work_dir(self, stack: ExitStack) -> Path:
        if self.given.work_dir is not None:
            work_dir = self.given.work_dir
        else:
            _sweep_work_dirs()
            work_dir = Path(tempfile.mkdtemp(prefix=f"coursetools-grade-{os.getpid()}-"))
            stack.callback(shutil.rmtree, work_dir, ignore_errors=True)
        work_dir.chmod(0o711)  # traversable by the sandbox uids, not listable
        return work_dir

    def _uids(self, stack: ExitStack) -> int | None:
        if os.geteuid() != 0 or self.given.uid_base is not None:
            return self.given.uid_base
        uid_base = sandbox.allocate_uids(self.jobs)
        stack.callback(sandbox.release_uids, uid_base)
        return uid_base

    def _memory_groups(self, stack: ExitStack) -> None:
        """One memory cgroup per job slot (where writable): a submission's processes share one limit."""
        settings = self.settings
        limit_mb = settings.group_mb or settings.memory_mb
        sandbox.sweep_memory_groups()
        made = [
            sandbox.MemoryGroup.create(
                f"coursetools-grade-{os.getpid()}-{settings.uid_base or 0}-{slot}", limit_mb
            )
            for slot in range(self.jobs)
        ]
        groups = [g for g in made if g is not None]
        if len(groups) != self.jobs:  # all slots or none: a grade must not depend on the slot
            for group in groups:
                group.remove()
            return
        for group in groups:
            stack.callback(group.remove)
        self.groups = groups

    def _zygotes(self, stack: ExitStack) -> None:
        settings = self.settings
        if self.zygotes is not None or not self.busy:
            return  # a caller's zygotes stay the caller's
        if settings.zygote and settings.isolation in ("namespaces", "none"):
            isolate = settings.isolation == "namespaces"
            zygotes = [
                Zygote(settings.python, str(ROOT), base_env(), isolate)
                for _ in range(min(self.jobs, self.busy))
            ]
            for zygote in zygotes:
                stack.callback(zygote.close)
            for zygote in zygotes:
                zygote.warm()
            self.zygotes = zygotes

    def _readers(self, stack: ExitStack) -> None:
        """One notebook reader per job slot, started now (they start while the zygotes warm up)
        for the slots that will be used."""
        self.readers = [NotebookReader(self.settings.memory_mb) for _ in range(self.jobs)]
        for reader in self.readers:
            stack.callback(reader.close)
        for reader in self.readers[: min(self.jobs, self.busy)]:
            reader.start()


class _Gradebook:
    """The class's records while grading, and ``grades.csv`` rewritten from them at most once per
    :data:`GRADEBOOK_EVERY` seconds (a class of a thousand is not rewritten a thousand times;
    :func:`coursetools.grade.outputs.publish.publish` writes the last)."""

    def __init__(self, out: Path, info: scores.ClassInfo, sources: scores.Sources, progress) -> None:
        self.out, self.info, self.sources, self.progress = out, info, sources, progress
        self.records: dict[str, Record] = {}
        self.lock = threading.Lock()
        self._written = 0.0

    def put(self, record: Record) -> None:
        self.records[record.student] = record

    def write_csv(self, every: float = 0.0) -> None:
        if time.monotonic() - self._written >= every:
            gradebook.write_gradebook(self.out, scores.build(self.info, self.records, self.sources))
            self._written = time.monotonic()

    def final(self, record: Record) -> scores.Grade:
        """``record``'s final grade (overrides, written answers, late policy applied)."""
        info = replace(self.info, students=[record.student])
        return scores.build(info, {record.student: record}, self.sources).grades[0]

    def finished(self, record: Record) -> None:
        """One more submission graded (called from a job thread)."""
        with self.lock:
            self.put(record)
            self.write_csv(every=GRADEBOOK_EVERY)
            if self.progress is not None:
                self.progress.update(record, grade=self.final(record))


def _kept_or_pending(
    book: _Gradebook, subs: list[Submission], out: Path, assignment: Assignment, force: bool
) -> list[Submission]:
    """Put every learner's record in ``book`` (a finished one whose submission and assignment are
    unchanged is kept, unless ``force``; the others pending); return the submissions to grade."""
    todo = []
    for sub in subs:
        stored = None if force else record_io.load_record(out, sub.student)
        old = Record.from_dict(stored) if stored is not None else None
        if (
            old is not None
            and old.status.final
            and old.digest == sub.digest
            and old.assignment == assignment.digest
        ):
            book.put(old)
        else:
            book.put(record_io.pending_record(sub.student, str(sub.path), assignment.points))
            todo.append(sub)
    return todo


def _grade_one(
    sub: Submission,
    slot: JobSlot,
    session: GradingSession,
    assignment: Assignment,
    exercises: dict,
    book: _Gradebook,
) -> Record:
    """Grade one submission in job ``slot`` and write what the learner reads; a failure of
    the grader itself gives a ``grader-error`` record (one submission never stops the class)."""
    try:
        record = grade_submission(sub, assignment, exercises, session.settings, slot, session.stop)
        if record.status is not Status.INTERRUPTED:
            graded = scores.build(
                replace(book.info, students=[sub.student]), {sub.student: record}, book.sources
            )
            publish.write_learner(book.out, graded.grades[0], graded)
            record_io.write_record(book.out, record)
    except Exception as exc:  # noqa: BLE001 - one submission must never stop the class
        record = record_io.pending_record(sub.student, str(sub.path), assignment.points)
        record.status = Status.GRADER_ERROR
        record.incidents = [f"{type(exc).__name__}: {exc}"[:300]]
        record.digest = sub.digest
    return record


def _class_info(
    assignment: Assignment, subs: list[Submission], strays: list[str], show_hidden_inputs, overrides_csv
) -> scores.ClassInfo:
    nb = nbformat.read(assignment.path, as_version=4)
    return scores.ClassInfo(
        assignment=assignment.path.stem,
        notebook=str(assignment.path.resolve()),
        points=dict(assignment.points),
        functions=dict(assignment.functions),
        manual=written.questions(nb),
        students=[s.student for s in subs],
        strays=strays,
        show_hidden_inputs=show_hidden_inputs,
        overrides=str(Path(overrides_csv).resolve()) if overrides_csv else "",
    )


def grade(
    assignment_spec: str,
    submissions: Path,
    out: Path,
    *,
    jobs: int | None = None,
    force: bool = False,
    settings: Settings | None = None,
    progress_stream=None,
    quiet: bool = False,
    zygotes: list | None = None,
    show_hidden_inputs: bool = False,
    overrides_csv: Path | None = None,
    shard: Shard | None = None,
) -> list[dict]:
    """Grade ``submissions`` against the exercise notebook ``assignment_spec``; return the records
    (each as the JSON object of its ``record.json``, :meth:`Record.to_dict`).

    Writes ``out/grades.csv`` (first with every student pending, then after
    each finished student), ``out/feedback/<student>.md`` and
    ``out/<student>/results.json``. A student whose ``record.json`` exists and
    whose submission file and assignment are unchanged is kept unless ``force``.
    ``zygotes``: pre-warmed processes a caller lends (for several assignments);
    by default the grader starts one per job slot and closes them at the end.
    ``show_hidden_inputs``: the feedback shows what the hidden cases try and what came back
    (by default only their verdict, the named mistake and the hint). At the end every output
    is rendered from the class's final scores (:func:`coursetools.grade.outputs.publish.publish`:
    overrides, manual scores, late policy) and, unless ``quiet``, the summary is printed.
    ``shard``: grade only that share of the class (:mod:`.shard`; no ``report.html``).
    """
    started = time.monotonic()
    assignment = load_assignment(assignment_spec)
    exercises = {ex_id: get_exercise(ex_id) for ex_id in assignment.points}
    out, submissions = Path(out).resolve(), Path(submissions).resolve()
    out.mkdir(parents=True, exist_ok=True)
    jobs = max(1, jobs or min(2, os.cpu_count() or 1))

    found = [s for s in find_submissions(submissions, assignment.path.stem) if s.path.resolve() != out]
    subs, strays = split_strays(found, submissions)
    safe_keys(subs)
    info = _class_info(assignment, subs, strays, show_hidden_inputs, overrides_csv)
    info.save(out)
    if shard is not None:  # one share (shard.py): class.json above stays the whole class's
        subs = shard.take(out, subs, assignment.digest)
    progress = Progress(len(subs), progress_stream)
    book = _Gradebook(out, info, scores.Sources.load(out, info), None if quiet else progress)
    todo = _kept_or_pending(book, subs, out, assignment, force)
    book.write_csv()
    if not quiet:
        for sub in subs:
            if sub not in todo:
                kept = book.records[sub.student]
                progress.update(kept, skipped=True, grade=book.final(kept))

    given = settings if settings is not None else Settings(out=out)
    with GradingSession(given, submissions, out, jobs, len(todo), zygotes) as session:

        def grade_one(sub: Submission, slot: int) -> Record:
            return _grade_one(sub, session.slots[slot], session, assignment, exercises, book)

        try:
            session.grade_all(todo, grade_one, book.finished)
        except KeyboardInterrupt:
            with book.lock:
                book.write_csv()
            raise
    try:
        (out / ".work").rmdir()
    except OSError:
        pass
    published = publish.publish(out, report_html=shard is None)
    if not quiet:
        settings = session.settings
        isolation = sandbox.describe(
            settings.isolation, settings.uid_base, jobs, session.memory_kind, needed_paths(settings.python)
        )
        print(summary(published, isolation, time.monotonic() - started, out=out), flush=True)
    return [book.records[s.student].to_dict() for s in subs]
