"""Gradescope: the autograder archive of an assignment, and the ``results.json`` of one submission.

``python -m coursetools.grade gradescope ASSIGNMENT --out autograder.zip`` (or
:func:`build_archive`) writes the zip that Gradescope's "Configure autograder"
page takes. Its root holds

* ``setup.sh``: run once, as root, when Gradescope builds the image; it makes a
  virtual environment with the pinned CPU environment of ``binder/requirements.txt``
  (torch from the CPU wheel index) and installs attnlib from the archive. The pins need
  Python 3.11 or newer (:data:`MIN_PYTHON`): on Ubuntu 24.04 the system's python3 (3.12)
  builds it, on 22.04 (3.10) Ubuntu's ``python3.11`` package, else a standalone 3.11 by uv;
* ``run_autograder``: run for each submission; it grades the notebook found in
  ``/autograder/submission`` with the course's grader (the same sandbox, limits
  and checks as ``python -m coursetools.grade``) and writes
  ``/autograder/results/results.json`` (:func:`results_json`);
* ``requirements.txt``, ``attnlib/``, ``coursetools/``, ``pyproject.toml`` and
  ``exercises/ASSIGNMENT.ipynb`` (the points and answer cells): the checks and
  the grader. No ``solutions/`` folder and no solution cell is ever included
  (:func:`build_archive` refuses to write an archive that has one).

Gradescope's format (https://gradescope-autograders.readthedocs.io/en/latest/specs/):
``results.json`` has a top-level ``score`` (it overrides the sum of the tests),
``output`` and ``tests`` (its optional ``execution_time`` we never write: the learner's
code controls a run's time, issue 43.3); each test a ``name``, ``score``,
``max_score``, ``output``, ``status`` and ``visibility`` (``visible``, ``hidden``,
``after_due_date`` or ``after_published``). We write two tests per exercise:
its visible cases (``visible``) and its hidden cases (``after_published``).

The root of the ``/autograder`` tree is read from ``COURSE_AUTOGRADER_ROOT``
and the Python that grades from ``COURSE_AUTOGRADER_PYTHON``, so that the tree
can be rebuilt in a temporary folder to test the archive (tests/grader/stories/test_gradescope.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path
from typing import cast

from coursetools.grade import batch
from coursetools.grade.grading.runner import Isolation, Settings
from coursetools.grade.grading.submission import resolve_assignment
from coursetools.grade.outputs.results import GS_FAILED
from coursetools.grade.outputs.results import results_json as results_json  # its old home
from coursetools.grade.records.paths import ROOT

ENV_ROOT = "COURSE_AUTOGRADER_ROOT"
ENV_PYTHON = "COURSE_AUTOGRADER_PYTHON"
ENV_ISOLATION = "COURSE_AUTOGRADER_ISOLATION"  # auto (default), namespaces, userns, none
VENV = "/opt/attention-course/venv"
PACKAGES = ("attnlib", "coursetools")
SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")

# the oldest Python the pinned environment installs on (numpy, scipy and matplotlib's pins)
MIN_PYTHON = (3, 11)
HERE = Path(__file__).resolve().parent


def script(name: str, assignment: str = "") -> str:
    """One of the archive's two scripts (``setup.sh``, ``run_autograder``), from its template
    beside this module: ``@NAME@`` filled with this module's constants, ``__ASSIGNMENT__`` with
    ``assignment``. Read when an archive is built (the container never reads them)."""
    fields = {
        "@MIN_MAJOR@": str(MIN_PYTHON[0]),
        "@MIN_MINOR@": str(MIN_PYTHON[1]),
        "@VENV@": VENV,
        "@ENV_ROOT@": ENV_ROOT,
        "@ENV_PYTHON@": ENV_PYTHON,
        "__ASSIGNMENT__": assignment,
    }
    text = (HERE / name).read_text(encoding="utf-8")
    for field, value in fields.items():
        text = text.replace(field, value)
    return text


# --------------------------------------------------------------------------- the archive


def _requirements(root: Path) -> str:
    """The pinned run-time environment: binder/requirements.txt (CPU torch), plus nbformat."""
    text = (root / "binder" / "requirements.txt").read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    names = {ln.split("==")[0].strip().lower() for ln in lines if "==" in ln}
    if "nbformat" not in names:
        lines.append("nbformat")
    return (
        "# the course's pinned CPU run-time environment (from binder/requirements.txt)\n"
        + "\n".join(lines)
        + "\n"
    )


def _package_files(root: Path) -> list[Path]:
    files = []
    for package in PACKAGES:
        folder = root / package
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(root)
            if path.is_file() and "__pycache__" not in rel.parts and path.suffix in (".py", ".json", ".txt"):
                files.append(rel)
    return files


def _add(archive: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # reproducible bytes
    mode = 0o755 if executable else 0o644
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def build_archive(assignment: str, out: Path, root: Path = ROOT) -> list[str]:
    """Write Gradescope's autograder zip for ``assignment`` (a stem or an exercise notebook).

    Returns the names in the archive. Raises ``ValueError`` when a file that
    would go in holds a solution (a ``solutions/`` path or a solution marker
    in a notebook).
    """
    notebook = Path(resolve_assignment(assignment, root)).resolve()
    stem = notebook.stem
    entries: dict[str, tuple[bytes, bool]] = {
        "setup.sh": (script("setup.sh").encode(), True),
        "run_autograder": (script("run_autograder", stem).encode(), True),
        "requirements.txt": (_requirements(root).encode(), False),
        f"exercises/{stem}.ipynb": (notebook.read_bytes(), False),
        "course.json": (
            json.dumps({"assignment": stem, "built": time.strftime("%Y-%m-%d")}, indent=1).encode(),
            False,
        ),
    }
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (root / name).is_file():
            entries[name] = ((root / name).read_bytes(), False)
    for rel in _package_files(root):
        entries[rel.as_posix()] = ((root / rel).read_bytes(), False)
    for name, (data, _) in entries.items():
        if name.split("/")[0] == "solutions":
            raise ValueError(f"refusing to pack {name}: solutions never go into the autograder")
        if name.endswith(".ipynb") and any(m.encode() in data for m in SOLUTION_MARKERS):
            raise ValueError(f"refusing to pack {name}: it holds a solution cell")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with zipfile.ZipFile(tmp, "w") as archive:
        for name in sorted(entries):
            data, executable = entries[name]
            _add(archive, name, data, executable)
    os.replace(tmp, out)
    return sorted(entries)


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _error_results(message: str) -> dict:
    return {
        "score": 0.0,
        "output": message,
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [
            {"name": "submission", "score": 0.0, "max_score": 0.0, "status": GS_FAILED, "output": message}
        ],
    }


def find_notebook(submission: Path, stem: str) -> Path | None:
    """The notebook to grade in Gradescope's submission folder: the one named like the
    assignment, else the newest ``.ipynb`` (checkpoints and macOS resource files skipped)."""
    found = []
    for path in submission.rglob("*.ipynb"):
        parts = path.relative_to(submission).parts
        if any(p.startswith(".") or p == "__MACOSX" for p in parts) or path.is_symlink():
            continue
        if path.is_file():
            found.append(path)
    if not found:
        return None
    named = [p for p in found if p.stem == stem]
    return max(named or found, key=lambda p: (p.stat().st_mtime, str(p)))


def run(root: Path, assignment: str) -> dict:
    """Grade the one submission of a Gradescope container; write and return ``results/results.json``."""
    root = Path(root).resolve()
    results = root / "results" / "results.json"
    notebook = find_notebook(root / "submission", assignment)
    if notebook is None:
        data = _error_results(
            f"No notebook found in your submission: upload your {assignment}.ipynb (the .ipynb file)."
        )
        _write_json(results, data)
        return data
    work = Path(tempfile.mkdtemp(prefix="course-autograder-"))
    try:
        subs = work / "submissions"
        subs.mkdir()
        shutil.copyfile(notebook, subs / "submission.ipynb")
        out = work / "graded"
        settings = Settings(
            out=out,
            isolation=cast(Isolation, os.environ.get(ENV_ISOLATION, "auto")),
            hide=(str(root / "results"), str(root / "submission")),
        )
        records = batch.grade(assignment, subs, out, jobs=1, force=True, settings=settings, quiet=True)
        data = json.loads((out / records[0]["student"] / "results.json").read_text(encoding="utf-8"))
    except Exception as exc:  # noqa: BLE001 - Gradescope must get a results.json in every case
        traceback.print_exc()
        data = _error_results(f"The autograder failed ({type(exc).__name__}); tell your instructor.")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _write_json(results, data)
    return data


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coursetools.grade gradescope",
        description="Write Gradescope's autograder zip for an assignment (no solutions inside).",
    )
    parser.add_argument("assignment", help="the exercise notebook, or its stem (e.g. 05-masks)")
    parser.add_argument("--out", type=Path, default=Path("autograder.zip"), help="the zip to write")
    args = parser.parse_args(argv)
    try:
        names = build_archive(args.assignment, args.out)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({len(names)} files): upload it on Gradescope's 'Configure Autograder' page")
    return 0


def _run_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.grade.gradescope run")
    parser.add_argument("--root", type=Path, default=Path(os.environ.get(ENV_ROOT, "/autograder")))
    parser.add_argument("--assignment", required=True)
    args = parser.parse_args(argv)
    data = run(args.root, args.assignment)
    print(f"score {data['score']}; {len(data['tests'])} tests written to {args.root / 'results'}")
    return 0
