"""Moved to :mod:`coursetools.assign`; this alias keeps ``python -m attnlib.assign`` working.

The exercise generator is instructor tooling, not part of the library that
learners install, so it lives in the top-level package ``coursetools``::

    python -m coursetools.assign             # every solutions/*.ipynb
    python -m attnlib.assign                 # the same (prints where the command now lives)
"""

from __future__ import annotations

import sys

try:
    from coursetools.assign import (  # noqa: F401 - re-exported for old imports
        BEGIN,
        END,
        EXERCISE_ID,
        STUB_COMMENT,
        AssignError,
        exercise_ids,
        exercise_meta,
        main,
        make_exercise,
        render,
        strip_solution,
    )
except ModuleNotFoundError as exc:  # pragma: no cover - a learner's install without the course tools
    if exc.name not in ("coursetools", "coursetools.assign"):
        raise
    raise ModuleNotFoundError(
        "attnlib.assign moved to coursetools.assign, which ships with the course repository "
        "(run it from a checkout: python -m coursetools.assign)",
        name=exc.name,
    ) from None

MOVED_TO = "coursetools.assign"

if __name__ == "__main__":
    print(f"note: this command now lives in `python -m {MOVED_TO}`; running it", file=sys.stderr)
    sys.exit(main())
