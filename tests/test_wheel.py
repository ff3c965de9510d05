"""The learner's wheel holds the library and its data, and nothing of the instructor's tooling (issue 28).

Learners install attnlib (pip, the Colab setup cell, Binder); the grader and the
exercise generator (coursetools/) run from a checkout. The wheel is built
offline from a copy of the working tree (pyproject.toml, README.md, attnlib/ and
coursetools/, so that leaving coursetools out is the configuration's doing and
a stale build/ folder cannot leak into it).
"""

from __future__ import annotations

import ast
import email
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _copy_sources(target: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "--", "attnlib", "coursetools"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for name in ["pyproject.toml", "README.md", *listed]:
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    _copy_sources(source)
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp),
            str(source),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    (path,) = tmp.glob("attnlib-*.whl")
    with zipfile.ZipFile(path) as archive:
        yield archive


def test_the_wheel_holds_attnlib_and_no_coursetools(wheel):
    names = wheel.namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"attnlib"}, f"the learner's wheel holds {sorted(tops)}, expected attnlib only"
    # the library's own modules are all there (the efficient package, the checks, the chapters' models)
    for module in ("attnlib/__init__.py", "attnlib/efficient/tiled.py", "attnlib/checks/rules/audit.py"):
        assert module in names, f"{module} missing from the wheel"


def test_the_wheel_holds_the_recorded_spreads(wheel):
    """The chapters glue attnlib/chapters/spreads/*.json (package data): a learner's install has them."""
    in_repo = sorted(p.name for p in (ROOT / "attnlib" / "chapters" / "spreads").glob("*.json"))
    assert in_repo, "no attnlib/chapters/spreads/*.json in the checkout"
    in_wheel = sorted(
        Path(n).name
        for n in wheel.namelist()
        if n.startswith("attnlib/chapters/spreads/") and n.endswith(".json")
    )
    assert in_wheel == in_repo


def test_the_wheel_holds_the_self_check_questions(wheel):
    """The exercise notebooks check their concept questions with attnlib.checks.quiz, which reads
    attnlib/quizzes/chNN.yml (package data): a learner's install in Colab has them."""
    in_repo = sorted(p.name for p in (ROOT / "attnlib" / "quizzes").glob("ch[0-9][0-9].yml"))
    assert in_repo, "no attnlib/quizzes/chNN.yml in the checkout"
    in_wheel = sorted(Path(n).name for n in wheel.namelist() if n.startswith("attnlib/quizzes/"))
    assert in_wheel == in_repo


def test_the_wheel_holds_chapter_12s_text_with_its_hash(wheel):
    """Chapter 12 trains on Tiny Shakespeare, read offline from the installed attnlib (package data)."""
    import hashlib

    from attnlib.chapters.char_lm import SHA256

    names = wheel.namelist()
    assert "attnlib/chapters/data/README.md" in names, "the text's provenance is missing from the wheel"
    data = wheel.read("attnlib/chapters/data/tinyshakespeare.txt")
    assert hashlib.sha256(data).hexdigest() == SHA256


def test_the_wheel_holds_chapter_12s_checkpoint_with_its_hash(wheel):
    """Chapter 12 loads its longer-trained model (attnlib/chapters/checkpoint.py) from package data."""
    import hashlib
    import json

    log = json.loads(wheel.read("attnlib/chapters/data/char_checkpoint.json"))
    weights = wheel.read("attnlib/chapters/data/char_checkpoint.pt")
    assert hashlib.sha256(weights).hexdigest() == log["weights_sha256"]
    # and the record of its recipe from four more seeds, which the page's table reads
    seeds = json.loads(wheel.read("attnlib/chapters/data/char_checkpoint_seeds.json"))
    on_disk = json.loads((ROOT / "attnlib" / "chapters" / "data" / "char_checkpoint_seeds.json").read_text())
    assert seeds == on_disk, "the wheel's seeds record differs from the checkout's"


def test_the_wheel_requires_only_what_attnlib_imports(wheel):
    (metadata,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    message = email.message_from_string(wheel.read(metadata).decode())
    requires = sorted(r.split(">")[0].split("=")[0].strip() for r in message.get_all("Requires-Dist") or [])
    # pyyaml: attnlib.checks.quiz reads the self-check questions shipped in attnlib/quizzes/
    assert requires == ["numpy", "pyyaml", "torch"], requires
    assert message["License-Expression"] == "MIT"
    # nbformat is the grader's and the generator's (coursetools), not the library's
    imported = set()
    for path in (ROOT / "attnlib").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    # every requirement is one attnlib imports (the distribution pyyaml is the module yaml)
    assert {"numpy", "yaml", "torch"} <= imported, sorted(imported)
    assert "nbformat" not in imported, "attnlib imports nbformat: add it back to pyproject's dependencies"


def test_no_console_script_points_into_coursetools(wheel):
    entry_points = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points[0]).decode() if entry_points else ""
    assert "coursetools" not in text, text
