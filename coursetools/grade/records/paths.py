"""Where things are: the repository's folders, and the layout of a grading output folder.

Every module of the writing side (gradebook, feedback, report, exports) names a file
through this module, so that the layout is written down once::

    OUT/class.json                 the class: assignment, its notebook, feedback settings
    OUT/grades.csv                 one row per submission, always, exactly once
    OUT/feedback/<student>.md      what each learner reads
    OUT/<student>/results.json     Gradescope's autograder format
    OUT/<student>/record.json      the grader's own record (written last: marks it done)
    OUT/report.html                the class at a glance
    OUT/roster.csv                 who each key is, in the LMS (written by the intake)
    OUT/overrides.csv              the instructor's adjustments (never written by the grader)
    OUT/manual/<question>.csv      scores of written answers, graded by hand
    OUT/late.toml                  the late policy of the assignment (the instructor's)
    OUT/strays.txt                 files of the download that are not submissions
    OUT/submissions/               the staged download (an LMS zip or folder)
    OUT/export/                    what goes back to the LMS
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXERCISES = ROOT / "exercises"
SOLUTIONS = ROOT / "solutions"
CHECKS = ROOT / "attnlib" / "checks"
PACKAGES = ("attnlib", "coursetools")


# every name the output folder uses for itself (a learner's key is a folder of OUT: a learner
# named "strays.txt", "class.json" or "Feedback" must never be one of them, whatever the case)
RESERVED = frozenset(
    {
        "class.json",
        "grades.csv",
        "report.html",
        "roster.csv",
        "overrides.csv",
        "manual",
        "late.toml",
        "strays.txt",
        "submissions",
        "export",
        "feedback",
        "work",
    }
)


def reserved(key: str) -> bool:
    """A key the output folder uses for itself (case-insensitively, with or without a dot
    prefix or a trailing dot: some file systems ignore both)."""
    return key.strip(".").lower() in RESERVED or key.lower().startswith(".coursetools")


def unreserved(key: str) -> str:
    """``key``, or ``learner-<key>`` when the output folder uses that name (:data:`RESERVED`)."""
    return f"learner-{key}" if reserved(key) else key


@dataclass(frozen=True)
class Out:
    """The files of one grading output folder."""

    root: Path

    @property
    def class_json(self) -> Path:
        return self.root / "class.json"

    @property
    def grades(self) -> Path:
        return self.root / "grades.csv"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    @property
    def roster(self) -> Path:
        return self.root / "roster.csv"

    @property
    def overrides(self) -> Path:
        return self.root / "overrides.csv"

    @property
    def manual(self) -> Path:
        return self.root / "manual"

    @property
    def late(self) -> Path:
        return self.root / "late.toml"

    @property
    def strays(self) -> Path:
        return self.root / "strays.txt"

    @property
    def staged(self) -> Path:
        return self.root / "submissions"

    @property
    def export(self) -> Path:
        return self.root / "export"

    @property
    def feedback_dir(self) -> Path:
        return self.root / "feedback"

    def feedback(self, student: str) -> Path:
        return self.root / "feedback" / f"{student}.md"

    def results(self, student: str) -> Path:
        return self.root / student / "results.json"

    def record(self, student: str) -> Path:
        return self.root / student / "record.json"

    def records(self) -> list[Path]:
        return sorted(self.root.glob("*/record.json"))


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and :func:`os.replace`: an interrupted
    run leaves the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
