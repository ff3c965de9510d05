"""A late policy per assignment (issue 27, item 4): OUT/late.toml, applied from the LMS's late
mark or the submission time, shown in the gradebook, the feedback and results.json."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import fixtures
import pytest

from coursetools.grade.outputs import late

ROOT = Path(__file__).resolve().parents[3]

POLICY = """
deadline = 2026-11-20T23:59:00+00:00
grace_hours = 1
penalty_per_day = 0.1
max_penalty = 0.3
lms_late_days = 1
"""


def _policy(tmp_path: Path, text: str = POLICY) -> late.Policy:
    path = tmp_path / "late.toml"
    path.write_text(text)
    policy, problems = late.read_policy(path)
    assert problems == [] and policy is not None
    return policy


@pytest.mark.parametrize(
    "submitted,days,points",
    [
        ("2026-11-20T12:00:00+00:00", 0, 0.0),  # on time
        ("2026-11-21T00:30:00+00:00", 0, 0.0),  # within the grace hour
        ("2026-11-21T01:00:00+00:00", 1, 1.0),  # one day started
        ("2026-11-22T02:00:00+00:00", 2, 2.0),
        ("2026-11-30T00:00:00+00:00", 9, 3.0),  # capped at 30%
        ("2026-11-21T09:00:00+09:00", 0, 0.0),  # 00:00 UTC: a time zone is respected
    ],
)
def test_days_late_from_the_submission_time(tmp_path, submitted, days, points):
    policy = _policy(tmp_path)
    assert policy.days_late({"submitted": submitted}) == days
    assert policy.penalty({"submitted": submitted}, 10.0)[0] == pytest.approx(points)


def test_the_lms_late_mark_counts_when_no_time_is_known(tmp_path):
    policy = _policy(tmp_path, "penalty_per_day = 0.25\nlms_late_days = 2\n")
    assert policy.penalty({"late": "yes"}, 4.0) == (2.0, policy.penalty({"late": "yes"}, 4.0)[1])
    assert "2 days late" in policy.penalty({"late": "yes"}, 4.0)[1]
    assert policy.penalty({"late": ""}, 4.0) == (0.0, "")


@pytest.mark.parametrize(
    "text,problem",
    [
        ("penalty_per_day = 2\n", "between 0 and 1"),
        ("penalty_per_day = 'ten'\n", "not a number"),
        ("deadline = 'soon'\n", "not a date and time"),
        ("penalty = 0.1\n", "unknown setting 'penalty'"),
        ("this is not toml", "not read"),
    ],
)
def test_a_bad_policy_is_reported(tmp_path, text, problem):
    path = tmp_path / "late.toml"
    path.write_text(text)
    _, problems = late.read_policy(path)
    assert any(problem in p for p in problems), problems


@pytest.mark.slow
def test_the_penalty_reaches_every_output(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "roster.csv").write_text(
        "student,student_id,name,lms,late,submitted,file,duplicate_of\n"
        "ada,1,ada,canvas,,2026-11-20T10:00:00+00:00,a.ipynb,\n"
        "grace,2,grace,canvas,yes,2026-11-22T03:00:00+00:00,g.ipynb,\n"
    )
    (out / "late.toml").write_text(POLICY)
    records = [fixtures.record(s, {"ex-9-1": 2.0}, {"ex-9-1": 2.0}) for s in ("ada", "grace")]
    fixtures.write_graded(out, records)
    with open(out / "grades.csv", newline="") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    assert rows["ada"]["total"] == "2" and rows["ada"]["adjustments"] == ""
    assert rows["grace"]["total"] == "1.6" and rows["grace"]["ex-9-1"] == "2"  # 2 days: 20% of 2 off
    assert rows["grace"]["adjustments"].startswith(
        "late penalty on the total: 2 -> 1.6 (submitted 2 days late"
    )
    feedback = (out / "feedback" / "grace.md").read_text()
    assert "Score: **1.6** out of 2." in feedback and "late penalty on the total: 2 -> 1.6" in feedback
    results = json.loads((out / "grace" / "results.json").read_text())
    assert results["score"] == pytest.approx(1.6)
    assert any(
        t["name"] == "total: adjusted by your instructor" and t["score"] == pytest.approx(-0.4)
        for t in results["tests"]
    )
