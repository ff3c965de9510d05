"""Exercise checks: ``check("ex-02-1", my_function)`` prints specific feedback.

Every chapter registers its exercises in a module ``attnlib/checks/chNN_slug.py``;
those modules are discovered on first use.
"""

from attnlib.checks.core import (
    Case,
    CaseResult,
    CheckResult,
    Exercise,
    Misconception,
    NotAttempted,
    all_exercises,
    check,
    compare_outputs,
    evaluate,
    forbidden_calls,
    forbidden_message,
    forbidden_result,
    get_exercise,
    judge_case,
    judge_error,
    register,
    run_case,
    to_arrays,
)
from attnlib.checks.forbidden import find_forbidden

__all__ = [
    "Case",
    "CaseResult",
    "CheckResult",
    "Exercise",
    "Misconception",
    "NotAttempted",
    "all_exercises",
    "check",
    "compare_outputs",
    "find_forbidden",
    "evaluate",
    "forbidden_calls",
    "forbidden_message",
    "forbidden_result",
    "get_exercise",
    "judge_case",
    "judge_error",
    "register",
    "run_case",
    "to_arrays",
]
