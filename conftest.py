"""Collect the course notebooks with nbval, strict where outputs are stored.

* ``solutions/*.ipynb`` are stored with outputs: every cell's output must match
  (cells tagged ``nbval-ignore-output`` excepted; ``tests/nbval_sanitize.cfg``
  masks addresses and timings).
* ``exercises/*.ipynb`` and ``book/*.ipynb`` are stored without outputs: they
  must run from top to bottom without an error (nbval's lax mode).

Plain ``pytest`` does this without ``--nbval``; pass ``--no-notebooks`` to skip them.

Markers by room (see CONTRIBUTING.md): notebooks, the book build and everything
under ``tests/grader/`` are ``slow``; the grader's tests are also ``grader``.
``bash tools/test.sh -m "not slow"`` is the contributor's quick loop.
"""

from pathlib import Path

from nbval.plugin import IPyNbFile

STRICT = {"solutions"}
LAX = {"exercises", "book"}


def pytest_addoption(parser):
    parser.addoption("--no-notebooks", action="store_true", help="do not run the course notebooks")


def pytest_collect_file(file_path: Path, parent):
    config = parent.config
    if file_path.suffix != ".ipynb" or config.getoption("--no-notebooks"):
        return None
    if config.option.nbval or config.option.nbval_lax:
        return None  # nbval's own hook collects it
    try:
        top = file_path.relative_to(config.rootpath).parts[0]
    except ValueError:
        return None
    if top not in STRICT | LAX:
        return None
    collector = IPyNbFile.from_parent(parent, path=file_path)
    collector.compare_outputs = top in STRICT
    return collector


def pytest_collection_modifyitems(config, items):
    import pytest

    grader_dir = config.rootpath / "tests" / "grader"
    for item in items:
        path = Path(str(item.path))
        if path.suffix == ".ipynb" or item.get_closest_marker("book"):
            item.add_marker(pytest.mark.slow)
        if grader_dir in path.parents:
            item.add_marker(pytest.mark.grader)
            item.add_marker(pytest.mark.slow)
