"""A class across machines: grade one share of it (``--shard K/N``), then merge the shares.

One idea: a class is split into ``N`` shares by learner key alone, every share is graded by
the ordinary grader on its own machine into its own output folder, and
``python -m coursetools.grade merge OUT_0 ... OUT_N-1 --out OUT`` joins them into the folder
a one-machine run would have written.

* **The split** (:func:`share_of`): a learner belongs to share ``int(sha256(key)) mod N``.
  It depends on the learner's key only, never on who else is in the class, so adding or
  removing a learner moves nobody else; ``K`` runs from 0 to ``N - 1`` (a Slurm array's
  ``SLURM_ARRAY_TASK_ID``, a Kubernetes Indexed Job's ``JOB_COMPLETION_INDEX``).
* **A share** (:meth:`Shard.take`, the one hook in :func:`coursetools.grade.batch.grade`):
  every share reads the whole class the same way (an LMS download is staged in full in
  every share, keys are made unique over the whole class, ``class.json`` lists the whole
  class), then grades only its own learners; the others stay ``not-graded`` in that share's
  gradebook. It writes ``OUT_K/.coursetools-share.json``: which share it is, the assignment's
  fingerprint, and every learner's key and submission fingerprint. A share renders no
  ``report.html`` (its near-identical answers would see one share only).
* **The merge** (:func:`merge`) refuses, with what to do instead, shares that do not make one
  class: a share missing or given twice, another assignment or assignment version, another
  class (other learners or other files), a learner without a finished record, a record in
  the wrong share or graded from another file, intake or instructor files that differ. Then
  it copies ``class.json``, the staged download and the instructor's files, every learner's
  ``record.json`` (a path into a share folder is rewritten into OUT), and renders every
  output once (:func:`coursetools.grade.outputs.publish.publish`), so ``grades.csv``, the feedback,
  ``results.json``, ``report.html`` (whose near-identical answers now see the whole class)
  and ``strays.txt`` are those of a one-machine run of the same records, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from coursetools.grade.grading.submission import Submission
from coursetools.grade.outputs import publish
from coursetools.grade.outputs.scores import ClassScores
from coursetools.grade.records.paths import Out, atomic_write
from coursetools.grade.records.record import Record, Status
from coursetools.grade.records.record_io import write_record
from coursetools.grade.records.roster import ROSTER

SHARE_FILE = ".coursetools-share.json"  # in a share's output folder: which share, which class
# what a share folder holds besides the learners' records that the merged folder needs as it is:
# the intake's roster and staged download, the instructor's adjustments (identical in every share)
SHARED = (ROSTER, "submissions", "overrides.csv", "late.toml", "manual")
SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class MergeError(ValueError):
    """Share folders that do not make one class (the message says which and what to do)."""


def share_of(student: str, count: int) -> int:
    """The share (0 to ``count - 1``) of the learner keyed ``student``: a function of the key
    alone, the same on every machine and in every Python process (no hash seed)."""
    digest = hashlib.sha256(student.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % count


@dataclass(frozen=True)
class Shard:
    """Share ``index`` of ``count`` (``--shard index/count``, ``0 <= index < count``)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not (1 <= self.count and 0 <= self.index < self.count):
            raise ValueError(
                f"share {self.index}/{self.count} does not exist: K/N needs N >= 1 and 0 <= K < N "
                "(K counts from 0, as SLURM_ARRAY_TASK_ID and JOB_COMPLETION_INDEX do)"
            )

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"K/N"`` as a share (a :class:`ValueError` that says the form otherwise)."""
        match = SPEC.match(str(text))
        if not match:
            raise ValueError(f"--shard takes K/N (e.g. 0/4, K from 0 to N-1), got {text!r}")
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, student: str) -> bool:
        return share_of(student, self.count) == self.index

    def take(self, out: Path, subs: list[Submission], assignment: str) -> list[Submission]:
        """The submissions of this share, in class order; writes ``OUT/.coursetools-share.json``
        (this share, the ``assignment``'s fingerprint and the whole class: every learner's key
        and file fingerprint, for :func:`merge` to check the shares against each other)."""
        mark = {
            "shard": self.index,
            "of": self.count,
            "assignment": assignment,
            "class": {sub.student: sub.digest for sub in subs},
        }
        atomic_write(Path(out) / SHARE_FILE, json.dumps(mark, indent=1) + "\n")
        return [sub for sub in subs if self.holds(sub.student)]


# --------------------------------------------------------------------------- merging


@dataclass
class _Share:
    folder: Path
    shard: Shard
    assignment: str
    learners: dict[str, str]  # the whole class as this share saw it: key -> file fingerprint

    @property
    def own(self) -> list[str]:
        return [s for s in self.learners if self.shard.holds(s)]

    def __str__(self) -> str:
        return f"share {self.shard} ({self.folder})"


def _read_share(folder: Path) -> _Share:
    path = folder / SHARE_FILE
    if not folder.is_dir():
        raise MergeError(f"{folder} is not a folder")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        shard = Shard(int(data["shard"]), int(data["of"]))
        learners = {str(k): str(v) for k, v in dict(data["class"]).items()}
        assignment = str(data["assignment"])
    except FileNotFoundError:
        raise MergeError(
            f"{folder} is not a share of a class (no {SHARE_FILE}): grade it with --shard K/N"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MergeError(f"{path} cannot be read ({type(exc).__name__}): grade that share again") from None
    return _Share(folder, shard, assignment, learners)


def _check_set(shares: list[_Share]) -> None:
    """One class, every share exactly once."""
    first = shares[0]
    for share in shares[1:]:
        if share.shard.count != first.shard.count:
            raise MergeError(
                f"{first} and {share} split the class differently ({first.shard.count} and "
                f"{share.shard.count} shares): grade every share with the same N"
            )
        if share.assignment != first.assignment:
            raise MergeError(
                f"{first} and {share} were graded against different assignments (fingerprints "
                f"{first.assignment} and {share.assignment}: another notebook, other points or "
                "other checks): grade every share with the same checkout and assignment"
            )
        if share.learners != first.learners:
            only = sorted(set(first.learners) ^ set(share.learners))
            changed = sorted(
                s for s in set(first.learners) & set(share.learners) if first.learners[s] != share.learners[s]
            )
            what = f"learners in one only: {', '.join(only[:10])}" if only else ""
            what += ("; " if what and changed else "") + (
                f"other files for: {', '.join(changed[:10])}" if changed else ""
            )
            raise MergeError(
                f"{first} and {share} saw different classes ({what}): grade every share from the "
                "same SUBMISSIONS, unchanged"
            )
    seen: dict[int, _Share] = {}
    for share in shares:
        if share.shard.index in seen:
            raise MergeError(
                f"share {share.shard} is given twice ({seen[share.shard.index].folder} and "
                f"{share.folder}): give each share's folder once"
            )
        seen[share.shard.index] = share
    missing = [f"{k}/{first.shard.count}" for k in range(first.shard.count) if k not in seen]
    if missing:
        raise MergeError(
            f"share{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing: give all "
            f"{first.shard.count} share folders (grade the missing ones with --shard K/{first.shard.count})"
        )


def _tree(path: Path) -> dict[str, str] | None:
    """``{relative path: sha256 of its bytes}`` of a file or folder (None: absent)."""
    if path.is_symlink():
        raise MergeError(f"{path} is a symbolic link: a share folder's files are plain files")
    if path.is_file():
        return {"": hashlib.sha256(path.read_bytes()).hexdigest()}
    if not path.is_dir():
        return None
    files = {}
    for item in sorted(path.rglob("*")):
        if item.is_symlink():
            raise MergeError(f"{item} is a symbolic link: a share folder's files are plain files")
        if item.is_file():
            files[item.relative_to(path).as_posix()] = hashlib.sha256(item.read_bytes()).hexdigest()
    return files


def _check_files(shares: list[_Share]) -> None:
    """``class.json`` and the files of :data:`SHARED` are the same in every share (or absent from all)."""
    for name in ("class.json", *SHARED):
        first = _tree(shares[0].folder / name)
        for share in shares[1:]:
            if _tree(share.folder / name) != first:
                raise MergeError(
                    f"{name} differs between {shares[0]} and {share}: every share must be graded "
                    "from the same download with the same options, and the instructor's files "
                    "(overrides, late policy, manual scores) added to the merged folder"
                )


def _records(shares: list[_Share]) -> dict[str, tuple[_Share, Record]]:
    """Every learner's finished record, from its own share; refuses a record in the wrong share,
    graded from another file or against another assignment, and a learner with none."""
    found: dict[str, tuple[_Share, Record]] = {}
    for share in shares:
        own = set(share.own)
        for path in Out(share.folder).records():
            student = path.parent.name
            if student not in share.learners:
                raise MergeError(
                    f"{share} holds a record for {student!r}, who is not in the class: "
                    "grade each share into a fresh folder"
                )
            if student not in own:
                raise MergeError(
                    f"{share} holds a record for {student!r}, who belongs to share "
                    f"{share_of(student, share.shard.count)}/{share.shard.count}: the shares overlap; "
                    "grade each share into its own fresh folder"
                )
            try:
                record = Record.from_dict(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, KeyError, TypeError, RecursionError):
                raise MergeError(f"{path} cannot be read: grade {share} again") from None
            found[student] = (share, record)
    for share in shares:
        for student in share.own:
            if student not in found:
                raise MergeError(
                    f"{student!r} of {share} has no record: rerun that share's command "
                    "(learners already graded are kept)"
                )
            record = found[student][1]
            if not record.status.final or record.status is Status.NOT_GRADED:
                raise MergeError(
                    f"{student!r} of {share} is {record.status.value}: rerun that share's command"
                )
            if record.digest != share.learners[student]:
                raise MergeError(
                    f"{student!r} of {share} was graded from another file than the class's "
                    "(the submission changed after grading): rerun that share's command"
                )
            if record.assignment != share.assignment:
                raise MergeError(
                    f"{student!r} of {share} was graded against another version of the assignment: "
                    "rerun that share's command"
                )
    return found


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target)
    elif source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def merge(folders: list[Path], out: Path) -> ClassScores:
    """Join the share folders ``folders`` (one per share, any order) into ``out``, a new or empty
    folder, and render every output; return the class's scores. Raises :class:`MergeError`,
    before writing anything, when the folders do not make one class."""
    out = Path(out).resolve()
    folders = [Path(f).resolve() for f in folders]
    if not folders:
        raise MergeError("no share folder given: merge OUT_0 ... OUT_N-1 --out OUT")
    if out in folders:
        raise MergeError(f"{out} is a share: merge into a new folder")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise MergeError(f"{out} exists and is not an empty folder: merge into a new folder")
    shares = [_read_share(f) for f in folders]
    _check_set(shares)
    _check_files(shares)
    records = _records(shares)

    out.mkdir(parents=True, exist_ok=True)
    first = shares[0].folder
    for name in ("class.json", *SHARED):
        _copy(first / name, out / name)
    for student in shares[0].learners:
        share, record = records[student]
        source = Out(share.folder).record(student)
        file = Path(record.file)
        if file.is_relative_to(share.folder):  # a staged upload: the merged folder's own copy
            record.file = str(out / file.relative_to(share.folder))
            write_record(out, record)
        else:
            _copy(source, Out(out).record(student))
    return publish.publish(out)
