"""A late policy per assignment: ``OUT/late.toml``, the instructor's file (never written by the grader).

::

    deadline = 2026-11-20T23:59:00+01:00   # when the assignment was due (TOML date-time)
    grace_hours = 1                         # late by less than this: no penalty
    penalty_per_day = 0.10                  # share of the maximum taken off per day (or part of one) late
    max_penalty = 0.50                      # at most this share of the maximum in all
    lms_late_days = 1                       # days counted at least when the LMS marks a file late

How late a learner is comes from the roster of the download (``OUT/roster.csv``):
its ``submitted`` time (the time the LMS stored with the graded file) against the
``deadline``; Canvas's ``LATE`` mark counts as at least ``lms_late_days`` days (the
LMS knows the deadline and the extensions it granted). The penalty is taken off the
final total (after overrides and manual scores, never below 0), shown in
``grades.csv`` (``adjustments``), in the learner's feedback and ``results.json``, and
in the LMS exports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import tomllib

from coursetools.grade.records.record import number

FIELDS = ("deadline", "grace_hours", "penalty_per_day", "max_penalty", "lms_late_days")


@dataclass(frozen=True)
class Policy:
    deadline: datetime | None = None
    grace_hours: float = 0.0
    penalty_per_day: float = 0.0
    max_penalty: float = 1.0
    lms_late_days: float = 1.0

    def days_late(self, roster: dict) -> float:
        """Days (and parts of days) late, after the grace period; 0 when on time or unknown."""
        submitted = parse_time(roster.get("submitted", "")) if roster else None
        days = 0.0
        if self.deadline is not None and submitted is not None:
            seconds = (submitted - self.deadline).total_seconds() - 3600 * self.grace_hours
            days = math.ceil(seconds / 86400) if seconds > 0 else 0
        if roster and roster.get("late") == "yes":  # the LMS's own mark: late, whatever the time says
            days = max(days, self.lms_late_days)
        return days

    def penalty(self, roster: dict, max_points: float) -> tuple[float, str]:
        """The points taken off a learner's total, and the reason the learner reads."""
        days = self.days_late(roster)
        if days <= 0 or self.penalty_per_day <= 0:
            return 0.0, ""
        share = min(self.max_penalty, self.penalty_per_day * days)
        points = round(share * max_points, 6)
        plural = "" if days == 1 else "s"
        reason = (
            f"submitted {number(days)} day{plural} late: {number(100 * self.penalty_per_day)}% of the "
            f"maximum per day, at most {number(100 * self.max_penalty)}%; {number(points)} points off"
        )
        return points, reason


def parse_time(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo else when.astimezone()  # a naive time is the grader's local time


def read_policy(path: Path) -> tuple[Policy | None, list[str]]:
    """The policy in ``path`` (None when there is no file) and what is wrong with it."""
    path = Path(path)
    if not path.is_file():
        return None, []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, [f"{path.name}: not read ({exc}); no late penalty applied"]
    problems = [
        f"{path.name}: unknown setting {key!r} (known: {', '.join(FIELDS)})"
        for key in data
        if key not in FIELDS
    ]
    deadline = data.get("deadline")
    if isinstance(deadline, str):
        deadline = parse_time(deadline) or deadline
    if deadline is not None and not isinstance(deadline, datetime):
        problems.append(f"{path.name}: deadline {data['deadline']!r} is not a date and time")
        deadline = None
    if isinstance(deadline, datetime) and deadline.tzinfo is None:
        deadline = deadline.astimezone()
    numbers = {}
    for key, default, top in (
        ("grace_hours", 0.0, None),
        ("penalty_per_day", 0.0, 1.0),
        ("max_penalty", 1.0, 1.0),
        ("lms_late_days", 1.0, None),
    ):
        value = data.get(key, default)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or value < 0
            or (top and value > top)
        ):
            bound = f" between 0 and {top}" if top else " of 0 or more"
            problems.append(f"{path.name}: {key} = {value!r} is not a number{bound}; no late penalty applied")
            return None, problems
        numbers[key] = float(value)
    return Policy(deadline, **numbers), problems
