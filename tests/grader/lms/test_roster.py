"""The roster the intake writes (coursetools/grade/lms/roster.py), read back by the gradebook."""

from __future__ import annotations

import csv

import fixtures
import pytest
from fixtures import STEM, _nb, _zip

from coursetools.grade.lms import intake
from coursetools.grade.lms.roster import write_roster
from coursetools.grade.outputs.publish import publish


@pytest.mark.slow
def test_the_roster_and_the_gradebook_columns(tmp_path):
    members = {
        f"lovelaceada_12345_67890_{STEM}.ipynb": _nb(),
        f"turingalan_LATE_34567_11111_{STEM}.ipynb": _nb(),
        f"turingalan_LATE_34567_22222_{STEM}.ipynb": _nb(),
    }
    result = intake.collect(_zip(tmp_path / "c.zip", members), tmp_path / "out" / "staged", STEM)
    out = tmp_path / "out"
    write_roster(out, result)
    fixtures.write_graded(
        out,
        [
            fixtures.record("lovelaceada-12345", {"ex-00-1": 1.0}, {"ex-00-1": 1.0}),
            fixtures.record("turingalan-34567", {"ex-00-1": 0.0}, {"ex-00-1": 1.0}),
        ],
    )
    for _ in range(2):  # idempotent
        publish(out)
        with open(out / "grades.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert list(rows[0]) == [
            "student",
            "student_id",
            "name",
            "late",
            "duplicates",
            "ex-00-1",
            "total",
            "max",
            "status",
            "notes",
        ]
        assert (
            rows[0]["student_id"] == "12345"
            and rows[0]["name"] == "lovelaceada"
            and rows[0]["duplicates"] == ""
        )
        assert rows[1]["late"] == "yes" and rows[1]["duplicates"] == "2" and rows[1]["ex-00-1"] == "0"
