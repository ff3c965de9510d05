"""Issue 43, item 1: legitimate notebooks of the earlier class get their marks through the real grader.

IPython magics (``%matplotlib``, ``%%time`` over the answer, ``%timeit`` and ``!pip`` in other
cells), ``display()``, a thread pool, ``sys.exit(0)`` at the end of a cell, a slow but correct
answer, and helpers the answers need from other cells (a constant, ``from typing import Tuple``,
a ``@dataclass``, a cell-level lambda, a ``functools.lru_cache`` helper). Each exercise runs in
its own process with the cells it needs (issue 43): what the other cells do can neither hold
an exercise nor take its marks.
"""

from __future__ import annotations

import pytest
from fixtures import HONEST, _full, _notebook, _scores

from coursetools.grade.records.record import Status

pytestmark = [pytest.mark.grader, pytest.mark.slow]

MAGICS = [
    ("ex-04-1", "before", "%matplotlib inline\n%config InlineBackend.figure_format = 'svg'\n"),
    ("ex-04-1", "before", "!pip list | head -3\n"),
    ("ex-04-1", "after", "x = np.random.default_rng(0).normal(size=(4, 6))\n%timeit stable_softmax(x)\n"),
    ("ex-04-1", "after", "r = %timeit -o stable_softmax(x)\nprint(r.best)\n"),
    ("ex-04-2", "after", "%%capture out\nprint(log_sum_exp(x))\n"),
    ("ex-04-3", "after", "display(scaled_scores(x, x))\n"),
    ("ex-04-3", "after", "from IPython.display import Markdown\ndisplay(Markdown('**done**'))\n"),
]
THREADS_AND_EXIT = [
    (
        "ex-04-2",
        "after",
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(4) as pool:\n"
        "    rows = list(pool.map(log_sum_exp, [np.ones((2, 3)) * k for k in range(8)]))\n"
        "print(len(rows))\n",
    ),
    (
        "ex-04-3",
        "after",
        "print(scaled_scores(np.ones((2, 4)), np.ones((3, 4))).shape)\nimport sys\nsys.exit(0)\n",
    ),
    ("ex-04-4", "before", "import functools\nfrom dataclasses import dataclass\nfrom typing import Tuple\n"),
    (
        "ex-04-4",
        "before",
        "NEG_INF = -np.inf\nTINY = np.finfo(np.float64).tiny\n\n@dataclass\nclass Scale:\n    d_k: int\n\n"
        "    def factor(self) -> float:\n        return 1.0 / np.sqrt(self.d_k)\n\n"
        "row_max = lambda s: s.max(axis=-1, keepdims=True)\n\n"
        "@functools.lru_cache(maxsize=None)\ndef shape_of(d: int) -> Tuple[int, int]:\n    return (d, d)\n"
        "import sys\nsys.exit(0)\n",
    ),
]
# ex-04-1 with a %%time header; ex-04-4 through the helpers above; ex-04-2 slow but correct
ANSWERS = {
    **HONEST,
    "ex-04-1": "%%time\n" + HONEST["ex-04-1"],
    "ex-04-2": "import math\n\ndef log_sum_exp(x):\n"
    "    x = np.asarray(x, dtype=float)\n"
    "    flat = x.reshape(-1, x.shape[-1])\n"
    "    out = []\n"
    "    for row in flat:  # one row at a time, in Python: slow, and right\n"
    "        m = max(row)\n"
    "        if m == -math.inf:\n"
    "            out.append(-math.inf)\n"
    "            continue\n"
    "        out.append(m + math.log(sum(math.exp(v - m) for v in row)))\n"
    "    return np.array(out).reshape(x.shape[:-1])\n",
    "ex-04-4": "def attention_weights(x, w_q, w_k):\n"
    "    s = (x @ w_q) @ np.swapaxes(x @ w_k, -1, -2) * Scale(w_q.shape[-1]).factor()\n"
    "    e = np.exp(s - row_max(s))\n"
    "    return np.maximum(e / e.sum(axis=-1, keepdims=True), 0.0 * TINY)\n",
}


def test_magics_and_display_around_the_answers_get_full_marks(grader):  # noqa: F811
    record = grader("magics", _notebook({**HONEST, "ex-04-1": ANSWERS["ex-04-1"]}, MAGICS))
    assert record.status is Status.GRADED, (record.review, record.notes)
    assert _scores(record) == _full(record) and record.total == record.max, (_scores(record), record.review)


def test_threads_sys_exit_helpers_and_a_slow_answer_get_full_marks(grader):  # noqa: F811
    record = grader("threads-exit", _notebook(ANSWERS, THREADS_AND_EXIT))
    assert record.status is Status.GRADED, (record.review, record.notes)
    assert _scores(record) == _full(record) and record.total == record.max, (_scores(record), record.review)
    # the helper cell's sys.exit(0) did not run for ex-04-4: only the statements it needs did
    assert not any(e.get("etype") == "SystemExit" for e in record.cell_errors), record.cell_errors
