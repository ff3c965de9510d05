"""What an output folder keeps for every later command: ``OUT/class.json`` and the records.

:class:`ClassInfo` is what the grader was asked to grade (written by the grading run, read by
``report``, ``overrides``, ``manual`` and ``export``); :func:`load_records` reads the grader's
``OUT/<student>/record.json`` files back as :class:`~coursetools.grade.record.Record` objects.
Both sit on the vocabulary floor so that every reader of OUT can use them without the scores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from coursetools.grade.paths import Out, atomic_write
from coursetools.grade.record import Record


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
