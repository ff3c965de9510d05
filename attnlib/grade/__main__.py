"""Alias: ``python -m attnlib.grade ...`` runs ``python -m coursetools.grade ...``.

The grader is instructor tooling that runs from a checkout of the course
repository (it is not in the wheel learners install): elsewhere this says so in
one line instead of a traceback.
"""

from __future__ import annotations

import os
import sys

HOW_TO_RUN = (
    "attnlib.grade: the class grader is coursetools.grade, which runs from a checkout of the course "
    "repository: cd <checkout> && python -m coursetools.grade ..."
)

if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        from coursetools.grade.__main__ import main
    except ModuleNotFoundError as exc:
        if exc.name not in ("coursetools", "coursetools.grade", "coursetools.grade.__main__"):
            raise
        print(HOW_TO_RUN, file=sys.stderr)
        sys.exit(2)
    print("note: this command now lives in `python -m coursetools.grade`; running it", file=sys.stderr)
    sys.exit(main())
