"""The course's instructor tooling: exercise generation and the class grader.

Kept apart from :mod:`attnlib`, the library every learner installs, because it
is Linux-only, assumes a checkout of the course repository and runs other
people's code:

* :mod:`coursetools.assign` generates ``exercises/`` from ``solutions/``;
* :mod:`coursetools.grade` grades a class's notebooks in sandboxed processes.
"""

import sys

# Grading never writes byte-code into the course checkout (its children run with -B).
sys.dont_write_bytecode = True
