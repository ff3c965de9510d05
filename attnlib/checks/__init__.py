"""Exercise checks: ``check("ex-02-1", my_function)`` prints specific feedback.

Every chapter registers its exercises in a module ``attnlib/checks/chNN_slug.py``;
those modules are discovered on first use.

The public names are those of :mod:`attnlib.checks.core` (listed once, in its
``__all__``) plus :func:`~attnlib.checks.rules.find_forbidden`.
"""

from attnlib.checks import core
from attnlib.checks.core import *  # noqa: F403  (core.__all__ is the one list of public names)
from attnlib.checks.rules import find_forbidden

__all__ = [*core.__all__, "find_forbidden"]
from attnlib.checks.summary import check_all as check_all  # the last cell of every exercise notebook
