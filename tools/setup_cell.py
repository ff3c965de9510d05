"""Insert (or update) the course setup cell in every chapter and solution notebook.

The setup cell installs attnlib when it is missing, which is the case on Colab
and on a JupyterHub that pulled the repository with nbgitpuller (Binder installs
it from binder/postBuild, and a local .venv already has it, so there the cell
does nothing). It goes right before the notebook's first code cell, tagged

* ``setup`` (so that this tool finds it again and updates it in place),
* ``nbval-ignore-output`` (pip may print on a machine without attnlib),
* ``remove-cell`` (the website does not show it; the downloaded notebook has it).

Usage (from the repository root)::

    .venv/bin/python tools/setup_cell.py            # book/*.ipynb and solutions/*.ipynb
    .venv/bin/python tools/setup_cell.py book/03-qkv.ipynb
    .venv/bin/python tools/setup_cell.py --check    # exit 1 if a notebook lacks the current cell
    .venv/bin/python -m attnlib.assign              # then regenerate exercises/ from solutions/

The cell's text depends only on ``repository.url`` in ``_config.yml``; running
the tool twice changes nothing the second time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("book", "solutions")
CELL_ID = "attnlib-setup"
TAGS = ["setup", "nbval-ignore-output", "remove-cell"]

TEMPLATE = """\
# Course setup: install attnlib when it is missing (Colab, a JupyterHub); elsewhere this does nothing.
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

if importlib.util.find_spec("attnlib") is None:
    _repo = Path.cwd().parent
    _source = str(_repo) if (_repo / "attnlib" / "__init__.py").is_file() else "git+{url}"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", _source], check=True)
    importlib.invalidate_caches()"""


def repository_url(root: Path = ROOT) -> str:
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    url = str(config["repository"]["url"]).rstrip("/")
    if not url.startswith("https://"):
        raise SystemExit(f"_config.yml repository.url must be an https URL, not {url!r}")
    return url if url.endswith(".git") else url + ".git"


def setup_source(root: Path = ROOT) -> str:
    return TEMPLATE.format(url=repository_url(root))


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
    tags = cell.get("metadata", {}).get("tags", [])
    return cell.source == source and all(tag in tags for tag in TAGS)


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
        return True
    cell = nbformat.v4.new_code_cell(source=source, metadata={"tags": list(TAGS)})
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
        for path in bad:
            shown = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
            print(f"{shown}: no current setup cell (run: .venv/bin/python tools/setup_cell.py {shown})")
        print(f"{len(paths) - len(bad)} of {len(paths)} notebooks have the setup cell")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
