"""What every layout of a download shares: the learner a name stands for, their files, the base.

A layout (:mod:`.canvas`, :mod:`.moodle`, :mod:`.folder`) reads a member's name and says which
learner it is (a :class:`Learner`: the key the grader uses, the LMS's id, the name shown), and
which name the learner gave the upload. The intake gathers each learner's files in an
:class:`Entry` (one :class:`Candidate` a file), grades one of them (:mod:`.duplicates`) and
returns the class as an :class:`Intake`.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from coursetools.grade.records.escape import visible

SAFE = re.compile(r"[^A-Za-z0-9._-]+")


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
    """What :func:`.intake.collect` found: the staged folder, the students, and what went wrong."""

    folder: Path
    entries: list[Entry]
    problems: list[str]
    strays: list[str] = field(default_factory=list)  # files of the download that are not submissions

    @property
    def duplicates(self) -> list[Entry]:
        return [e for e in self.entries if e.duplicate]


@dataclass(frozen=True)
class Learner:
    """The learner a member's name stands for in an LMS's download."""

    key: str  # ``<slug of the name>-<LMS id>``
    uid: str  # the LMS's user id
    person: str  # the name as the download spells it (Canvas login, Moodle full name)
    late: bool = False  # Canvas's ``_LATE_``
    sid: str = ""  # Canvas's submission number, as named

    @property
    def number(self) -> int:
        return int(self.sid) if self.sid else 0


class Layout:
    """A download's layout: which learner a top-level member is, and the name of an upload.

    A subclass says what its LMS's names hold; this base claims no name (a member no layout
    claims is read as a plain folder's: :class:`.folder.Folder`).
    """

    name = ""  # Entry.lms: canvas, moodle, folder

    def folder(self, name: str) -> Learner | None:
        """The learner a top-level folder of the download is, by its name (None: not this LMS's)."""
        return None

    def file(self, name: str) -> Learner | None:
        """The learner a top-level file of the download is, by its name (None: not this LMS's)."""
        return None

    def refused(self, top: str, in_folder: bool) -> Learner | None:
        """The learner of a member the extraction refused, by the name that carries its id
        (:func:`.layouts.refused_name`: a folder's, or the member's own)."""
        return None

    def claims(self, name: str, is_dir: bool) -> bool:
        """Whether a top-level member's name is this LMS's (the votes of :func:`.layouts.layout_of`)."""
        return (self.folder(name) if is_dir else self.file(name)) is not None

    def prefix(self, name: str) -> re.Match | None:
        """The LMS's prefix of a file's name, whose ``file`` group is the name the learner gave."""
        return None

    def unmark(self, stem: str) -> str:
        """A stem without the LMS's mark of a re-upload."""
        return stem

    def upload_name(self, source: str) -> str:
        """The name the learner gave the file (without the LMS's prefix and resubmission marks)."""
        name = PurePosixPath(source).name
        match = self.prefix(name)
        if match:
            name = match["file"]
        stem, dot, ext = name.rpartition(".")
        if dot:
            name = self.unmark(stem) + "." + ext
        return name

    def entry(self, learner: Learner, late: bool = False) -> Entry:
        return Entry(learner.key, learner.uid, visible(learner.person), self.name, late=late)


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


def fingerprint(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def skipped(part: str) -> bool:
    return part.startswith(".") or part == "__MACOSX" or part == ".ipynb_checkpoints"


def files_under(folder: Path) -> list[Path]:
    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(skipped(p) for p in rel.parts) or path.is_symlink() or not path.is_file():
            continue
        found.append(path)
    return found


def links_under(root: Path) -> list[str]:
    """The symbolic links of a download folder (never followed), by their names below ``root``."""
    found = []
    for top, dirs, files in os.walk(root):
        here = Path(top)
        rel = here.relative_to(root)
        if any(skipped(p) for p in rel.parts):
            continue
        for name in sorted(dirs + files):
            if not skipped(name) and (here / name).is_symlink():
                found.append((rel / name).as_posix())
    return sorted(found)


def candidate_of(path: Path, source: str, number: int = 0) -> Candidate:
    """A file of a learner, with its modification time."""
    return Candidate(path, source, path.stat().st_mtime, number)
