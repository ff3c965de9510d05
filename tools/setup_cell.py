"""Insert (or update) the course setup cell in every chapter and solution notebook.

The setup cell installs attnlib when it is missing, which is the case on Colab
and on a JupyterHub that pulled the repository with nbgitpuller (Binder installs
it from binder/postBuild, and a local .venv already has it, so there the cell
does nothing). It goes right before the notebook's first code cell, tagged

* ``setup`` (so that this tool finds it again and updates it in place),
* ``nbval-ignore-output`` (pip may print on a machine without attnlib),
* ``remove-cell`` (the website does not show it; the downloaded notebook has it),

and collapsed where the learner opens it: its code is hidden behind its first
line, a ``# @title`` (``cellView: form`` in Colab, ``jupyter.source_hidden`` in
JupyterLab and Notebook 7), so a notebook starts with the learner's content.

Usage (from the repository root)::

    .venv/bin/python tools/setup_cell.py            # book/*.ipynb and solutions/*.ipynb
    .venv/bin/python tools/setup_cell.py book/03-qkv.ipynb
    .venv/bin/python tools/setup_cell.py --check    # exit 1 if a notebook lacks the current cell
    .venv/bin/python -m attnlib.assign              # then regenerate exercises/ from solutions/

The cell names the course's repository, found as the website finds it
(book/_ext/course_repository.py): ``COURSE_REPOSITORY``, else the checkout's git
remote ``origin`` when it is on GitHub; ``COURSE_BRANCH`` or ``repository.branch``
of ``_config.yml`` gives the branch. A notebook opened in Colab from the site's
launch button then installs attnlib from that same repository and branch. With no
repository known, the cell installs nothing from the network: where attnlib is
missing it stops with a message that says how to install it. Publishing the
course at a new address is therefore::

    export COURSE_REPOSITORY=https://github.com/<org>/<repo>
    .venv/bin/python tools/setup_cell.py && .venv/bin/python -m attnlib.assign

The cell does not change what a notebook prints where attnlib is installed
(nothing), so solutions need no re-execution. Running the tool twice changes
nothing the second time.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from course_repository import CourseRepository, find_repository  # noqa: E402 (the site's own rule)

sys.path.pop(0)
FOLDERS = ("book", "solutions")
CELL_ID = "attnlib-setup"
TAGS = ["setup", "nbval-ignore-output", "remove-cell"]

# Collapsed in the front ends: Colab shows a form cell's title only, JupyterLab hides the source.
METADATA = {"cellView": "form", "jupyter": {"source_hidden": True}}

HEADER = """\
# @title Course setup: installs attnlib where it is missing
# (Colab, a JupyterHub); elsewhere (a checkout, Binder) it does nothing.
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

if importlib.util.find_spec("attnlib") is None:
    _checkout = Path.cwd().parent  # a notebook of book/, solutions/, exercises/
"""
# The repository is known: a checkout's own attnlib, else the repository's.
FROM_REPOSITORY = """\
    _source = "{pip_source}"
    if (_checkout / "attnlib" / "__init__.py").is_file():
        _source = str(_checkout)
"""
# Unknown: nothing is fetched from an address that may not exist.
FROM_CHECKOUT_ONLY = """\
    if not (_checkout / "attnlib" / "__init__.py").is_file():
        raise ModuleNotFoundError(
            "attnlib is not installed. Install it from the course's repository"
            " (your instructor gives its address), then run this cell again:\\n"
            "    %pip install git+https://github.com/<org>/<repo>.git"
        )
    _source = str(_checkout)
"""
FOOTER = """\
    _pip = [sys.executable, "-m", "pip", "install", "--quiet", _source]
    subprocess.run(_pip, check=True)
    importlib.invalidate_caches()"""


def course_repository(root: Path = ROOT, environ=None) -> CourseRepository:
    """The repository the website links to (book/_ext/course_repository.py), for a checkout at ``root``."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    branch = str((config.get("repository") or {}).get("branch") or "main")
    return find_repository(root, branch, environ)


def setup_source(root: Path = ROOT, repository: CourseRepository | None = None) -> str:
    """The setup cell's code for ``repository`` (default: the one the site links to)."""
    repository = course_repository(root) if repository is None else repository
    if repository.pip_source is None:
        return HEADER + FROM_CHECKOUT_ONLY + FOOTER
    return HEADER + FROM_REPOSITORY.format(pip_source=repository.pip_source) + FOOTER


def is_setup_cell(cell) -> bool:
    return cell.cell_type == "code" and (
        cell.get("id") == CELL_ID or "setup" in cell.get("metadata", {}).get("tags", [])
    )


def find_setup_cell(nb) -> int | None:
    for index, cell in enumerate(nb.cells):
        if is_setup_cell(cell):
            return index
    return None


def cell_is_current(cell, source: str) -> bool:
    metadata = cell.get("metadata", {})
    tags = metadata.get("tags", [])
    collapsed = all(metadata.get(key) == value for key, value in METADATA.items())
    return cell.source == source and all(tag in tags for tag in TAGS) and collapsed


def apply(nb, source: str) -> bool:
    """Insert or update the setup cell of ``nb`` in place; return True when it changed."""
    index = find_setup_cell(nb)
    if index is not None:
        cell = nb.cells[index]
        if cell_is_current(cell, source):
            return False
        cell.source = source
        tags = cell.metadata.setdefault("tags", [])
        tags.extend(tag for tag in TAGS if tag not in tags)
        cell.metadata.update(copy.deepcopy(METADATA))
        return True
    cell = nbformat.v4.new_code_cell(source=source, metadata={"tags": list(TAGS), **copy.deepcopy(METADATA)})
    ids = {c.get("id") for c in nb.cells}
    if nb.nbformat_minor >= 5:  # cell ids exist from nbformat 4.5 on
        cell["id"] = CELL_ID if CELL_ID not in ids else f"{CELL_ID}-cell"
    else:
        cell.pop("id", None)
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    nb.cells.insert(first_code, cell)
    return True


def default_paths(root: Path = ROOT) -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (root / folder).glob("*.ipynb"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: book/*.ipynb solutions/*.ipynb")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a cell is missing")
    args = parser.parse_args(argv)
    source = setup_source()
    paths = args.notebooks or default_paths()
    bad = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        nb = nbformat.reads(text, as_version=4)
        if args.check:
            index = find_setup_cell(nb)
            if index is None or not cell_is_current(nb.cells[index], source):
                bad.append(path)
            continue
        if apply(nb, source):
            nbformat.validate(nb)
            # The same layout as Jupyter and attnlib.assign: one-space indent, trailing newline.
            path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
            print(f"updated {path}")
    if args.check:
        if bad:
            repository = course_repository()
            print(f"the setup cell installs attnlib from: {repository.pip_source or 'a checkout only'}")
            print(f"(the repository: {repository.url or 'none'}, from {repository.source})")
        for path in bad:
            shown = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
            print(f"{shown}: no current setup cell (run: .venv/bin/python tools/setup_cell.py {shown})")
        print(f"{len(paths) - len(bad)} of {len(paths)} notebooks have the setup cell")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
