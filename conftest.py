"""Collect the course notebooks with nbval, strict where outputs are stored.

* ``solutions/*.ipynb`` are stored with outputs: every cell's output must match
  (cells tagged ``nbval-ignore-output`` excepted; ``tests/nbval_sanitize.cfg``
  masks addresses and timings).
* ``exercises/*.ipynb`` and ``book/*.ipynb`` are stored without outputs: they
  must run from top to bottom without an error (nbval's lax mode).

A second float path (issue 23): every ``book/`` and ``solutions/`` notebook is
collected twice. The second copy's cells end in ``[default-1thread]``: their
kernel starts with ``ATEN_CPU_CAPABILITY=default`` (PyTorch's portable kernels,
which every x86-64 machine has, instead of this CPU's AVX2 or AVX-512 ones) and
one thread (``OMP_NUM_THREADS=1``, ``MKL_NUM_THREADS=1``), and the solutions'
stored outputs must match there too. So a chapter's asserts and a solution's
printed digits hold on two float paths in every CI run. ``--native-only`` skips
the second copy (``-k "not default-1thread"`` does the same).

Plain ``pytest`` does this without ``--nbval``; pass ``--no-notebooks`` to skip them.

Markers (see CONTRIBUTING.md, "Tests"): ``slow`` by what a test does, not by its folder:
notebooks and the book build here, an explicit ``@pytest.mark.slow`` on a test that trains
a model or runs the grader, and ``tests/conftest.py`` fails a test without it that starts
the grader, a kernel, the book build or a browser. Everything under ``tests/grader/`` is
also ``grader``. ``bash tools/test.sh -m "not slow"`` is the contributor's quick loop.
"""

import os
from contextlib import contextmanager
from pathlib import Path

import pytest
from nbval.plugin import IPyNbFile

STRICT = {"solutions"}
LAX = {"exercises", "book"}
# The notebooks that run a second time on another float path, and that path.
SECOND_PATH_FOLDERS = {"book", "solutions"}
SECOND_PATH = "default-1thread"
SECOND_PATH_ENV = {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def pytest_addoption(parser):
    parser.addoption("--no-notebooks", action="store_true", help="do not run the course notebooks")
    parser.addoption(
        "--native-only",
        action="store_true",
        help=f"run the notebooks on this CPU's float path only (no [{SECOND_PATH}] copy)",
    )


def pytest_configure(config):
    config.pluginmanager.register(SecondFloatPath(), "course-second-float-path")
    config.addinivalue_line(
        "markers",
        f"float_path: a notebook run again with {SECOND_PATH_ENV} (the [{SECOND_PATH}] copies)",
    )


@contextmanager
def environment(overrides: dict[str, str]):
    """Set ``overrides`` in os.environ for the block, then restore it exactly."""
    saved = {name: os.environ.get(name) for name in overrides}
    os.environ.update(overrides)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class OtherFloatPathNotebook(IPyNbFile):
    """A notebook whose kernel starts with ``SECOND_PATH_ENV``; its cells' ids end in ``[default-1thread]``.

    nbval starts the kernel in ``setup()`` and jupyter_client gives it a copy of
    ``os.environ``, so the variables are set around that call only: the test
    process itself (and the other notebooks' kernels) keep the native path.
    """

    def setup(self):
        with environment(SECOND_PATH_ENV):
            super().setup()

    def collect(self):
        for item in super().collect():
            item.name = f"{item.name}[{SECOND_PATH}]"
            item._id = self.id.child(item.name)  # pytest's id of a child, from the new name
            yield item


def notebook_folder(file_path: Path, config) -> str | None:
    """``book``, ``solutions`` or ``exercises`` for a notebook nbval should run here, else None."""
    if file_path.suffix != ".ipynb" or config.getoption("--no-notebooks"):
        return None
    if config.option.nbval or config.option.nbval_lax:
        return None  # nbval's own hook collects it
    try:
        top = file_path.relative_to(config.rootpath).parts[0]
    except ValueError:
        return None
    return top if top in STRICT | LAX else None


def pytest_collect_file(file_path: Path, parent):
    top = notebook_folder(file_path, parent.config)
    if top is None:
        return None
    collector = IPyNbFile.from_parent(parent, path=file_path)
    collector.compare_outputs = top in STRICT
    return collector


class SecondFloatPath:
    """A second ``pytest_collect_file``: a hook returns one collector per implementation."""

    @staticmethod
    @pytest.hookimpl(trylast=True)  # after the native copy
    def pytest_collect_file(file_path: Path, parent):
        top = notebook_folder(file_path, parent.config)
        if top not in SECOND_PATH_FOLDERS or parent.config.getoption("--native-only"):
            return None
        collector = OtherFloatPathNotebook.from_parent(parent, path=file_path)
        collector.compare_outputs = top in STRICT
        return collector


# Two workers (``bash tools/test.sh``; pytest-xdist ``--dist loadscope``; COURSE_TEST_WORKERS=1: none).
# The course's scheduler sends each of these units whole to one worker, in collection order:
# * a file: a notebook's cells (both float paths) share one kernel per copy, and a test module's
#   module-scoped fixtures (trained models) are made once;
# * the website's tests (tests/site/): they share the session's one strict build (built_book);
# * except tests/test_binder.py, whose tests (each builds its own environment) go one by one.
# The units that take minutes go out first (``LONGEST_FIRST``), so that no worker is left with
# one of them at the end while the other has nothing to do.
# (xdist's own ``loadgroup`` cannot be used: it renames item._nodeid, which pytest 9.2 ignores.)
SITE_TESTS = "tests/site/"
ONE_BY_ONE = ("tests/test_binder.py",)
# the longest units of a whole run (--durations on a clean clone, two workers): the grader's
# tests as an unprivileged user (614 s), test_binder's Binder (392 s) and Colab (283 s)
# environments, the website (one strict build, 285 s, then every page in a browser)
LONGEST_FIRST = (
    "tests/grader/sandbox/test_unprivileged.py",
    "tests/test_binder.py::test_binder_environment_runs_every_chapter_and_exercise",
    "site",
    "tests/test_binder.py::test_colab_setup_cell_installs_what_is_missing_and_every_notebook_runs",
)


def work_unit(nodeid: str) -> str:
    """The scheduling unit of a test, from its node id alone (the controller sees no items)."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(SITE_TESTS):
        return "site"
    if path in ONE_BY_ONE:
        return nodeid
    return path


def put_longest_first(queue) -> None:
    """Move the units of ``LONGEST_FIRST`` found in ``queue`` (an OrderedDict keyed by unit) to
    its front, in that order; the others keep their collection order."""
    for unit in reversed(LONGEST_FIRST):
        if unit in queue:
            queue.move_to_end(unit, last=False)


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest-xdist is pinned in requirements.txt; without it, no workers
    pass
else:

    class CourseScheduling(LoadScopeScheduling):
        """``--dist loadscope`` with the course's units (:func:`work_unit`)."""

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not getattr(self, "_longest_moved", False):  # once, before the first unit goes out
                self._longest_moved = True
                put_longest_first(self.workqueue)
            super()._assign_work_unit(node)

    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") == "loadscope":
            return CourseScheduling(config, log)
        return None


def pytest_collection_modifyitems(config, items):
    grader_dir = config.rootpath / "tests" / "grader"
    for item in items:
        path = Path(str(item.path))
        if path.suffix == ".ipynb" or item.get_closest_marker("book"):
            item.add_marker(pytest.mark.slow)
        if isinstance(item.parent, OtherFloatPathNotebook):
            item.add_marker(pytest.mark.float_path)
        if grader_dir in path.parents:
            item.add_marker(pytest.mark.grader)
