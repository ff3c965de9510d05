"""The quick loop, ``bash tools/test.sh -m "not slow"``, stays quick (issue 38).

``slow`` means what a test does: it trains a model, executes a notebook, builds the book, starts
a browser or runs the grader. ``tests/conftest.py`` fails a test outside ``slow`` that starts one
of those processes (from a test, a fixture, or grader code that catches the refusal). Here the
real guard, copied beside planted tests, runs them in a pytest of their own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

PLANTED = """
import subprocess, sys

import pytest

STARTS = {
    "grader": "coursetools.grade.sandbox.harness",
    "zygote": "-I -B -c from coursetools.grade.sandbox.zygote import serve",
    "sandbox": "/usr/bin/unshare --mount --net",
    "autograder": "/autograder/run_autograder",
    "kernel": "ipykernel_launcher -f kernel.json",
    "book": "jupyter-book build .",
    "browser": "/usr/bin/chromedriver --port=0",
}


def start(words):
    # a Python that does nothing, with the command line of the process it stands for
    subprocess.run([sys.executable, "-c", "pass", *words.split()], check=True)


@pytest.mark.parametrize("name", sorted(STARTS))
def test_quick_starts(name):
    start(STARTS[name])


def test_quick_catches_the_refusal():
    try:  # as the grader does: it fails closed on a process it cannot start
        start(STARTS["grader"])
    except Exception:
        pass


@pytest.fixture(scope="module")
def graded():
    start(STARTS["grader"])


def test_quick_uses_a_fixture_that_grades(graded):
    pass


@pytest.mark.slow
def test_slow_starts_the_grader():
    start(STARTS["grader"])


def test_quick_starts_an_ordinary_process():
    start("ruff check .")
"""


def _run_planted(tmp_path: Path) -> subprocess.CompletedProcess:
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_planted.py").write_text(PLANTED, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: planted\n", encoding="utf-8")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-q", "-c", "pytest.ini"]
    return subprocess.run(
        [*command, "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_quick_test_that_starts_a_slow_process_fails_and_a_slow_one_may(tmp_path):
    proc = _run_planted(tmp_path)
    out = proc.stdout + proc.stderr
    lines = re.findall(r"^(PASSED|FAILED|ERROR) test_planted\.py::(\S+)", out, re.M)
    outcome = {name: verdict for verdict, name in lines}
    kinds = ["autograder", "book", "browser", "grader", "kernel", "sandbox", "zygote"]
    assert outcome == {
        **{f"test_quick_starts[{kind}]": "FAILED" for kind in kinds},
        "test_quick_catches_the_refusal": "FAILED",
        "test_quick_uses_a_fixture_that_grades": "ERROR",  # refused while its fixture was set up
        "test_slow_starts_the_grader": "PASSED",
        "test_quick_starts_an_ordinary_process": "PASSED",
    }, out
    assert proc.returncode == 1, out
    said = "is not marked slow but starts"
    for name, what in [
        ("test_quick_starts[sandbox]", "the grader"),
        ("test_quick_starts[kernel]", "a notebook kernel"),
        ("test_quick_starts[book]", "the book build"),
        ("test_quick_starts[browser]", "a browser"),
        ("test_quick_catches_the_refusal", "the grader"),
    ]:
        assert f"test_planted.py::{name} {said} {what}" in out, out
    assert "Mark it @pytest.mark.slow" in out


def _guard():
    """tests/conftest.py, loaded by its path (the root's conftest.py has the same module name)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("course_tests_conftest", TESTS / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_guard_reads_what_a_command_starts_not_the_folders_on_its_way():
    slow_process = _guard().slow_process
    browser, grader = "a browser", "the grader (sandbox, zygote, notebook reader or command)"
    assert slow_process(["/usr/bin/chromium", "--headless"]) == browser
    assert slow_process("/usr/bin/chromedriver --port=0") == browser
    assert slow_process([sys.executable, "-m", "coursetools.grade.batch"]) == grader
    assert slow_process([sys.executable, "-c", "from coursetools.grade import main"]) == grader
    assert slow_process(["unshare", "--net", "true"]) == grader
    assert slow_process([sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"]) == "a notebook kernel"
    # a checkout, a temporary folder or a file whose path merely contains a sign starts nothing
    for quiet in (
        ["/tmp/nochrome.Hnr3/repo/.venv/bin/python", "-m", "pip", "wheel", "/tmp/nochrome.Hnr3/x"],
        ["git", "-C", "/home/me/chromium-work/course", "status"],
        ["/srv/unshare-tests/.venv/bin/ruff", "check", "."],
        [sys.executable, "/work/coursetools.grade.notes/setup_cell.py", "--check"],
    ):
        assert slow_process(quiet) is None, quiet
