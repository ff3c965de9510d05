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


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if "==" in line and not line.startswith("-"):
            name, version = line.split("==")
            pins[name.lower()] = version.split("+")[0]  # torch==2.13.0+cpu is the 2.13.0 release
    return pins


def test_binder_pins_the_course_versions():
    """Binder runs what the course is tested with: every package both files name has one version."""
    course = _pins(ROOT / "requirements.txt")
    binder = _pins(ROOT / "binder" / "requirements.txt")
    assert binder, "binder/requirements.txt pins nothing"
    for name, version in binder.items():
        assert name in course, f"binder/requirements.txt installs {name}, which requirements.txt does not pin"
        assert version == course[name], f"{name}: binder {version}, requirements.txt {course[name]}"


# What provides each module a notebook imports, in Binder's environment: binder/requirements.txt,
# attnlib from binder/postBuild, and Jupyter's kernel (IPython, matplotlib_inline) from repo2docker's base.
BINDER_PROVIDES = {
    "torch": "torch",
    "numpy": "numpy",
    "scipy": "scipy",
    "matplotlib": "matplotlib",
    "ipywidgets": "ipywidgets",
    "nbformat": "nbformat",
    "attnlib": "postBuild",
    "IPython": "base",
    "matplotlib_inline": "base",
}


def test_every_notebook_import_is_installed_by_binder():
    """A static guard in the quick loop; tests/test_binder.py runs every notebook in that environment."""
    import ast
    import sys

    import nbformat

    binder = _pins(ROOT / "binder" / "requirements.txt")
    missing = {}
    for folder in ("book", "exercises", "solutions"):
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.cell_type != "code":
                    continue
                lines = [
                    line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))
                ]
                for node in ast.walk(ast.parse("\n".join(lines))):
                    if isinstance(node, ast.Import):
                        names = [alias.name for alias in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                        names = [node.module]
                    else:
                        continue
                    for name in (n.split(".")[0] for n in names):
                        if name in sys.stdlib_module_names:
                            continue
                        provider = BINDER_PROVIDES.get(name)
                        if provider is None or (
                            provider not in {"postBuild", "base"} and provider not in binder
                        ):
                            missing.setdefault(name, []).append(f"{folder}/{path.name}")
    assert not missing, "notebooks import what Binder does not install: " + "; ".join(
        f"{name} ({', '.join(sorted(set(paths)))})" for name, paths in missing.items()
    )
