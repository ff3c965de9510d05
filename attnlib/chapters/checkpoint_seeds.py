"""Chapter 12's checkpoint over more seeds, as far as it can be trained cheaply: up to step 500.

The shipped checkpoint (:mod:`attnlib.chapters.checkpoint`) is one seed. Its heads over
training move most between steps 250 and 500; this module trains the same recipe
(:func:`checkpoint.build_model`, :func:`checkpoint.make_optimizer`, :func:`checkpoint.train_step`
with ``steps=checkpoint.STEPS``, so the rate at each step is the shipped run's; the batches from
the seed) for other seeds up to :data:`LAST_STEP` only, and measures the heads with
:func:`checkpoint.head_measures` at :data:`POINTS`. Beside the copying measure (the loss on the
second half of repeated random sequences, a copy of the first) it measures its control
(:func:`fresh_half`): the same first halves followed by fresh random tokens, where nothing can be
copied, so a second-half gap has its no-copy baseline beside it.

Run (slow: about 6-10 minutes a seed on two idle threads; the chapter never trains these)::

    python -m attnlib.chapters.checkpoint_seeds run --seeds 1 2 3 4 0

or, on a busy machine, one process per share of the seeds, one thread each, then join them::

    python -m attnlib.chapters.checkpoint_seeds run --seeds 1 3 0 --threads 1 --out a.json
    python -m attnlib.chapters.checkpoint_seeds run --seeds 2 4 --threads 1 --out b.json
    python -m attnlib.chapters.checkpoint_seeds merge a.json b.json

writes ``data/char_checkpoint_seeds.json`` after each seed (:data:`RECORD_PATH`): per seed the
measures at each point, the losses of the first :data:`checkpoint.FIRST_STEPS` steps, the
held-out loss at each point and the seconds; and the float path, thread count, load average,
torch's version and :func:`checkpoint.code_hash` with this module's own hash. Seed 0 is the
shipped run: its log has the same measures at the same steps (without the control), and a
rerun here repeats them bit for bit on the log's float path.
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

from attnlib.chapters import checkpoint
from attnlib.chapters.char_lm import corpus, estimate_loss, induction_test, repeated_random

__all__ = [
    "LAST_STEP",
    "POINTS",
    "RECORD_PATH",
    "claims",
    "fresh_half",
    "fresh_tokens",
    "load_record",
    "measures",
    "run_seed",
    "spread_table",
]

RECORD_PATH = checkpoint.DATA_DIR / "char_checkpoint_seeds.json"
POINTS = (0, 250, 500)
LAST_STEP = 500
SEEDS = (1, 2, 3, 4)
FRESH_SEED = 8  # the generator of the fresh second halves (the copied halves use seed 7)


def fresh_tokens(vocab_size: int) -> torch.Tensor:
    """(64, 2 x INDUCTION_HALF): the first halves of :func:`checkpoint.head_measures`'s repeated
    sequences (generator seed 7), each followed by fresh uniform tokens (seed :data:`FRESH_SEED`)."""
    half = checkpoint.INDUCTION_HALF
    repeated = repeated_random(64, half, vocab_size, torch.Generator().manual_seed(7))
    fresh = torch.randint(0, vocab_size, (64, half), generator=torch.Generator().manual_seed(FRESH_SEED))
    return torch.cat([repeated[:, :half], fresh], dim=1)


@torch.no_grad()
def fresh_half(model, vocab_size: int) -> dict:
    """The copying measure's control: :func:`induction_test` on :func:`fresh_tokens`.

    ``"first"`` and ``"second"``: the mean losses of the two halves when the second is not a
    copy (both random: a model that cannot copy scores them alike); ``"best_induction"``: the
    largest head's weight on the key an induction head would read, there meaningless (what
    attention on that key scores when nothing repeats).
    """
    was_training = model.training
    out = induction_test(model, fresh_tokens(vocab_size))
    model.train(was_training)
    return {"first": out["first"], "second": out["second"], "best_induction": out["induction"].max().item()}


def measures(model, val_data: torch.Tensor, vocab_size: int) -> dict:
    """The summary the page reads at one point: :func:`checkpoint.head_measures`'s best heads
    and halves (the per-head lists left out), with :func:`fresh_half` as ``"fresh"``."""
    full = checkpoint.head_measures(model, val_data, vocab_size)
    keep = ("best_previous", "best_induction", "induction_uniform", "first", "second")
    return {**{k: full[k] for k in keep}, "fresh": fresh_half(model, vocab_size)}


def run_seed(seed: int, last_step: int = LAST_STEP, points=POINTS, progress=None) -> dict:
    """Train the checkpoint's recipe from ``seed`` up to ``last_step`` (of a schedule of
    :data:`checkpoint.STEPS` steps), measuring at ``points``; returns the seed's entry."""
    start = time.perf_counter()
    vocab, train_data, val_data = corpus()
    model = checkpoint.build_model(len(vocab), seed)
    optimizer = checkpoint.make_optimizer(model)
    batches = torch.Generator().manual_seed(seed)
    windows = checkpoint.measure_windows(val_data)
    entry: dict = {"seed": seed, "first_losses": [], "points": []}

    def measure(step):
        point = {"step": step, "val": estimate_loss(model, windows), **measures(model, val_data, len(vocab))}
        point["seconds_so_far"] = time.perf_counter() - start
        entry["points"].append(point)
        if progress is not None:
            progress(seed, point)

    if 0 in points:
        measure(0)
    model.train()
    for step in range(last_step):
        loss, _ = checkpoint.train_step(model, optimizer, train_data, batches, step, checkpoint.STEPS)
        if step < checkpoint.FIRST_STEPS:
            entry["first_losses"].append(loss)
        if step + 1 in points:
            measure(step + 1)
    entry["seconds"] = time.perf_counter() - start
    return entry


def module_hash() -> str:
    """SHA-256 of this module's code without docstrings (as :func:`checkpoint.code_hash`)."""
    from attnlib.chapters.spread import _code_only

    return hashlib.sha256(_code_only(inspect.getsource(sys.modules[__name__])).encode()).hexdigest()


def load_record(path: Path | str = RECORD_PATH) -> dict:
    """The committed record of :func:`main`'s run."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def spread_table(record: dict, log: dict | None = None) -> list[dict]:
    """One row per seed and point (:data:`POINTS`), seed 0's from the shipped log's heads (its
    control from the record's rerun of seed 0, if it has one: else ``fresh_gap`` is None).

    Each row: ``seed``, ``step``, ``previous`` and ``recency`` (the best previous-character head
    and its recency baseline), ``induction`` and ``uniform`` (the best induction score and an
    even spread's), ``gap`` (first-half loss minus second-half loss, the copy's),
    ``fresh_gap`` (the same on sequences whose second half is fresh) and ``margin``: the gap
    minus the fresh gap, both from the same run (for seed 0, the record's rerun, whose float
    path may differ from the log's).
    """
    log = checkpoint.load_log() if log is None else log
    by_seed = {int(k): v for k, v in record["seeds"].items()}
    rows = []
    for seed in sorted({0, *by_seed}):
        for step in POINTS:
            own = next((p for p in by_seed.get(seed, {}).get("points", []) if p["step"] == step), None)
            if seed == 0:
                heads = next(h for h in log["heads"] if h["step"] == step)
            else:
                heads = own
            if heads is None:
                continue
            rows.append(
                {
                    "seed": seed,
                    "step": step,
                    "previous": heads["best_previous"]["previous"],
                    "recency": heads["best_previous"]["recency"],
                    "induction": heads["best_induction"]["score"],
                    "uniform": heads["induction_uniform"],
                    "gap": heads["first"] - heads["second"],
                    "fresh_gap": None if own is None else own["fresh"]["first"] - own["fresh"]["second"],
                    "margin": None
                    if own is None
                    else (own["first"] - own["second"]) - (own["fresh"]["first"] - own["fresh"]["second"]),
                }
            )
    return rows


COPY_GAIN = 0.1  # nats: chapter 12's threshold for a second-half gap that shows copying


def previous_head(row: dict) -> bool:
    """Chapter 12's test of a previous-character head: twice its recency head's weight or more."""
    return row["previous"] >= 2 * row["recency"]


def induction_head(row: dict) -> bool:
    """A head whose induction score is above twice an even spread's (chapter 12's test)."""
    return row["induction"] > 2 * row["uniform"]


def copies(row: dict) -> bool:
    """The copied halves' gap exceeds the fresh halves' by more than :data:`COPY_GAIN` (``margin``)."""
    return row["margin"] > COPY_GAIN


def claims(rows: list[dict]) -> dict:
    """What chapter 12 counts over the seeds of :func:`spread_table`'s ``rows``: per test and
    step (250, 500), ``(k, n)``: k of n seeds pass (``"copy"``: of the seeds with a control);
    ``"later"``: the seeds whose best head's weight on the previous character rose more from
    step 250 to 500 than from 0 to 250; ``"seeds"``: the seeds, sorted."""
    at = {(r["seed"], r["step"]): r for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    out: dict = {"seeds": seeds}
    for name, test in (("previous", previous_head), ("induction", induction_head), ("copy", copies)):
        for step in POINTS[1:]:
            measured = [at[s, step] for s in seeds if name != "copy" or at[s, step]["margin"] is not None]
            out[name, step] = (sum(test(r) for r in measured), len(measured))
    rises = [
        at[s, 500]["previous"] - at[s, 250]["previous"] > at[s, 250]["previous"] - at[s, 0]["previous"]
        for s in seeds
    ]
    out["later"] = (sum(rises), len(seeds))
    return out


def _part_record(args) -> dict:
    """The head of one process's record: what decides its digits and what it was run with."""
    command = "python -m attnlib.chapters.checkpoint_seeds run --seeds " + " ".join(map(str, args.seeds))
    if args.threads != checkpoint.THREADS:
        command += f" --threads {args.threads}"
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "float_path": checkpoint.float_path(),
        "threads": torch.get_num_threads(),
        "code_hash": checkpoint.code_hash(),
        "module_hash": module_hash(),
        "schedule_steps": checkpoint.STEPS,
        "last_step": LAST_STEP,
        "points": list(POINTS),
        "fresh_seed": FRESH_SEED,
        "runs": [{"command": command, "seeds": list(args.seeds), "load_start": list(os.getloadavg())}],
        "seeds": {},
    }


def merge(parts: list[dict]) -> dict:
    """One record from the records of processes that ran other seeds on the same code and float
    path (``runs`` lists each process's command, seconds and load; ``seeds`` joins them)."""
    first = parts[0]
    same = ("torch", "float_path", "threads", "code_hash", "module_hash", "schedule_steps", "points")
    for part in parts[1:]:
        for key in same:
            if part[key] != first[key]:
                raise ValueError(f"the parts differ in {key}: {first[key]!r} and {part[key]!r}")
        if set(part["seeds"]) & set(first["seeds"]):
            raise ValueError("a seed is in two parts")
    merged = {**first, "runs": [r for p in parts for r in p["runs"]], "seeds": {}}
    for part in parts:
        merged["seeds"].update(part["seeds"])
    merged["seeds"] = dict(sorted(merged["seeds"].items(), key=lambda kv: int(kv[0])))
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attnlib.chapters.checkpoint_seeds", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="train seeds up to step 500 and write their record")
    p_run.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    p_run.add_argument("--threads", type=int, default=checkpoint.THREADS)
    p_run.add_argument("--out", default=str(RECORD_PATH))
    p_merge = sub.add_parser("merge", help="join the records of processes that ran other seeds")
    p_merge.add_argument("parts", nargs="+")
    p_merge.add_argument("--out", default=str(RECORD_PATH))
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.command == "merge":
        record = merge([load_record(p) for p in args.parts])
        out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {out}: seeds {', '.join(record['seeds'])}")
        return 0
    torch.set_num_threads(args.threads)
    record = _part_record(args)
    run = record["runs"][0]

    def progress(seed, point):
        best = point["best_previous"]
        print(
            f"seed {seed} step {point['step']}: held-out {point['val']:.4f}, previous {best['previous']:.3f}"
            f" (recency {best['recency']:.3f}), gap {point['first'] - point['second']:.3f}"
            f" (fresh {point['fresh']['first'] - point['fresh']['second']:.3f})"
            f" [{point['seconds_so_far']:.0f} s, load {os.getloadavg()[0]:.2f}]",
            flush=True,
        )

    start = time.perf_counter()
    for seed in args.seeds:
        record["seeds"][str(seed)] = run_seed(seed, progress=progress)
        run["seconds"] = time.perf_counter() - start
        run["load_end"] = list(os.getloadavg())
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} ({run['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
