"""Repository hygiene that keeps the two README commands reproducible."""

import fnmatch
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK_SOURCES = {"book"}


def test_every_requirement_is_pinned():
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[A-Za-z0-9_.+\-]+", line), f"not pinned: {line}"


def test_torch_is_pinned_to_the_cpu_build_version():
    assert "torch==2.13.0" in (ROOT / "requirements.txt").read_text().splitlines()


def test_every_top_level_folder_outside_the_book_is_excluded_from_sphinx():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    excluded = set(config["exclude_patterns"])
    for path in ROOT.iterdir():
        if path.is_dir() and path.name not in BOOK_SOURCES and path.name != ".git":
            if path.name.startswith(".") and path.name not in {".venv", ".ci", ".github"}:
                continue
            assert any(fnmatch.fnmatch(path.name, pattern) for pattern in excluded), (
                f"{path.name}/ is not in _config.yml exclude_patterns"
            )


def test_notebooks_are_re_executed_on_every_build():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "force"


def test_book_notebooks_are_stored_without_outputs():
    import nbformat

    for path in sorted((ROOT / "book").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs, f"{path.name} has stored outputs: clear them before committing"
