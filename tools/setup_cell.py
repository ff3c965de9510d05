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
    .venv/bin/python -m coursetools.assign          # then regenerate exercises/ from solutions/

Where the cell installs attnlib from, in a checkout's notebook of ``book/``,
``solutions/`` or ``exercises/``, that checkout first (a JupyterHub's clone); else

* the course's repository, found as the website finds it
  (book/_ext/course_repository.py): ``COURSE_REPOSITORY``, else the checkout's git
  remote ``origin`` when it is on GitHub; ``COURSE_BRANCH`` or ``repository.branch``
  of ``_config.yml`` gives the branch. A notebook opened in Colab from the site's
  launch button then installs attnlib from that same repository and branch;
* with no repository known, the learner's wheel ``attnlib-<version>-py3-none-any.whl``
  beside the notebook (its folder; Colab's ``/content``); where there is none the
  cell stops with one line that says which file to download from the course's
  website and the exact ``%pip install`` command. Nothing is fetched from an
  address that may not exist.

The website ships that wheel (``_static/``) and rewrites the cell of the notebooks it
offers for download so that, when the site's address is known (``COURSE_SITE_URL`` or
``html.baseurl``) and no repository is, they install the wheel from the site they came
from (``setup_source(..., wheel_url=...)``, book/_ext/course_wheel.py). Publishing the
course at a new repository is therefore::

    export COURSE_REPOSITORY=https://github.com/<org>/<repo>
    .venv/bin/python tools/setup_cell.py && .venv/bin/python -m coursetools.assign

The cell does not change what a notebook prints where attnlib is installed
(nothing), so solutions need no re-execution. Running the tool twice changes
nothing the second time; changing attnlib's version (pyproject.toml) changes the
wheel's name in the cell, and ``--check`` says so.
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
import course_wheel  # noqa: E402 (the wheel the website ships)
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
# The site's address is known (book/_ext/course_wheel.py): the wheel the site ships.
FROM_SITE = """\
    _source = "{wheel_url}"
    if (_checkout / "attnlib" / "__init__.py").is_file():
        _source = str(_checkout)
"""
# Neither: nothing is fetched from an address that may not exist. The wheel beside the
# notebook (downloaded from the site), else one line that says what to do.
FROM_WHEEL_BESIDE = """\
    _wheel = Path.cwd() / "{wheel}"
    if (_checkout / "attnlib" / "__init__.py").is_file():
        _source = str(_checkout)
    elif _wheel.is_file():
        _source = str(_wheel)
    else:
        raise ModuleNotFoundError(
            "attnlib is not installed: download {wheel}"
            " (the attnlib wheel, linked under each chapter's title on the"
            " course website) into this notebook's folder (Colab: upload it"
            " to /content) and run this cell again, or run:"
            " %pip install {wheel}"
        )
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


def wheel_filename(root: Path = ROOT) -> str:
    """The learner's wheel, ``attnlib-<version>-py3-none-any.whl`` (the website ships it in ``_static/``)."""
    return course_wheel.wheel_filename(root)


def setup_source(
    root: Path = ROOT, repository: CourseRepository | None = None, wheel_url: str | None = None
) -> str:
    """The setup cell's code for ``repository`` (default: the one the site links to).

    Without a repository, ``wheel_url`` (the website's copy of the wheel) is the source;
    without either, the wheel beside the notebook (and a message where there is none).
    """
    repository = course_repository(root) if repository is None else repository
    if repository.pip_source is not None:
        return HEADER + FROM_REPOSITORY.format(pip_source=repository.pip_source) + FOOTER
    if wheel_url is not None:
        return HEADER + FROM_SITE.format(wheel_url=wheel_url) + FOOTER
    return HEADER + FROM_WHEEL_BESIDE.format(wheel=wheel_filename(root)) + FOOTER


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
            # The same layout as Jupyter and coursetools.assign: one-space indent, trailing newline.
            path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
            print(f"updated {path}")
    if args.check:
        if bad:
            repository = course_repository()
            beside = f"a checkout, else {wheel_filename()} beside the notebook"
            print(f"the setup cell installs attnlib from: {repository.pip_source or beside}")
            print(f"(the repository: {repository.url or 'none'}, from {repository.source})")
        for path in bad:
            shown = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
            print(f"{shown}: no current setup cell (run: .venv/bin/python tools/setup_cell.py {shown})")
        print(f"{len(paths) - len(bad)} of {len(paths)} notebooks have the setup cell")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
