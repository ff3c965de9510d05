"""Time and peak memory of attention implementations against the sequence length n.

One command:

    .venv/bin/python benchmarks/attention_bench.py            # full: n = 128 .. 8192
    .venv/bin/python benchmarks/attention_bench.py --quick    # n = 128 .. 2048
    .venv/bin/python benchmarks/attention_bench.py --smoke --out /tmp/b   # tiny, for tests

Setting: float32, batch 1, 8 heads, head dim 64 (model width 512),
``torch.set_num_threads(2)``. Every (implementation, n) point runs in a fresh
Python process that builds its inputs, warms the libraries up on a tiny input,
then

* memory: resets the kernel's peak-RSS counter (``/proc/self/clear_refs``),
  calls the implementation once and reads ``VmHWM`` from ``/proc/self/status``;
  *extra memory* = peak RSS minus the RSS just before the call (inputs already
  built). Where ``clear_refs`` is not writable it falls back to
  ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (a peak that may include the
  start-up); the JSON says which was used.
* time: one warm-up call, then repeats until ``--min-time`` seconds or
  ``--max-repeats`` calls (at least 3); the median is reported.

Points are skipped when the previous n predicts a call longer than
``--time-budget`` seconds or (for the O(n^2) implementations) a score matrix
larger than ``--memory-budget`` MB. The machine's achievable FLOP/s is a plain
2048 x 2048 float32 matmul (torch and NumPy). Attention FLOPs are counted as
``4 n^2 d`` per head (Q K^T and P V), half of that when causal; the
``nn.MultiheadAttention`` rows add the ``8 n D^2`` of its four projections.

A head-to-head section times attnlib's tiled attention and torch SDPA
alternately in one process at the largest sizes, so that the ratio is taken
under the same load (other jobs share this machine; ``os.getloadavg`` is
recorded with every point).

The measuring processes run with ``OMP_WAIT_POLICY=PASSIVE`` (``--omp-wait-policy``):
with the default, OpenMP threads spin at every barrier, and on a machine shared
with other jobs that makes a Python loop of many small parallel operations (the
tiled implementation) several times slower while one fused kernel hardly
notices. The JSON records the policy.

Output: ``<out>/<mode>.json`` and ``<out>/<mode>_time.png``,
``<out>/<mode>_memory.png``, ``<out>/<mode>_flops.png``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HEADS, HEAD_DIM, BATCH, THREADS = 8, 64, 1, 2

# name: (label, is the memory quadratic in n, is it causal, forward + backward)
IMPLS = {
    "numpy_naive": ("naive NumPy softmax(QK^T)V", True, False, False),
    "torch_naive": ("naive torch softmax(QK^T)V", True, False, False),
    "tiled": ("attnlib tiled_attention", False, False, False),
    "tiled_causal": ("attnlib tiled_attention, causal", False, True, False),
    "sdpa": ("torch SDPA", False, False, False),
    "sdpa_causal": ("torch SDPA, is_causal", False, True, False),
    "mha": ("nn.MultiheadAttention (eval fast path)", True, False, False),
    "mha_no_fastpath": ("nn.MultiheadAttention, fast path off", False, False, False),
    "torch_naive_fb": ("naive torch, forward + backward", True, False, True),
    "tiled_fb": ("attnlib tiled_attention, forward + backward", False, False, True),
    "sdpa_fb": ("torch SDPA, forward + backward", False, False, True),
}
# The forward + backward FLOPs: 3.5 x the forward's (FlashAttention-2's count: the
# backward does 2.5 x the forward's matmul work, recomputing the scores included).
FB_FLOPS = 3.5

MODES = {
    "full": [128, 256, 512, 1024, 2048, 4096, 8192],
    "quick": [128, 256, 512, 1024, 2048],
    "smoke": [32, 64],
}
HEAD_TO_HEAD = {"full": [2048, 4096, 8192], "quick": [2048], "smoke": [32]}
# pairs timed alternately in one process by the head-to-head: (attnlib, torch)
PAIRS = {"tiled": "sdpa", "tiled_causal": "sdpa_causal", "tiled_fb": "sdpa_fb"}


# ---------------------------------------------------------------------------
# worker: one point in a fresh process
# ---------------------------------------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_bytes(method: str) -> int:
    if method == "VmHWM":
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def make_call(name: str, n: int, inputs=None):
    """Build inputs (or take ``inputs = (q, k, v)``) and return a zero-argument call."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(THREADS)
    g = torch.Generator().manual_seed(0)
    shape = (BATCH, HEADS, n, HEAD_DIM)
    q, k, v = inputs or (torch.randn(*shape, generator=g) for _ in range(3))
    scale = 1.0 / math.sqrt(HEAD_DIM)

    if name.endswith("_fb"):  # forward + backward, the gradients of q, k, v
        forward = make_call(name[: -len("_fb")], n, inputs=(q, k, v))
        for t in (q, k, v):
            t.requires_grad_(True)
        grad_out = torch.randn(*shape, generator=g)

        def call():
            for t in (q, k, v):
                t.grad = None  # every call allocates its gradients afresh
            forward().backward(grad_out)

        return call
    if name == "numpy_naive":
        qn, kn, vn = (t[0].numpy().copy() for t in (q, k, v))

        def call():
            s = qn @ kn.transpose(0, 2, 1)
            s *= np.float32(scale)
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            return s @ vn

        return call
    if name == "torch_naive":
        return lambda: torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1) @ v
    if name in ("tiled", "tiled_causal"):
        sys.path.insert(0, str(ROOT))
        from attnlib.efficient import tiled_attention

        causal = name == "tiled_causal"
        return lambda: tiled_attention(q, k, v, is_causal=causal)
    if name in ("sdpa", "sdpa_causal"):
        causal = name == "sdpa_causal"
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    if name in ("mha", "mha_no_fastpath"):
        width = HEADS * HEAD_DIM
        mha = torch.nn.MultiheadAttention(width, HEADS, batch_first=True).eval()
        x = torch.randn(BATCH, n, width, generator=g)
        fast = name == "mha"

        def call():
            torch.backends.mha.set_fastpath_enabled(fast)
            with torch.inference_mode():
                return mha(x, x, x, need_weights=False)[0]

        return call
    raise ValueError(f"unknown implementation {name!r}")


def worker(name: str, n: int, min_time: float, max_repeats: int) -> dict:
    # warm the libraries (thread pools, MKL buffers) on a tiny problem first
    make_call(name, 16)()
    call = make_call(name, n)
    gc.collect()
    method = "VmHWM" if _reset_peak() else "ru_maxrss"
    before = _rss_bytes()
    call()  # the measured call for memory (also the warm-up for timing)
    extra = max(_peak_bytes(method) - before, 0)
    times = []
    start = time.perf_counter()
    least = min(3, max_repeats)
    while len(times) < max_repeats and (len(times) < least or time.perf_counter() - start < min_time):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    # the matmul rate in this process, right after: how much CPU the point really had
    mm = matmul_flops(256 if n <= 64 else 2048, repeats=3)
    return {
        "impl": name,
        "n": n,
        "time_ms": 1e3 * statistics.median(times),
        "min_time_ms": 1e3 * min(times),
        "times_ms": [1e3 * t for t in times],
        "matmul_gflops_here": mm["torch_gflops"],
        "extra_mb": extra / 2**20,
        "memory_method": method,
        "load": os.getloadavg(),
        "niceness": os.getpriority(os.PRIO_PROCESS, 0),
    }


def head_to_head(n: int, rounds: int, pairs=tuple(PAIRS)) -> dict:
    """tiled and SDPA timed alternately in one process, same inputs, same load."""
    names = [name for ours in pairs for name in (PAIRS[ours], ours)]
    calls = {name: make_call(name, n) for name in names}
    for call in calls.values():
        call()
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
    med = {name: 1e3 * statistics.median(t) for name, t in times.items()}
    return {
        "n": n,
        "rounds": rounds,
        "median_ms": med,
        "times_ms": {name: [1e3 * x for x in t] for name, t in times.items()},
        **{f"ratio_{ours}_to_{PAIRS[ours]}": med[ours] / med[PAIRS[ours]] for ours in pairs},
        # the ratio of the fastest calls: the least disturbed estimate on a busy machine
        **{
            f"min_ratio_{ours}_to_{PAIRS[ours]}": min(times[ours]) / min(times[PAIRS[ours]]) for ours in pairs
        },
        "load": os.getloadavg(),
        "niceness": os.getpriority(os.PRIO_PROCESS, 0),
    }


def matmul_flops(size: int = 2048, repeats: int = 10) -> dict:
    import torch

    torch.set_num_threads(THREADS)
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(size, size, generator=g), torch.randn(size, size, generator=g)
    an, bn = a.numpy(), b.numpy()
    flops = 2 * size**3
    out = {}
    for name, call in (("torch", lambda: a @ b), ("numpy", lambda: an @ bn)):
        call()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        # the best run: what the machine can achieve when nothing else interferes
        out[f"{name}_gflops"] = flops / min(times) / 1e9
        out[f"{name}_gflops_median"] = flops / statistics.median(times) / 1e9
    out["size"] = size
    return out


# ---------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------


def attention_flops(name: str, n: int) -> float:
    flops = 4.0 * n * n * HEAD_DIM * HEADS * BATCH
    if IMPLS[name][2]:
        flops /= 2
    if IMPLS[name][3]:
        flops *= FB_FLOPS
    if name.startswith("mha"):
        flops += 8.0 * n * (HEADS * HEAD_DIM) ** 2 * BATCH
    return flops


def run_point(args, name: str, n: int) -> dict | None:
    if args.in_process:
        return worker(name, n, args.min_time, args.max_repeats)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        name,
        str(n),
        "--min-time",
        str(args.min_time),
        "--max-repeats",
        str(args.max_repeats),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.point_timeout)
    if proc.returncode != 0:
        print(f"  {name} n={n} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fit_exponent(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(y) against log(x)."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def fits(results: list[dict], lo: int, hi: int) -> dict:
    out = {}
    for name in IMPLS:
        rows = [r for r in results if r["impl"] == name and lo <= r["n"] <= hi]
        out[name] = {
            "n_range": [lo, hi],
            "points": len(rows),
            "time_exponent": fit_exponent([(r["n"], r["time_ms"]) for r in rows]),
            "memory_exponent": fit_exponent([(r["n"], r["extra_mb"]) for r in rows]),
        }
    return out


def plot(data: dict, out: Path, mode: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results, fit = data["results"], data["fits"]
    files = []
    for key, ylabel, suffix, exp_key in (
        ("time_ms", "time per call (ms)", "time", "time_exponent"),
        ("extra_mb", "extra peak memory (MB)", "memory", "memory_exponent"),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for name, (label, _, causal, fb) in IMPLS.items():
            rows = sorted((r for r in results if r["impl"] == name), key=lambda r: r["n"])
            if not rows:
                continue
            e = fit[name][exp_key]
            tag = f" (slope {e:.2f})" if e is not None else ""
            ax.plot(
                [r["n"] for r in rows],
                [max(r[key], 1e-3) for r in rows],
                "s:" if fb else "o--" if causal else "o-",
                label=label + tag,
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n")
        ax.set_ylabel(ylabel)
        lo, hi = data["meta"]["fit_range"]
        ax.set_title(f"{ylabel} vs n (slopes fitted for {lo} <= n <= {hi})", fontsize=10)
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        path = out / f"{mode}_{suffix}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(path.name)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, (label, _, causal, fb) in IMPLS.items():
        rows = sorted((r for r in results if r["impl"] == name), key=lambda r: r["n"])
        if rows:
            ax.plot(
                [r["n"] for r in rows],
                [100 * r["fraction_of_matmul"] for r in rows],
                "s:" if fb else "o--" if causal else "o-",
                label=label,
            )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("% of the 2048x2048 matmul FLOP/s")
    ax.set_title(
        f"fraction of the achievable {data['matmul']['achievable_gflops']:.0f} GFLOP/s reached", fontsize=10
    )
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    path = out / f"{mode}_flops.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    files.append(path.name)
    return files


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="n = 128 .. 2048")
    mode.add_argument("--smoke", action="store_true", help="tiny sizes (for tests)")
    p.add_argument("--out", type=Path, default=HERE / "results", help="output folder")
    p.add_argument("--impl", nargs="*", choices=list(IMPLS), help="only these implementations")
    p.add_argument("--sizes", nargs="*", type=int, help="override the list of n")
    p.add_argument(
        "--time-budget",
        type=float,
        default=20.0,
        help="skip a point whose predicted single call exceeds this (s)",
    )
    p.add_argument(
        "--memory-budget",
        type=float,
        default=8000.0,
        help="skip an O(n^2) point whose score matrix exceeds this (MB)",
    )
    p.add_argument("--min-time", type=float, default=2.0, help="time each point this long (s)")
    p.add_argument("--max-repeats", type=int, default=15)
    p.add_argument("--point-timeout", type=float, default=600.0)
    p.add_argument("--rounds", type=int, default=5, help="rounds of the head-to-head")
    p.add_argument(
        "--in-process",
        action="store_true",
        help="run every point in this process (fast, memory figures less clean; the default for --smoke)",
    )
    p.add_argument(
        "--update",
        action="store_true",
        help="merge into an existing <out>/<mode>.json: a point measured again keeps "
        "its fastest measurement (other jobs only add time), the others are kept",
    )
    p.add_argument(
        "--nice",
        type=int,
        default=0,
        help="change the niceness of the measuring processes by this much (negative "
        "= higher priority, needs the right to do so; for a busy shared machine)",
    )
    p.add_argument(
        "--merge",
        nargs="*",
        type=Path,
        metavar="JSON",
        help="with --update or --replot: also take the points of these result files (same mode and settings)",
    )
    p.add_argument(
        "--replot",
        action="store_true",
        help="measure nothing; recompute the fits and plots of <out>/<mode>.json",
    )
    p.add_argument(
        "--pairs",
        nargs="*",
        choices=list(PAIRS),
        help="head-to-head pairs (attnlib vs torch), default: every pair whose two "
        "implementations are measured",
    )
    p.add_argument(
        "--h2h-sizes",
        nargs="*",
        type=int,
        metavar="N",
        help="sizes of the head-to-head (default: the mode's, or the largest --sizes)",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="with --update: the points and head-to-head pairs measured now replace "
        "the stored ones (after a change of the code), instead of keeping the "
        "fastest",
    )
    p.add_argument("--worker", nargs=2, metavar=("IMPL", "N"), help=argparse.SUPPRESS)
    p.add_argument("--head-to-head", type=int, metavar="N", help=argparse.SUPPRESS)
    p.add_argument(
        "--omp-wait-policy",
        choices=["passive", "active", "unset"],
        default="passive",
        help="OMP_WAIT_POLICY for the measuring processes (default passive: on a "
        "shared machine, threads spinning at every barrier make a loop of many "
        "small parallel ops very slow)",
    )
    args = p.parse_args(argv)
    if args.omp_wait_policy != "unset" and "torch" not in sys.modules:
        # must be set before the OpenMP runtime starts; children inherit it
        os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy.upper()

    if args.worker:
        print(json.dumps(worker(args.worker[0], int(args.worker[1]), args.min_time, args.max_repeats)))
        return 0
    if args.head_to_head:
        print(json.dumps(head_to_head(args.head_to_head, args.rounds, args.pairs)))
        return 0

    if args.nice:
        try:
            os.nice(args.nice)  # the worker processes inherit it
        except OSError as exc:
            print(f"could not change the niceness by {args.nice}: {exc}", file=sys.stderr)
    mode_name = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.smoke:
        args.min_time, args.max_repeats, args.rounds = 0.0, 1, 1
        args.in_process = True
    sizes = args.sizes or MODES[mode_name]
    impls = args.impl or list(IMPLS)
    args.out.mkdir(parents=True, exist_ok=True)

    import numpy
    import torch

    started = time.time()
    load_start = os.getloadavg()
    print(f"mode {mode_name}: n = {sizes}", flush=True)
    if args.replot:  # measure nothing: recompute fits, fractions and plots of <mode>.json
        impls, args.update, args.rounds = [], True, 0
        mm = {"torch_gflops": 0.0}
    else:
        mm = matmul_flops(256 if args.smoke else 2048)
        print(f"matmul: torch {mm['torch_gflops']:.0f} GFLOP/s, numpy {mm['numpy_gflops']:.0f}", flush=True)

    results, skipped = [], []
    for name in impls:
        prev = None
        for n in sizes:
            score_mb = 4 * BATCH * HEADS * n * n / 2**20
            if IMPLS[name][1] and score_mb > args.memory_budget:
                skipped.append({"impl": name, "n": n, "reason": f"score matrix {score_mb:.0f} MB"})
                continue
            if prev is not None and prev["time_ms"] / 1e3 * (n / prev["n"]) ** 2 > args.time_budget:
                skipped.append({"impl": name, "n": n, "reason": "predicted time over budget"})
                continue
            row = run_point(args, name, n)
            if row is None:
                skipped.append({"impl": name, "n": n, "reason": "worker failed"})
                continue
            row["flops"] = attention_flops(name, n)
            row["gflops"] = row["flops"] / (row["time_ms"] / 1e3) / 1e9
            row["fraction_of_matmul"] = row["gflops"] / mm["torch_gflops"]
            row["fraction_of_matmul_here"] = row["gflops"] / row["matmul_gflops_here"]
            results.append(row)
            prev = row
            print(
                f"  {name:16s} n={n:5d} {row['time_ms']:9.1f} ms {row['extra_mb']:8.1f} MB "
                f"{100 * row['fraction_of_matmul']:5.1f}% (matmul here "
                f"{row['matmul_gflops_here']:.0f} GFLOP/s) load {row['load'][0]:.2f}",
                flush=True,
            )

    h2h = []
    if args.pairs is None:
        args.pairs = [ours for ours in PAIRS if {ours, PAIRS[ours]} <= set(impls)]
    h2h_sizes = args.h2h_sizes or (HEAD_TO_HEAD[mode_name] if not args.sizes else sizes[-1:])
    if args.rounds > 0 and args.pairs:
        for n in h2h_sizes:
            if args.in_process:
                h2h.append(head_to_head(n, args.rounds, args.pairs))
            else:
                cmd = [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--head-to-head",
                    str(n),
                    "--rounds",
                    str(args.rounds),
                    "--pairs",
                    *args.pairs,
                ]
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.point_timeout)
                if proc.returncode != 0:
                    print(f"  head-to-head n={n} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                    continue
                h2h.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            if h2h:
                r = h2h[-1]
                ratios = ", ".join(
                    f"{ours}/{PAIRS[ours]} {r[f'ratio_{ours}_to_{PAIRS[ours]}']:.2f}" for ours in args.pairs
                )
                print(f"  head-to-head n={n}: {ratios} (load {r['load'][0]:.1f})", flush=True)

    if args.update and (args.out / f"{mode_name}.json").is_file():
        # keep the earlier points that were not measured again in this run
        old = json.loads((args.out / f"{mode_name}.json").read_text())
        for other in args.merge or []:  # points of other runs, same settings
            more = json.loads(Path(other).read_text())
            if args.replace:  # a run of the changed code: its points count as measured now
                results += more["results"]
                h2h += more["head_to_head"]
            else:
                old["results"] += more["results"]
                old["head_to_head"] += more["head_to_head"]
            old["meta"]["updates"] = old["meta"].get("updates", []) + [f"merged {other}"]
        # A point measured more than once keeps its least disturbed measurement. Other jobs
        # can only add time, so that is the fastest one (its memory is the same every time).
        best = {}
        for r in old["results"] + results:
            key = (r["impl"], r["n"])
            if key not in best or r["time_ms"] < best[key]["time_ms"]:
                best[key] = r
        if args.replace:  # the code changed: what was measured now wins
            best.update({(r["impl"], r["n"]): r for r in results})
        fresh = {(r["impl"], r["n"]) for r in skipped}
        results = [r for key, r in best.items() if key not in fresh]
        by_n = {}  # one head-to-head per (n, pairs): the one under the lowest load
        for h in old["head_to_head"] + h2h:
            key = (h["n"], tuple(sorted(_pairs_of(h))))
            if key not in by_n or h["load"][0] < by_n[key]["load"][0]:
                by_n[key] = h
        if args.replace:
            by_n.update({(h["n"], tuple(sorted(_pairs_of(h)))): h for h in h2h})
        h2h = list(by_n.values())
        measured = set(best)
        skipped = [r for r in old["skipped"] if (r["impl"], r["n"]) not in measured] + skipped
        h2h.sort(key=lambda h: h["n"])
        if old["matmul"]["torch_gflops"] > mm["torch_gflops"]:
            mm = old["matmul"]  # the best one measured at a start
        sizes = sorted(set(sizes) | set(old["meta"]["sizes"]))
        load_start = old["meta"]["load_start"]
        updates = old["meta"].get("updates", []) + [time.strftime("%Y-%m-%d %H:%M:%S")]
    else:
        updates = []
    results.sort(key=lambda r: (list(IMPLS).index(r["impl"]), r["n"]))
    # The achievable rate: the best 2048 x 2048 matmul of the run, at the start or in any
    # point's process (on a busy machine the one at the start may be far below it).
    mm = dict(mm)
    mm["achievable_gflops"] = max([mm["torch_gflops"]] + [r.get("matmul_gflops_here", 0.0) for r in results])
    for row in results:
        row["fraction_of_matmul"] = row["gflops"] / mm["achievable_gflops"]

    done = sorted({r["n"] for r in results})
    lo = 1024 if 1024 in done and done[-1] > 1024 else (done[len(done) // 2 - 1] if done else 0)
    hi = done[-1] if done else 0
    if len(done) >= 2 and lo >= hi:
        lo = done[-2]
    data = {
        "meta": {
            "mode": mode_name,
            "command": " ".join(
                [Path(sys.executable).name, "benchmarks/attention_bench.py"]
                + (["--" + mode_name] if mode_name != "full" else [])
            ),
            "dtype": "float32",
            "batch": BATCH,
            "heads": HEADS,
            "head_dim": HEAD_DIM,
            "threads": THREADS,
            "sizes": sizes,
            "python": platform.python_version(),
            "torch": torch.__version__,
            "numpy": numpy.__version__,
            "machine": platform.machine(),
            "processor": _cpu_name(),
            "cpu_count": os.cpu_count(),
            "memory_method": results[0]["memory_method"] if results else None,
            "in_process": bool(args.in_process),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "niceness": sorted({r.get("niceness", 0) for r in results}),
            "memory_definition": "peak RSS during one call minus the RSS just before it "
            "(inputs built, libraries warmed up), fresh process per point",
            "time_definition": "median of >= 3 calls after one warm-up, fresh process per point",
            "flops_definition": "4 n^2 d per head (QK^T and PV), halved when causal; "
            "MultiheadAttention adds 8 n D^2 for its projections",
            "time_budget_s": args.time_budget,
            "memory_budget_mb": args.memory_budget,
            "fit_range": [lo, hi],
            "load_start": load_start,
            "uptime": _uptime(),
            "updates": updates,
            "elapsed_s": None,
        },
        "matmul": mm,
        "results": results,
        "skipped": skipped,
        "fits": fits(results, lo, hi),
        "head_to_head": h2h,
        "targets": targets(results, h2h),
    }
    data["meta"]["load_end"] = os.getloadavg()
    data["meta"]["elapsed_s"] = time.time() - started
    data["plots"] = plot(data, args.out, mode_name)
    path = args.out / f"{mode_name}.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path} and {', '.join(data['plots'])} in {data['meta']['elapsed_s']:.0f} s")
    return 0


def _pairs_of(h2h: dict) -> list[str]:
    return [ours for ours in PAIRS if f"ratio_{ours}_to_{PAIRS[ours]}" in h2h]


def targets(results: list[dict], h2h: list[dict]) -> dict:
    """The figures of issue 15: attnlib's tiled attention against SDPA.

    Time ratios come from the head-to-head (the two timed alternately in one process,
    the fastest call of each: the least disturbed estimate on a shared machine) where
    it was run, else from the separate points; memory from the separate points.
    """
    point = {(r["impl"], r["n"]): r for r in results}
    out = {}
    for ours, n in (("tiled", 4096), ("tiled_fb", 2048), ("tiled_fb", 4096)):
        theirs = PAIRS[ours]
        key = f"time_ratio_{ours}_to_{theirs}_n{n}"
        h = [h for h in h2h if h["n"] == n and f"min_ratio_{ours}_to_{theirs}" in h]
        if h:
            out[key] = {
                "value": h[-1][f"min_ratio_{ours}_to_{theirs}"],
                "from": "head_to_head",
                "median_ratio": h[-1][f"ratio_{ours}_to_{theirs}"],
            }
        elif (ours, n) in point and (theirs, n) in point:
            out[key] = {"value": point[ours, n]["time_ms"] / point[theirs, n]["time_ms"], "from": "points"}
    rows = [(r["n"], r["extra_mb"]) for r in results if r["impl"] == "tiled_fb" and 1024 <= r["n"] <= 4096]
    out["memory_exponent_tiled_fb_1024_4096"] = fit_exponent(rows)
    if ("tiled_fb", 4096) in point and ("sdpa_fb", 4096) in point:
        out["memory_ratio_tiled_fb_to_sdpa_fb_n4096"] = (
            point["tiled_fb", 4096]["extra_mb"] / point["sdpa_fb", 4096]["extra_mb"]
        )
    return out


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"load average {os.getloadavg()}"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
