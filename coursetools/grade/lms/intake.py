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
import hashlib
import io
import json
import os
import re
import shutil
import stat
import sys
import time
import unicodedata
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

from coursetools.grade.records.escape import csv_cell, terminal, visible
from coursetools.grade.records.paths import unreserved
from coursetools.grade.records.roster import ROSTER, ROSTER_FIELDS

MAX_TOTAL_BYTES = 2 << 30
MAX_FILE_BYTES = 64 << 20
MAX_FILES = 20000

CANVAS = re.compile(r"^(?P<login>[^_/]+?)_(?P<late>LATE_)?(?P<uid>\d+)_(?P<sid>\d+)_(?P<file>.+)$")
MOODLE_FOLDER = re.compile(r"^(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?$")
MOODLE_FILE = re.compile(r"^(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_file_(?P<file>.+)$")
CANVAS_RESUBMISSION = re.compile(r"-\d+$")
MOODLE_REUPLOAD = re.compile(r" \(\d+\)$")  # Moodle's file picker: "05-masks (1).ipynb"
STAGED_MARK = ".coursetools-staged.json"  # in a staged folder: what the intake put there
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
    reasons: list[str] = field(default_factory=list)  # why each of ``others`` is not graded
    submitted: str = ""  # the graded file's time (stored in the zip, or on disk), ISO 8601
    candidates: list[Candidate] = field(default_factory=list, repr=False)
    refused: str = ""  # why the intake refused this learner's only upload (then no candidate)

    @property
    def duplicate(self) -> bool:
        return bool(self.others)


@dataclass
class Intake:
    """What :func:`collect` found: the staged folder, the students, and what went wrong."""

    folder: Path
    entries: list[Entry]
    problems: list[str]
    strays: list[str] = field(default_factory=list)  # files of the download that are not submissions

    @property
    def duplicates(self) -> list[Entry]:
        return [e for e in self.entries if e.duplicate]


# letters that Unicode's decomposition does not reduce to ASCII
_LETTERS = str.maketrans(
    {
        "ß": "ss",
        "æ": "ae",
        "Æ": "AE",
        "ø": "o",
        "Ø": "O",
        "œ": "oe",
        "Œ": "OE",
        "ł": "l",
        "Ł": "L",
        "đ": "d",
        "Đ": "D",
        "ð": "d",
        "Ð": "D",
        "þ": "th",
        "Þ": "TH",
        "ı": "i",
    }
)


def slug(text: str) -> str:
    """A key from a name: ASCII letters (accents dropped: ``Jörg Müller-Lüdenscheidt`` ->
    ``jorg-muller-ludenscheidt``), digits, ``.``, ``_`` and ``-``, beginning and ending
    with a letter or a digit."""
    ascii_text = unicodedata.normalize("NFKD", text.strip().translate(_LETTERS))
    ascii_text = "".join(ch for ch in ascii_text if not unicodedata.combining(ch))
    return SAFE.sub("-", ascii_text).strip("-._").lower()[:80].strip("-._") or "student"


def _fingerprint(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:8]


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
    refused: list[tuple[str, str]] | None = None,
    aliases: dict[str, str] | None = None,
) -> list[str]:
    """Extract ``archive`` into ``dest``, refusing unsafe members; return what was refused.

    Raises :class:`UnsafeArchive` when the archive as a whole is refused (not a
    zip, too many members, more than ``max_total_bytes``); ``dest`` then holds
    whatever was extracted before. ``refused``, when given, receives ``(member name,
    why)`` of each refused member (the intake gives its learner an ``unreadable`` row).
    ``aliases``, when given, lets a member with a name part longer than the file system's 255
    bytes (a long upload name, a long full name in another script) be extracted under a short
    name, ``{short: long}`` (the intake reads the long one); without it such a member is refused.
    """
    problems = _Refusals(refused)
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
            problems.member(info.filename.replace("\\", "/"))
            shown = terminal(info.filename, 200)
            why = _unsafe_member(info)
            if why is not None:
                problems.append(f"{shown}: refused ({why})")
                continue
            try:
                target = (dest / info.filename.replace("\\", "/")).resolve()
            except (OSError, ValueError) as exc:
                problems.append(f"{shown}: refused ({terminal(exc, 120)})")
                continue
            if target != dest and dest not in target.parents:
                problems.append(f"{shown}: refused (a path that leaves the folder)")
                continue
            parts = target.relative_to(dest).parts
            if any(_too_long(part) for part in parts):
                if aliases is None:
                    problems.append(f"{shown}: refused (a name longer than 255 bytes)")
                    continue
                short = [_alias(part, aliases) if _too_long(part) else part for part in parts]
                target = dest.joinpath(*short)
            if info.is_dir():
                try:
                    target.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    problems.append(f"{shown}: refused ({terminal(exc.strerror or exc, 120)})")
                continue
            if info.file_size > max_file_bytes:
                problems.append(f"{shown}: refused (larger than {max_file_bytes} bytes)")
                continue
            if written + info.file_size > max_total_bytes:
                raise UnsafeArchive(f"{archive} holds more than {max_total_bytes} bytes")
            size = 0
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as dst:
                    while True:
                        block = src.read(1 << 20)
                        if not block:
                            break
                        size += len(block)
                        if size > max_file_bytes or written + size > max_total_bytes:
                            raise UnsafeArchive("more bytes than its header says, or than allowed")
                        dst.write(block)
            except (UnsafeArchive, zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
                try:
                    target.unlink(missing_ok=True)
                except OSError:
                    pass
                problems.append(f"{shown}: refused ({terminal(exc, 120)})")
                continue
            written += size
            try:
                stamp = time.mktime(info.date_time + (0, 0, -1))
                os.utime(target, (stamp, stamp))
            except (OverflowError, ValueError, OSError):
                pass  # a member with an impossible date keeps the time of its extraction
    return problems


def _too_long(part: str) -> bool:
    return len(part.encode("utf-8", "surrogateescape")) > 255


def _alias(part: str, aliases: dict[str, str]) -> str:
    """A short name for a name part longer than 255 bytes (kept in ``aliases``: short -> long):
    a digest of the long name, with its extension when that is short."""
    suffix = PurePosixPath(part).suffix
    suffix = suffix if suffix.isascii() and len(suffix) <= 16 and SAFE.search(suffix[1:]) is None else ""
    short = f"~{hashlib.sha256(part.encode('utf-8', 'surrogateescape')).hexdigest()[:24]}{suffix}"
    aliases[short] = part
    return short


def _named(path: Path, root: Path, aliases: dict[str, str]) -> str:
    """``path`` below ``root`` as the download named it (a long part's alias read back)."""
    return "/".join(aliases.get(part, part) for part in path.relative_to(root).parts)


class _Refusals(list):
    """The problems of :func:`safe_extract`, and the names of the members refused."""

    _WHY = re.compile(r"^(?P<name>.*): refused \((?P<why>.*)\)$", re.S)

    def __init__(self, names: list[tuple[str, str]] | None) -> None:
        super().__init__()
        self.names = names
        self._raw: str | None = None

    def member(self, raw: str) -> None:
        self._raw = raw

    def append(self, text: str) -> None:
        super().append(text)
        match = self._WHY.match(text)
        if self.names is not None and self._raw is not None and match:
            self.names.append((self._raw, match["why"]))


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


def _links_under(root: Path) -> list[str]:
    """The symbolic links of a download folder (never followed), by their names below ``root``."""
    found = []
    for top, dirs, files in os.walk(root):
        here = Path(top)
        rel = here.relative_to(root)
        if any(_skipped(p) for p in rel.parts):
            continue
        for name in sorted(dirs + files):
            if not _skipped(name) and (here / name).is_symlink():
                found.append((rel / name).as_posix())
    return sorted(found)


def _unwrap(root: Path, aliases: dict[str, str] | None = None) -> Path:
    """A zip of a folder holds one folder: look inside it (unless it is a student's own folder)."""
    aliases = aliases or {}
    while True:
        entries = [p for p in root.iterdir() if not _skipped(p.name)]
        only = aliases.get(entries[0].name, entries[0].name) if len(entries) == 1 else ""
        if len(entries) != 1 or not entries[0].is_dir() or MOODLE_FOLDER.match(only):
            return root
        inner = [p for p in entries[0].iterdir() if not _skipped(p.name)]
        if not any(p.is_dir() for p in inner) and len(inner) <= 1:
            return root  # one student's folder with one file: keep it as a student
        root = entries[0]


def _candidate(path: Path, source: str, number: int = 0) -> Candidate:
    return Candidate(path, source, path.stat().st_mtime, number)


def find_entries(
    root: Path,
    problems: list[str] | None = None,
    strays: list[str] | None = None,
    refused: Sequence[tuple[str, str]] = (),
    aliases: dict[str, str] | None = None,
) -> list[Entry]:
    """The students in a folder (already extracted), with all their candidate files.

    A name that cannot be read (too long, not decodable, gone) is reported in
    ``problems`` and skipped, never the class; a file at the top of a plain folder that
    is not a notebook is listed in ``strays`` (not a student). Two plain names that make
    the same key (``Ada.ipynb`` and ``ada.ipynb``) each get a key with a fingerprint of
    their own name, as folders do, instead of being merged into one learner. A member of an
    LMS download that the extraction ``refused`` (``(name, why)``: a link, too large, encrypted)
    and whose name carries the layout's prefix is its learner's entry with no file (``refused``
    says why), when that learner has no other file: graded ``unreadable``, never left out; the
    member's name counts wherever its path puts it (``/``, ``..``: its last part, or its Moodle
    folder). ``aliases`` (:func:`safe_extract`): the names longer than 255 bytes, read by their
    long name, staged under the learner's key."""
    aliases = aliases or {}
    problems = problems if problems is not None else []
    strays = strays if strays is not None else []
    by_key: dict[str, Entry] = {}

    def add(key: str, entry: Entry, candidate: Candidate, late: bool = False) -> None:
        if key not in by_key:
            by_key[key] = entry
        by_key[key].candidates.append(candidate)
        by_key[key].late = by_key[key].late or late

    plain: dict[str, list[tuple[str, Path]]] = {}
    try:
        children = sorted(root.iterdir())
    except OSError as exc:
        raise FileNotFoundError(f"cannot read {root}: {exc.strerror}") from None
    lms = layout_of(children, problems, refused, aliases)
    for path in children:
        name = aliases.get(path.name, path.name)
        try:
            if _skipped(name) or path.is_symlink():
                continue
            rel = _named(path, root, aliases)
            if path.is_dir():
                moodle = MOODLE_FOLDER.match(name) if lms == "moodle" else None
                files = _files_under(path)
                if moodle:
                    person, uid = moodle["name"].strip(), moodle["uid"]
                    key = f"{slug(person)}-{uid}"
                    if not files:
                        continue  # Moodle makes a folder for an empty online-text submission too
                    for file in files:
                        entry = Entry(key, uid, visible(person), "moodle")
                        add(key, entry, _candidate(file, _named(file, root, aliases)))
                else:
                    plain.setdefault(slug(name), []).append((name, path))
                continue
            # the id comes only from the prefix of the download's own LMS: in a Canvas download
            # an upload named like a Moodle file is a Canvas file (and the reverse)
            canvas = CANVAS.match(name) if lms == "canvas" else None
            moodle = MOODLE_FILE.match(name) if lms == "moodle" else None
            if moodle:
                person, uid = moodle["name"].strip(), moodle["uid"]
                add(
                    f"{slug(person)}-{uid}",
                    Entry(f"{slug(person)}-{uid}", uid, visible(person), "moodle"),
                    _candidate(path, rel),
                )
            elif canvas:
                login, uid = canvas["login"], canvas["uid"]
                key = f"{slug(login)}-{uid}"
                add(
                    key,
                    Entry(key, uid, visible(login), "canvas"),
                    _candidate(path, rel, int(canvas["sid"])),
                    bool(canvas["late"]),
                )
            elif PurePosixPath(name).suffix != ".ipynb":
                strays.append(visible(rel))
            else:
                stem = PurePosixPath(name).stem
                plain.setdefault(slug(stem), []).append((stem, path))
        except (OSError, ValueError) as exc:
            problems.append(
                f"{terminal(name, 200)}: refused ({terminal(getattr(exc, 'strerror', None) or exc, 120)})"
            )
    for member, why in refused:
        top, in_folder = _refused_name(member)
        match = None
        if lms == "canvas" and not in_folder:
            match = CANVAS.match(top)
            person = match["login"] if match else ""
        elif lms == "moodle":
            match = MOODLE_FOLDER.match(top) if in_folder else MOODLE_FILE.match(top)
            person = match["name"].strip() if match else ""
        if match is None or not top or _skipped(top):
            continue
        key = f"{slug(person)}-{match['uid']}"
        if key not in by_key:
            by_key[key] = Entry(
                key, match["uid"], visible(person), lms, late=bool(match.groupdict().get("late"))
            )
            by_key[key].file = visible(member)
            by_key[key].refused = why
    for key, named in plain.items():
        clash = len({raw for raw, _ in named}) > 1
        for raw, path in named:
            own = unreserved(f"{key[:70]}-{_fingerprint(raw)}" if clash else key)
            try:
                if path.is_dir():
                    files = _files_under(path)
                    entry = Entry(own, "", visible(raw), "folder")
                    if not files:
                        by_key.setdefault(own, entry)
                    for file in files:
                        add(own, entry, _candidate(file, _named(file, root, aliases)))
                else:
                    add(
                        own,
                        Entry(own, "", visible(raw), "folder"),
                        _candidate(path, _named(path, root, aliases)),
                    )
            except (OSError, ValueError) as exc:
                problems.append(
                    f"{terminal(raw, 200)}: refused ({terminal(getattr(exc, 'strerror', None) or exc, 120)})"
                )
    return list(by_key.values())


def layout_of(
    children: list[Path],
    problems: list[str] | None = None,
    refused: Sequence[tuple[str, str]] = (),
    aliases: dict[str, str] | None = None,
) -> str:
    """The layout of a download, decided once for all its members: ``canvas``, ``moodle`` or
    ``folder``.

    Each top-level member is classed by the patterns it matches: a Canvas file
    (``login_12345_67890_...``, no folder: Canvas's download is flat), a Moodle folder or
    file (``Full Name_12345_assignsubmission_...``), or both (an upload whose name the learner
    chose to look like the other LMS's: Canvas keeps the upload's name after its prefix).
    The layout is the LMS with more members that match it alone; a member that matches both
    counts for neither, and only when no member matches one alone does it decide (Canvas,
    whose prefix comes first: reported). A layout with no matching member is ``folder`` (no
    LMS id is taken from any name). The members the extraction ``refused`` count too (by
    their names: a class whose every upload was refused is still its LMS's)."""
    aliases = aliases or {}
    canvas = moodle = both = 0
    tops: list[tuple[str, bool]] = []
    for path in children:
        try:
            if _skipped(path.name) or path.is_symlink():
                continue
            tops.append((aliases.get(path.name, path.name), path.is_dir()))
        except OSError:
            continue
    seen = {name for name, _ in tops}
    for member, _ in refused:
        top, in_folder = _refused_name(member)
        if top and top not in seen and not _skipped(top):
            seen.add(top)
            tops.append((top, in_folder))
    for name, is_dir in tops:
        as_canvas = not is_dir and bool(CANVAS.match(name))
        as_moodle = bool(MOODLE_FOLDER.match(name)) if is_dir else bool(MOODLE_FILE.match(name))
        if as_canvas and as_moodle:
            both += 1
        elif as_canvas:
            canvas += 1
        elif as_moodle:
            moodle += 1
    if canvas or moodle:
        if canvas == moodle:
            if problems is not None:
                problems.append(
                    f"the download holds {canvas} Canvas and {moodle} Moodle names: no LMS id is taken "
                    "from any name (graded as a plain folder)"
                )
            return "folder"
        return "canvas" if canvas > moodle else "moodle"
    if both:
        if problems is not None:
            problems.append(
                "every name of the download fits both Canvas's and Moodle's pattern: read as Canvas's"
            )
        return "canvas"
    return "folder"


def _refused_name(member: str) -> tuple[str, bool]:
    """The name of a refused member that can carry its learner's LMS id, and whether it is a
    folder's: a Moodle folder on its path (``Full Name_12345_assignsubmission_file_/...``), else
    its last part (``/login_12345_67890_x.ipynb``, ``../login_12345_...``, a link's name)."""
    name = re.sub(r"^[A-Za-z]:", "", member.replace("\\", "/"))
    parts = [p for p in name.split("/") if p not in ("", ".", "..")]
    for part in parts:  # a file's name never matches a Moodle folder's (its extension)
        if MOODLE_FOLDER.match(part):
            return part, True
    if not parts:
        return "", False
    return parts[-1], len(parts) > 1 and not CANVAS.match(parts[-1]) and not MOODLE_FILE.match(parts[-1])


def shared_ids(entries: list[Entry]) -> dict[str, list[str]]:
    """``{LMS id: [keys]}`` of the ids that more than one learner of ``entries`` carries (a
    download whose names claim one id twice): no row is applied or exported by such an id."""
    by_id: dict[str, list[str]] = {}
    for entry in entries:
        if entry.student_id:
            by_id.setdefault(f"{entry.lms}:{entry.student_id}", []).append(entry.student)
    return {k.split(":", 1)[1]: sorted(v) for k, v in by_id.items() if len(v) > 1}


def _original_name(entry: Entry, candidate: Candidate) -> str:
    """The name the learner gave the file (without the LMS's prefix and resubmission marks)."""
    name = PurePosixPath(candidate.source).name
    match = CANVAS.match(name) if entry.lms == "canvas" else MOODLE_FILE.match(name)
    if match:
        name = match["file"]
    stem, dot, ext = name.rpartition(".")
    if dot and entry.lms == "canvas":
        name = CANVAS_RESUBMISSION.sub("", stem) + "." + ext
    elif dot and entry.lms == "moodle":
        name = MOODLE_REUPLOAD.sub("", stem) + "." + ext
    return name


def upload_name(source: str, lms: str) -> str:
    """The name a learner gave a file of the download (``answers.pdf`` for Canvas's
    ``knuthdonald_45678_33333_answers.pdf``)."""
    entry = Entry("", "", "", lms)
    return _original_name(entry, Candidate(Path(source), source, 0.0))


def _rank(entry: Entry, candidate: Candidate, assignment_stem: str) -> tuple:
    original = _original_name(entry, candidate)
    notebook = original.endswith(".ipynb")
    named = notebook and original[: -len(".ipynb")] == assignment_stem
    return (notebook, named, candidate.mtime, candidate.number, candidate.source)


def choose(entry: Entry, assignment_stem: str) -> Candidate | None:
    """The file to grade: a notebook before anything else, one named like the assignment
    before other notebooks (a re-upload ``05-masks (1).ipynb`` or ``05-masks-1.ipynb`` is
    named like it), then the newest."""
    if not entry.candidates:
        return None
    return max(entry.candidates, key=lambda c: _rank(entry, c, assignment_stem))


def why_not(entry: Entry, pick: Candidate, other: Candidate, assignment_stem: str) -> str:
    """Why ``other`` was not graded, in the words of the roster and the message."""
    mine, theirs = _rank(entry, pick, assignment_stem), _rank(entry, other, assignment_stem)
    if mine[0] and not theirs[0]:
        return "not a notebook"
    if mine[1] and not theirs[1]:
        newer = " though newer" if other.mtime > pick.mtime else ""
        return f"not named like the assignment{newer}"
    return "older"


def why_graded(entry: Entry, pick: Candidate, assignment_stem: str) -> str:
    """Why ``pick`` was graded among a duplicate's files."""
    rank = _rank(entry, pick, assignment_stem)
    others = [_rank(entry, c, assignment_stem) for c in entry.candidates if c is not pick]
    newest = all(rank[2:4] >= o[2:4] for o in others)
    if rank[1]:
        kind = (
            "the newest notebook named like the assignment"
            if newest
            else "the notebook named like the assignment"
        )
        return kind if newest or any(o[1] for o in others) else f"{kind}, though older"
    if rank[0]:
        return "the newest notebook" if newest else "a notebook"
    return "the newest file (no notebook)"


def _claim_staging(staging: Path, source: Path) -> Path:
    """A staging folder that is neither the download nor inside it nor holds it, and that is
    empty or was made by the intake (never a folder of the instructor's)."""
    source = source.resolve()
    candidate = staging
    for n in range(1, 100):
        resolved = candidate.resolve()
        overlaps = resolved == source or resolved in source.parents or source in resolved.parents
        ours = (
            (candidate / STAGED_MARK).is_file()
            or not candidate.exists()
            or (candidate.is_dir() and not any(candidate.iterdir()))
        )
        if not overlaps and ours:
            return candidate
        candidate = staging.with_name(f"{staging.name}-staged{'' if n == 1 else n}")
    raise FileExistsError(f"no free staging folder beside {staging}")


def collect(source: Path, staging: Path, assignment_stem: str, **limits) -> Intake:
    """Stage the class found in ``source`` (a folder or a zip) as ``staging/<student>.ipynb``.

    ``staging`` is emptied first when the intake made it; a folder that is the download
    itself, holds it or is not the intake's is never touched (another name beside it is
    used: ``Intake.folder`` says which). Files that are learners' uploads but not
    notebooks are staged without an extension, so that the grader reports them
    ``unreadable`` (by the name the learner gave them: ``roster.csv``); files that are no
    learner's (a stray ``notes.txt`` in a plain folder) are listed in ``Intake.strays``.
    """
    source = Path(source)
    problems: list[str] = []
    strays: list[str] = []
    if not source.exists():
        raise FileNotFoundError(f"no submissions at {source}")
    staging = _claim_staging(Path(staging), source)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    refused: list[tuple[str, str]] = []
    aliases: dict[str, str] = {}  # names longer than 255 bytes, extracted under a short one
    if source.is_file():
        extracted = _claim_staging(staging.parent / f".{staging.name}-extracted", source)
        if extracted.exists():
            shutil.rmtree(extracted)
        problems += safe_extract(source, extracted, refused=refused, aliases=aliases, **limits)
        (extracted / STAGED_MARK).write_text("{}", encoding="utf-8")
        root = _unwrap(extracted, aliases)
        if root != extracted:  # a zip of one folder: the members' names below it
            inner = _named(root, extracted, aliases)
            refused = [(n[len(inner) + 1 :], w) if n.startswith(inner + "/") else (n, w) for n, w in refused]
    else:
        extracted = None
        root = _unwrap(source)
        for link in _links_under(root):  # a link in an unzipped download: its learner's row, a message
            refused.append((link, "a symbolic link"))
            problems.append(f"{terminal(link, 200)}: refused (a symbolic link)")
    entries = find_entries(root, problems, strays, refused, aliases)
    keys: dict[str, int] = {}
    uploads = []
    for entry in entries:
        n = keys.get(entry.student, 0)
        keys[entry.student] = n + 1
        if n:
            entry.student = f"{entry.student}-{n + 1}"
        pick = choose(entry, assignment_stem)
        if pick is None and entry.refused:
            problems.append(
                f"{entry.student}: {terminal(entry.file, 200)} refused ({terminal(entry.refused, 120)}): "
                "graded unreadable"
            )
            (staging / entry.student).write_bytes(b"")
            uploads.append(entry.student)
            continue
        if pick is None:
            problems.append(f"{entry.student}: an empty folder")
            (staging / entry.student).write_bytes(b"")
            uploads.append(entry.student)
            continue
        entry.file = visible(pick.source)
        others = sorted((c for c in entry.candidates if c is not pick), key=lambda c: c.source)
        entry.others = [visible(c.source) for c in others]
        entry.reasons = [why_not(entry, pick, c, assignment_stem) for c in others]
        entry.submitted = datetime.fromtimestamp(pick.mtime).astimezone().isoformat(timespec="seconds")
        notebook = _original_name(entry, pick).endswith(".ipynb")
        target = staging / (f"{entry.student}.ipynb" if notebook else entry.student)
        try:
            shutil.copy2(pick.path, target)
        except OSError as exc:
            problems.append(
                f"{entry.student}: {terminal(entry.file, 200)} not staged ({terminal(exc.strerror, 80)})"
            )
            continue
        if not notebook:
            uploads.append(target.name)
        if entry.duplicate:
            not_graded = ", ".join(f"{o} ({r})" for o, r in zip(entry.others, entry.reasons, strict=True))
            problems.append(
                f"{entry.student}: {len(entry.candidates)} files; graded {terminal(entry.file, 200)}, "
                f"{why_graded(entry, pick, assignment_stem)} (not graded: {terminal(not_graded, 400)})"
            )
    for uid, students in shared_ids(entries).items():
        problems.append(
            f"LMS id {terminal(uid, 40)} is carried by {len(students)} learners "
            f"({terminal(', '.join(students), 300)}): overrides, manual scores and exports "
            "never apply a row by this id (use the key)"
        )
    if strays:
        problems.append(f"not submissions (not graded): {terminal(', '.join(strays), 400)}")
    (staging / STAGED_MARK).write_text(json.dumps({"uploads": uploads, "strays": strays}), encoding="utf-8")
    if extracted is not None:
        shutil.rmtree(extracted, ignore_errors=True)
    entries.sort(key=lambda e: e.student)
    return Intake(staging, entries, problems, strays)


def staged(folder: Path) -> dict:
    """What the intake wrote in a staged folder: ``{"uploads": [...], "strays": [...]}``
    (empty for a folder the intake did not make)."""
    try:
        data = json.loads((Path(folder) / STAGED_MARK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def staged_uploads(folder: Path) -> set[str]:
    return set(staged(folder).get("uploads", []))


# --------------------------------------------------------------------------- roster and gradebook


def write_roster(out: Path, intake: Intake) -> Path:
    """``OUT/roster.csv``: who each graded key is, which file was graded and when it was
    stored, the name the learner gave it (``upload``: the outputs never read an LMS's naming),
    which files were not graded and why (every learner text escaped: :mod:`.escape`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(ROSTER_FIELDS)
    for e in intake.entries:
        late = "yes" if e.late else ""
        row = [
            e.student,
            e.student_id,
            e.name,
            e.lms,
            late,
            e.submitted,
            e.file,
            "",
            upload_name(e.file, e.lms),
        ]
        writer.writerow([csv_cell(c) for c in row])
        for other, reason in zip(e.others, e.reasons or ["older"] * len(e.others), strict=False):
            row = [e.student, e.student_id, e.name, e.lms, "", "", other, f"not graded ({reason})"]
            row.append(upload_name(other, e.lms))
            writer.writerow([csv_cell(c) for c in row])
    path = Path(out) / ROSTER
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{ROSTER}.tmp")
    tmp.write_text(buffer.getvalue(), encoding="utf-8")
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------- staging for the grader

STAGED = "submissions"  # OUT/submissions: where a download is staged


def needs_intake(submissions: Path) -> bool:
    """A zip, or a folder with Canvas or Moodle names (the grader reads plain folders itself)."""
    submissions = Path(submissions)
    if submissions.is_file():
        return True
    if not submissions.is_dir():
        return False
    for entry in submissions.iterdir():
        name = entry.name
        try:
            link = entry.is_symlink()  # a link with an LMS name: the intake gives it a row
            if (link or entry.is_dir()) and MOODLE_FOLDER.match(name):
                return True
            if (link or entry.is_file()) and (CANVAS.match(name) or MOODLE_FILE.match(name)):
                return True
        except OSError:
            return True  # a name the file system refuses: the intake reports it and goes on
    return False


def prepare(submissions: Path, out: Path, assignment_stem: str, quiet: bool = False) -> Path:
    """The folder to grade: ``submissions`` itself, or ``OUT/submissions`` (:data:`STAGED`) staged
    from a download (with ``OUT/roster.csv``); duplicates and refused zip members are printed
    unless ``quiet``."""
    if not needs_intake(submissions):
        return Path(submissions)
    result = collect(submissions, Path(out) / STAGED, assignment_stem)
    write_roster(out, result)
    if not quiet:
        print(
            f"{len(result.entries)} students in {submissions} ({len(result.duplicates)} with several files)",
            file=sys.stderr,
        )
        for problem in result.problems:
            print(f"  {terminal(problem, 600)}", file=sys.stderr)
    return result.folder
