"""What an output folder keeps for every later command: ``OUT/class.json`` and the records.

:class:`ClassInfo` is what the grader was asked to grade (written by the grading run, read by
``report``, ``overrides``, ``manual`` and ``export``); :func:`load_records` reads the grader's
``OUT/<student>/record.json`` files back as :class:`~coursetools.grade.records.record.Record` objects.
Both sit on the vocabulary floor so that every reader of OUT can use them without the scores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from coursetools.grade.records.paths import Out, atomic_write
from coursetools.grade.records.record import Record


@dataclass
class ClassInfo:
    """``OUT/class.json``: what the grader was asked to grade, for every later command."""

    assignment: str = ""  # the notebook's stem
    notebook: str = ""  # its path
    points: dict[str, float] = field(default_factory=dict)  # exercise id -> points, in notebook order
    functions: dict[str, str] = field(default_factory=dict)
    manual: dict[str, float] = field(default_factory=dict)  # written question id -> points
    students: list[str] = field(default_factory=list)  # the class, in gradebook order
    strays: list[str] = field(default_factory=list)  # files of the download that are not submissions
    show_hidden_inputs: bool = False
    overrides: str = ""  # the overrides file, when not OUT/overrides.csv

    @classmethod
    def load(cls, out: Path) -> ClassInfo:
        try:
            data = json.loads(Out(Path(out)).class_json.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls()
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def save(self, out: Path) -> None:
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        atomic_write(Out(Path(out)).class_json, json.dumps(data, indent=1) + "\n")


def load_records(out: Path) -> dict[str, Record]:
    """``{student: Record}`` of the grader's records under ``out``."""
    records = {}
    for path in Out(Path(out)).records():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if (
            isinstance(data, dict)
            and isinstance(data.get("student"), str)
            and data["student"] == path.parent.name
        ):
            records[data["student"]] = Record.from_dict(data)
    return records


ANSWERS_CACHE = ".coursetools-answers.json"  # reserved: a name starting ".coursetools" (paths.reserved)
ANSWERS_CACHE_VERSION = 1


def answers_key(
    student: str, digest: str, assignment: str, functions: dict[str, str], questions: list[str]
) -> str:
    """The cache key of a learner's answers: the learner (two learners' records may claim one
    digest: a copy, or a link to a classmate's file, which is never read), the file's digest, the
    assignment's digest and what was asked (the exercises' functions, the written questions)."""
    import hashlib

    asked = json.dumps([sorted(functions.items()), sorted(questions)], separators=(",", ":"))
    who = hashlib.sha256(student.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return f"{who}:{digest}:{assignment}:{hashlib.sha256(asked.encode()).hexdigest()[:16]}"


@dataclass
class AnswerCache:
    """``OUT/.coursetools-answers.json``: the answers of graded notebooks as the reader worker
    read them once (``{key: {"normal": ..., "written": ...}}``, :func:`answers_key`), so that
    every later command (report, overrides, manual, export) reads a notebook again only when
    its file or the assignment changed."""

    path: Path
    entries: dict[str, dict] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)  # the notebooks (learner:digest:assignment) asked about
    changed: bool = False

    @classmethod
    def load(cls, out: Path) -> AnswerCache:
        path = Path(out) / ANSWERS_CACHE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return cls(path)
        entries = data.get("answers") if isinstance(data, dict) else None
        if data.get("version") != ANSWERS_CACHE_VERSION or not isinstance(entries, dict):
            return cls(path)
        return cls(path, {str(k): v for k, v in entries.items() if isinstance(v, dict)})

    def get(self, key: str) -> dict | None:
        self.used.add(_notebook_part(key))
        return self.entries.get(key)

    def put(self, key: str, answers: dict) -> None:
        self.entries[key] = answers
        self.used.add(_notebook_part(key))
        self.changed = True

    def save(self) -> None:
        """Write the entries of the notebooks asked about this time (a changed notebook's old
        answers are dropped; another command's questions about the same notebook are kept)."""
        kept = {k: v for k, v in self.entries.items() if _notebook_part(k) in self.used}
        if not self.changed and len(kept) == len(self.entries):
            return
        data = {"version": ANSWERS_CACHE_VERSION, "answers": kept}
        atomic_write(self.path, json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")


def _notebook_part(key: str) -> str:
    """The notebook's part of an :func:`answers_key`: the learner, the file's digest and the
    assignment's."""
    return key.rsplit(":", 1)[0]
