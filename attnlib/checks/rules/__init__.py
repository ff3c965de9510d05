"""The forbidden-call rule: what an exercise's answer may not call, and how it is read.

One rule, read two ways, one idea a file:

=================  ============================================================================
module             what it holds
=================  ============================================================================
``families``       the policy data: existing implementations, families (``"~softmax"``), the
                   learner's words for them, the conventional aliases, the dynamic lookups
``finder``         the name finder (the blocklist reading): which forbidden entries an answer
                   names, by its syntax tree; its findings are what the feedback shows
``audit``          the allow-list audit on a notebook's cells (the grader's side): forbidden
                   entries score 0 under any public path, what cannot be read goes to review
``runtime``        the same audit on a function object (``check()``'s side)
``allowed``        what an answer may reference: a base list and each exercise's ``EXTRA``
``public_paths``   every public path of attnlib's objects (generated:
                   ``python -m attnlib.checks.rules.public_paths --write``)
=================  ============================================================================

Why both readings still run: the finder names the calls an answer makes (the feedback's "not
allowed: the answer uses ..."; the grader's zero), exactly and cheaply, and never sends an honest
answer to review; the audit is what makes the rule sound, since an answer that reaches a
forbidden object by a path the finder cannot resolve is held for review instead of being marked.
Dropping the finder would lose the names in the feedback, not soundness; dropping the audit
would lose soundness.

Every module here imports the standard library only at its top (the runtime side and the
writer of :mod:`~attnlib.checks.rules.public_paths` import attnlib inside the functions that
need it): the grader's notebook reader imports the package without attnlib's core (torch).
"""

from attnlib.checks.rules.audit import Audit, audit_notebook, notebook_names
from attnlib.checks.rules.families import (
    ATTENTION_IMPLEMENTATIONS,
    FAMILIES,
    FAMILY_NAMES,
    LOGSUMEXP_IMPLEMENTATIONS,
    SCALED_SCORE_IMPLEMENTATIONS,
    SOFTMAX_IMPLEMENTATIONS,
    FamilyName,
    family_covers,
)
from attnlib.checks.rules.finder import (
    find_dynamic,
    find_forbidden,
    find_forbidden_in_cells,
    forbidden_in_function,
    function_source,
)
from attnlib.checks.rules.runtime import audit_function

__all__ = [
    "ATTENTION_IMPLEMENTATIONS",
    "FAMILIES",
    "FAMILY_NAMES",
    "LOGSUMEXP_IMPLEMENTATIONS",
    "SCALED_SCORE_IMPLEMENTATIONS",
    "SOFTMAX_IMPLEMENTATIONS",
    "Audit",
    "FamilyName",
    "audit_function",
    "audit_notebook",
    "family_covers",
    "find_dynamic",
    "find_forbidden",
    "find_forbidden_in_cells",
    "forbidden_in_function",
    "function_source",
    "notebook_names",
]
