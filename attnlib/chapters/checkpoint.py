"""Chapter 12's longer-trained character model: one command trains it, the package ships it.

``python -m attnlib.chapters.checkpoint train`` trains chapter 12's model
(:func:`attnlib.chapters.char_lm.build_char_model`: pre-norm, tied head,
embeddings from N(0, 0.02²)), larger than the page's (:data:`CONFIG`), with
the page's practice (AdamW, weight decay on the matrices, warm-up and cosine
decay, clipping: :func:`attnlib.chapters.char_lm.lr_at`,
:func:`attnlib.chapters.char_lm.param_groups`) for :data:`STEPS` steps on two
threads, and writes ``data/char_checkpoint.pt`` (the float32 state dict) and
``data/char_checkpoint.json`` (the log: configuration, seed, the losses of the
first 20 steps, the training curve, the held-out loss beside the bigram table's
on the same windows, the heads measured at several steps along the run, the
time, torch's version, the float path, the thread count and :func:`code_hash`).

Retrain when :func:`code_hash` changes (``tests/chapters/test_checkpoint.py``
says so): the hash covers this module, chapters 10 and 12's modules and
attnlib's modules the model computes with, without their docstrings.
:func:`load_checkpoint` reads the shipped weights; nothing is trained there.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch
from torch import nn

from attnlib.chapters import char_lm, tiny_lm
from attnlib.chapters.char_lm import (
    build_char_model,
    corpus,
    estimate_loss,
    eval_windows,
    generate_text,
    get_batch,
    head_scores,
    induction_test,
    lm_loss,
    lr_at,
    param_groups,
    recency_baseline,
    repeated_random,
)

__all__ = [
    "CONFIG",
    "STEPS",
    "WEIGHTS_PATH",
    "LOG_PATH",
    "code_hash",
    "float_path",
    "head_measures",
    "load_checkpoint",
    "load_log",
    "train",
]

DATA_DIR = Path(__file__).with_name("data")
WEIGHTS_PATH = DATA_DIR / "char_checkpoint.pt"
LOG_PATH = DATA_DIR / "char_checkpoint.json"

SEED = 0
CONTEXT = 128
CONFIG = {"d_model": 128, "num_heads": 4, "d_ff": 512, "num_layers": 4}  # 0.82M parameters, tied
BATCH = 32
STEPS = 3300
PRACTICE = {"peak_lr": 1.5e-3, "warmup_steps": 100, "min_lr": 1.5e-4, "weight_decay": 0.1, "clip": 1.0}
THREADS = 2  # torch's default on a 2-core machine
EVAL_EVERY = 250  # held-out loss on the fixed windows
EVAL_COUNT = 128  # held-out windows of CONTEXT + 1 characters (eval_windows, seed 1234)
HEAD_COUNT = 32  # held-out windows the heads are measured on (the first of the eval windows)
INDUCTION_HALF = 64  # repeated random sequences of 2 x 64 tokens
CURVE_EVERY = 25  # the training loss is logged as the mean of each 25 steps
FIRST_STEPS = 20  # the losses of these steps are logged as they are, for a bit-for-bit check
HEAD_STEPS = (0, 30, 60, 120, 250, 500, 1000, 2000)  # and after the last step
SAMPLE_SEED = 0
SAMPLE_PROMPT = "\n"
SAMPLE_CHARS = 127

# The code the weights depend on: hashed without docstrings (spread._code_only).
HASHED_MODULES = (
    "attnlib.chapters.checkpoint",
    "attnlib.chapters.char_lm",
    "attnlib.chapters.tiny_lm",
    "attnlib.transformer",
    "attnlib.modules",
    "attnlib.attention",
    "attnlib.functional",
    "attnlib.masks",
    "attnlib.positions",
)


def code_hash() -> str:
    """SHA-256 of the code of :data:`HASHED_MODULES` (syntax trees without docstrings).

    Comments, layout and docstrings do not count; a changed number, expression or call does,
    and asks for a retrain: ``python -m attnlib.chapters.checkpoint train``.
    """
    import importlib

    from attnlib.chapters.spread import _code_only

    digest = hashlib.sha256()
    for name in HASHED_MODULES:
        code = _code_only(inspect.getsource(importlib.import_module(name)))
        digest.update(name.encode() + b"\0" + code.encode())
    return digest.hexdigest()


def float_path() -> dict:
    """The float path of this process: ``ATEN_CPU_CAPABILITY`` (``"native"`` when unset), the
    capability torch runs, its thread count, and :func:`attnlib.chapters.spread.machine_key`."""
    from attnlib.chapters.spread import machine_key

    return {
        "path": os.environ.get("ATEN_CPU_CAPABILITY", "native"),
        "capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "machine_key": machine_key(),
    }


def same_float_path(recorded: dict) -> bool:
    """Whether this process runs the recorded float path: same machine kind, ATen path and threads."""
    from attnlib.chapters.spread import key_matches

    here = float_path()
    return (
        key_matches(recorded["machine_key"], here["machine_key"])
        and recorded["path"] == here["path"]
        and recorded["capability"] == here["capability"]
        and recorded["threads"] == here["threads"]
    )


def build_model(vocab_size: int, seed: int = SEED) -> tiny_lm.TinyDecoderLM:
    """The checkpoint's initial model (:func:`build_char_model` on :data:`CONFIG`)."""
    return build_char_model(seed, vocab_size, CONTEXT, **CONFIG)


def measure_windows(val_data: torch.Tensor) -> torch.Tensor:
    """The fixed held-out windows (EVAL_COUNT, CONTEXT + 1) every held-out loss is measured on."""
    return eval_windows(val_data, CONTEXT, count=EVAL_COUNT)


@torch.no_grad()
def head_measures(model: tiny_lm.TinyDecoderLM, val_data: torch.Tensor, vocab_size: int) -> dict:
    """The heads as chapter 12 measures them, each beside its baseline.

    Over :data:`HEAD_COUNT` held-out windows: per head (layer-major) the mean weight on the
    previous character (``"previous"``) and that of the recency head matched to its mean
    distance back (``"recency_previous"``, :func:`attnlib.chapters.char_lm.recency_baseline`);
    ``"best_previous"``: the head with the largest ``previous - recency_previous``. On
    repeated random sequences (64 of 2 x :data:`INDUCTION_HALF` tokens, generator seed 7):
    each head's prefix-matching weight (``"induction"``), beside ``"induction_uniform"``,
    what a head spreading its weight evenly over its keys scores, and the mean loss of the
    first half (``"first"``, random: ln V at best) and of the second (``"second"``, a copy).
    """
    was_training = model.training
    held_out = measure_windows(val_data)[:HEAD_COUNT, :-1]
    maps = char_lm.attention_maps(model, held_out)
    recency = recency_baseline(maps)
    previous = head_scores(model, held_out)["previous"].flatten()
    fitted = recency["recency_previous"].flatten()
    best = int((previous.double() - fitted).argmax())
    tokens = repeated_random(64, INDUCTION_HALF, vocab_size, torch.Generator().manual_seed(7))
    ind = induction_test(model, tokens)
    induction = ind["induction"].flatten()
    rows = torch.arange(INDUCTION_HALF, 2 * INDUCTION_HALF, dtype=torch.float64)
    model.train(was_training)
    return {
        "previous": previous.tolist(),
        "recency_previous": fitted.tolist(),
        "best_previous": {"head": best, "previous": previous[best].item(), "recency": fitted[best].item()},
        "induction": induction.tolist(),
        "best_induction": {"head": int(induction.argmax()), "score": induction.max().item()},
        "induction_uniform": (1.0 / (rows + 1)).mean().item(),
        "first": ind["first"],
        "second": ind["second"],
    }


def samples(model: tiny_lm.TinyDecoderLM, vocab, temperatures=(0.8, 1.0)) -> dict:
    """``{str(temperature): text}``: :data:`SAMPLE_CHARS` characters after :data:`SAMPLE_PROMPT`,
    each from a generator seeded :data:`SAMPLE_SEED` (no top-k)."""
    prompt = vocab.encode(SAMPLE_PROMPT)[None]
    out = {}
    for temperature in temperatures:
        tokens = generate_text(
            model,
            prompt,
            SAMPLE_CHARS,
            temperature=temperature,
            generator=torch.Generator().manual_seed(SAMPLE_SEED),
        )
        out[str(temperature)] = vocab.decode(tokens[0])
    return out


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """AdamW on :func:`attnlib.chapters.char_lm.param_groups` (decay on the matrices only)."""
    return torch.optim.AdamW(
        param_groups(model, PRACTICE["weight_decay"]), lr=PRACTICE["peak_lr"], betas=(0.9, 0.99)
    )


def train_step(model, optimizer, train_data, batches, step: int, steps: int) -> tuple[float, float]:
    """One step of the run (0-based ``step`` of ``steps``): the rate of :func:`lr_at`, a batch
    from ``batches``, the gradient clipped; returns the batch's loss and the norm before clipping."""
    for group in optimizer.param_groups:
        group["lr"] = lr_at(step, PRACTICE["peak_lr"], PRACTICE["warmup_steps"], steps, PRACTICE["min_lr"])
    loss = lm_loss(model, get_batch(train_data, BATCH, CONTEXT, batches))
    optimizer.zero_grad()
    loss.backward()
    norm = nn.utils.clip_grad_norm_(model.parameters(), PRACTICE["clip"])
    optimizer.step()
    return loss.item(), norm.item()


def first_losses(count: int = FIRST_STEPS, steps: int = STEPS, seed: int = SEED) -> list[float]:
    """The losses of the run's first ``count`` steps, trained again (:func:`train_step`, as
    :func:`train` does; the warm-up's rates do not depend on ``steps``)."""
    vocab, train_data, _ = corpus()
    model = build_model(len(vocab), seed)
    optimizer = make_optimizer(model)
    batches = torch.Generator().manual_seed(seed)
    model.train()
    return [train_step(model, optimizer, train_data, batches, step, steps)[0] for step in range(count)]


def train(steps: int = STEPS, seed: int = SEED, progress=None) -> tuple[nn.Module, dict]:
    """Train the checkpoint's model; returns it and its log (see the module's docstring).

    The loop is :func:`attnlib.chapters.char_lm.train_lm`'s (AdamW with :func:`param_groups`,
    the rate of :func:`lr_at`, the batches of :func:`get_batch` from ``seed``, clipping),
    with the heads measured at :data:`HEAD_STEPS` and after the last step. ``progress``:
    a callable given the partial log after each held-out evaluation (for watching a run).
    """
    start = time.perf_counter()
    vocab, train_data, val_data = corpus()
    model = build_model(len(vocab), seed)
    windows = measure_windows(val_data)
    batches = torch.Generator().manual_seed(seed)
    optimizer = make_optimizer(model)
    log = {
        "command": "python -m attnlib.chapters.checkpoint train",
        "config": {**CONFIG, "context": CONTEXT, "tie": True, "norm_first": True, "dropout": 0.0},
        "practice": {**PRACTICE, "betas": [0.9, 0.99], "batch_size": BATCH, "steps": steps},
        "seed": seed,
        "params": sum(p.numel() for p in model.parameters()),
        "eval": {"count": EVAL_COUNT, "context": CONTEXT, "seed": 1234, "head_count": HEAD_COUNT},
        "first_losses": [],
        "curve_every": CURVE_EVERY,
        "curve": [],
        "eval_step": [0],
        "val_eval": [estimate_loss(model, windows)],
        "heads": [],
        "clipped": 0,
    }
    log["heads"].append({"step": 0, **head_measures(model, val_data, len(vocab))})
    losses = []
    model.train()
    for step in range(steps):
        loss, norm = train_step(model, optimizer, train_data, batches, step, steps)
        losses.append(loss)
        log["clipped"] += int(norm > PRACTICE["clip"])
        done = step + 1
        if done <= FIRST_STEPS:
            log["first_losses"].append(losses[-1])
        if done % CURVE_EVERY == 0:
            log["curve"].append(sum(losses[-CURVE_EVERY:]) / CURVE_EVERY)
        if done % EVAL_EVERY == 0 or done == steps:
            log["eval_step"].append(done)
            log["val_eval"].append(estimate_loss(model, windows))
            log["seconds_so_far"] = time.perf_counter() - start
            if progress is not None:
                progress(log)
        if done in HEAD_STEPS or done == steps:
            log["heads"].append({"step": done, **head_measures(model, val_data, len(vocab))})
    model.eval()
    log["clipped"] = log["clipped"] / steps
    log["train_seconds"] = time.perf_counter() - start
    log["val"] = log["val_eval"][-1]
    log["val_init"] = log["val_eval"][0]
    from attnlib.chapters.text_controls import bigram_on_windows

    bigram = bigram_on_windows(train_data, windows, len(vocab))
    log["bigram"] = {"loss": bigram["loss"], "se": bigram["se"]}
    per_window = torch.stack([torch.tensor(estimate_loss(model, w[None])) for w in windows])
    log["val_se"] = per_window.std().item() / len(windows) ** 0.5
    page = eval_windows(val_data, char_lm.CONTEXT)  # chapter 12's own 64 windows of 64 characters
    log["page_windows"] = {
        "val": estimate_loss(model, page),
        "bigram": bigram_on_windows(train_data, page, len(vocab))["loss"],
    }
    log["samples"] = samples(model, vocab)
    return model, log


def load_log(path: Path | str = LOG_PATH) -> dict:
    """The shipped training log."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def load_checkpoint(path: Path | str = WEIGHTS_PATH) -> tiny_lm.TinyDecoderLM:
    """The shipped model, in eval mode (its tied head shares the embedding again)."""
    vocab_size = len(char_lm.CharVocab(char_lm.load_text()))
    model = build_model(vocab_size)
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    model.head.weight = model.embed.weight
    return model.eval()


def sha256_file(path: Path | str) -> str:
    """The SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write(model: nn.Module, log: dict, out_dir: Path | str = DATA_DIR) -> tuple[Path, Path]:
    """Save the float32 state dict and the log (with the weights' SHA-256) under ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    weights, log_path = out_dir / WEIGHTS_PATH.name, out_dir / LOG_PATH.name
    state = {k: v.detach().to(torch.float32).contiguous() for k, v in model.state_dict().items()}
    torch.save(state, weights)
    log = {**log, "weights_sha256": sha256_file(weights), "weights_bytes": weights.stat().st_size}
    log_path.write_text(json.dumps(log, indent=1) + "\n", encoding="utf-8")
    return weights, log_path


def _time_steps(count: int) -> float:
    """Seconds per training step of the checkpoint's model on this process's threads."""
    vocab, train_data, _ = corpus()
    model = build_model(len(vocab))
    optimizer = torch.optim.AdamW(param_groups(model, 0.1), lr=1e-3)
    batches = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    for _ in range(count):
        loss = lm_loss(model, get_batch(train_data, BATCH, CONTEXT, batches))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return (time.perf_counter() - start) / count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attnlib.chapters.checkpoint", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_train = sub.add_parser("train", help="train the checkpoint and write its weights and log")
    p_train.add_argument("--steps", type=int, default=STEPS)
    p_train.add_argument("--out", default=str(DATA_DIR), help="folder for the .pt and .json")
    p_time = sub.add_parser("time", help="seconds per training step (nothing is written)")
    p_time.add_argument("--count", type=int, default=30)
    args = parser.parse_args(argv)
    torch.set_num_threads(THREADS)
    if args.command == "time":
        print(f"{_time_steps(args.count):.3f} s per step on {torch.get_num_threads()} thread(s)")
        return 0

    def progress(log):
        step, val = log["eval_step"][-1], log["val_eval"][-1]
        print(f"step {step}: held-out {val:.4f} ({log['seconds_so_far']:.0f} s)", flush=True)

    log_head = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "float_path": float_path(),
        "code_hash": code_hash(),
    }
    model, log = train(args.steps, progress=progress)
    weights, log_path = write(model, {**log_head, **log}, args.out)
    print(
        f"held-out {log['val']:.4f} nats/char (bigram {log['bigram']['loss']:.4f}, same windows), "
        f"{log['train_seconds']:.0f} s; wrote {weights} and {log_path}"
    )
    print("sample at temperature 0.8:", log["samples"]["0.8"], sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
