"""Submissions as instructors receive them: a folder, or a .zip downloaded from an LMS.

:func:`collect` reads a folder or a zip and stages one file per student in a
flat folder (``<student>.ipynb``) that the grader takes as it is. The download's layout is
decided once for all its members (:func:`.layouts.layout_of`), then read by its class:

* Canvas's bulk download (:mod:`.canvas`): ``lastfirst_12345_67890_05-masks.ipynb``, and
  ``lastfirst_LATE_12345_67890_...`` for a late one;
* Moodle's (:mod:`.moodle`): one folder per student, ``Full Name_12345_assignsubmission_file_/``
  (or, without folders, ``Full Name_12345_assignsubmission_file_05-masks.ipynb``);
* the course's own layouts (:mod:`.folder`): ``<student>.ipynb`` and ``<student>/.../*.ipynb``
  (nbgrader's exchange), where the student id is unknown.

A student with two or more files is a *duplicate*: it is reported, and one file is graded
(:mod:`.duplicates`). Zips are extracted safely (:mod:`.archive`). :func:`prepare` stages a
download for the grader and writes ``OUT/roster.csv`` (:mod:`.roster`).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from coursetools.grade.lms.archive import named, safe_extract
from coursetools.grade.lms.base import (
    Candidate,
    Entry,
    Intake,
    candidate_of,
    files_under,
    links_under,
    skipped,
)
from coursetools.grade.lms.duplicates import choose, why_graded, why_not
from coursetools.grade.lms.layouts import (
    FOLDER,
    layout,
    layout_of,
    names_a_learner,
    refused_name,
    upload_name,
)
from coursetools.grade.lms.roster import write_roster
from coursetools.grade.records.escape import terminal, visible

STAGED_MARK = ".coursetools-staged.json"  # in a staged folder: what the intake put there


def _unwrap(root: Path, aliases: dict[str, str] | None = None) -> Path:
    """A zip of a folder holds one folder: look inside it (unless it is a student's own folder)."""
    aliases = aliases or {}
    while True:
        entries = [p for p in root.iterdir() if not skipped(p.name)]
        only = aliases.get(entries[0].name, entries[0].name) if len(entries) == 1 else ""
        if len(entries) != 1 or not entries[0].is_dir() or names_a_learner(only, is_dir=True):
            return root
        inner = [p for p in entries[0].iterdir() if not skipped(p.name)]
        if not any(p.is_dir() for p in inner) and len(inner) <= 1:
            return root  # one student's folder with one file: keep it as a student
        root = entries[0]


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

    def add(key: str, entry: Entry, found: Candidate, late: bool = False) -> None:
        if key not in by_key:
            by_key[key] = entry
        by_key[key].candidates.append(found)
        by_key[key].late = by_key[key].late or late

    plain: dict[str, list[tuple[str, Path]]] = {}
    try:
        children = sorted(root.iterdir())
    except OSError as exc:
        raise FileNotFoundError(f"cannot read {root}: {exc.strerror}") from None
    lms = layout_of(children, problems, refused, aliases)
    # the id comes only from the prefix of the download's own LMS: in a Canvas download an
    # upload named like a Moodle file is a Canvas file (and the reverse); a member that is no
    # learner of that LMS is read as a plain folder's
    reader = layout(lms)
    for path in children:
        name = aliases.get(path.name, path.name)
        try:
            if skipped(name) or path.is_symlink():
                continue
            rel = named(path, root, aliases)
            if path.is_dir():
                learner = reader.folder(name)
                if learner:
                    files = files_under(path)
                    if not files:
                        continue  # Moodle makes a folder for an empty online-text submission too
                    for file in files:
                        add(
                            learner.key, reader.entry(learner), candidate_of(file, named(file, root, aliases))
                        )
                else:
                    FOLDER.gather(plain, name, path, is_dir=True)
                continue
            learner = reader.file(name)
            if learner:
                add(learner.key, reader.entry(learner), candidate_of(path, rel, learner.number), learner.late)
            elif not FOLDER.gather(plain, name, path, is_dir=False):
                strays.append(visible(rel))
        except (OSError, ValueError) as exc:
            problems.append(
                f"{terminal(name, 200)}: refused ({terminal(getattr(exc, 'strerror', None) or exc, 120)})"
            )
    for member, why in refused:
        top, in_folder = refused_name(member)
        learner = reader.refused(top, in_folder)
        if learner is None or not top or skipped(top):
            continue
        if learner.key not in by_key:
            by_key[learner.key] = reader.entry(learner, late=learner.late)
            by_key[learner.key].file = visible(member)
            by_key[learner.key].refused = why
    for own, raw, path in FOLDER.keys(plain):
        try:
            if path.is_dir():
                files = files_under(path)
                entry = Entry(own, "", visible(raw), "folder")
                if not files:
                    by_key.setdefault(own, entry)
                for file in files:
                    add(own, entry, candidate_of(file, named(file, root, aliases)))
            else:
                add(
                    own,
                    Entry(own, "", visible(raw), "folder"),
                    candidate_of(path, named(path, root, aliases)),
                )
        except (OSError, ValueError) as exc:
            problems.append(
                f"{terminal(raw, 200)}: refused ({terminal(getattr(exc, 'strerror', None) or exc, 120)})"
            )
    return list(by_key.values())


def shared_ids(entries: list[Entry]) -> dict[str, list[str]]:
    """``{LMS id: [keys]}`` of the ids that more than one learner of ``entries`` carries (a
    download whose names claim one id twice): no row is applied or exported by such an id."""
    by_id: dict[str, list[str]] = {}
    for entry in entries:
        if entry.student_id:
            by_id.setdefault(f"{entry.lms}:{entry.student_id}", []).append(entry.student)
    return {k.split(":", 1)[1]: sorted(v) for k, v in by_id.items() if len(v) > 1}


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
            inner = named(root, extracted, aliases)
            refused = [(n[len(inner) + 1 :], w) if n.startswith(inner + "/") else (n, w) for n, w in refused]
    else:
        extracted = None
        root = _unwrap(source)
        for link in links_under(root):  # a link in an unzipped download: its learner's row, a message
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
        notebook = upload_name(pick.source, entry.lms).endswith(".ipynb")
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
            if (link or entry.is_dir()) and names_a_learner(name, is_dir=True):
                return True
            if (link or entry.is_file()) and names_a_learner(name, is_dir=False):
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
