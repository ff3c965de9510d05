"""How far a trained model's numbers move between seeds, CPUs and thread counts.

A chapter that trains a model states only what holds for the *method*, not for
one run. Its experiment is a function ``experiment(seed) -> dict`` in
``attnlib.chapters`` (each value a number or a list of numbers). This module

* runs it over several seeds, on three float paths of PyTorch's CPU kernels
  (the machine's own, ``ATEN_CPU_CAPABILITY=avx2`` and ``=default``) and with one
  and two threads, each run in a fresh interpreter, and writes every run's
  numbers to ``attnlib/chapters/spreads/<name>.json`` (the file ships with
  attnlib, so a chapter opened in Colab reads it too);
* loads that file for the chapter, which glues its own run beside the spread
  ("0.74 here; 0.70-0.86 over 5 seeds, 3 float paths, 1 and 2 threads") and
  asserts its claims for every recorded run as well as for its own.

Run a sweep (slow: minutes; the chapters never do)::

    python -m attnlib.chapters.spread ch01 attnlib.chapters.seq2seq:reverse_experiment \\
        --seeds 0 1 2 3 4

The file records a hash of the code of the experiment's module and of the chapter
modules it imports; ``tests/chapters`` fails when that code changed after the sweep
(rerun the sweep, then commit).

After a refactor that should not change a single number (a renamed constant, a helper
moved), :func:`rehash` records the new hash without the whole sweep, but only when a
rerun of some recorded runs, at least one on every recorded float path, gives every
recorded number again, bit for bit; the file keeps which runs were repeated::

    python -m attnlib.chapters.spread ch10 --rehash
    python -m attnlib.chapters.spread ch10 --rehash --repeat 0/native/1 2/default/2

Any other change of the code asks for a new sweep.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import json
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SPREAD_DIR = Path(__file__).with_name("spreads")
PATHS = ("native", "avx2", "default")
THREADS = (1, 2)
_MARK = "@@SPREAD@@"


def _chapter_dependencies(module_name: str) -> list[str]:
    """``module_name`` and every ``attnlib.chapters`` module it imports, directly or not, sorted.

    Imports anywhere in a module count (also those inside functions): a chapter's experiment
    often imports the models of an earlier chapter where it uses them.
    """
    import ast

    seen: set[str] = set()
    todo = [module_name]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse(inspect.getsource(importlib.import_module(name)))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                base = node.module
                if node.level:  # relative: from .vocab import ..., inside attnlib.chapters
                    base = ".".join(name.split(".")[: -node.level] + [node.module])
                names = [base] + [f"{base}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for found in names:
                if found.startswith("attnlib.chapters.") and found != __name__:
                    try:
                        importlib.import_module(found)
                    except ImportError:
                        continue  # a name imported from a module, not a module
                    todo.append(found)
    return sorted(seen)


def source_hash(experiment: str) -> str:
    """SHA-256 (first 16 hex digits) of the code of the experiment's module and its chapter modules.

    The chapter modules it imports (``attnlib.chapters.*``, directly or not) count too: chapter
    07's experiment trains chapter 01's GRU from ``attnlib.chapters.seq2seq``. attnlib's core is
    not hashed: it is tested against torch, and a change to its numbers would show in the tests
    of every chapter that asserts on its own run.

    Parameters
    ----------
    experiment : str
        ``"package.module:function"``.

    Returns
    -------
    str
    """
    digest = hashlib.sha256()
    for name in _chapter_dependencies(experiment.split(":")[0]):
        code = _code_only(inspect.getsource(importlib.import_module(name)))
        digest.update(name.encode() + b"\0" + code.encode())
    return digest.hexdigest()[:16]


def _code_only(source: str) -> str:
    """The module's syntax tree without docstrings: what computes, not what is said about it.

    Comments and layout are not in the tree either, so rewording a docstring or reformatting
    does not ask for a new sweep; changing a number, an expression or a call does.
    """
    import ast

    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


def _child_code(experiment: str, seed: int, threads: int) -> str:
    module_name, func = experiment.split(":")
    return (
        "import json, torch, importlib\n"
        f"torch.set_num_threads({threads})\n"
        f"fn = getattr(importlib.import_module({module_name!r}), {func!r})\n"
        f"metrics = fn(seed={seed})\n"
        "print({mark!r} + json.dumps({{'capability': torch.backends.cpu.get_cpu_capability(),"
        " 'threads': torch.get_num_threads(), 'metrics': metrics}}))\n".format(mark=_MARK)
    )


def run_one(experiment: str, seed: int, path: str, threads: int, timeout: float = 1800) -> dict:
    """Run ``experiment(seed=seed)`` in a fresh interpreter on one float path and thread count.

    Parameters
    ----------
    experiment : str
        ``"package.module:function"``; the function returns a dict of numbers or lists of numbers.
    seed : int
    path : {"native", "avx2", "default"}
        ``"native"`` leaves ``ATEN_CPU_CAPABILITY`` unset; the others set it.
    threads : int
        torch's intra-op threads (and ``OMP_NUM_THREADS``).
    timeout : float, optional
        Seconds before the run is abandoned.

    Returns
    -------
    dict
        ``{"seed", "path", "capability", "threads", "metrics"}``.
    """
    if path not in PATHS:
        raise ValueError(f"run_one: path must be one of {PATHS}, got {path!r}")
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    if path != "native":
        env["ATEN_CPU_CAPABILITY"] = path
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    env["PYTHONHASHSEED"] = "0"
    env.setdefault("MPLBACKEND", "Agg")
    # Idle OpenMP threads sleep instead of spinning. The numbers are the same; on a shared
    # machine a 2-thread run no longer crawls (chapter 02's training, 60 steps, 2 threads,
    # load 9 on 2 cores: 73 s spinning, 10 s passive; 9 s on one thread).
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    proc = subprocess.run(
        [sys.executable, "-c", _child_code(experiment, seed, threads)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith(_MARK)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"{experiment}(seed={seed}) on {path}, {threads} thread(s) failed "
            f"(exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    result = json.loads(lines[-1][len(_MARK) :])
    return {"seed": seed, "path": path, **result}


def sweep(
    name: str,
    experiment: str,
    seeds: Sequence[int],
    paths: Sequence[str] = PATHS,
    threads: Sequence[int] = THREADS,
    out_dir: Path = SPREAD_DIR,
) -> Path:
    """Run every (seed, path, threads) combination and write ``out_dir/<name>.json``.

    Parameters
    ----------
    name : str
        The chapter's key, e.g. ``"ch01"``.
    experiment : str
        ``"package.module:function"``.
    seeds : sequence of int
    paths : sequence of str, optional
    threads : sequence of int, optional
    out_dir : pathlib.Path, optional

    Returns
    -------
    pathlib.Path
        The file written.
    """
    runs = []
    for seed in seeds:
        for path in paths:
            for t in threads:
                run = run_one(experiment, seed, path, t)
                print(f"{name}: seed {seed}, {path} ({run['capability']}), {t} thread(s)", flush=True)
                runs.append(run)
    record = {
        "name": name,
        "experiment": experiment,
        "source_hash": source_hash(experiment),
        "seeds": list(seeds),
        "paths": list(paths),
        "threads": list(threads),
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
        },
        "runs": runs,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{name}.json"
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return out


@dataclass(frozen=True)
class Spread:
    """Every recorded run of one chapter's experiment (see :func:`load`).

    Attributes
    ----------
    name : str
    experiment : str
    runs : list of dict
        Each ``{"seed", "path", "capability", "threads", "metrics"}``.
    """

    name: str
    experiment: str
    runs: list

    def values(self, metric: str) -> list:
        """The metric in every run (numbers, or lists of numbers), in the file's order."""
        try:
            return [run["metrics"][metric] for run in self.runs]
        except KeyError:
            raise KeyError(f"spread {self.name}: no metric {metric!r}") from None

    def low(self, metric: str):
        """Smallest value over the runs (elementwise for a list metric)."""
        vals = self.values(metric)
        if isinstance(vals[0], list):
            return [min(col) for col in zip(*vals, strict=True)]
        return min(vals)

    def high(self, metric: str):
        """Largest value over the runs (elementwise for a list metric)."""
        vals = self.values(metric)
        if isinstance(vals[0], list):
            return [max(col) for col in zip(*vals, strict=True)]
        return max(vals)

    @property
    def seeds(self) -> list:
        return sorted({run["seed"] for run in self.runs})

    @property
    def capabilities(self) -> list:
        return sorted({run["capability"] for run in self.runs})

    @property
    def thread_counts(self) -> list:
        return sorted({run["threads"] for run in self.runs})

    def conditions(self) -> str:
        """E.g. ``"5 seeds, 3 float paths AVX2/AVX512/DEFAULT, 1 and 2 threads"`` (no parentheses:
        the chapters glue it inside theirs).

        Where the runs do not cover every combination of those seeds, paths and thread
        counts (extra seeds run on one path only, say), it says how many they cover:
        ``"...; 24 of the 54 combinations"``, so the text never reads as the full grid.
        """
        caps = self.capabilities
        threads = " and ".join(str(t) for t in self.thread_counts)
        text = (
            f"{len(self.seeds)} seeds, {len(caps)} float paths {'/'.join(caps)}, "
            f"{threads} thread{'s' if self.thread_counts != [1] else ''}"
        )
        covered = {(run["seed"], run["capability"], run["threads"]) for run in self.runs}
        grid = len(self.seeds) * len(caps) * len(self.thread_counts)
        if len(covered) < grid:
            text += f"; {len(covered)} of the {grid} combinations"
        return text

    def describe(self, metric: str, here: float, fmt: str = ".2f") -> str:
        """``"0.74 here; 0.70-0.86 over 5 seeds, 3 float paths .../..., 1 and 2 threads"``."""
        lo, hi = self.low(metric), self.high(metric)
        return f"{here:{fmt}} here; {lo:{fmt}}-{hi:{fmt}} over {self.conditions()}"

    def check(self, claim, description: str) -> None:
        """Assert ``claim(metrics)`` for every recorded run; the error names the runs where it fails.

        Parameters
        ----------
        claim : callable
            ``claim(metrics: dict) -> bool``.
        description : str
            The claim in words, for the message.
        """
        failed = [
            f"seed {r['seed']} on {r['capability']} with {r['threads']} thread(s)"
            for r in self.runs
            if not claim(r["metrics"])
        ]
        if failed:
            raise AssertionError(
                f"expected {description} in every recorded run of {self.name}; "
                f"it fails in {len(failed)} of {len(self.runs)}: {'; '.join(failed[:5])}"
            )


def load(name: str, directory: Path = SPREAD_DIR) -> Spread:
    """The recorded spread of chapter experiment ``name`` (e.g. ``"ch01"``).

    Parameters
    ----------
    name : str
    directory : pathlib.Path, optional

    Returns
    -------
    Spread
    """
    path = Path(directory) / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"no recorded spread {path}; run: python -m attnlib.chapters.spread {name} MODULE:FUNCTION"
        )
    record = json.loads(path.read_text(encoding="utf-8"))
    return Spread(name=record["name"], experiment=record["experiment"], runs=record["runs"])


def rehash(
    name: str, repeat: Sequence[tuple[int, str, int]] | None = None, directory: Path = SPREAD_DIR
) -> Path:
    """Record the current code's hash in ``<name>.json`` after runs repeated with it match the record.

    For a refactor that leaves every number as it was: each run in ``repeat`` is run again
    with the code as it is now and must give exactly the recorded metrics (the same floats,
    bit for bit, as JSON reads them back). Only then is ``source_hash`` replaced; the
    file's ``rehashed`` list keeps the old and new hash and the runs repeated. The
    recorded runs themselves are kept, unchanged.

    Parameters
    ----------
    name : str
        The chapter's key, e.g. ``"ch10"``.
    repeat : sequence of (seed, path, threads), optional
        Recorded runs to repeat; together they must cover every float path of the record.
        Default: one run per recorded path, the seeds and thread counts taken in turn
        (``(0, "native", 1), (1, "avx2", 2), (2, "default", 1)`` for seeds 0-2).
    directory : pathlib.Path, optional

    Returns
    -------
    pathlib.Path
        The file rewritten.

    Raises
    ------
    ValueError
        A run in ``repeat`` is not in the record, or a recorded path is not covered.
    AssertionError
        A repeated run gave another number (the file is left as it was): the change
        is not a pure refactor, so sweep again.
    """
    path = Path(directory) / f"{name}.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    recorded = {(r["seed"], r["path"], r["threads"]): r for r in record["runs"]}
    if repeat is None:
        seeds, threads = record["seeds"], record["threads"]
        repeat = [
            (seeds[i % len(seeds)], p, threads[i % len(threads)]) for i, p in enumerate(record["paths"])
        ]
    repeat = [(int(seed), str(p), int(t)) for seed, p, t in repeat]
    unknown = [run for run in repeat if run not in recorded]
    if unknown:
        raise ValueError(f"rehash: {name} has no recorded run (seed, path, threads) {unknown[0]}")
    uncovered = sorted({r["path"] for r in record["runs"]} - {p for _, p, _ in repeat})
    if uncovered:
        raise ValueError(f"rehash: repeat must cover every recorded float path; none on {uncovered}")
    for seed, p, t in repeat:
        run = run_one(record["experiment"], seed, p, t)
        old = recorded[(seed, p, t)]
        if run["metrics"] != old["metrics"] or run["capability"] != old["capability"]:
            changed = sorted(k for k in old["metrics"] if run["metrics"].get(k) != old["metrics"][k])
            raise AssertionError(
                f"rehash: {name}, seed {seed} on {p} ({run['capability']}) with {t} thread(s) "
                f"gives other numbers than recorded ({', '.join(changed) or 'its float path'}): "
                f"the code's change is not a pure refactor; sweep again"
            )
        print(f"{name}: seed {seed}, {p} ({run['capability']}), {t} thread(s): as recorded", flush=True)
    new_hash = source_hash(record["experiment"])
    record.setdefault("rehashed", []).append(
        {"from": record["source_hash"], "to": new_hash, "repeated": [list(run) for run in repeat]}
    )
    record["source_hash"] = new_hash
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return path


def _run_key(text: str) -> tuple[int, str, int]:
    """``"0/native/1"`` -> ``(0, "native", 1)`` for ``--repeat``."""
    seed, path, threads = text.split("/")
    return int(seed), path, int(threads)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m attnlib.chapters.spread", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("name", help="the chapter's key, e.g. ch01")
    parser.add_argument(
        "experiment",
        nargs="?",
        help="package.module:function returning a dict of numbers (not with --rehash)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--threads", type=int, nargs="+", default=list(THREADS))
    parser.add_argument(
        "--rehash",
        action="store_true",
        help="after a pure refactor: repeat some recorded runs, then record the hash",
    )
    parser.add_argument(
        "--repeat",
        type=_run_key,
        nargs="+",
        metavar="SEED/PATH/THREADS",
        help="with --rehash: the runs to repeat",
    )
    args = parser.parse_args(argv)
    if args.rehash == (args.experiment is not None):
        parser.error("give an experiment to sweep, or --rehash without one")
    if args.repeat and not args.rehash:
        parser.error("--repeat goes with --rehash")
    if args.rehash:
        out = rehash(args.name, args.repeat)
    else:
        out = sweep(args.name, args.experiment, args.seeds, args.paths, args.threads)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
