"""Chapter 12's controls, computed on the page's own data beside the recorded runs.

The bigram table is scored on exactly the windows and positions the model is
scored on (:func:`attnlib.chapters.char_lm.eval_windows`, position ``t``
predicting ``t + 1``), so that the model and its baseline see the same
characters. Not imported by the modules whose code the records hash.
"""

from __future__ import annotations

import torch


def bigram_logp(train_data: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Log-probabilities (V, V) of counted bigrams with add-one smoothing, as in ``char_lm.bigram_loss``."""
    counts = torch.ones(vocab_size, vocab_size, dtype=torch.float64)
    counts.index_put_(
        (train_data[:-1], train_data[1:]),
        torch.ones(len(train_data) - 1, dtype=torch.float64),
        accumulate=True,
    )
    return (counts / counts.sum(1, keepdim=True)).log()


def bigram_on_windows(train_data: torch.Tensor, windows: torch.Tensor, vocab_size: int) -> dict:
    """The bigram table of ``train_data`` scored on ``windows`` (B, L + 1) as a model is.

    Returns ``"loss"`` (mean over the B x L predicted positions), ``"se"`` (the
    standard error of that mean over the B windows: the spread of the windows'
    own means, divided by the square root of B) and ``"per_window"`` (B,).
    """
    logp = bigram_logp(train_data, vocab_size)
    nll = -logp[windows[:, :-1], windows[:, 1:]]  # (B, L)
    per_window = nll.mean(1)
    se = per_window.std().item() / len(per_window) ** 0.5
    return {"loss": nll.mean().item(), "se": se, "per_window": per_window}
