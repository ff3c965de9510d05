"""A checkout below a folder of mode 0700 (a fresh ``mktemp -d`` clone) grades, and grading
writes no byte-code into it (issue 12, statuses and records)."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "grader"))
import fake_class  # noqa: E402

pytestmark = pytest.mark.grader


def _copy_checkout(target: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("attnlib", "coursetools"):
        shutil.copytree(ROOT / name, target / name, ignore=ignore)
    (target / "exercises").mkdir()
    shutil.copy(fake_class.EXERCISE, target / "exercises" / fake_class.EXERCISE.name)


def test_a_checkout_below_a_0700_folder_grades_and_stays_free_of_bytecode(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    locked.chmod(0o700)
    repo = locked / "course"
    _copy_checkout(repo)
    subs = locked / "subs"
    subs.mkdir()
    (subs / "ann.ipynb").write_text(nbformat.writes(fake_class._with_answer(fake_class.CORRECT)), "utf-8")
    (subs / "ben.ipynb").write_text(nbformat.writes(fake_class._with_answer(fake_class.ZEROS)), "utf-8")
    out = locked / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run(
        [sys.executable, "-m", "coursetools.grade", "00-how-to-use", str(subs), "--out", str(out), "--quiet"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "grades.csv", encoding="utf-8", newline="") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    assert (rows["ann"]["status"], rows["ann"]["total"]) == ("graded", "1"), rows
    assert (rows["ben"]["status"], rows["ben"]["total"]) == ("graded", "0"), rows
    written = sorted(str(p.relative_to(repo)) for p in repo.rglob("*.pyc"))
    # only the package marker that Python compiles before coursetools can switch byte-code off
    assert all(p.startswith("coursetools/__pycache__/__init__.") for p in written), written


def test_a_checkout_in_the_temporary_folder_sees_no_other_folder_of_it(tmp_path):
    """Issue 24: with the checkout under the system's temporary folder, the sandbox's root still
    holds only what grading needs: another folder of /tmp (another course's answer key) is not
    readable, /tmp is empty, and /proc/self/mountinfo names no hidden folder."""
    from coursetools.grade import sandbox

    if sandbox.probe() not in ("namespaces", "userns"):
        pytest.skip("without namespaces the sandbox has no root of its own (documented)")
    if not str(tmp_path.resolve()).startswith("/tmp/"):
        pytest.skip(f"pytest's temporary folder {tmp_path} is not under /tmp here")
    repo = tmp_path / "course"
    _copy_checkout(repo)
    key = tmp_path / "other-course" / "key.txt"
    key.parent.mkdir()
    key.write_text("the answers\n", encoding="utf-8")
    subs = tmp_path / "subs"
    subs.mkdir()
    reader = (
        fake_class.HEADER
        + "    try:\n"
        + f"        open({str(key)!r}).read()\n"
        + "    except OSError:\n"
        + "        return np.zeros(a.shape[:-1] + b.shape[-2:-1])\n"
        + "    return a @ np.swapaxes(b, -1, -2)\n"
    )
    hidden = [str(key.parent), str(subs), str(tmp_path / "out")]
    probe = (
        "import os\n"
        "print('TMP', sorted(os.listdir('/tmp')))\n"
        "mounts = open('/proc/self/mountinfo').read()\n"
        f"print('NAMED', [p for p in {hidden!r} if p in mounts])\n"
    )
    (subs / "reader.ipynb").write_text(
        nbformat.writes(fake_class._with_answer(reader, after=[probe])), "utf-8"
    )
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run(
        [sys.executable, "-m", "coursetools.grade", "00-how-to-use", str(subs), "--out", str(out), "--quiet"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    record = json.loads((out / "reader" / "record.json").read_text(encoding="utf-8"))
    assert (record["status"], record["total"]) == ("graded", 0.0), record["exercises"]
    printed = record["output"]["head"]
    # /tmp holds at most the folders on the way to the checkout and to the interpreter's
    # environment (the course's .venv, under /tmp too when the whole clone is), nothing else
    needed = [repo.resolve(), Path(sys.prefix).resolve(), Path(sys.executable).resolve()]
    on_the_way = repr(sorted({p.relative_to("/tmp").parts[0] for p in needed if p.is_relative_to("/tmp")}))
    assert f"TMP {on_the_way}" in printed and "NAMED []" in printed, printed
