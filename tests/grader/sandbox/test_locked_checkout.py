"""A checkout below a folder of mode 0700 (a fresh ``mktemp -d`` clone) grades, and grading
writes no byte-code into it (issue 12, statuses and records)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import fixtures
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.grader


@dataclass(frozen=True)
class CopiedCheckout:
    """A copy of the checkout's ``attnlib``, ``coursetools`` and chapter 00's exercise at
    ``top/course``, graded from there: submissions in ``top/subs``, output in ``top/out``."""

    top: Path

    @property
    def repo(self) -> Path:
        return self.top / "course"

    @property
    def subs(self) -> Path:
        return self.top / "subs"

    @property
    def out(self) -> Path:
        return self.top / "out"

    def grade(self, notebooks: dict[str, nbformat.NotebookNode]) -> None:
        """Write ``{student: notebook}`` into ``subs`` and grade them as an instructor does, with
        ``python -m coursetools.grade 00-how-to-use`` run from the copy (no ``PYTHON*`` variable
        of this session leaks in); the grader must exit 0."""
        self.subs.mkdir()
        for student, nb in notebooks.items():
            (self.subs / f"{student}.ipynb").write_text(nbformat.writes(nb), "utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        command = [sys.executable, "-m", "coursetools.grade", "00-how-to-use", str(self.subs)]
        proc = subprocess.run(
            [*command, "--out", str(self.out), "--quiet"],
            cwd=self.repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture
def copied_checkout() -> Callable[[Path], CopiedCheckout]:
    """-> ``make(top)``: copies the checkout below the folder ``top`` (which must exist)."""

    def make(top: Path) -> CopiedCheckout:
        checkout = CopiedCheckout(top)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        for name in ("attnlib", "coursetools"):
            shutil.copytree(ROOT / name, checkout.repo / name, ignore=ignore)
        (checkout.repo / "exercises").mkdir()
        shutil.copy(fixtures.EXERCISE, checkout.repo / "exercises" / fixtures.EXERCISE.name)
        return checkout

    return make


@pytest.mark.slow
def test_a_checkout_below_a_0700_folder_grades_and_stays_free_of_bytecode(tmp_path, copied_checkout):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    locked.chmod(0o700)
    checkout = copied_checkout(locked)
    checkout.grade(
        {
            "ann": fixtures.with_answer(fixtures.CORRECT),
            "ben": fixtures.with_answer(fixtures.ZEROS),
        }
    )
    with open(checkout.out / "grades.csv", encoding="utf-8", newline="") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    assert (rows["ann"]["status"], rows["ann"]["total"]) == ("graded", "1"), rows
    assert (rows["ben"]["status"], rows["ben"]["total"]) == ("graded", "0"), rows
    written = sorted(str(p.relative_to(checkout.repo)) for p in checkout.repo.rglob("*.pyc"))
    # only the package marker that Python compiles before coursetools can switch byte-code off
    assert all(p.startswith("coursetools/__pycache__/__init__.") for p in written), written


@pytest.mark.slow
def test_a_checkout_in_the_temporary_folder_sees_no_other_folder_of_it(tmp_path, copied_checkout):
    """Issue 24: with the checkout under the system's temporary folder, the sandbox's root still
    holds only what grading needs: another folder of /tmp (another course's answer key) is not
    readable, /tmp is empty, and /proc/self/mountinfo names no hidden folder."""
    from coursetools.grade.sandbox import api as sandbox

    if sandbox.probe() not in ("namespaces", "userns"):
        pytest.skip("without namespaces the sandbox has no root of its own (documented)")
    if not str(tmp_path.resolve()).startswith("/tmp/"):
        pytest.skip(f"pytest's temporary folder {tmp_path} is not under /tmp here")
    checkout = copied_checkout(tmp_path)
    key = tmp_path / "other-course" / "key.txt"
    key.parent.mkdir()
    key.write_text("the answers\n", encoding="utf-8")
    reader = (
        fixtures.HEADER
        + "    try:\n"
        + f"        open({str(key)!r}).read()\n"
        + "    except OSError:\n"
        + "        return np.zeros(a.shape[:-1] + b.shape[-2:-1])\n"
        + "    return a @ np.swapaxes(b, -1, -2)\n"
    )
    hidden = [str(key.parent), str(checkout.subs), str(checkout.out)]
    probe = (
        "import os\n"
        "print('TMP', sorted(os.listdir('/tmp')))\n"
        "mounts = open('/proc/self/mountinfo').read()\n"
        f"print('NAMED', [p for p in {hidden!r} if p in mounts])\n"
    )
    # in the answer cell, after the function: the exercise's process runs it (issue 43)
    checkout.grade({"reader": fixtures.with_answer(reader + probe)})
    record = json.loads((checkout.out / "reader" / "record.json").read_text(encoding="utf-8"))
    # open() is off the exercise's allow-list, so the answer goes to review with no score (issue
    # 34.1); its cases are still judged: every one failed, so the key was not read
    assert (record["status"], record["total"]) == ("needs-review", None), record["exercises"]
    cases = record["exercises"]["ex-00-1"]["cases"]
    assert cases and all(c["status"] == "failed" for c in cases), cases
    printed = record["output"]["head"]
    # /tmp holds at most the folders on the way to the checkout and to the interpreter's
    # environment (the course's .venv, under /tmp too when the whole clone is), nothing else
    on_the_way = repr(fixtures.tmp_folders_on_the_way(checkout.repo))
    assert f"TMP {on_the_way}" in printed and "NAMED []" in printed, printed
