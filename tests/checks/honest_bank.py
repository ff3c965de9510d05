# ruff: noqa: E501 - the bank's answers are notebook cells, one source line per string
"""A bank of honest answers (issue 43): right answers in the styles a class writes, each one
written from the exercise's text in exercises/*.ipynb (never from the reference or the checks).

Each :class:`Honest` is the source of an answer cell (its own imports, helpers, constants,
decorators, classes, lambdas) and, optionally, cells the learner put before it. Every one must
be right on every case, visible and hidden, and come out clean from the forbidden-call rule on
both sides (tests/checks/test_honest_bank.py). The styles the fifth pass of the grader found
held on an unseen class are here on purpose: np.subtract/np.divide, torch.meshgrid,
torch.kthvalue, itertools.product, functools.reduce, @functools.lru_cache, a @dataclass,
``from typing import Tuple``, module constants (``NEG_INF = -np.inf``, ``np.finfo(...).tiny``),
a cell-level lambda, ``.diagonal()`` as a method, np.apply_along_axis, np.longdouble.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Honest:
    exercise: str
    answer: str
    before: tuple[str, ...] = ()
    style: str = ""


BANK: list[Honest] = []


def add(exercise: str, style: str, answer: str, *before: str) -> None:
    BANK.append(Honest(exercise, answer, tuple(before), style))


# ------------------------------------------------------------------------------------ ex-00-1
add("ex-00-1", "matmul", "def pairwise_dot(a, b):\n    return a @ np.swapaxes(b, -1, -2)\n")
add("ex-00-1", "einsum", "def pairwise_dot(a, b):\n    return np.einsum('...nd,...md->...nm', a, b)\n")
add("ex-00-1", "np.matmul", "def pairwise_dot(a, b):\n    return np.matmul(a, np.moveaxis(b, -1, -2))\n")
add(
    "ex-00-1",
    "typing",
    "from typing import Any\n\ndef pairwise_dot(a: Any, b: Any) -> Any:\n    bt = b.swapaxes(-1, -2)\n    return a @ bt\n",
)
add(
    "ex-00-1",
    "lambda helper",
    "def pairwise_dot(a, b):\n    return a @ T(b)\n",
    "T = lambda m: np.swapaxes(m, -2, -1)",
)

# ------------------------------------------------------------------------------------ ex-02-1
add(
    "ex-02-1",
    "broadcast",
    "def alignment_scores(s_prev, H, W, U, v):\n    return np.tanh(W @ s_prev + H @ U.T) @ v\n",
)
add(
    "ex-02-1",
    "einsum",
    "def alignment_scores(s_prev, H, W, U, v):\n    hidden = np.tanh(np.einsum('ad,d->a', W, s_prev)[None, :] + np.einsum('ae,se->sa', U, H))\n    return np.einsum('sa,a->s', hidden, v)\n",
)
add(
    "ex-02-1",
    "np.add + np.dot",
    "def alignment_scores(s_prev, H, W, U, v):\n    q = np.dot(W, s_prev)\n    k = np.dot(H, np.transpose(U))\n    return np.dot(np.tanh(np.add(k, q)), v)\n",
)
add(
    "ex-02-1",
    "columns",
    "def alignment_scores(s_prev, H, W, U, v):\n    cols = U @ H.T + (W @ s_prev)[:, np.newaxis]  # (d_a, S)\n    return v @ np.tanh(cols)\n",
)
add(
    "ex-02-1",
    "matmul",
    "def alignment_scores(s_prev, H, W, U, v):\n    return np.matmul(np.tanh(np.matmul(H, U.T) + np.matmul(W, s_prev)), v)\n",
)

# ------------------------------------------------------------------------------------ ex-02-2
add(
    "ex-02-2",
    "subtract max",
    "def alignment_weights(scores):\n    e = np.exp(scores - scores.max(axis=1, keepdims=True))\n    return e / e.sum(axis=1, keepdims=True)\n",
)
add(
    "ex-02-2",
    "np.subtract/np.divide",
    "def alignment_weights(scores):\n    shifted = np.subtract(scores, np.max(scores, axis=-1, keepdims=True))\n    e = np.exp(shifted)\n    return np.divide(e, np.sum(e, axis=-1, keepdims=True))\n",
)
add(
    "ex-02-2",
    "apply_along_axis",
    "def _row(z):\n    e = np.exp(z - z.max())\n    return e / e.sum()\n\ndef alignment_weights(scores):\n    return np.apply_along_axis(_row, 1, scores)\n",
)
add(
    "ex-02-2",
    "loop over rows",
    "def alignment_weights(scores):\n    out = np.empty_like(scores, dtype=float)\n    for i, row in enumerate(scores):\n        e = np.exp(row - max(row))\n        out[i] = e / e.sum()\n    return out\n",
)
add(
    "ex-02-2",
    "torch",
    "import torch\n\ndef alignment_weights(scores):\n    t = torch.as_tensor(scores, dtype=torch.float64)\n    e = torch.exp(t - t.amax(dim=-1, keepdim=True))\n    return (e / e.sum(dim=-1, keepdim=True)).numpy()\n",
)

# ------------------------------------------------------------------------------------ ex-02-3
add("ex-02-3", "matmul", "def attention_context(weights, H):\n    return weights @ H\n")
add(
    "ex-02-3", "einsum", "def attention_context(weights, H):\n    return np.einsum('ts,sd->td', weights, H)\n"
)
add(
    "ex-02-3",
    "broadcast sum",
    "def attention_context(weights, H):\n    return (weights[:, :, None] * H[None, :, :]).sum(axis=1)\n",
)
add(
    "ex-02-3",
    "tensordot",
    "def attention_context(weights, H):\n    return np.tensordot(weights, H, axes=([1], [0]))\n",
)
add(
    "ex-02-3",
    "functools.reduce",
    "import functools\n\ndef attention_context(weights, H):\n    terms = [np.outer(weights[:, j], H[j]) for j in range(H.shape[0])]\n    return functools.reduce(np.add, terms)\n",
)

# ------------------------------------------------------------------------------------ ex-03-1
add("ex-03-1", "tuple", "def project_qkv(x, w_q, w_k, w_v):\n    return x @ w_q, x @ w_k, x @ w_v\n")
add(
    "ex-03-1",
    "typing.Tuple",
    "from typing import Tuple\n\ndef project_qkv(x, w_q, w_k, w_v) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:\n    return tuple(np.matmul(x, w) for w in (w_q, w_k, w_v))\n",
)
add(
    "ex-03-1",
    "einsum",
    "def project_qkv(x, w_q, w_k, w_v):\n    f = lambda w: np.einsum('...ld,dk->...lk', x, w)\n    return f(w_q), f(w_k), f(w_v)\n",
)
add(
    "ex-03-1",
    "namedtuple",
    "from collections import namedtuple\nQKV = namedtuple('QKV', 'Q K V')\n\ndef project_qkv(x, w_q, w_k, w_v):\n    return tuple(QKV(x @ w_q, x @ w_k, x @ w_v))\n",
)
add(
    "ex-03-1",
    "map",
    "def project_qkv(x, w_q, w_k, w_v):\n    Q, K, V = map(lambda w: x @ w, [w_q, w_k, w_v])\n    return Q, K, V\n",
)

# ------------------------------------------------------------------------------------ ex-03-2
add(
    "ex-03-2",
    "math.sqrt",
    "import math\n\ndef attention_scores(x, w_q, w_k):\n    q, k = x @ w_q, x @ w_k\n    return q @ np.swapaxes(k, -1, -2) / math.sqrt(w_q.shape[-1])\n",
)
add(
    "ex-03-2",
    "einsum",
    "def attention_scores(x, w_q, w_k):\n    q = np.einsum('...ld,dk->...lk', x, w_q)\n    k = np.einsum('...ld,dk->...lk', x, w_k)\n    return np.einsum('...ik,...jk->...ij', q, k) / np.sqrt(w_q.shape[-1])\n",
)
add(
    "ex-03-2",
    "np.divide",
    "def attention_scores(x, w_q, w_k):\n    d_k = w_q.shape[1]\n    return np.divide(np.matmul(x @ w_q, np.swapaxes(x @ w_k, -2, -1)), d_k ** 0.5)\n",
)
add(
    "ex-03-2",
    "scale first",
    "def attention_scores(x, w_q, w_k):\n    scale = 1.0 / np.sqrt(w_k.shape[-1])\n    return (x @ w_q * scale) @ np.moveaxis(x @ w_k, -1, -2)\n",
)
add(
    "ex-03-2",
    "helper def",
    "def attention_scores(x, w_q, w_k):\n    return _scores(x @ w_q, x @ w_k)\n",
    "def _scores(q, k):\n    return q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])\n",
)

# ------------------------------------------------------------------------------------ ex-03-3
add(
    "ex-03-3",
    "plain exp",
    "def row_softmax(scores):\n    e = np.exp(scores)\n    return e / e.sum(axis=-1, keepdims=True)\n",
)
add(
    "ex-03-3",
    "max shift",
    "def row_softmax(scores):\n    e = np.exp(scores - np.amax(scores, axis=-1, keepdims=True))\n    return e / np.sum(e, axis=-1, keepdims=True)\n",
)
add(
    "ex-03-3",
    "reshape rows",
    "def row_softmax(scores):\n    rows = scores.reshape(-1, scores.shape[-1])\n    e = np.exp(rows - rows.max(1)[:, None])\n    return (e / e.sum(1)[:, None]).reshape(scores.shape)\n",
)
add(
    "ex-03-3",
    "np.divide out",
    "def row_softmax(scores):\n    z = np.exp(np.subtract(scores, scores.max(-1, keepdims=True)))\n    total = z.sum(-1, keepdims=True)\n    return np.divide(z, total)\n",
)
add(
    "ex-03-3",
    "log space",
    "def row_softmax(scores):\n    m = scores.max(-1, keepdims=True)\n    log_z = m + np.log(np.exp(scores - m).sum(-1, keepdims=True))\n    return np.exp(scores - log_z)\n",
)

# ------------------------------------------------------------------------------------ ex-03-4
add(
    "ex-03-4",
    "step by step",
    "def attention_output(q, k, v):\n    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])\n    w = np.exp(s - s.max(-1, keepdims=True))\n    w = w / w.sum(-1, keepdims=True)\n    return w @ v\n",
)
add(
    "ex-03-4",
    "einsum",
    "def attention_output(q, k, v):\n    s = np.einsum('...id,...jd->...ij', q, k) / q.shape[-1] ** 0.5\n    p = np.exp(s - s.max(axis=-1, keepdims=True))\n    p /= p.sum(axis=-1, keepdims=True)\n    return np.einsum('...ij,...jv->...iv', p, v)\n",
)
add(
    "ex-03-4",
    "helpers",
    "def _softmax_rows(s):\n    e = np.exp(s - s.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n\ndef attention_output(q, k, v):\n    return _softmax_rows(q @ k.swapaxes(-1, -2) / np.sqrt(k.shape[-1])) @ v\n",
)
add(
    "ex-03-4",
    "torch inside",
    "import torch\n\ndef attention_output(q, k, v):\n    Q, K, V = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))\n    s = Q @ K.transpose(-1, -2) / Q.shape[-1] ** 0.5\n    w = torch.exp(s - s.max(-1, keepdim=True).values)\n    return (w / w.sum(-1, keepdim=True) @ V).numpy()\n",
)
add(
    "ex-03-4",
    "dataclass",
    "from dataclasses import dataclass\n\n@dataclass\nclass Attn:\n    scale: float\n\n    def weights(self, q, k):\n        s = q @ np.swapaxes(k, -1, -2) * self.scale\n        e = np.exp(s - s.max(-1, keepdims=True))\n        return e / e.sum(-1, keepdims=True)\n\ndef attention_output(q, k, v):\n    return Attn(1 / np.sqrt(q.shape[-1])).weights(q, k) @ v\n",
)

# ------------------------------------------------------------------------------------ ex-04-1
add(
    "ex-04-1",
    "keepdims",
    "def stable_softmax(x):\n    e = np.exp(x - x.max(axis=-1, keepdims=True))\n    return e / e.sum(axis=-1, keepdims=True)\n",
)
add(
    "ex-04-1",
    "np.subtract/np.divide",
    "def stable_softmax(x):\n    e = np.exp(np.subtract(x, np.max(x, axis=-1, keepdims=True)))\n    return np.divide(e, np.sum(e, axis=-1, keepdims=True))\n",
)
add(
    "ex-04-1",
    "apply_along_axis",
    "def stable_softmax(x):\n    def one(z):\n        e = np.exp(z - np.max(z))\n        return e / np.sum(e)\n    return np.apply_along_axis(one, -1, np.asarray(x, dtype=float))\n",
)
add(
    "ex-04-1",
    "longdouble",
    "def stable_softmax(x):\n    z = np.asarray(x, dtype=np.longdouble)\n    e = np.exp(z - z.max(-1, keepdims=True))\n    return (e / e.sum(-1, keepdims=True)).astype(np.float64)\n",
)
add(
    "ex-04-1",
    "log-sum-exp by hand",
    "def stable_softmax(x):\n    m = np.max(x, axis=-1, keepdims=True)\n    lse = m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))\n    return np.exp(x - lse)\n",
)
add(
    "ex-04-1",
    "expand_dims",
    "def stable_softmax(x):\n    m = np.expand_dims(np.max(x, axis=-1), -1)\n    e = np.exp(x - m)\n    return e / np.expand_dims(e.sum(axis=-1), -1)\n",
)

# ------------------------------------------------------------------------------------ ex-04-2
add(
    "ex-04-2",
    "identity",
    "def log_sum_exp(x):\n    m = x.max(axis=-1, keepdims=True)\n    return (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))[..., 0]\n",
)
add(
    "ex-04-2",
    "squeeze",
    "def log_sum_exp(x):\n    m = np.max(x, axis=-1)\n    return m + np.log(np.sum(np.exp(x - m[..., None]), axis=-1))\n",
)
add(
    "ex-04-2",
    "log1p",
    "def log_sum_exp(x):\n    m = np.max(x, -1, keepdims=True)\n    rest = np.sum(np.exp(x - m), -1) - 1.0\n    return np.squeeze(m, -1) + np.log1p(rest)\n",
)
add(
    "ex-04-2",
    "torch",
    "import torch\n\ndef log_sum_exp(x):\n    t = torch.as_tensor(x, dtype=torch.float64)\n    m = t.max(dim=-1).values\n    return (m + torch.log(torch.exp(t - m.unsqueeze(-1)).sum(-1))).numpy()\n",
)
add(
    "ex-04-2",
    "apply_along_axis",
    "import math\n\ndef _lse(z):\n    m = max(z)\n    return m + math.log(sum(math.exp(v - m) for v in z))\n\ndef log_sum_exp(x):\n    return np.apply_along_axis(_lse, -1, np.asarray(x, dtype=float))\n",
)

# ------------------------------------------------------------------------------------ ex-04-3
add(
    "ex-04-3",
    "sqrt",
    "def scaled_scores(q, k):\n    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])\n",
)
add(
    "ex-04-3",
    "einsum",
    "def scaled_scores(q, k):\n    return np.einsum('...ld,...sd->...ls', q, k) / np.sqrt(k.shape[-1])\n",
)
add(
    "ex-04-3",
    "power",
    "def scaled_scores(q, k):\n    d_k = q.shape[-1]\n    return np.matmul(q, np.moveaxis(k, -1, -2)) * np.power(d_k, -0.5)\n",
)
add(
    "ex-04-3",
    "math",
    "import math\n\ndef scaled_scores(q, k):\n    return (q / math.sqrt(q.shape[-1])) @ k.swapaxes(-2, -1)\n",
)
add(
    "ex-04-3",
    "lru_cache scale",
    "import functools, math\n\n@functools.lru_cache(maxsize=None)\ndef inv_sqrt(d):\n    return 1.0 / math.sqrt(d)\n\ndef scaled_scores(q, k):\n    return q @ k.swapaxes(-1, -2) * inv_sqrt(q.shape[-1])\n",
)

# ------------------------------------------------------------------------------------ ex-04-4
add(
    "ex-04-4",
    "all in one",
    "def attention_weights(x, w_q, w_k):\n    s = (x @ w_q) @ np.swapaxes(x @ w_k, -1, -2) / np.sqrt(w_q.shape[-1])\n    e = np.exp(s - s.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n",
)
add(
    "ex-04-4",
    "helpers in the cell",
    "def softmax_rows(s):\n    e = np.exp(s - np.max(s, axis=-1, keepdims=True))\n    return e / np.sum(e, axis=-1, keepdims=True)\n\ndef attention_weights(x, w_q, w_k):\n    d_k = w_q.shape[-1]\n    return softmax_rows(np.einsum('...ik,...jk->...ij', x @ w_q, x @ w_k) / np.sqrt(d_k))\n",
)
add(
    "ex-04-4",
    "NEG_INF constant",
    "def attention_weights(x, w_q, w_k):\n    s = np.matmul(x @ w_q, np.swapaxes(x @ w_k, -1, -2)) / np.sqrt(w_k.shape[-1])\n    s = np.where(np.isnan(s), NEG_INF, s)\n    e = np.exp(s - s.max(-1, keepdims=True))\n    return e / e.sum(-1, keepdims=True)\n",
    "NEG_INF = -np.inf",
)
add(
    "ex-04-4",
    "finfo tiny",
    "TINY = np.finfo(np.float64).tiny\n\ndef attention_weights(x, w_q, w_k):\n    s = (x @ w_q) @ (x @ w_k).swapaxes(-1, -2) / np.sqrt(w_q.shape[-1])\n    e = np.exp(s - s.max(-1, keepdims=True))\n    return e / np.maximum(e.sum(-1, keepdims=True), TINY)\n",
)
add(
    "ex-04-4",
    "torch float64",
    "import torch\n\ndef attention_weights(x, w_q, w_k):\n    X, Wq, Wk = (torch.as_tensor(a, dtype=torch.float64) for a in (x, w_q, w_k))\n    s = (X @ Wq) @ (X @ Wk).transpose(-1, -2) / Wq.shape[-1] ** 0.5\n    e = (s - s.amax(-1, keepdim=True)).exp()\n    return (e / e.sum(-1, keepdim=True)).numpy()\n",
)

# ------------------------------------------------------------------------------------ ex-05-1
add(
    "ex-05-1",
    "arange compare",
    "import torch\n\ndef padding_mask_from_lengths(lengths, max_len):\n    return torch.arange(max_len)[None, :] < lengths[:, None]\n",
)
add(
    "ex-05-1",
    "unsqueeze",
    "import torch\n\ndef padding_mask_from_lengths(lengths, max_len):\n    pos = torch.arange(max_len, device=lengths.device)\n    return pos.unsqueeze(0) < lengths.unsqueeze(1)\n",
)
add(
    "ex-05-1",
    "torch.lt",
    "import torch\n\ndef padding_mask_from_lengths(lengths, max_len):\n    return torch.lt(torch.arange(max_len).expand(len(lengths), max_len), lengths.view(-1, 1))\n",
)
add(
    "ex-05-1",
    "meshgrid",
    "import torch\n\ndef padding_mask_from_lengths(lengths, max_len):\n    L, P = torch.meshgrid(lengths, torch.arange(max_len), indexing='ij')\n    return P < L\n",
)
add(
    "ex-05-1",
    "ones cumsum",
    "import torch\n\ndef padding_mask_from_lengths(lengths, max_len):\n    idx = torch.ones(lengths.shape[0], max_len, dtype=torch.long).cumsum(-1) - 1\n    return (idx < lengths[:, None]).bool()\n",
)

# ------------------------------------------------------------------------------------ ex-05-2
add(
    "ex-05-2",
    "arange compare",
    "import torch\n\ndef build_causal_mask(q_len, k_len):\n    return torch.arange(k_len)[None, :] <= torch.arange(q_len)[:, None]\n",
)
add(
    "ex-05-2",
    "tril",
    "import torch\n\ndef build_causal_mask(q_len, k_len):\n    return torch.tril(torch.ones(q_len, k_len, dtype=torch.bool))\n",
)
add(
    "ex-05-2",
    "meshgrid",
    "import torch\n\ndef build_causal_mask(q_len, k_len):\n    i, j = torch.meshgrid(torch.arange(q_len), torch.arange(k_len), indexing='ij')\n    return j <= i\n",
)
add(
    "ex-05-2",
    "itertools.product",
    "import itertools\nimport torch\n\ndef build_causal_mask(q_len, k_len):\n    m = torch.zeros(q_len, k_len, dtype=torch.bool)\n    for i, j in itertools.product(range(q_len), range(k_len)):\n        m[i, j] = j <= i\n    return m\n",
)
add(
    "ex-05-2",
    "triu negated",
    "import torch\n\ndef build_causal_mask(q_len, k_len):\n    return ~torch.ones(q_len, k_len, dtype=torch.bool).triu(diagonal=1)\n",
)
add(
    "ex-05-2",
    "lru_cache",
    "import functools\nimport torch\n\n@functools.lru_cache(maxsize=64)\ndef _grid(q_len, k_len):\n    return torch.arange(k_len)[None, :] <= torch.arange(q_len)[:, None]\n\ndef build_causal_mask(q_len, k_len):\n    return _grid(q_len, k_len).clone()\n",
)

# ------------------------------------------------------------------------------------ ex-05-3
_MASKED = (
    "    d_k = query.shape[-1]\n"
    "    s = query @ key.transpose(-2, -1) / math.sqrt(d_k)\n"
    "    s = s.masked_fill(~mask, float('-inf'))\n"
    "    m = s.amax(-1, keepdim=True)\n"
    "    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)\n"
    "    e = torch.exp(s - m)\n"
    "    den = e.sum(-1, keepdim=True)\n"
    "    w = torch.where(den > 0, e / den.clamp_min(1e-300), torch.zeros_like(e))\n"
    "    return w @ value, w\n"
)
add(
    "ex-05-3",
    "masked_fill",
    "import math\nimport torch\n\ndef masked_attention(query, key, value, mask):\n" + _MASKED,
)
add(
    "ex-05-3",
    "multiply by mask",
    "import torch\n\ndef masked_attention(query, key, value, mask):\n    s = torch.matmul(query, key.transpose(-1, -2)) / query.shape[-1] ** 0.5\n    s = torch.where(mask, s, torch.full_like(s, -1e30))\n    e = torch.exp(s - s.max(-1, keepdim=True).values) * mask\n    den = e.sum(-1, keepdim=True)\n    w = e / torch.where(den == 0, torch.ones_like(den), den)\n    return w @ value, w\n",
)
add(
    "ex-05-3",
    "NEG_INF constant",
    "import torch\nNEG_INF = float('-inf')\n\ndef masked_attention(query, key, value, mask):\n    s = torch.einsum('...ld,...sd->...ls', query, key) / query.size(-1) ** 0.5\n    s = s.masked_fill(mask.logical_not(), NEG_INF)\n    m = torch.nan_to_num(s.amax(-1, keepdim=True), neginf=0.0)\n    e = (s - m).exp()\n    den = e.sum(-1, keepdim=True)\n    w = torch.where(den > 0, e / den, torch.zeros_like(e))\n    return torch.einsum('...ls,...sv->...lv', w, value), w\n",
)
add(
    "ex-05-3",
    "typing + helper",
    "from typing import Tuple\nimport torch\n\ndef _weights(s, mask):\n    e = torch.exp(s - s.amax(-1, keepdim=True).detach()) * mask.to(s.dtype)\n    den = e.sum(-1, keepdim=True)\n    return e / den.masked_fill(den == 0, 1.0)\n\ndef masked_attention(query, key, value, mask) -> Tuple[torch.Tensor, torch.Tensor]:\n    s = (query @ key.mT) / query.shape[-1] ** 0.5\n    s = torch.where(mask, s, s.new_tensor(-1e9))\n    w = _weights(s, mask)\n    return w @ value, w\n",
)
add(
    "ex-05-3",
    "dataclass result",
    "import math\nfrom dataclasses import dataclass\nimport torch\n\n@dataclass\nclass Result:\n    output: torch.Tensor\n    weights: torch.Tensor\n\ndef masked_attention(query, key, value, mask):\n    s = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])\n    keep = mask.expand(s.shape)\n    s = s.masked_fill(~keep, -math.inf)\n    m = s.max(dim=-1, keepdim=True).values.nan_to_num(neginf=0.0)\n    e = torch.exp(s - m)\n    den = e.sum(-1, keepdim=True)\n    w = torch.where(den > 0, e / torch.where(den > 0, den, torch.ones_like(den)), torch.zeros_like(e))\n    r = Result(w @ value, w)\n    return r.output, r.weights\n",
)

# ------------------------------------------------------------------------------------ ex-06-1
add(
    "ex-06-1",
    "view + transpose",
    "def split_heads(x, num_heads):\n    B, L, D = x.shape\n    return x.view(B, L, num_heads, D // num_heads).transpose(1, 2)\n",
)
add(
    "ex-06-1",
    "reshape + permute",
    "def split_heads(x, num_heads):\n    B, L, D = x.shape\n    return x.reshape(B, L, num_heads, -1).permute(0, 2, 1, 3)\n",
)
add(
    "ex-06-1",
    "unflatten",
    "def split_heads(x, num_heads):\n    return x.unflatten(-1, (num_heads, -1)).transpose(-3, -2)\n",
)
add(
    "ex-06-1",
    "chunk + stack",
    "import torch\n\ndef split_heads(x, num_heads):\n    return torch.stack(torch.chunk(x, num_heads, dim=-1), dim=1)\n",
)
add(
    "ex-06-1",
    "movedim",
    "import torch\n\ndef split_heads(x, num_heads):\n    B, L, D = x.shape\n    return torch.movedim(x.reshape(B, L, num_heads, D // num_heads), 2, 1)\n",
)

# ------------------------------------------------------------------------------------ ex-06-2
add(
    "ex-06-2",
    "transpose + reshape",
    "def merge_heads(x):\n    B, h, L, d = x.shape\n    return x.transpose(1, 2).reshape(B, L, h * d)\n",
)
add(
    "ex-06-2",
    "permute + contiguous view",
    "def merge_heads(x):\n    B, h, L, d = x.shape\n    return x.permute(0, 2, 1, 3).contiguous().view(B, L, h * d)\n",
)
add("ex-06-2", "cat", "import torch\n\ndef merge_heads(x):\n    return torch.cat(x.unbind(dim=1), dim=-1)\n")
add("ex-06-2", "flatten", "def merge_heads(x):\n    return x.transpose(1, 2).flatten(start_dim=2)\n")
add(
    "ex-06-2",
    "einsum-free list",
    "import torch\n\ndef merge_heads(x):\n    heads = [x[:, j] for j in range(x.shape[1])]\n    return torch.cat(heads, -1)\n",
)

# ------------------------------------------------------------------------------------ ex-06-3
_SPLIT = "def split_heads(x, num_heads):\n    B, L, D = x.shape\n    return x.view(B, L, num_heads, D // num_heads).transpose(1, 2)\n"
_MERGE = "def merge_heads(x):\n    B, h, L, d = x.shape\n    return x.transpose(1, 2).reshape(B, L, h * d)\n"
add(
    "ex-06-3",
    "own split/merge from earlier cells",
    "import math\nimport torch\n\ndef multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads):\n    q = split_heads(x @ w_q, num_heads)\n    k = split_heads(x @ w_k, num_heads)\n    v = split_heads(x @ w_v, num_heads)\n    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])\n    w = torch.exp(s - s.amax(-1, keepdim=True))\n    w = w / w.sum(-1, keepdim=True)\n    return merge_heads(w @ v) @ w_o\n",
    _SPLIT,
    _MERGE,
)
add(
    "ex-06-3",
    "einsum",
    "import torch\n\ndef multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads):\n    B, L, _ = x.shape\n    h = num_heads\n    q = (x @ w_q).reshape(B, L, h, -1)\n    k = (x @ w_k).reshape(B, L, h, -1)\n    v = (x @ w_v).reshape(B, L, h, -1)\n    s = torch.einsum('blhd,bmhd->bhlm', q, k) / q.shape[-1] ** 0.5\n    p = (s - s.amax(-1, keepdim=True)).exp()\n    p = p / p.sum(-1, keepdim=True)\n    o = torch.einsum('bhlm,bmhd->blhd', p, v).reshape(B, L, -1)\n    return o @ w_o\n",
)
add(
    "ex-06-3",
    "loop over heads",
    "import torch\n\ndef multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads):\n    q, k, v = x @ w_q, x @ w_k, x @ w_v\n    dk, dv = q.shape[-1] // num_heads, v.shape[-1] // num_heads\n    outs = []\n    for j in range(num_heads):\n        qj, kj, vj = q[..., j*dk:(j+1)*dk], k[..., j*dk:(j+1)*dk], v[..., j*dv:(j+1)*dv]\n        s = qj @ kj.transpose(-1, -2) / dk ** 0.5\n        e = torch.exp(s - s.max(-1, keepdim=True).values)\n        outs.append((e / e.sum(-1, keepdim=True)) @ vj)\n    return torch.cat(outs, -1) @ w_o\n",
)
add(
    "ex-06-3",
    "library split/merge",
    "import torch\nfrom attnlib import split_heads as sh, merge_heads as mh\n\ndef multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads):\n    q, k, v = (sh(x @ w, num_heads) for w in (w_q, w_k, w_v))\n    s = q @ k.mT / q.shape[-1] ** 0.5\n    w = (s - s.amax(-1, keepdim=True)).exp()\n    return mh((w / w.sum(-1, keepdim=True)) @ v) @ w_o\n",
)
add(
    "ex-06-3",
    "class with methods",
    "import math\nimport torch\n\nclass Heads:\n    def __init__(self, n):\n        self.n = n\n\n    def split(self, t):\n        B, L, D = t.shape\n        return t.reshape(B, L, self.n, D // self.n).transpose(1, 2)\n\n    def merge(self, t):\n        return t.transpose(1, 2).flatten(2)\n\ndef multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads):\n    H = Heads(num_heads)\n    q, k, v = H.split(x @ w_q), H.split(x @ w_k), H.split(x @ w_v)\n    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n    w = torch.exp(s - s.amax(-1, keepdim=True))\n    w = w / w.sum(-1, keepdim=True)\n    return H.merge(w @ v) @ w_o\n",
)

# ------------------------------------------------------------------------------------ ex-09-1
add(
    "ex-09-1",
    "arange + pow",
    "import torch\n\ndef sinusoidal_table(n_positions, d_model):\n    p = torch.arange(n_positions, dtype=torch.float64)[:, None]\n    k = torch.arange(0, d_model, 2, dtype=torch.float64)\n    angle = p / 10000 ** (k / d_model)\n    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)\n    pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = torch.cos(angle)\n    return pe\n",
)
add(
    "ex-09-1",
    "exp log",
    "import math\nimport torch\n\ndef sinusoidal_table(n_positions, d_model):\n    pos = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)\n    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))\n    pe = torch.empty(n_positions, d_model, dtype=torch.float64)\n    pe[:, ::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)\n    return pe\n",
)
add(
    "ex-09-1",
    "stack interleave",
    "import torch\n\ndef sinusoidal_table(n_positions, d_model):\n    p = torch.arange(n_positions, dtype=torch.float64)\n    inv = 10000.0 ** (-torch.arange(d_model // 2, dtype=torch.float64) * 2 / d_model)\n    a = torch.outer(p, inv)\n    return torch.stack([a.sin(), a.cos()], dim=-1).reshape(n_positions, d_model)\n",
)
add(
    "ex-09-1",
    "numpy then torch",
    "import numpy as np\nimport torch\n\ndef sinusoidal_table(n_positions, d_model):\n    p = np.arange(n_positions)[:, None]\n    two_k = np.arange(0, d_model, 2)[None, :]\n    ang = p / np.power(10000.0, two_k / d_model)\n    pe = np.zeros((n_positions, d_model))\n    pe[:, 0::2], pe[:, 1::2] = np.sin(ang), np.cos(ang)\n    return torch.from_numpy(pe)\n",
)
add(
    "ex-09-1",
    "itertools.product",
    "import itertools, math\nimport torch\n\ndef sinusoidal_table(n_positions, d_model):\n    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)\n    for p, k in itertools.product(range(n_positions), range(d_model // 2)):\n        a = p / 10000 ** (2 * k / d_model)\n        pe[p, 2 * k], pe[p, 2 * k + 1] = math.sin(a), math.cos(a)\n    return pe\n",
)

# ------------------------------------------------------------------------------------ ex-09-2
add(
    "ex-09-2",
    "even/odd slices",
    "import torch\n\ndef rope(x):\n    L, E = x.shape[-2], x.shape[-1]\n    theta = 10000.0 ** (-torch.arange(0, E, 2, dtype=torch.float64) / E)\n    phi = torch.arange(L, dtype=torch.float64)[:, None] * theta\n    c, s = phi.cos().to(x.dtype), phi.sin().to(x.dtype)\n    a, b = x[..., 0::2], x[..., 1::2]\n    out = torch.empty_like(x)\n    out[..., 0::2] = a * c - b * s\n    out[..., 1::2] = a * s + b * c\n    return out\n",
)
add(
    "ex-09-2",
    "stack + flatten",
    "import torch\n\ndef rope(x):\n    L, E = x.shape[-2:]\n    k = torch.arange(E // 2, dtype=torch.float64)\n    phi = torch.outer(torch.arange(L, dtype=torch.float64), 10000.0 ** (-2 * k / E))\n    cos, sin = torch.cos(phi).to(x.dtype), torch.sin(phi).to(x.dtype)\n    pairs = x.unflatten(-1, (E // 2, 2))\n    a, b = pairs[..., 0], pairs[..., 1]\n    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)\n",
)
add(
    "ex-09-2",
    "complex numbers",
    "import torch\n\ndef rope(x):\n    L, E = x.shape[-2], x.shape[-1]\n    theta = 10000.0 ** (-torch.arange(0, E, 2, dtype=torch.float64) / E)\n    phi = torch.arange(L, dtype=torch.float64)[:, None] * theta\n    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], E // 2, 2).contiguous())\n    r = torch.view_as_real(z * torch.polar(torch.ones_like(phi), phi))\n    return r.reshape(x.shape).to(x.dtype)\n",
)
add(
    "ex-09-2",
    "rotate-half matrix style",
    "import torch\n\ndef rope(x):\n    L, E = x.shape[-2:]\n    inv = 1.0 / 10000 ** (torch.arange(0, E, 2).double() / E)\n    ang = torch.arange(L).double()[:, None] * inv[None, :]\n    cos = ang.cos().repeat_interleave(2, -1).to(x.dtype)\n    sin = ang.sin().repeat_interleave(2, -1).to(x.dtype)\n    a, b = x[..., ::2], x[..., 1::2]\n    turned = torch.stack((-b, a), dim=-1).reshape(x.shape)\n    return x * cos + turned * sin\n",
)
add(
    "ex-09-2",
    "float64 then back, numpy angles",
    "import numpy as np\nimport torch\n\ndef rope(x):\n    L, E = x.shape[-2], x.shape[-1]\n    phi = torch.from_numpy(np.arange(L)[:, None] * 10000.0 ** (-np.arange(0, E, 2) / E))\n    x64 = x.double()\n    a, b = x64[..., 0::2], x64[..., 1::2]\n    out = torch.stack([a * phi.cos() - b * phi.sin(), a * phi.sin() + b * phi.cos()], dim=-1)\n    return out.reshape(x.shape).to(x.dtype)\n",
)

# ------------------------------------------------------------------------------------ ex-09-3
add(
    "ex-09-3",
    "broadcast",
    "import torch\n\ndef alibi(num_heads, L):\n    r = torch.arange(num_heads, dtype=torch.float32)\n    slope = 2.0 ** (-8.0 * (r + 1) / num_heads)\n    i = torch.arange(L)[:, None]\n    j = torch.arange(L)[None, :]\n    bias = -slope[:, None, None] * (i - j).float()\n    return bias.masked_fill(j > i, float('-inf'))\n",
)
add(
    "ex-09-3",
    "where + meshgrid",
    "import torch\n\ndef alibi(num_heads, L):\n    i, j = torch.meshgrid(torch.arange(L), torch.arange(L), indexing='ij')\n    slopes = torch.tensor([2 ** (-8 * (r + 1) / num_heads) for r in range(num_heads)], dtype=torch.float32)\n    d = (i - j).to(torch.float32)\n    out = -slopes.view(-1, 1, 1) * d\n    return torch.where(j <= i, out, torch.full_like(out, -torch.inf))\n",
)
add(
    "ex-09-3",
    "triu -inf",
    "import math\nimport torch\n\ndef alibi(num_heads, L):\n    pos = torch.arange(L, dtype=torch.float32)\n    dist = pos[:, None] - pos[None, :]\n    upper = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)\n    heads = []\n    for r in range(num_heads):\n        h = -math.pow(2, -8 * (r + 1) / num_heads) * dist\n        heads.append(h.masked_fill(upper, -math.inf))\n    return torch.stack(heads)\n",
)
add(
    "ex-09-3",
    "NEG_INF + numpy",
    "import numpy as np\nimport torch\nNEG_INF = -np.inf\n\ndef alibi(num_heads, L):\n    slopes = 2.0 ** (-8.0 * np.arange(1, num_heads + 1) / num_heads)\n    i = np.arange(L)[:, None]\n    j = np.arange(L)[None, :]\n    b = -slopes[:, None, None] * (i - j)\n    b = np.where(j > i, NEG_INF, b)\n    return torch.tensor(b, dtype=torch.float32)\n",
)
add(
    "ex-09-3",
    "tril mask",
    "import torch\n\ndef alibi(num_heads, L):\n    idx = torch.arange(L)\n    rel = (idx.view(L, 1) - idx.view(1, L)).float()\n    slope = torch.pow(2.0, -8.0 * torch.arange(1, num_heads + 1).float() / num_heads)\n    keep = torch.tril(torch.ones(L, L)).bool()\n    return torch.where(keep, -slope[:, None, None] * rel, torch.tensor(float('-inf')))\n",
)

# ------------------------------------------------------------------------------------ ex-09-4
add(
    "ex-09-4",
    "halves",
    "import torch\n\ndef rope_halves(x, positions):\n    E = x.shape[-1]\n    half = E // 2\n    theta = 10000.0 ** (-2 * torch.arange(half, dtype=torch.float64) / E)\n    phi = positions.to(torch.float64)[:, None] * theta\n    c, s = phi.cos().to(x.dtype), phi.sin().to(x.dtype)\n    a, b = x[..., :half], x[..., half:]\n    return torch.cat([a * c - b * s, a * s + b * c], dim=-1)\n",
)
add(
    "ex-09-4",
    "rotate_half helper",
    "import torch\n\ndef rotate_half(t):\n    a, b = t.chunk(2, dim=-1)\n    return torch.cat((-b, a), dim=-1)\n\ndef rope_halves(x, positions):\n    E = x.shape[-1]\n    inv = 1.0 / (10000 ** (torch.arange(0, E, 2, dtype=torch.float64) / E))\n    ang = torch.outer(positions.double(), inv)\n    ang = torch.cat((ang, ang), dim=-1)\n    return x * ang.cos().to(x.dtype) + rotate_half(x) * ang.sin().to(x.dtype)\n",
)
add(
    "ex-09-4",
    "split",
    "import torch\n\ndef rope_halves(x, positions):\n    E = x.size(-1)\n    a, b = torch.split(x, E // 2, dim=-1)\n    k = torch.arange(E // 2, dtype=torch.float64)\n    phi = positions.double().unsqueeze(-1) * torch.pow(10000.0, -2.0 * k / E)\n    cos, sin = torch.cos(phi).to(x.dtype), torch.sin(phi).to(x.dtype)\n    return torch.cat((a * cos - b * sin, a * sin + b * cos), -1)\n",
)
add(
    "ex-09-4",
    "in float64",
    "import torch\n\ndef rope_halves(x, positions):\n    dt = x.dtype\n    x = x.to(torch.float64)\n    E = x.shape[-1]\n    h = E // 2\n    theta = torch.tensor([10000.0 ** (-2 * k / E) for k in range(h)], dtype=torch.float64)\n    phi = positions.to(torch.float64).reshape(-1, 1) * theta.reshape(1, -1)\n    out = torch.empty_like(x)\n    out[..., :h] = x[..., :h] * phi.cos() - x[..., h:] * phi.sin()\n    out[..., h:] = x[..., :h] * phi.sin() + x[..., h:] * phi.cos()\n    return out.to(dt)\n",
)
add(
    "ex-09-4",
    "dataclass of tables",
    "from dataclasses import dataclass\nimport torch\n\n@dataclass(frozen=True)\nclass Angles:\n    cos: torch.Tensor\n    sin: torch.Tensor\n\ndef angles(positions, E, dtype):\n    inv = 10000.0 ** (-torch.arange(0, E, 2, dtype=torch.float64) / E)\n    phi = positions.double()[:, None] * inv\n    return Angles(phi.cos().to(dtype), phi.sin().to(dtype))\n\ndef rope_halves(x, positions):\n    t = angles(positions, x.shape[-1], x.dtype)\n    a, b = x.chunk(2, -1)\n    return torch.cat([a * t.cos - b * t.sin, a * t.sin + b * t.cos], -1)\n",
)

# ------------------------------------------------------------------------------------ ex-11-1
add(
    "ex-11-1",
    "reshape + permute",
    "def patchify(images, patch_size):\n    B, C, H, W = images.shape\n    p = patch_size\n    x = images.reshape(B, C, H // p, p, W // p, p)\n    x = x.permute(0, 2, 4, 1, 3, 5)\n    return x.reshape(B, (H // p) * (W // p), C * p * p)\n",
)
add(
    "ex-11-1",
    "tensor.unfold method",
    "def patchify(images, patch_size):\n    p = patch_size\n    B, C = images.shape[:2]\n    t = images.unfold(2, p, p).unfold(3, p, p)  # (B, C, H/p, W/p, p, p)\n    return t.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * p * p)\n",
)
add(
    "ex-11-1",
    "loops + stack",
    "import torch\n\ndef patchify(images, patch_size):\n    p = patch_size\n    B, C, H, W = images.shape\n    pieces = [images[:, :, r:r + p, c:c + p].reshape(B, -1) for r in range(0, H, p) for c in range(0, W, p)]\n    return torch.stack(pieces, dim=1)\n",
)
add(
    "ex-11-1",
    "einops-free view",
    "def patchify(images, patch_size):\n    B, C, H, W = images.shape\n    p = patch_size\n    gh, gw = H // p, W // p\n    return images.view(B, C, gh, p, gw, p).permute(0, 2, 4, 1, 3, 5).contiguous().view(B, gh * gw, -1)\n",
)
add(
    "ex-11-1",
    "itertools.product",
    "import itertools\nimport torch\n\ndef patchify(images, patch_size):\n    p = patch_size\n    B, C, H, W = images.shape\n    rows, cols = range(0, H, p), range(0, W, p)\n    return torch.stack([images[..., r:r + p, c:c + p].flatten(1) for r, c in itertools.product(rows, cols)], 1)\n",
)

# ------------------------------------------------------------------------------------ ex-11-2
add(
    "ex-11-2",
    "reshape + permute",
    "def unpatchify(patches, patch_size, height, width):\n    B, N, D = patches.shape\n    p = patch_size\n    C = D // (p * p)\n    x = patches.reshape(B, height // p, width // p, C, p, p)\n    return x.permute(0, 3, 1, 4, 2, 5).reshape(B, C, height, width)\n",
)
add(
    "ex-11-2",
    "loop fill",
    "import torch\n\ndef unpatchify(patches, patch_size, height, width):\n    B, N, D = patches.shape\n    p = patch_size\n    C = D // (p * p)\n    out = patches.new_zeros(B, C, height, width)\n    per_row = width // p\n    for n in range(N):\n        r, c = divmod(n, per_row)\n        out[:, :, r * p:(r + 1) * p, c * p:(c + 1) * p] = patches[:, n].reshape(B, C, p, p)\n    return out\n",
)
add(
    "ex-11-2",
    "view + contiguous",
    "def unpatchify(patches, patch_size, height, width):\n    p = patch_size\n    B = patches.shape[0]\n    C = patches.shape[-1] // p // p\n    gh, gw = height // p, width // p\n    x = patches.contiguous().view(B, gh, gw, C, p, p)\n    return x.permute(0, 3, 1, 4, 2, 5).contiguous().view(B, C, height, width)\n",
)
add(
    "ex-11-2",
    "cat rows",
    "import torch\n\ndef unpatchify(patches, patch_size, height, width):\n    p = patch_size\n    B, N, D = patches.shape\n    C = D // (p * p)\n    gw = width // p\n    tiles = patches.reshape(B, N, C, p, p)\n    rows = [torch.cat([tiles[:, r * gw + c] for c in range(gw)], dim=-1) for r in range(height // p)]\n    return torch.cat(rows, dim=-2)\n",
)
add(
    "ex-11-2",
    "unflatten + movedim",
    "import torch\n\ndef unpatchify(patches, patch_size, height, width):\n    p = patch_size\n    C = patches.shape[-1] // (p * p)\n    x = patches.unflatten(1, (height // p, width // p)).unflatten(-1, (C, p, p))\n    x = torch.movedim(x, 3, 1)  # (B, C, gh, gw, p, p)\n    return x.transpose(3, 4).reshape(x.shape[0], C, height, width)\n",
)

# ------------------------------------------------------------------------------------ ex-11-3
add(
    "ex-11-3",
    "cat + add",
    "import torch\n\ndef vit_tokens(patch_vectors, cls_token, positions):\n    B = patch_vectors.shape[0]\n    cls = cls_token.expand(B, 1, -1)\n    return torch.cat([cls, patch_vectors], dim=1) + positions\n",
)
add(
    "ex-11-3",
    "repeat",
    "import torch\n\ndef vit_tokens(patch_vectors, cls_token, positions):\n    B, N, D = patch_vectors.shape\n    cls = cls_token.reshape(1, 1, D).repeat(B, 1, 1)\n    return torch.cat((cls, patch_vectors), 1) + positions.unsqueeze(0)\n",
)
add(
    "ex-11-3",
    "new_empty fill",
    "def vit_tokens(patch_vectors, cls_token, positions):\n    B, N, D = patch_vectors.shape\n    out = patch_vectors.new_empty(B, N + 1, D)\n    out[:, 0] = cls_token + positions[0]\n    out[:, 1:] = patch_vectors + positions[1:]\n    return out\n",
)
add(
    "ex-11-3",
    "broadcast_to",
    "import torch\n\ndef vit_tokens(patch_vectors, cls_token, positions):\n    B, N, D = patch_vectors.shape\n    first = torch.broadcast_to(cls_token[None, None, :], (B, 1, D))\n    seq = torch.cat([first, patch_vectors], dim=-2)\n    return seq + positions[None]\n",
)
add(
    "ex-11-3",
    "separate sums",
    "import torch\n\ndef vit_tokens(patch_vectors, cls_token, positions):\n    head = (cls_token + positions[0]).expand(patch_vectors.shape[0], 1, -1)\n    body = patch_vectors + positions[1:]\n    return torch.cat([head, body], 1)\n",
)

# ------------------------------------------------------------------------------------ ex-11-4
add(
    "ex-11-4",
    "loop",
    "import torch\n\ndef rollout(weights):\n    L = weights.shape[-1]\n    eye = torch.eye(L, dtype=weights.dtype)\n    result = None\n    for layer in weights:\n        A = 0.5 * layer.mean(dim=1) + 0.5 * eye\n        result = A if result is None else A @ result\n    return result\n",
)
add(
    "ex-11-4",
    "functools.reduce",
    "import functools\nimport torch\n\ndef rollout(weights):\n    eye = torch.eye(weights.shape[-1], dtype=weights.dtype)\n    mats = [0.5 * w.mean(1) + 0.5 * eye for w in weights]\n    return functools.reduce(lambda acc, a: a @ acc, mats)\n",
)
add(
    "ex-11-4",
    "vectorised heads mean",
    "import torch\n\ndef rollout(weights):\n    A = 0.5 * weights.mean(dim=2) + 0.5 * torch.eye(weights.shape[-1], dtype=weights.dtype)\n    out = A[0]\n    for n in range(1, A.shape[0]):\n        out = torch.bmm(A[n], out)\n    return out\n",
)
add(
    "ex-11-4",
    "identity start",
    "import torch\n\ndef rollout(weights):\n    B, L = weights.shape[1], weights.shape[-1]\n    I = torch.eye(L, dtype=weights.dtype).expand(B, L, L)\n    R = I.clone()\n    for W in weights.unbind(0):\n        R = (0.5 * W.mean(1) + 0.5 * I) @ R\n    return R\n",
)
add(
    "ex-11-4",
    "diagonal method",
    "import torch\n\ndef rollout(weights):\n    R = None\n    for w in weights:\n        A = 0.5 * w.mean(dim=1)\n        A.diagonal(dim1=-2, dim2=-1).add_(0.5)\n        R = A if R is None else torch.matmul(A, R)\n    return R\n",
)

# ------------------------------------------------------------------------------------ ex-12-1
add(
    "ex-12-1",
    "numpy where",
    "def learning_rates(peak_lr, warmup_steps, total_steps, min_lr):\n    s = np.arange(total_steps, dtype=float)\n    w = warmup_steps\n    warm = peak_lr * (s + 1) / max(w, 1)\n    p = (s - w) / (total_steps - w) if total_steps > w else s * 0\n    cos = min_lr + (peak_lr - min_lr) * 0.5 * (1 + np.cos(np.pi * p))\n    return np.where(s < w, warm, cos)\n",
)
add(
    "ex-12-1",
    "python list",
    "import math\n\ndef learning_rates(peak_lr, warmup_steps, total_steps, min_lr):\n    out = []\n    for s in range(total_steps):\n        if s < warmup_steps:\n            out.append(peak_lr * (s + 1) / warmup_steps)\n        else:\n            p = (s - warmup_steps) / (total_steps - warmup_steps)\n            out.append(min_lr + (peak_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * p)))\n    return np.array(out, dtype=float)\n",
)
add(
    "ex-12-1",
    "dataclass schedule",
    "import math\nfrom dataclasses import dataclass\n\n@dataclass\nclass Schedule:\n    peak: float\n    warmup: int\n    total: int\n    floor: float\n\n    def at(self, s):\n        if s < self.warmup:\n            return self.peak * (s + 1) / self.warmup\n        p = (s - self.warmup) / (self.total - self.warmup)\n        return self.floor + (self.peak - self.floor) * 0.5 * (1 + math.cos(math.pi * p))\n\ndef learning_rates(peak_lr, warmup_steps, total_steps, min_lr):\n    sched = Schedule(peak_lr, warmup_steps, total_steps, min_lr)\n    return np.array([sched.at(s) for s in range(total_steps)])\n",
)
add(
    "ex-12-1",
    "torch",
    "import math\nimport torch\n\ndef learning_rates(peak_lr, warmup_steps, total_steps, min_lr):\n    s = torch.arange(total_steps, dtype=torch.float64)\n    w = warmup_steps\n    rates = torch.empty(total_steps, dtype=torch.float64)\n    n_w = min(w, total_steps)\n    rates[:n_w] = peak_lr * (s[:n_w] + 1) / max(w, 1)\n    p = (s[n_w:] - w) / (total_steps - w)\n    rates[n_w:] = min_lr + (peak_lr - min_lr) * 0.5 * (1 + torch.cos(math.pi * p))\n    return rates\n",
)
add(
    "ex-12-1",
    "lambdas + concatenate",
    "import math\n\nwarm = lambda s, w, peak: peak * (s + 1) / w\ncosine = lambda p, peak, low: low + (peak - low) * 0.5 * (1 + np.cos(math.pi * p))\n\ndef learning_rates(peak_lr, warmup_steps, total_steps, min_lr):\n    w = min(warmup_steps, total_steps)\n    first = warm(np.arange(w), warmup_steps, peak_lr) if w else np.zeros(0)\n    rest = np.arange(w, total_steps)\n    second = cosine((rest - warmup_steps) / max(total_steps - warmup_steps, 1), peak_lr, min_lr)\n    return np.concatenate([first, second]).astype(float)\n",
)

# ------------------------------------------------------------------------------------ ex-12-2
add(
    "ex-12-2",
    "topk threshold",
    "import torch\n\ndef top_k_logits(logits, k):\n    V = logits.shape[-1]\n    if k >= V:\n        return logits.clone()\n    kth = torch.topk(logits, k, dim=-1).values[..., -1:]\n    return logits.masked_fill(logits < kth, float('-inf'))\n",
)
add(
    "ex-12-2",
    "kthvalue",
    "import torch\n\ndef top_k_logits(logits, k):\n    V = logits.size(-1)\n    k = min(k, V)\n    kth = torch.kthvalue(logits, V - k + 1, dim=-1, keepdim=True).values\n    return torch.where(logits >= kth, logits, torch.full_like(logits, -torch.inf))\n",
)
add(
    "ex-12-2",
    "sort",
    "import torch\n\ndef top_k_logits(logits, k):\n    k = min(k, logits.shape[-1])\n    sorted_vals, _ = torch.sort(logits, dim=-1, descending=True)\n    kth = sorted_vals[..., k - 1].unsqueeze(-1)\n    out = logits.clone()\n    out[out < kth] = float('-inf')\n    return out\n",
)
add(
    "ex-12-2",
    "NEG_INF constant",
    "import torch\nNEG_INF = float('-inf')\n\ndef top_k_logits(logits, k):\n    if k >= logits.shape[-1]:\n        return logits.clone()\n    threshold = logits.topk(k, dim=-1).values.amin(dim=-1, keepdim=True)\n    return logits.masked_fill(logits < threshold, NEG_INF)\n",
)
add(
    "ex-12-2",
    "rows loop",
    "import torch\n\ndef top_k_logits(logits, k):\n    flat = logits.reshape(-1, logits.shape[-1])\n    out = torch.full_like(flat, float('-inf'))\n    for i, row in enumerate(flat):\n        kth = torch.sort(row, descending=True).values[min(k, row.numel()) - 1]\n        keep = row >= kth\n        out[i, keep] = row[keep]\n    return out.reshape(logits.shape)\n",
)

# ------------------------------------------------------------------------------------ ex-12-3
add(
    "ex-12-3",
    "diagonal method",
    "def induction_score(weights):\n    T = weights.shape[-1] // 2\n    return weights[..., T:, 1:T + 1].diagonal(dim1=-2, dim2=-1).mean(-1)\n",
)
add(
    "ex-12-3",
    "torch.diagonal offset",
    "import torch\n\ndef induction_score(weights):\n    T = weights.shape[-1] // 2\n    return torch.diagonal(weights, offset=-(T - 1), dim1=-2, dim2=-1)[..., 1:].mean(-1)\n",
)
add(
    "ex-12-3",
    "gather",
    "import torch\n\ndef induction_score(weights):\n    n = weights.shape[-1]\n    T = n // 2\n    q = torch.arange(T, n)\n    return weights[..., q, q - T + 1].mean(dim=-1)\n",
)
add(
    "ex-12-3",
    "loop",
    "import torch\n\ndef induction_score(weights):\n    T = weights.shape[-1] // 2\n    total = 0\n    for t in range(T, 2 * T):\n        total = total + weights[..., t, t - T + 1]\n    return total / T\n",
)
add(
    "ex-12-3",
    "mask multiply",
    "import torch\n\ndef induction_score(weights):\n    n = weights.shape[-1]\n    T = n // 2\n    target = torch.zeros(n, n, dtype=weights.dtype)\n    rows = torch.arange(T, n)\n    target[rows, rows - T + 1] = 1.0 / T\n    return (weights * target).sum(dim=(-2, -1))\n",
)

# ------------------------------------------------------------------------------------ ex-08-1
add(
    "ex-08-1",
    "guarded",
    "def online_softmax_step(m, l, block):\n    m_new = max(m, float(np.max(block))) if len(block) else m\n    if m_new == -np.inf:\n        return m_new, 0.0\n    return m_new, l * np.exp(m - m_new) + float(np.sum(np.exp(block - m_new)))\n",
)
add(
    "ex-08-1",
    "math",
    "import math\n\ndef online_softmax_step(m, l, block):\n    m_new = max([m, *[float(b) for b in block]])\n    if math.isinf(m_new) and m_new < 0:\n        return m_new, 0.0\n    old = l * math.exp(m - m_new) if l else 0.0\n    return m_new, old + sum(math.exp(float(b) - m_new) for b in block)\n",
)
add(
    "ex-08-1",
    "np.maximum",
    "def online_softmax_step(m, l, block):\n    m_new = float(np.maximum(m, block.max(initial=-np.inf)))\n    if np.isneginf(m_new):\n        return m_new, float(l)\n    return m_new, float(l * np.exp(m - m_new) + np.exp(block - m_new).sum())\n",
)

# ------------------------------------------------------------------------------------ ex-07-1
add(
    "ex-07-1",
    "masked_fill",
    "import math\nimport torch\n\ndef cross_attention(decoder_states, encoder_states, w_q, w_k, w_v, source_mask):\n    q, k, v = decoder_states @ w_q, encoder_states @ w_k, encoder_states @ w_v\n    s = q @ k.transpose(-1, -2) / math.sqrt(w_q.shape[-1])\n    s = s.masked_fill(~source_mask[:, None, :], float('-inf'))\n    e = torch.exp(s - s.amax(-1, keepdim=True))\n    w = e / e.sum(-1, keepdim=True)\n    return w @ v, w\n",
)
add(
    "ex-07-1",
    "einsum + where",
    "import torch\n\ndef cross_attention(decoder_states, encoder_states, w_q, w_k, w_v, source_mask):\n    q = torch.einsum('btd,dk->btk', decoder_states, w_q)\n    k = torch.einsum('bse,ek->bsk', encoder_states, w_k)\n    v = torch.einsum('bse,ev->bsv', encoder_states, w_v)\n    s = torch.einsum('btk,bsk->bts', q, k) / q.shape[-1] ** 0.5\n    s = torch.where(source_mask.unsqueeze(1), s, torch.tensor(float('-inf'), dtype=s.dtype))\n    w = (s - s.max(-1, keepdim=True).values).exp()\n    w = w / w.sum(-1, keepdim=True)\n    return torch.einsum('bts,bsv->btv', w, v), w\n",
)
add(
    "ex-07-1",
    "typing + helper",
    "from typing import Tuple\nimport torch\n\ndef softmax_last(s):\n    e = torch.exp(s - s.amax(dim=-1, keepdim=True))\n    return e / e.sum(dim=-1, keepdim=True)\n\ndef cross_attention(decoder_states, encoder_states, w_q, w_k, w_v, source_mask) -> Tuple[torch.Tensor, torch.Tensor]:\n    q = decoder_states @ w_q\n    k = encoder_states @ w_k\n    scores = torch.bmm(q, k.transpose(1, 2)) / w_k.shape[1] ** 0.5\n    w = softmax_last(scores.masked_fill(source_mask.logical_not().unsqueeze(1), -torch.inf))\n    return torch.bmm(w, encoder_states @ w_v), w\n",
)

# ------------------------------------------------------------------------------------ ex-07-2
add(
    "ex-07-2",
    "arange compare",
    "import torch\n\ndef source_mask(src_lengths, src_len):\n    return (torch.arange(src_len)[None, :] < src_lengths[:, None])[:, None, None, :]\n",
)
add(
    "ex-07-2",
    "view",
    "import torch\n\ndef source_mask(src_lengths, src_len):\n    B = src_lengths.shape[0]\n    pos = torch.arange(src_len).view(1, 1, 1, src_len)\n    return pos < src_lengths.view(B, 1, 1, 1)\n",
)
add(
    "ex-07-2",
    "meshgrid",
    "import torch\n\ndef source_mask(src_lengths, src_len):\n    L, P = torch.meshgrid(src_lengths, torch.arange(src_len), indexing='ij')\n    return (P < L).unsqueeze(1).unsqueeze(1)\n",
)

# ------------------------------------------------------------------------------------ ex-08-2
add(
    "ex-08-2",
    "as the formulas",
    "import math\nimport torch\n\ndef tile_update(m, l, acc, q_tile, k_tile, v_tile):\n    E = q_tile @ k_tile.transpose(-1, -2) / math.sqrt(q_tile.shape[-1])\n    m_new = torch.maximum(m, E.amax(-1, keepdim=True))\n    c = torch.exp(m - m_new)\n    P = torch.exp(E - m_new)\n    return m_new, c * l + P.sum(-1, keepdim=True), c * acc + P @ v_tile\n",
)
add(
    "ex-08-2",
    "einsum",
    "import torch\n\ndef tile_update(m, l, acc, q_tile, k_tile, v_tile):\n    E = torch.einsum('...qd,...kd->...qk', q_tile, k_tile) * q_tile.shape[-1] ** -0.5\n    m2 = torch.max(m, E.max(dim=-1, keepdim=True).values)\n    scale = (m - m2).exp()\n    P = (E - m2).exp()\n    l2 = scale * l + P.sum(dim=-1, keepdim=True)\n    acc2 = scale * acc + torch.einsum('...qk,...kv->...qv', P, v_tile)\n    return m2, l2, acc2\n",
)
add(
    "ex-08-2",
    "namedtuple state",
    "from collections import namedtuple\nimport torch\n\nState = namedtuple('State', 'm l acc')\n\ndef tile_update(m, l, acc, q_tile, k_tile, v_tile):\n    old = State(m, l, acc)\n    E = torch.matmul(q_tile, k_tile.mT) / torch.tensor(float(q_tile.shape[-1]), dtype=q_tile.dtype).sqrt()\n    m_new = torch.where(E.amax(-1, keepdim=True) > old.m, E.amax(-1, keepdim=True), old.m)\n    c = torch.exp(old.m - m_new)\n    P = torch.exp(E - m_new)\n    new = State(m_new, c * old.l + P.sum(-1, keepdim=True), c * old.acc + P @ v_tile)\n    return tuple(new)\n",
)

# ------------------------------------------------------------------------------------ ex-08-3
add(
    "ex-08-3",
    "cat + softmax by hand",
    "import math\nimport torch\n\ndef kv_decode_step(query, key, value, cache_k, cache_v):\n    cache_k = torch.cat([cache_k, key], dim=2)\n    cache_v = torch.cat([cache_v, value], dim=2)\n    s = query @ cache_k.transpose(-1, -2) / math.sqrt(query.shape[-1])\n    w = torch.exp(s - s.amax(-1, keepdim=True))\n    w = w / w.sum(-1, keepdim=True)\n    return w @ cache_v, cache_k, cache_v\n",
)
add(
    "ex-08-3",
    "library attention (allowed here)",
    "import torch\nimport torch.nn.functional as F\n\ndef kv_decode_step(query, key, value, cache_k, cache_v):\n    k = torch.cat((cache_k, key), dim=-2)\n    v = torch.cat((cache_v, value), dim=-2)\n    return F.scaled_dot_product_attention(query, k, v), k, v\n",
)
add(
    "ex-08-3",
    "einsum",
    "import torch\n\ndef kv_decode_step(query, key, value, cache_k, cache_v):\n    K = torch.concat([cache_k, key], -2)\n    V = torch.concat([cache_v, value], -2)\n    s = torch.einsum('bhqd,bhpd->bhqp', query, K) / query.size(-1) ** 0.5\n    p = (s - s.max(-1, keepdim=True).values).exp()\n    out = torch.einsum('bhqp,bhpv->bhqv', p / p.sum(-1, keepdim=True), V)\n    return out, K, V\n",
)

# ------------------------------------------------------------------------------------ ex-02-4
add(
    "ex-02-4",
    "masked_fill",
    "import torch\n\ndef additive_attention_forward(module, query, keys, key_mask):\n    W, U, v = module.w_query.weight, module.w_key.weight, module.v.weight\n    hidden = torch.tanh((query @ W.T)[:, None, :] + keys @ U.T)  # (B, S, d_a)\n    scores = (hidden @ v.T)[..., 0]  # (B, S)\n    scores = scores.masked_fill(~key_mask, float('-inf'))\n    e = torch.exp(scores - scores.amax(-1, keepdim=True))\n    weights = e / e.sum(-1, keepdim=True)\n    return torch.bmm(weights[:, None, :], keys)[:, 0], weights\n",
)
add(
    "ex-02-4",
    "einsum",
    "import torch\n\ndef additive_attention_forward(module, query, keys, key_mask):\n    q = torch.einsum('ad,bd->ba', module.w_query.weight, query)\n    k = torch.einsum('ae,bse->bsa', module.w_key.weight, keys)\n    s = torch.einsum('bsa,a->bs', torch.tanh(q[:, None] + k), module.v.weight[0])\n    s = torch.where(key_mask, s, torch.full_like(s, -torch.inf))\n    w = (s - s.max(-1, keepdim=True).values).exp()\n    w = w / w.sum(-1, keepdim=True)\n    return torch.einsum('bs,bse->be', w, keys), w\n",
)
add(
    "ex-02-4",
    "multiply by mask",
    "import torch\n\ndef additive_attention_forward(module, query, keys, key_mask):\n    proj_q = query @ module.w_query.weight.t()\n    proj_k = keys @ module.w_key.weight.t()\n    s = (torch.tanh(proj_q.unsqueeze(1) + proj_k) * module.v.weight.squeeze(0)).sum(-1)\n    s = s - s.masked_fill(~key_mask, -1e30).amax(-1, keepdim=True)\n    e = torch.exp(s.masked_fill(~key_mask, -1e30)) * key_mask\n    w = e / e.sum(-1, keepdim=True)\n    return (w.unsqueeze(-1) * keys).sum(1), w\n",
)

# ------------------------------------------------------------------------------------ ex-13-1
add(
    "ex-13-1",
    "broadcast",
    "import torch\n\ndef window_mask(n, window, sinks):\n    q = torch.arange(n).unsqueeze(1)\n    k = torch.arange(n).unsqueeze(0)\n    causal = k <= q\n    return causal & ((q - k < window) | (k < sinks))\n",
)
add(
    "ex-13-1",
    "triu/tril",
    "import torch\n\ndef window_mask(n, window, sinks):\n    full = torch.ones(n, n, dtype=torch.bool)\n    band = torch.tril(full) & torch.triu(full, diagonal=-(window - 1))\n    sink = torch.zeros(n, n, dtype=torch.bool)\n    sink[:, :sinks] = True\n    return band | (sink & torch.tril(full))\n",
)
add(
    "ex-13-1",
    "numpy loops",
    "import numpy as np\nimport torch\n\ndef window_mask(n, window, sinks):\n    m = np.zeros((n, n), dtype=bool)\n    for i in range(n):\n        m[i, max(0, i - window + 1):i + 1] = True\n        m[i, :min(sinks, i + 1)] = True\n    return torch.from_numpy(m)\n",
)

# ------------------------------------------------------------------------------------ ex-13-2
add(
    "ex-13-2",
    "given feature map",
    "import torch\nfrom attnlib.variants import elu_feature_map\n\ndef linear_attention_recurrence(query, key, value):\n    fq, fk = elu_feature_map(query), elu_feature_map(key)\n    S = torch.zeros(*query.shape[:-2], query.shape[-1], value.shape[-1], dtype=query.dtype)\n    z = torch.zeros(*query.shape[:-2], query.shape[-1], dtype=query.dtype)\n    out = []\n    for t in range(query.shape[-2]):\n        S = S + torch.einsum('...d,...e->...de', fk[..., t, :], value[..., t, :])\n        z = z + fk[..., t, :]\n        out.append(torch.einsum('...d,...de->...e', fq[..., t, :], S) / (fq[..., t, :] * z).sum(-1, keepdim=True))\n    return torch.stack(out, -2)\n",
)
add(
    "ex-13-2",
    "cumsum",
    "import torch\nimport torch.nn.functional as F\n\ndef linear_attention_recurrence(query, key, value):\n    fq, fk = F.elu(query) + 1, F.elu(key) + 1\n    states = torch.cumsum(fk.unsqueeze(-1) * value.unsqueeze(-2), dim=-3)\n    norms = torch.cumsum(fk, dim=-2)\n    return (fq.unsqueeze(-2) @ states).squeeze(-2) / (fq * norms).sum(-1, keepdim=True)\n",
)
add(
    "ex-13-2",
    "unbind loop",
    "import torch\n\ndef phi(x):\n    return torch.where(x > 0, x + 1, torch.exp(x))\n\ndef linear_attention_recurrence(query, key, value):\n    S, z, outs = 0, 0, []\n    for q, k, v in zip(phi(query).unbind(-2), phi(key).unbind(-2), value.unbind(-2)):\n        S = S + k[..., :, None] * v[..., None, :]\n        z = z + k\n        outs.append((q[..., :, None] * S).sum(-2) / (q * z).sum(-1, keepdim=True))\n    return torch.stack(outs, dim=-2)\n",
)

# ------------------------------------------------------------------------------------ ex-13-3
add(
    "ex-13-3",
    "einsum",
    "import torch\n\ndef absorbed_query(x, w_q, w_uk):\n    return torch.einsum('bsd,hdk,hck->bhsc', x, w_q, w_uk)\n",
)
add(
    "ex-13-3",
    "absorbed matrix",
    "import torch\n\ndef absorbed_query(x, w_q, w_uk):\n    w = torch.matmul(w_q, w_uk.transpose(1, 2))\n    return torch.matmul(x.unsqueeze(1), w.unsqueeze(0))\n",
)
add(
    "ex-13-3",
    "per-head list",
    "import torch\n\ndef absorbed_query(x, w_q, w_uk):\n    heads = [x @ wq @ wk.T for wq, wk in zip(w_q, w_uk)]\n    return torch.stack(heads, dim=1)\n",
)

# ------------------------------------------------------------------------------------ ex-13-4
add(
    "ex-13-4",
    "if chain",
    "def kv_cache_bytes(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):\n    if kind == 'mla':\n        per_layer = latent_dim + rope_dim\n    else:\n        heads = {'mha': num_heads, 'mqa': 1, 'gqa': kv_heads}[kind]\n        per_layer = 2 * heads * head_dim\n    return per_layer * layers * bytes_per_element\n",
)
add(
    "ex-13-4",
    "match",
    "def kv_cache_bytes(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):\n    match kind:\n        case 'mha':\n            n = 2 * num_heads * head_dim\n        case 'mqa':\n            n = 2 * head_dim\n        case 'gqa':\n            n = 2 * kv_heads * head_dim\n        case 'mla':\n            n = latent_dim + rope_dim\n    return int(n) * int(layers) * int(bytes_per_element)\n",
)
add(
    "ex-13-4",
    "dataclass",
    "from dataclasses import dataclass\n\n@dataclass\nclass Layer:\n    keys: int\n    values: int\n\ndef kv_cache_bytes(kind, layers, num_heads, kv_heads, head_dim, latent_dim, rope_dim, bytes_per_element):\n    if kind == 'mla':\n        layer = Layer(latent_dim + rope_dim, 0)\n    else:\n        g = num_heads if kind == 'mha' else (1 if kind == 'mqa' else kv_heads)\n        layer = Layer(g * head_dim, g * head_dim)\n    return (layer.keys + layer.values) * layers * bytes_per_element\n",
)
