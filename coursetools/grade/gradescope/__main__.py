"""``python -m coursetools.grade.gradescope [build] ASSIGNMENT`` writes the archive;
``... run --root ROOT --assignment STEM`` grades the one submission of a Gradescope container
(the archive's ``run_autograder`` calls it)."""

from __future__ import annotations

import os
import sys

from coursetools.grade.gradescope import _run_main, main

if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    if sys.argv[1:2] == ["run"]:
        sys.exit(_run_main(sys.argv[2:]))
    if sys.argv[1:2] == ["build"]:
        sys.exit(main(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
