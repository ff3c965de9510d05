"""Shared fixtures (the repository root, the website built once per session) and the guard
that keeps the quick loop quick: a test not marked ``slow`` may not start the grader, a
notebook kernel, the book build or a browser."""

import inspect
import os
import re
import subprocess
import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE_DIR = ROOT / "test-artifacts" / "site"


@pytest.fixture
def one_thread():
    """Run a test on one torch thread, as the chapters do for their tiny models.

    On a shared 2-core CPU tiny recurrent and attention models train several
    times faster on one thread, and the results repeat exactly.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def built_book() -> tuple[Path, str]:
    """Build the book strictly into test-artifacts/site; return (html folder, build log).

    The build runs once per test session; it fails the dependent tests, with
    the log, when jupyter-book exits non-zero (any warning, with -W).
    """
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb), "build", str(ROOT), "-W", "-n", "--keep-going", "--path-output", str(SITE_DIR)]
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env["PYTHONHASHSEED"] = "0"
    # A local build: without a repository or address its downloads need the wheel beside them (said so).
    env.setdefault("COURSE_SITE_URL", "none")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1500)
    log = proc.stdout + proc.stderr
    (SITE_DIR).mkdir(parents=True, exist_ok=True)
    (SITE_DIR / "build.log").write_text(log, encoding="utf-8")
    if proc.returncode != 0:
        pytest.fail(f"strict book build failed (exit {proc.returncode}); log tail:\n{log[-6000:]}")
    return SITE_DIR / "_build" / "html", log


# What `slow` means (CONTRIBUTING.md, "Tests"): a test that trains a model, executes a
# notebook, builds the book, starts a browser or runs the grader (its sandbox, its zygote,
# its notebook reader, its command line). All but the first start a process that the
# guard below recognises by its command line; a test outside the `slow` selection that
# starts one fails and says so, whatever else it asserts. A model's training has no such
# sign: `--durations` finds it, and the test gets an explicit `@pytest.mark.slow`.
SLOW_PROCESSES = {
    "the grader (sandbox, zygote, notebook reader or command)": (
        "coursetools.grade",
        "unshare",
        "setpriv",
        "run_autograder",  # the Gradescope autograder, which runs the grader
    ),
    "a notebook kernel": ("ipykernel",),
    "the book build": ("jupyter-book", "jupyter_book", "sphinx-build"),
    "a browser": ("chromium", "chromedriver", "chrome"),
}


def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` what has no process for the guard to see: a test that needs the built website
    (the build takes minutes; after the session's first test it starts nothing), and a test
    parametrized by an exercise whose answer trains a model (its reference takes an
    ``optimizer``: every case and every known mistake is a training run)."""
    for item in items:
        if "built_book" in getattr(item, "fixturenames", ()) or _trains_a_model(item):
            item.add_marker(pytest.mark.slow)


def _trains_a_model(item) -> bool:
    """Whether ``item`` is parametrized by an exercise (an ``Exercise`` or a bank entry naming
    one) whose answer takes an optimizer."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return False
    for value in callspec.params.values():
        reference = getattr(value, "reference", None)  # an attnlib.checks Exercise
        if reference is None and isinstance(getattr(value, "exercise", None), str):  # a bank entry
            from attnlib.checks import all_exercises

            exercise = all_exercises().get(value.exercise)
            reference = exercise.reference if exercise is not None else None
        if callable(reference) and "optimizer" in inspect.signature(reference).parameters:
            return True
    return False


def _names(argv) -> list[str]:
    """The names a command line calls on: of a path, only what it names (its last part); of any
    other word, its dotted names (``-m coursetools.grade``, ``-c "from coursetools.grade import x"``).

    A folder on the way is not a name: a checkout in ``/tmp/nochrome.x/`` starts no browser.
    """
    if isinstance(argv, str | bytes | os.PathLike):
        argv = [argv]
    names: list[str] = []
    for arg in argv:
        text = os.fsdecode(arg) if isinstance(arg, bytes | os.PathLike) else str(arg)
        for word in text.split():
            if "/" in word:
                names.append(word.rstrip("/").rsplit("/", 1)[-1])
            else:
                names.extend(re.findall(r"[A-Za-z_][\w.-]*", word))
    return names


def slow_process(argv) -> str | None:
    """What ``argv`` starts, from ``SLOW_PROCESSES``, or None for a process the quick loop may start.

    A sign matches a name that is the sign, or begins with it and then ``.``, ``_`` or ``-``
    (``coursetools.grade.sandbox.harness``, ``ipykernel_launcher``, ``chromium-browser``).
    """
    names = _names(argv)
    for what, signs in SLOW_PROCESSES.items():
        for sign in signs:
            if any(name == sign or name.startswith((f"{sign}.", f"{sign}_", f"{sign}-")) for name in names):
                return what
    return None


@contextmanager
def _refuse_slow_processes(item):
    """Record (and stop) every process of ``SLOW_PROCESSES`` that ``item`` starts; fail it after."""
    started: list[str] = []
    original = subprocess.Popen.__init__

    def guarded_init(self, args, *rest, **kwargs):
        what = slow_process(args)
        if what is not None:
            shown = args if isinstance(args, str) else " ".join(map(str, args))
            started.append(f"{what}: {shown[:200]}")
            raise SlowProcessInQuickLoop(f"{item.nodeid} starts {what}; mark it slow")
        original(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = guarded_init
    try:
        yield
    finally:
        subprocess.Popen.__init__ = original
        if started:
            pytest.fail(
                f"{item.nodeid} is not marked slow but starts "
                + "; ".join(dict.fromkeys(started))
                + ". Mark it @pytest.mark.slow (CONTRIBUTING.md, Tests: slow means it trains a"
                " model, executes a notebook, builds the book, starts a browser or runs the grader)",
                pytrace=False,
            )


class SlowProcessInQuickLoop(RuntimeError):
    """Raised where a quick test starts a slow process (the test fails in any case)."""


def _guarded_phase(item):
    if item.get_closest_marker("slow") is not None:
        return nullcontext()
    return _refuse_slow_processes(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _guarded_phase(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _guarded_phase(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    with _guarded_phase(item):
        return (yield)
