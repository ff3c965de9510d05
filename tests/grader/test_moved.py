"""The grader and assign moved to ``coursetools``; the old commands are aliases that behave the same."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import fake_class
import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.grader

VOLATILE = {"seconds", "runs", "output", "isolation", "file"}


def _run(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def _stable(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in VOLATILE}


@pytest.mark.slow
def test_old_and_new_grade_commands_grade_a_class_identically(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    every = fake_class.notebooks(tmp_path / "canary.txt")
    for name in ("correct", "mis-transposed", "partial-3d", "stub", "syntax-error", "empty"):
        nb, _ = every[name]
        data = nb if isinstance(nb, bytes) else fake_class.nbformat.writes(nb).encode()
        (subs / f"{name}.ipynb").write_bytes(data)
    results = {}
    for module in ("attnlib.grade", "coursetools.grade"):
        out = tmp_path / module
        proc = _run(["-m", module, "00-how-to-use", str(subs), "--out", str(out), "--jobs", "2", "--quiet"])
        assert proc.returncode == 0, proc.stderr[-2000:]
        with open(out / "grades.csv", encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
        records = {
            p.parent.name: _stable(json.loads(p.read_text(encoding="utf-8")))
            for p in out.glob("*/record.json")
        }
        feedback = {p.name: p.read_text(encoding="utf-8") for p in (out / "feedback").glob("*.md")}
        results[module] = (rows, records, feedback, proc.stderr)
    old, new = results["attnlib.grade"], results["coursetools.grade"]
    assert old[:3] == new[:3]
    assert len(old[0]) == 6 and {r["student"]: r["total"] for r in new[0]}["correct"] == "1"
    assert "now lives in `python -m coursetools.grade`" in old[3]
    assert "now lives" not in new[3]


@pytest.mark.slow
def test_old_and_new_assign_commands_write_the_same_exercises(tmp_path):
    solution = ROOT / "solutions" / "00-how-to-use.ipynb"
    texts = {}
    for module in ("attnlib.assign", "coursetools.assign"):
        out = tmp_path / module
        proc = _run(["-m", module, str(solution), "--out", str(out)])
        assert proc.returncode == 0, proc.stderr
        texts[module] = ((out / solution.name).read_text(encoding="utf-8"), proc.stderr)
    assert texts["attnlib.assign"][0] == texts["coursetools.assign"][0]
    assert "BEGIN SOLUTION" not in texts["coursetools.assign"][0]
    assert "now lives in `python -m coursetools.assign`" in texts["attnlib.assign"][1]


def test_old_import_paths_resolve_to_the_moved_modules():
    import attnlib.assign
    import attnlib.grade
    import coursetools.assign
    from coursetools.grade import batch, runner

    assert attnlib.grade.batch is batch and attnlib.grade.runner is runner
    assert attnlib.assign.render is coursetools.assign.render
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        attnlib.grade.nonexistent  # noqa: B018


def test_the_learners_package_does_not_ship_the_grader():
    """attnlib/grade holds only the alias (no sandbox code); the grader is in coursetools."""
    assert sorted(p.name for p in (ROOT / "attnlib" / "grade").glob("*.py")) == ["__init__.py", "__main__.py"]
    assert (ROOT / "coursetools" / "grade" / "sandbox.py").is_file()
    # since e28b41e the learners' distribution is attnlib alone: coursetools runs from a checkout
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'include = ["attnlib*"]' in text and '"coursetools*"' not in text
