"""Gradescope's autograder archive, unpacked into an /autograder-shaped tree and run.

The archive is built for chapter 00, unpacked as Gradescope does (its content in
``source/``, ``run_autograder`` copied next to it, ``submission/`` and ``results/``
made by the harness) under a temporary root given by ``COURSE_AUTOGRADER_ROOT``,
and ``run_autograder`` is run on a correct, a partial and a hostile submission.
Each ``results.json`` is checked against Gradescope's documented format
(https://gradescope-autograders.readthedocs.io/en/latest/specs/).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import fixtures
import nbformat
import pytest

from coursetools.grade import gradescope

pytestmark = pytest.mark.grader

ROOT = Path(__file__).resolve().parents[3]

ASSIGNMENT = "00-how-to-use"
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}
TOP_KEYS = {
    "score",
    "execution_time",
    "output",
    "output_format",
    "test_output_format",
    "test_name_format",
    "visibility",
    "stdout_visibility",
    "extra_data",
    "tests",
    "leaderboard",
}
TEST_KEYS = {
    "score",
    "max_score",
    "status",
    "name",
    "name_format",
    "number",
    "output",
    "output_format",
    "tags",
    "visibility",
    "extra_data",
}


def schema_errors(data) -> list[str]:
    """What in ``data`` breaks Gradescope's documented results.json format."""
    errors = []
    if not isinstance(data, dict):
        return ["results.json is not an object"]
    errors += [f"unknown top-level key {k!r}" for k in set(data) - TOP_KEYS]
    tests = data.get("tests")
    if "score" not in data and not (isinstance(tests, list) and all("score" in t for t in tests)):
        errors.append("no top-level score, and not every test has one")
    number = (int, float)
    for key in ("score", "execution_time"):
        if key in data and (isinstance(data[key], bool) or not isinstance(data[key], number)):
            errors.append(f"{key} is not a number")
    for key in ("visibility", "stdout_visibility"):
        if key in data and data[key] not in VISIBILITIES:
            errors.append(f"{key} {data[key]!r} is not one of {sorted(VISIBILITIES)}")
    if "output" in data and not isinstance(data["output"], str):
        errors.append("output is not a string")
    if tests is not None:
        if not isinstance(tests, list):
            return errors + ["tests is not a list"]
        for i, test in enumerate(tests):
            if not isinstance(test, dict):
                errors.append(f"test {i} is not an object")
                continue
            errors += [f"test {i}: unknown key {k!r}" for k in set(test) - TEST_KEYS]
            for key in ("score", "max_score"):
                if key in test and (isinstance(test[key], bool) or not isinstance(test[key], number)):
                    errors.append(f"test {i}: {key} is not a number")
            for key in ("name", "output", "number"):
                if key in test and not isinstance(test[key], str):
                    errors.append(f"test {i}: {key} is not a string")
            if "visibility" in test and test["visibility"] not in VISIBILITIES:
                errors.append(f"test {i}: visibility {test['visibility']!r}")
            if "status" in test and test["status"] not in ("passed", "failed"):
                errors.append(f"test {i}: status {test['status']!r}")
    return errors


def test_the_schema_check_catches_malformed_results():
    assert schema_errors({"score": 1, "tests": []}) == []
    assert schema_errors({"tests": [{"name": "a"}]})  # no score anywhere
    assert schema_errors({"score": "1"})
    assert schema_errors({"score": 1, "visibility": "sometimes"})
    assert schema_errors({"score": 1, "tests": [{"score": 1, "visibility": "public"}]})
    assert schema_errors({"score": 1, "tests": [{"score": 1, "status": "ok"}]})
    assert schema_errors({"score": 1, "grade": 3})


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gs") / "autograder.zip"
    gradescope.build_archive(ASSIGNMENT, out)
    return out


def test_the_archive_has_the_scripts_the_checks_and_no_solution(archive):
    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
        modes = {info.filename: info.external_attr >> 16 for info in zf.infolist()}
        setup = zf.read("setup.sh").decode()
        requirements = zf.read("requirements.txt").decode()
        notebooks = {n: zf.read(n) for n in names if n.endswith(".ipynb")}
        sources = {n: zf.read(n) for n in names}
    assert {"setup.sh", "run_autograder", f"exercises/{ASSIGNMENT}.ipynb"} <= set(names)
    assert "attnlib/checks/ch00_how_to_use.py" in names
    assert any(n.startswith("coursetools/grade/") for n in names)
    for script in ("setup.sh", "run_autograder"):
        assert modes[script] & stat.S_IXUSR, f"{script} is not executable"
    assert not [n for n in names if n.startswith("solutions/") or "/solutions/" in n]
    assert list(notebooks) == [f"exercises/{ASSIGNMENT}.ipynb"]
    assert not [n for n, data in sources.items() if b"### BEGIN SOLUTION" in data and n.endswith(".ipynb")]
    # the solution's answer line is nowhere in the archive
    assert not [n for n, data in sources.items() if b"np.swapaxes(b, -1, -2)" in data and "ipynb" in n]
    assert "torch==2.13.0+cpu" in requirements and "download.pytorch.org/whl/cpu" in requirements
    assert "pip install" in setup and "-r requirements.txt" in setup and "--no-deps -e" in setup


def test_a_solution_never_goes_in(tmp_path):
    fake_root = tmp_path / "repo"
    shutil.copytree(ROOT / "binder", fake_root / "binder")
    (fake_root / "exercises").mkdir()
    nb = nbformat.read(ROOT / "solutions" / f"{ASSIGNMENT}.ipynb", as_version=4)
    nbformat.write(nb, fake_root / "exercises" / f"{ASSIGNMENT}.ipynb")
    with pytest.raises(ValueError, match="solution"):
        gradescope.build_archive(ASSIGNMENT, tmp_path / "a.zip", root=fake_root)
    assert not (tmp_path / "a.zip").exists()


def _unpack(archive: Path, root: Path) -> None:
    """What Gradescope does: the zip's content in source/, run_autograder next to it."""
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(root / "source")
        for info in zf.infolist():
            mode = info.external_attr >> 16
            if mode:
                os.chmod(root / "source" / info.filename, mode & 0o777)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    for folder in ("submission", "results"):
        (root / folder).mkdir()


def _run(
    root: Path, notebook_bytes: bytes | None, name: str = f"{ASSIGNMENT}.ipynb", isolation: str = "auto"
) -> dict:
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder)
        (root / folder).mkdir()
    if notebook_bytes is not None:
        (root / "submission" / name).write_bytes(notebook_bytes)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root),
        gradescope.ENV_ROOT: str(root),
        gradescope.ENV_PYTHON: sys.executable,
        gradescope.ENV_ISOLATION: isolation,
    }
    proc = subprocess.run(
        [str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((root / "results" / "results.json").read_text())


@pytest.fixture(scope="module")
def tree(archive, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("autograder-root") / "autograder"
    _unpack(archive, root)
    return root


def _nb(source: str) -> bytes:
    return nbformat.writes(fixtures.with_answer(source)).encode()


def _by_name(data: dict) -> dict[str, dict]:
    return {t["name"]: t for t in data["tests"]}


@pytest.mark.slow
def test_a_correct_submission_gets_full_marks(tree):
    data = _run(tree, _nb(fixtures.CORRECT))
    assert schema_errors(data) == []
    assert data["score"] == pytest.approx(1.0), data["output"]
    tests = _by_name(data)
    assert set(tests) == {"ex-00-1 pairwise_dot(): visible cases", "ex-00-1 pairwise_dot(): hidden cases"}
    assert tests["ex-00-1 pairwise_dot(): visible cases"]["visibility"] == "visible"
    assert tests["ex-00-1 pairwise_dot(): hidden cases"]["visibility"] == "after_published"
    assert sum(t["max_score"] for t in data["tests"]) == pytest.approx(1.0)
    assert all(t["status"] == "passed" for t in data["tests"])


@pytest.mark.slow
def test_a_partial_submission_gets_its_share_and_the_named_mistake(tree):
    partial = fixtures.HEADER + "    return a @ b.T\n"  # 2-D cases pass, batched ones fail
    data = _run(tree, _nb(partial), name="my-upload.ipynb")
    assert schema_errors(data) == []
    assert data["score"] == pytest.approx(0.5), data["output"]
    visible = _by_name(data)["ex-00-1 pairwise_dot(): visible cases"]
    assert visible["status"] == "failed" and 0 < visible["score"] < visible["max_score"]
    assert "known mistake" in visible["output"]
    assert "return a @ np.swapaxes" not in json.dumps(data)  # feedback never shows the solution line


@pytest.mark.parametrize("isolation", ["auto", "none"])  # none: a container that forbids namespaces
@pytest.mark.slow
def test_a_hostile_submission_cannot_write_its_own_score(tree, isolation):
    fake = json.dumps({"score": 100, "tests": []})
    hostile = (
        "import glob, json, os\n"
        # the tree's own results file, never /autograder: a test writes only under its tmp folder
        # (with isolation "none", a grader that stays root lets a submission write where root can)
        "try:\n"
        f"    open({str(tree / 'results' / 'results.json')!r}, 'w').write({fake!r})\n"
        "except OSError:\n"
        "    pass\n"
        f"leak = glob.glob({str(tree)!r} + '/**/solutions/**', recursive=True)\n"
        "import attnlib.checks.core as core\n"
        "core.judge_case = lambda ex, case, got: core.CaseResult(case.name, 'passed')\n" + fixtures.ZEROS
    )
    data = _run(tree, _nb(hostile), isolation=isolation)
    assert schema_errors(data) == []
    assert data["score"] == 0
    assert data["tests"] and all(t["score"] == 0 for t in data["tests"])
    assert not list(tree.rglob("solutions"))


@pytest.mark.slow
def test_no_notebook_still_gives_valid_results(tree):
    data = _run(tree, None)
    assert schema_errors(data) == []
    assert data["score"] == 0 and "No notebook" in data["output"]


@pytest.mark.slow
def test_the_command_writes_the_same_archive(archive, tmp_path):
    out = tmp_path / "autograder.zip"
    command = [sys.executable, "-m", "coursetools.grade", "gradescope", ASSIGNMENT, "--out", str(out)]
    proc = subprocess.run(
        command,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(out) as new, zipfile.ZipFile(archive) as old:
        assert new.namelist() == old.namelist()
        assert new.read("run_autograder") == old.read("run_autograder")
