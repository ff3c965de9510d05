"""Moved: ``python -m coursetools.grade.classroom ASSIGNMENT DOWNLOAD --out OUT`` is an alias of
the grader's one command line, ``python -m coursetools.grade ASSIGNMENT DOWNLOAD --out OUT``,
which stages an LMS download itself (:func:`coursetools.grade.intake.prepare`) and renders
every output once. :func:`prepare` and :func:`needs_intake` now live in :mod:`.intake`.
"""

from __future__ import annotations

import os
import sys

from coursetools.grade.__main__ import main
from coursetools.grade.intake import STAGED, needs_intake, prepare

MOVED_TO = "python -m coursetools.grade"

__all__ = ["MOVED_TO", "STAGED", "main", "needs_intake", "prepare"]

if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    print(f"note: coursetools.grade.classroom now lives in `{MOVED_TO}` (same arguments)", file=sys.stderr)
    sys.exit(main())
