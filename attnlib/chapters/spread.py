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

**Seeds are the sample.** Each seed is one independent run of the method; its
float paths and thread counts repeat it with other roundings, which training can
amplify far beyond the last digit (chapter 06's seed 1 ends anywhere from 0.12 to
0.82 in loss over its repeats; :meth:`Spread.reproducibility`), but they draw no
new initial weights nor batches, so they are not more samples.
A chapter counts seeds: :meth:`Spread.in_seeds` says "in all 5 seeds" only with
at least :data:`MIN_SEEDS` seeds, and "in 3 of 3 seeds" below that, which the
chapter calls suggestive (:meth:`Spread.seeds_note`); a seed holds a claim only
if every one of its runs does. :meth:`Spread.check` returns that count to glue.

**Records are keyed on the machine.** What decides the digits besides the code
and the seed is the CPU and the BLAS: ``ATEN_CPU_CAPABILITY`` picks ATen's
kernels, but MKL and oneDNN dispatch on the CPU itself. A sweep records
:func:`machine_key`; the tests repeat a recorded run only on a machine of the
same kind, or one :func:`stamp` found to repeat it bit for bit
(:func:`repeatable_run`), and skip elsewhere, saying why.

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

On a machine of another kind (another CPU vendor or BLAS), :func:`stamp` records which
recorded runs repeat there bit for bit, so that the tests repeat them there too::

    python -m attnlib.chapters.spread ch03 --stamp --repeat 0/default/1
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
MIN_SEEDS = 5  # below this many seeds a claim "in all seeds" is said as "k of k seeds", suggestive
_MARK = "@@SPREAD@@"
# The fields of machine_key() a record must match for its digits to be expected here.
KEY_FIELDS = ("vendor", "model_name", "cpu_family", "cpu_model", "capability", "torch", "blas")


def _cpuinfo() -> dict:
    """The first processor's ``vendor_id``, ``model name``, ``cpu family`` and ``model`` (Linux)."""
    fields = {
        "vendor_id": "vendor",
        "model name": "model_name",
        "cpu family": "cpu_family",
        "model": "cpu_model",
    }
    out: dict = {}
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {"vendor": platform.processor() or platform.machine()}
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor only
        name, _, value = line.partition(":")
        if name.strip() in fields:
            out[fields[name.strip()]] = value.strip()
    return out


def _torch_side() -> dict:
    """torch's version, its native CPU capability and its BLAS, read in a fresh interpreter.

    A fresh interpreter without ``ATEN_CPU_CAPABILITY``: this process may have set it.
    """
    code = (
        "import json, re, torch\n"
        "cfg = torch.__config__.show()\n"
        "blas = re.search(r'BLAS_INFO=([^,]*)', cfg)\n"
        "lines = [l.strip(' -') for l in cfg.splitlines() if 'Math Kernel' in l or 'MKL-DNN' in l"
        " or 'OpenBLAS' in l]\n"
        "print(json.dumps({'capability': torch.backends.cpu.get_cpu_capability(),"
        " 'torch': torch.__version__,"
        " 'blas': '; '.join(([blas.group(1)] if blas else []) + lines)}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"machine_key: could not read torch's configuration:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


_KEY_CACHE: list = []


def machine_key() -> dict:
    """What decides a trained model's digits on this machine, beyond the code and the seed.

    The CPU (vendor, model name, family and model number, from ``/proc/cpuinfo``), torch's
    version and native CPU capability, and its BLAS (``BLAS_INFO`` and the MKL / MKL-DNN
    versions of ``torch.__config__.show()``). ``ATEN_CPU_CAPABILITY`` picks ATen's kernels,
    but MKL and oneDNN dispatch on the CPU itself: the same seed on the "default" path gives
    other digits on an AMD EPYC than on an Intel Xeon (chapter 06, seed 0, measured). A sweep
    records this key; ``tests/chapters/test_spreads.py`` repeats a recorded run only on a
    machine whose key matches. Read once per process.

    Returns
    -------
    dict
        ``{field: str}`` for the fields of :data:`KEY_FIELDS` this machine reports.
    """
    if not _KEY_CACHE:
        _KEY_CACHE.append({**_cpuinfo(), **_torch_side()})
    return dict(_KEY_CACHE[0])


def key_matches(recorded: dict, here: dict) -> bool:
    """Whether every field of ``recorded`` (among :data:`KEY_FIELDS`) is the same ``here``.

    A record may hold fewer fields than :func:`machine_key` gives (one made before the key
    was recorded: see its ``machine_key_note``); the fields it has must all match.
    """
    fields = [f for f in KEY_FIELDS if f in recorded]
    return bool(fields) and all(recorded[f] == here.get(f) for f in fields)


def describe_key(key: dict) -> str:
    """E.g. ``"AuthenticAMD AMD EPYC (family 25, model 1), AVX2, torch 2.13.0+cpu, mkl; ..."``."""
    cpu = " ".join(str(key[f]) for f in ("vendor", "model_name") if f in key) or "an unknown CPU"
    if "cpu_family" in key:
        cpu += f" (family {key['cpu_family']}, model {key.get('cpu_model', '?')})"
    rest = [str(key[f]) for f in ("capability",) if f in key]
    rest += [f"torch {key['torch']}"] if "torch" in key else []
    rest += [str(key["blas"])] if "blas" in key else []
    return ", ".join([cpu, *rest])


def repeatable_run(record: dict, here: dict | None = None) -> tuple[tuple[int, str, int] | None, str]:
    """Which recorded run this machine can repeat bit for bit, and why (or why none).

    The recording machine (its key is the record's ``machine_key``) repeats seed 0 on the
    native path with one thread, the page's own setting. Another machine repeats a run only
    where the record lists it as reproduced there (``reproduced_on``, written by
    :func:`stamp` after a repeat gave every number bit for bit). Elsewhere none: the
    BLAS may take another path, and a difference would say nothing about the code.

    Returns
    -------
    (run, reason)
        ``run`` is ``(seed, path, threads)`` or None; ``reason`` says why, in words.
    """
    here = machine_key() if here is None else here
    recorded = record.get("machine_key")
    if recorded and key_matches(recorded, here):
        return (0, "native", 1), "this machine is the recording machine's kind"
    for entry in record.get("reproduced_on", []):
        if key_matches(entry["key"], here) and entry["runs"]:
            return tuple(entry["runs"][0]), "this machine's kind reproduced it when stamped"
    was = describe_key(recorded) if recorded else "a machine the record does not name"
    return None, (
        f"{record['name']} was recorded on {was}; this machine is {describe_key(here)}, and no "
        f"recorded run is known to repeat bit for bit here (MKL and oneDNN dispatch on the CPU, "
        f"whatever ATEN_CPU_CAPABILITY says); try: python -m attnlib.chapters.spread "
        f"{record['name']} --stamp"
    )


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
    runs: Sequence[tuple[int, str, int]] | None = None,
    workers: int = 1,
) -> Path:
    """Run every (seed, path, threads) combination and write ``out_dir/<name>.json``.

    The seeds are the sample: each seed is an independent run of the method. The float paths
    and thread counts repeat a seed to measure how far its digits move on other kernels
    (reproducibility), not to add samples; ``runs`` may therefore give an explicit list,
    e.g. every seed on the native path with one thread and seed 0 alone on the others.

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
    runs : sequence of (seed, path, threads), optional
        The runs to make instead of the full grid of ``seeds`` x ``paths`` x ``threads``.
    workers : int, optional
        Runs made at the same time, each in its own interpreter (the numbers do not depend
        on it; timings inside the experiment do).

    Returns
    -------
    pathlib.Path
        The file written; it records this machine's :func:`machine_key`.
    """
    if runs is None:
        runs = [(seed, path, t) for seed in seeds for path in paths for t in threads]
    runs = [(int(seed), str(path), int(t)) for seed, path, t in runs]
    if not any(run == (0, "native", 1) for run in runs):
        raise ValueError("sweep: the runs must include seed 0 on the native path with one thread")
    from concurrent.futures import ThreadPoolExecutor

    def one(key):
        run = run_one(experiment, *key)
        print(f"{name}: seed {key[0]}, {key[1]} ({run['capability']}), {key[2]} thread(s)", flush=True)
        return run

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        done = list(pool.map(one, runs))
    record = {
        "name": name,
        "experiment": experiment,
        "source_hash": source_hash(experiment),
        "seeds": sorted({seed for seed, _, _ in runs}),
        "paths": [p for p in PATHS if any(p == path for _, path, _ in runs)],
        "threads": sorted({t for _, _, t in runs}),
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
        },
        "machine_key": machine_key(),
        "runs": done,
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
        """The recorded seeds, sorted: the independent samples of the method."""
        return sorted({run["seed"] for run in self.runs})

    @property
    def n_seeds(self) -> int:
        """How many independent runs the record holds: its seeds, not its runs.

        A seed repeated on other float paths and thread counts changes only its rounding
        (which training may amplify; :meth:`reproducibility`), not its weights nor its
        batches: it is one sample, however many times it ran.
        """
        return len(self.seeds)

    @property
    def suggestive(self) -> bool:
        """Fewer than :data:`MIN_SEEDS` seeds: a claim that holds in all of them is suggestive."""
        return self.n_seeds < MIN_SEEDS

    @property
    def capabilities(self) -> list:
        return sorted({run["capability"] for run in self.runs})

    @property
    def thread_counts(self) -> list:
        return sorted({run["threads"] for run in self.runs})

    def by_seed(self) -> dict:
        """``{seed: [metrics of each of its runs]}``, seeds sorted."""
        out: dict = {seed: [] for seed in self.seeds}
        for run in self.runs:
            out[run["seed"]].append(run["metrics"])
        return out

    def seeds_holding(self, claim) -> tuple[int, int]:
        """``(k, n)``: ``claim(metrics)`` holds in ``k`` of the ``n`` seeds.

        A seed holds only if the claim holds in every one of its runs (each float path and
        thread count): a claim that a float path can flip is not a property of that seed.
        """
        held = sum(all(bool(claim(m)) for m in runs) for runs in self.by_seed().values())
        return held, self.n_seeds

    def in_seeds(self, claim) -> str:
        """A claim's seed count in words: ``"in all 5 seeds"``, ``"in 3 of 3 seeds"``, ``"in 1 of 3 seeds"``.

        "all" only with at least :data:`MIN_SEEDS` seeds; with fewer, a claim that holds in
        every seed reads ``"in 3 of 3 seeds"`` and the chapter calls it suggestive
        (:meth:`suggestive`, :meth:`seeds_note`).
        """
        k, n = self.seeds_holding(claim)
        if k == n and n >= MIN_SEEDS:
            return f"in all {n} seeds"
        return f"in {k} of {n} seed{'s' if n != 1 else ''}"

    def seeds_note(self) -> str:
        """``""`` with :data:`MIN_SEEDS` seeds or more, else ``" (suggestive: only 3 seeds)"``."""
        if not self.suggestive:
            return ""
        return f" (suggestive: only {self.n_seeds} seed{'s' if self.n_seeds != 1 else ''})"

    def reproducibility(self, metric: str) -> float:
        """The most one seed's value of ``metric`` moves between its float paths and thread counts.

        The largest difference between two runs of the same seed (elementwise for a list
        metric): rounding, not a sample. Zero where each seed ran once.
        """
        worst = 0.0
        for runs in self.by_seed().values():
            vals = [m[metric] for m in runs]
            if isinstance(vals[0], list):
                cols = list(zip(*vals, strict=True))
                worst = max(worst, *(max(c) - min(c) for c in cols))
            else:
                worst = max(worst, max(vals) - min(vals))
        return worst

    def conditions(self) -> str:
        """E.g. ``"5 seeds, 3 float paths AVX2/AVX512/DEFAULT, 1 and 2 threads"`` (no parentheses:
        the chapters glue it inside theirs).

        Where the runs do not cover every combination of those seeds, paths and thread
        counts (extra seeds run on one path only, say), it says how many they cover:
        ``"...; 24 of the 54 combinations"``, so the text never reads as the full grid.
        The samples are the seeds; :meth:`reproduced` says what the repeats are.
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

    def reproduced(self) -> str:
        """What the repeats of a seed are, in words (no parentheses), e.g.
        ``"each seed repeated on 3 float paths AVX2/AVX512/DEFAULT with 1 and 2 threads, to check
        reproducibility, not as more samples"``.
        """
        caps = self.capabilities
        threads = " and ".join(str(t) for t in self.thread_counts)
        repeated = {s for s, runs in self.by_seed().items() if len(runs) > 1}
        who = (
            "each seed"
            if repeated == set(self.seeds)
            else (
                f"seed{'s' if len(repeated) != 1 else ''} {', '.join(map(str, sorted(repeated)))}"
                if repeated
                else "no seed"
            )
        )
        return (
            f"{who} repeated on {len(caps)} float path{'s' if len(caps) != 1 else ''} "
            f"{'/'.join(caps)} with {threads} "
            f"thread{'s' if self.thread_counts != [1] else ''}, to check reproducibility, not as "
            "more samples"
        )

    def describe(self, metric: str, here: float, fmt: str = ".2f") -> str:
        """``"0.74 here; 0.70-0.86 over 5 seeds, 3 float paths .../..., 1 and 2 threads"``."""
        lo, hi = self.low(metric), self.high(metric)
        return f"{here:{fmt}} here; {lo:{fmt}}-{hi:{fmt}} over {self.conditions()}"

    def check(self, claim, description: str) -> str:
        """Assert ``claim(metrics)`` for every recorded run; the error names the seeds where it fails.

        Parameters
        ----------
        claim : callable
            ``claim(metrics: dict) -> bool``.
        description : str
            The claim in words, for the message.

        Returns
        -------
        str
            The seed count to glue beside the claim (:meth:`in_seeds`, plus :meth:`seeds_note`):
            ``"in all 5 seeds"`` or ``"in 3 of 3 seeds (suggestive: only 3 seeds)"``.
        """
        failed = [
            f"seed {r['seed']} on {r['capability']} with {r['threads']} thread(s)"
            for r in self.runs
            if not claim(r["metrics"])
        ]
        if failed:
            k, n = self.seeds_holding(claim)
            raise AssertionError(
                f"expected {description} in every recorded seed of {self.name}; it fails in "
                f"{n - k} of {n} seeds ({len(failed)} of {len(self.runs)} runs): {'; '.join(failed[:5])}"
            )
        return self.in_seeds(claim) + self.seeds_note()


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


def stamp(
    name: str, repeat: Sequence[tuple[int, str, int]] | None = None, directory: Path = SPREAD_DIR
) -> Path:
    """Record that this machine repeats some recorded runs bit for bit (``reproduced_on``).

    A record is repeated by ``tests/chapters/test_spreads.py`` on its recording machine
    (:func:`repeatable_run`). On a machine of another kind (another CPU vendor or model,
    another BLAS) the same seed may round differently; where a recorded run does repeat
    exactly here, this keeps it, with :func:`machine_key`, so that the test repeats it on
    such machines too. Only runs that gave every recorded number again are kept; the
    record's code hash must be current (after a change of the code, sweep again).

    Parameters
    ----------
    name : str
    repeat : sequence of (seed, path, threads), optional
        Recorded runs to try; default seed 0 on each recorded path with one thread.
    directory : pathlib.Path, optional

    Returns
    -------
    pathlib.Path
        The file rewritten.

    Raises
    ------
    ValueError
        The record's hash is not the code's, or a run in ``repeat`` is not recorded.
    AssertionError
        No run repeated bit for bit here (the file is left as it was).
    """
    path = Path(directory) / f"{name}.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    if record["source_hash"] != source_hash(record["experiment"]):
        raise ValueError(f"stamp: {name} was recorded from other code; sweep again first")
    recorded = {(r["seed"], r["path"], r["threads"]): r for r in record["runs"]}
    if repeat is None:
        repeat = [(0, p, 1) for p in record["paths"] if (0, p, 1) in recorded]
    repeat = [(int(seed), str(p), int(t)) for seed, p, t in repeat]
    unknown = [run for run in repeat if run not in recorded]
    if unknown:
        raise ValueError(f"stamp: {name} has no recorded run (seed, path, threads) {unknown[0]}")
    same = []
    for key in repeat:
        run = run_one(record["experiment"], *key)
        old = recorded[key]
        equal = run["metrics"] == old["metrics"] and run["capability"] == old["capability"]
        print(f"{name}: {key} {'as recorded' if equal else 'differs here'}", flush=True)
        if equal:
            same.append(list(key))
    if not same:
        raise AssertionError(f"stamp: no run of {name} repeats bit for bit on {describe_key(machine_key())}")
    here = machine_key()
    entries = [e for e in record.get("reproduced_on", []) if e["key"] != here]
    record["reproduced_on"] = [*entries, {"key": here, "runs": same}]
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
        "--runs",
        type=_run_key,
        nargs="+",
        metavar="SEED/PATH/THREADS",
        help="sweep these runs instead of the grid of --seeds, --paths and --threads",
    )
    parser.add_argument("--workers", type=int, default=1, help="runs at the same time")
    parser.add_argument(
        "--rehash",
        action="store_true",
        help="after a pure refactor: repeat some recorded runs, then record the hash",
    )
    parser.add_argument(
        "--stamp",
        action="store_true",
        help="record which recorded runs repeat bit for bit on this machine (see stamp)",
    )
    parser.add_argument(
        "--repeat",
        type=_run_key,
        nargs="+",
        metavar="SEED/PATH/THREADS",
        help="with --rehash or --stamp: the runs to repeat",
    )
    args = parser.parse_args(argv)
    if args.rehash and args.stamp:
        parser.error("--rehash or --stamp, not both")
    if (args.rehash or args.stamp) == (args.experiment is not None):
        parser.error("give an experiment to sweep, or --rehash (or --stamp) without one")
    if args.repeat and not (args.rehash or args.stamp):
        parser.error("--repeat goes with --rehash or --stamp")
    if args.rehash:
        out = rehash(args.name, args.repeat)
    elif args.stamp:
        out = stamp(args.name, args.repeat)
    else:
        out = sweep(
            args.name,
            args.experiment,
            args.seeds,
            args.paths,
            args.threads,
            runs=args.runs,
            workers=args.workers,
        )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
