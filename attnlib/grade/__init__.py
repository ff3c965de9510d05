"""Moved to :mod:`coursetools.grade`; this alias keeps ``python -m attnlib.grade`` working.

The class grader is instructor tooling (Linux-only, it assumes a checkout of the
course repository), so it lives in the top-level package ``coursetools``, out of
the library that learners install. ``python -m attnlib.grade ...`` prints where
the command now lives and runs it; ``attnlib.grade.grade`` and
``attnlib.grade.<module>`` (``batch``, ``runner``, ...) resolve to the modules of
:mod:`coursetools.grade`.
"""

from __future__ import annotations

import importlib

MOVED_TO = "coursetools.grade"


def grade(*args, **kwargs):
    """Grade a folder of submissions; see :func:`coursetools.grade.batch.grade`."""
    from coursetools.grade.batch import grade as _grade

    return _grade(*args, **kwargs)


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return importlib.import_module(f"{MOVED_TO}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{MOVED_TO}.{name}":
            raise
        raise AttributeError(f"module 'attnlib.grade' has no attribute {name!r}") from None


__all__ = ["grade", "MOVED_TO"]
