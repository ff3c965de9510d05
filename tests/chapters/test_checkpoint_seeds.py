"""Chapter 12's checkpoint over five seeds up to step 500 (attnlib/chapters/checkpoint_seeds.py).

The record (attnlib/chapters/data/char_checkpoint_seeds.json) is written by
``python -m attnlib.chapters.checkpoint_seeds run``; the page reads it and never trains these.
These tests check that the module trains the checkpoint's recipe (its first step is the shipped
run's, bit for bit on the log's float path), that its control's sequences are the copied ones'
first halves with fresh second halves, and that its counts tell a passing seed from a failing one.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch

from attnlib.chapters import checkpoint, checkpoint_seeds

RERUN = "rerun python -m attnlib.chapters.checkpoint_seeds run --seeds 1 2 3 4 0"
OTHER_PATH_TOL = 1e-4  # one step's loss on another BLAS or ATen path (first_losses, 20 steps)


@pytest.fixture(scope="module")
def log():
    return checkpoint.load_log()


@contextmanager
def threads(n):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def test_the_fresh_halves_share_the_copied_halves_first_half_and_differ_after():
    tokens = checkpoint_seeds.fresh_tokens(65)
    half = checkpoint.INDUCTION_HALF
    from attnlib.chapters.char_lm import repeated_random

    copied = repeated_random(64, half, 65, torch.Generator().manual_seed(7))
    assert tokens.shape == copied.shape == (64, 2 * half)
    assert torch.equal(tokens[:, :half], copied[:, :half])
    # a fresh second half agrees with the first only by chance (1 in 65)
    assert (tokens[:, half:] == tokens[:, :half]).float().mean() < 0.05


def test_the_modules_first_step_is_the_shipped_runs(log):
    """run_seed's first step is checkpoint.train's: the same loss, bit for bit on the log's float
    path (this machine's kind, ATen's native path, the log's thread count)."""
    with threads(log["float_path"]["threads"]):
        entry = checkpoint_seeds.run_seed(0, last_step=1, points=())
        exact = checkpoint.same_float_path(log["float_path"])
    assert len(entry["first_losses"]) == 1 and entry["points"] == []
    if exact:
        assert entry["first_losses"][0] == log["first_losses"][0]
    else:
        assert entry["first_losses"][0] == pytest.approx(log["first_losses"][0], abs=OTHER_PATH_TOL)


def test_the_counts_tell_a_passing_seed_from_a_failing_one():
    """claims on made-up rows: a previous-character head at exactly twice its recency head's
    counts, one just under does not; a copy gap 0.1 beyond the control does not count."""

    def row(seed, step, previous, recency=0.1, induction=0.01, gap=0.0, fresh_gap=0.0):
        return {
            "seed": seed,
            "step": step,
            "previous": previous,
            "recency": recency,
            "induction": induction,
            "uniform": 0.01,
            "gap": gap,
            "fresh_gap": fresh_gap,
        }

    rows = [row(s, 0, 0.03) for s in (0, 1)]
    rows += [row(0, 250, 0.2, gap=0.3), row(1, 250, 0.199, induction=0.03, fresh_gap=None)]
    rows += [row(0, 500, 0.5, gap=0.1), row(1, 500, 0.3, gap=0.5, fresh_gap=0.35)]
    got = checkpoint_seeds.claims(rows)
    assert got["previous", 250] == (1, 2) and got["previous", 500] == (2, 2)
    assert got["induction", 250] == (1, 2) and got["induction", 500] == (0, 2)
    assert got["copy", 250] == (1, 1) and got["copy", 500] == (1, 2)
    assert got["later"] == (1, 2)  # seed 0: +0.3 after step 250 against +0.17 before
