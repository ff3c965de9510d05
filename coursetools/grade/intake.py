"""Submissions as instructors receive them: a folder, or a .zip downloaded from an LMS.

:func:`collect` reads a folder or a zip and stages one file per student in a
flat folder (``<student>.ipynb``) that the grader takes as it is. It recognises

* Canvas's bulk download: ``lastfirst_12345_67890_05-masks.ipynb`` (login, user
  id, submission id, the uploaded name, which Canvas may suffix ``-1``, ``-2`` on
  a resubmission), and ``lastfirst_LATE_12345_67890_...`` for a late one;
* Moodle's: one folder per student, ``Full Name_12345_assignsubmission_file_/``
  (or, without folders, ``Full Name_12345_assignsubmission_file_05-masks.ipynb``);
* the course's own layouts: ``<student>.ipynb`` and ``<student>/.../*.ipynb``
  (nbgrader's exchange), where the student id is unknown.

A student with two or more files is a *duplicate*: it is reported, and the
newest file is graded (the latest modification time, recorded in the zip or on
disk; on equal times the larger Canvas submission number, then the name). A
notebook is preferred to any other file, and a notebook named like the
assignment to other notebooks.

Zips are extracted safely (:func:`safe_extract`): no absolute path, no ``..``,
no symbolic link or device, no encrypted member, at most ``max_files`` members,
``max_file_bytes`` per file and ``max_total_bytes`` in all, counted on the bytes
actually written (a member whose header lies about its size is cut and refused).
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import stat
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

MAX_TOTAL_BYTES = 2 << 30
MAX_FILE_BYTES = 64 << 20
MAX_FILES = 20000

CANVAS = re.compile(r"^(?P<login>[^_/]+?)_(?P<late>LATE_)?(?P<uid>\d+)_(?P<sid>\d+)_(?P<file>.+)$")
MOODLE_FOLDER = re.compile(r"^(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?$")
MOODLE_FILE = re.compile(r"^(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_file_(?P<file>.+)$")
CANVAS_RESUBMISSION = re.compile(r"-\d+$")
SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class UnsafeArchive(ValueError):
    """A zip the grader refuses to extract as a whole (too many members, too large)."""


@dataclass
class Candidate:
    """One file that belongs to a student."""

    path: Path
    source: str  # as named in the download
    mtime: float
    number: int = 0  # Canvas's submission number, 0 elsewhere


@dataclass
class Entry:
    """One student of the class, and the file that is graded."""

    student: str  # the key the grader uses (file name in the staged folder, grades.csv)
    student_id: str  # the LMS's user id, "" when the layout has none
    name: str  # Canvas login, Moodle full name, or the file/folder name
    lms: str  # canvas, moodle, folder
    late: bool = False
    file: str = ""  # the graded file, as named in the download
    others: list[str] = field(default_factory=list)  # files of a duplicate that are not graded
    candidates: list[Candidate] = field(default_factory=list, repr=False)

    @property
    def duplicate(self) -> bool:
        return bool(self.others)


@dataclass
class Intake:
    """What :func:`collect` found: the staged folder, the students, and what went wrong."""

    folder: Path
    entries: list[Entry]
    problems: list[str]

    @property
    def duplicates(self) -> list[Entry]:
        return [e for e in self.entries if e.duplicate]


def slug(text: str) -> str:
    return SAFE.sub("-", text.strip()).strip("-._").lower()[:80] or "student"


# --------------------------------------------------------------------------- zip


def _unsafe_member(info: zipfile.ZipInfo) -> str | None:
    name = info.filename.replace("\\", "/")
    mode = info.external_attr >> 16
    if "\x00" in name or len(name) > 1024:
        return "a strange name"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "an absolute path"
    if ".." in PurePosixPath(name).parts:
        return "a path that leaves the folder (..)"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):  # 0: no Unix mode recorded
        return "not a plain file"
    if info.flag_bits & 0x1:
        return "encrypted"
    return None


def safe_extract(
    archive: Path,
    dest: Path,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_file_bytes: int = MAX_FILE_BYTES,
    max_files: int = MAX_FILES,
) -> list[str]:
    """Extract ``archive`` into ``dest``, refusing unsafe members; return what was refused.

    Raises :class:`UnsafeArchive` when the archive as a whole is refused (not a
    zip, too many members, more than ``max_total_bytes``); ``dest`` then holds
    whatever was extracted before.
    """
    problems: list[str] = []
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UnsafeArchive(f"{archive} is not a zip file: {exc}") from None
    with zf:
        members = zf.infolist()
        if len(members) > max_files:
            raise UnsafeArchive(f"{archive} has {len(members)} members, more than {max_files}")
        written = 0
        for info in members:
            why = _unsafe_member(info)
            if why is not None:
                problems.append(f"{info.filename}: refused ({why})")
                continue
            target = (dest / info.filename.replace("\\", "/")).resolve()
            if target != dest and dest not in target.parents:
                problems.append(f"{info.filename}: refused (a path that leaves the folder)")
                continue
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            if info.file_size > max_file_bytes:
                problems.append(f"{info.filename}: refused (larger than {max_file_bytes} bytes)")
                continue
            if written + info.file_size > max_total_bytes:
                raise UnsafeArchive(f"{archive} holds more than {max_total_bytes} bytes")
            target.parent.mkdir(parents=True, exist_ok=True)
            size = 0
            try:
                with zf.open(info) as src, open(target, "wb") as dst:
                    while True:
                        block = src.read(1 << 20)
                        if not block:
                            break
                        size += len(block)
                        if size > max_file_bytes or written + size > max_total_bytes:
                            raise UnsafeArchive("more bytes than its header says, or than allowed")
                        dst.write(block)
            except (UnsafeArchive, zipfile.BadZipFile, OSError, EOFError) as exc:
                target.unlink(missing_ok=True)
                problems.append(f"{info.filename}: refused ({exc})")
                continue
            written += size
            stamp = time.mktime(info.date_time + (0, 0, -1))
            os.utime(target, (stamp, stamp))
    return problems


# --------------------------------------------------------------------------- layouts


def _skipped(part: str) -> bool:
    return part.startswith(".") or part == "__MACOSX" or part == ".ipynb_checkpoints"


def _files_under(folder: Path) -> list[Path]:
    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(_skipped(p) for p in rel.parts) or path.is_symlink() or not path.is_file():
            continue
        found.append(path)
    return found


def _unwrap(root: Path) -> Path:
    """A zip of a folder holds one folder: look inside it (unless it is a student's own folder)."""
    while True:
        entries = [p for p in root.iterdir() if not _skipped(p.name)]
        if len(entries) != 1 or not entries[0].is_dir() or MOODLE_FOLDER.match(entries[0].name):
            return root
        inner = [p for p in entries[0].iterdir() if not _skipped(p.name)]
        if not any(p.is_dir() for p in inner) and len(inner) <= 1:
            return root  # one student's folder with one file: keep it as a student
        root = entries[0]


def _candidate(path: Path, source: str, number: int = 0) -> Candidate:
    return Candidate(path, source, path.stat().st_mtime, number)


def find_entries(root: Path) -> list[Entry]:
    """The students in a folder (already extracted), with all their candidate files."""
    by_key: dict[str, Entry] = {}

    def add(key: str, entry: Entry, candidate: Candidate, late: bool = False) -> None:
        if key not in by_key:
            by_key[key] = entry
        by_key[key].candidates.append(candidate)
        by_key[key].late = by_key[key].late or late

    for path in sorted(root.iterdir()):
        if _skipped(path.name) or path.is_symlink():
            continue
        rel = path.relative_to(root).as_posix()
        if path.is_dir():
            moodle = MOODLE_FOLDER.match(path.name)
            files = _files_under(path)
            if moodle:
                name, uid = moodle["name"].strip(), moodle["uid"]
                key = f"{slug(name)}-{uid}"
                if not files:
                    continue  # Moodle makes a folder for an empty online-text submission too
                for file in files:
                    entry = Entry(key, uid, name, "moodle")
                    add(key, entry, _candidate(file, file.relative_to(root).as_posix()))
            else:
                key = slug(path.name)
                entry = Entry(key, "", path.name, "folder")
                if not files:
                    by_key.setdefault(key, entry)
                for file in files:
                    add(key, entry, _candidate(file, file.relative_to(root).as_posix()))
            continue
        canvas = CANVAS.match(path.name)
        moodle = MOODLE_FILE.match(path.name)
        if moodle:
            name, uid = moodle["name"].strip(), moodle["uid"]
            add(
                f"{slug(name)}-{uid}",
                Entry(f"{slug(name)}-{uid}", uid, name, "moodle"),
                _candidate(path, rel),
            )
        elif canvas:
            login, uid = canvas["login"], canvas["uid"]
            key = f"{slug(login)}-{uid}"
            add(
                key,
                Entry(key, uid, login, "canvas"),
                _candidate(path, rel, int(canvas["sid"])),
                bool(canvas["late"]),
            )
        else:
            stem = path.stem if path.suffix == ".ipynb" else path.name
            add(slug(stem), Entry(slug(stem), "", stem, "folder"), _candidate(path, rel))
    return list(by_key.values())


def _original_name(entry: Entry, candidate: Candidate) -> str:
    name = PurePosixPath(candidate.source).name
    match = CANVAS.match(name) if entry.lms == "canvas" else MOODLE_FILE.match(name)
    if match:
        name = match["file"]
    stem, dot, ext = name.rpartition(".")
    if entry.lms == "canvas" and dot:
        name = CANVAS_RESUBMISSION.sub("", stem) + "." + ext
    return name


def choose(entry: Entry, assignment_stem: str) -> Candidate | None:
    """The file to grade: a notebook before anything else, one named like the assignment
    before other notebooks, then the newest."""
    if not entry.candidates:
        return None

    def rank(c: Candidate):
        original = _original_name(entry, c)
        notebook = original.endswith(".ipynb")
        named = notebook and original[: -len(".ipynb")] == assignment_stem
        return (notebook, named, c.mtime, c.number, c.source)

    return max(entry.candidates, key=rank)


def collect(source: Path, staging: Path, assignment_stem: str, **limits) -> Intake:
    """Stage the class found in ``source`` (a folder or a zip) as ``staging/<student>.ipynb``.

    ``staging`` is emptied first. Files that are not notebooks are staged
    without an extension, so that the grader reports them ``unreadable``.
    """
    source = Path(source)
    staging = Path(staging)
    problems: list[str] = []
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    if source.is_file():
        extracted = staging.parent / f".{staging.name}-extracted"
        if extracted.exists():
            shutil.rmtree(extracted)
        problems += safe_extract(source, extracted, **limits)
        root = _unwrap(extracted)
    elif source.is_dir():
        extracted = None
        root = _unwrap(source)
    else:
        raise FileNotFoundError(f"no submissions at {source}")
    entries = find_entries(root)
    keys: dict[str, int] = {}
    for entry in entries:
        n = keys.get(entry.student, 0)
        keys[entry.student] = n + 1
        if n:
            entry.student = f"{entry.student}-{n + 1}"
        pick = choose(entry, assignment_stem)
        if pick is None:
            problems.append(f"{entry.student}: an empty folder")
            (staging / entry.student).write_bytes(b"")
            continue
        entry.file = pick.source
        entry.others = sorted(c.source for c in entry.candidates if c is not pick)
        notebook = _original_name(entry, pick).endswith(".ipynb")
        target = staging / (f"{entry.student}.ipynb" if notebook else entry.student)
        shutil.copy2(pick.path, target)
        if entry.duplicate:
            problems.append(
                f"{entry.student}: {len(entry.candidates)} files; graded the newest, {entry.file} "
                f"(not graded: {', '.join(entry.others)})"
            )
    if extracted is not None:
        shutil.rmtree(extracted, ignore_errors=True)
    entries.sort(key=lambda e: e.student)
    return Intake(staging, entries, problems)


# --------------------------------------------------------------------------- roster and gradebook

ROSTER = "roster.csv"
ROSTER_FIELDS = ["student", "student_id", "name", "lms", "late", "file", "duplicate_of"]


def write_roster(out: Path, intake: Intake) -> Path:
    """``OUT/roster.csv``: who each graded key is, which file was graded, which were not."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(ROSTER_FIELDS)
    for e in intake.entries:
        row = asdict(e)
        writer.writerow([e.student, e.student_id, e.name, e.lms, "yes" if e.late else "", e.file, ""])
        for other in e.others:
            writer.writerow([row["student"], e.student_id, e.name, e.lms, "", other, "not graded (older)"])
    path = Path(out) / ROSTER
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{ROSTER}.tmp")
    tmp.write_text(buffer.getvalue(), encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_roster(out: Path) -> dict[str, dict]:
    """``{student: row}`` of the graded files in ``OUT/roster.csv`` (empty when there is none)."""
    path = Path(out) / ROSTER
    if not path.is_file():
        return {}
    with open(path, encoding="utf-8", newline="") as fh:
        return {r["student"]: r for r in csv.DictReader(fh) if not r.get("duplicate_of")}


ID_COLUMNS = ["student_id", "name", "late", "duplicates"]


def annotate_gradebook(out: Path) -> None:
    """Add the roster's columns (student id, name, late, number of files) to ``OUT/grades.csv``,
    right after ``student``. Idempotent: columns already there are refilled."""
    roster = read_roster(out)
    path = Path(out) / "grades.csv"
    if not roster or not path.is_file():
        return
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        return
    header = [h for h in rows[0] if h not in ID_COLUMNS]
    keep = [i for i, h in enumerate(rows[0]) if h not in ID_COLUMNS]
    others: dict[str, int] = {}
    with open(Path(out) / ROSTER, encoding="utf-8", newline="") as fh:
        for r in csv.DictReader(fh):
            others[r["student"]] = others.get(r["student"], 0) + 1
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([header[0], *ID_COLUMNS, *header[1:]])
    for row in rows[1:]:
        cells = [row[i] for i in keep if i < len(row)]
        info = roster.get(cells[0], {})
        files = others.get(cells[0], 0)
        extra = [
            info.get("student_id", ""),
            info.get("name", ""),
            info.get("late", ""),
            str(files) if files > 1 else "",
        ]
        writer.writerow([cells[0], *extra, *cells[1:]])
    tmp = path.with_name(".grades.csv.tmp")
    tmp.write_text(buffer.getvalue(), encoding="utf-8")
    os.replace(tmp, path)
