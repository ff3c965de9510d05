"""Chapter 13's variants, measured side by side with torch in one run.

    .venv/bin/python benchmarks/variants_bench.py                  # n = 1024 .. 8192, window 512
    .venv/bin/python benchmarks/variants_bench.py --smoke --out /tmp/v   # tiny, for the test

Two questions, each answered against its baseline in the same process and under the
same load (``os.getloadavg`` is recorded with every point):

* **The window.** ``attnlib.variants.sliding_window_attention`` (the banded, tiled
  kernel) against ``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``
  (full causal attention), forward, float32, batch 1, 8 heads, head dim 64, at a fixed
  window as ``n`` grows: the median of alternating calls, and the extra peak memory of
  one call, each in a fresh process (``VmHWM`` after ``/proc/self/clear_refs``).
* **Constant cost per token.** Generating ``T`` tokens one at a time with
  ``LinearAttentionState`` (a fixed ``(d, d)`` state) against attending over a growing
  KV cache (``F.scaled_dot_product_attention`` of one query over every cached key),
  each method generating the whole sequence in a pass of its own, the passes
  alternating (A, B, A, B, ...): the median over repeats of
  each step's time against its position, and two slopes, both relative: the fitted
  line's rise over the whole run divided by the mean step time (``relative_slope``), and
  the median step time of the last quarter of positions over the first quarter's, minus
  1 (``quarter_growth``). Issue 46's target: under 0.1 for the linear state.
* **Chapter 08's tiled kernel against SDPA.** ``attnlib.efficient.tiled_attention``
  and ``F.scaled_dot_product_attention`` (not causal), forward at ``n = 4096`` and
  forward + backward at ``n = 2048``, alternating calls in one process.

Every timed pair alternates (A, B, A, B, ...) after a warm-up call of each, on
``--threads`` threads (default 1); each call's wall time (``perf_counter``) and process
CPU time (``process_time``) are kept, with the medians, the fastest calls and the load
average before and after the pair. On a machine shared with other jobs, wall times
inflate with the load; the CPU times much less (a preempted process is not charged),
though caches shared with other jobs still slow both. Output: ``<out>/<mode>.json`` and
``<out>/<mode>.png``. Nothing here is a timed test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADS, HEAD_DIM = 8, 64
# Idle OpenMP threads sleep instead of spinning (as in attention_bench.py): on a machine shared
# with other jobs, spinning makes a kernel of many small operations several times slower while
# one fused kernel hardly notices. Set before torch is imported; the JSON records it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _peak_memory_worker(impl: str, n: int, window: int, block: int, threads: int = 1) -> dict:
    """One call of ``impl`` at ``n`` in this (fresh) process: the extra peak RSS it needed."""
    import torch
    import torch.nn.functional as F

    from attnlib.variants import sliding_window_attention

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, n, HEAD_DIM, generator=gen) for _ in range(3))
    with torch.no_grad():
        small = (t[..., :64, :] for t in (q, k, v))
        sliding_window_attention(*small, 16) if impl == "sliding" else F.scaled_dot_product_attention(
            q[..., :64, :], k[..., :64, :], v[..., :64, :], is_causal=True
        )
        with open("/proc/self/statm") as f:
            before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            method = "VmHWM"
        except OSError:
            method = "ru_maxrss"
        if impl == "sliding":
            sliding_window_attention(q, k, v, window, block_size=block)
        else:
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if method == "VmHWM":
        with open("/proc/self/status") as f:
            peak = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    else:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"impl": impl, "n": n, "extra_mb": max(peak - before, 0) / 2**20, "method": method}


def peak_memory(impl: str, n: int, window: int, block: int, threads: int) -> dict:
    code = (
        f"import json, sys; sys.path.insert(0, {str(HERE)!r}); import variants_bench as b; "
        f"print(json.dumps(b._peak_memory_worker({impl!r}, {n}, {window}, {block}, {threads})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def alternate(calls: dict, rounds: int) -> dict:
    """Time ``calls`` (name -> zero-argument call) alternately, ``rounds`` times each after a warm-up.

    Returns per name the wall and process-CPU seconds of every call, their medians and
    minima, and the load average before and after.
    """
    load_before = os.getloadavg()[0]
    wall: dict[str, list[float]] = {name: [] for name in calls}
    cpu: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        call()  # warm-up
    for _ in range(rounds):
        for name, call in calls.items():
            c0, w0 = time.process_time(), time.perf_counter()
            call()
            wall[name].append(time.perf_counter() - w0)
            cpu[name].append(time.process_time() - c0)
    return {
        "median_s": {name: statistics.median(ts) for name, ts in wall.items()},
        "min_s": {name: min(ts) for name, ts in wall.items()},
        "median_cpu_s": {name: statistics.median(ts) for name, ts in cpu.items()},
        "wall_s": wall,
        "cpu_s": cpu,
        "rounds": rounds,
        "load": [load_before, os.getloadavg()[0]],
    }


def head_to_head(n: int, window: int, block: int, rounds: int) -> dict:
    """Alternating calls of the windowed kernel and full causal SDPA at ``n``: medians and their ratio."""
    import torch
    import torch.nn.functional as F

    from attnlib.variants import sliding_window_attention

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, n, HEAD_DIM, generator=gen) for _ in range(3))
    calls = {
        "sliding": lambda: sliding_window_attention(q, k, v, window, block_size=block),
        "sdpa_causal": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    }
    with torch.no_grad():
        timed = alternate(calls, rounds)
    return {
        "n": n,
        "window": window,
        "block_size": block,
        **timed,
        "speedup": timed["median_s"]["sdpa_causal"] / timed["median_s"]["sliding"],
        "speedup_cpu": timed["median_cpu_s"]["sdpa_causal"] / timed["median_cpu_s"]["sliding"],
        "speedup_fastest": timed["min_s"]["sdpa_causal"] / timed["min_s"]["sliding"],
    }


def tiled_vs_sdpa(n: int, backward: bool, rounds: int) -> dict:
    """Chapter 08's ``tiled_attention`` against SDPA (not causal), forward or forward + backward."""
    import torch
    import torch.nn.functional as F

    from attnlib.efficient import tiled_attention

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, n, HEAD_DIM, generator=gen) for _ in range(3))
    grad_out = torch.randn(1, HEADS, n, HEAD_DIM, generator=gen)

    def make(attend):
        if not backward:
            return lambda: attend(q, k, v)

        def call():
            for t in (q, k, v):
                t.grad = None  # fresh gradients every call
            attend(q, k, v).backward(grad_out)

        return call

    for t in (q, k, v):
        t.requires_grad_(backward)
    calls = {"tiled": make(tiled_attention), "sdpa": make(F.scaled_dot_product_attention)}
    with torch.set_grad_enabled(backward):
        timed = alternate(calls, rounds)
    return {
        "n": n,
        "pass": "forward + backward" if backward else "forward",
        **timed,
        "ratio": timed["median_s"]["tiled"] / timed["median_s"]["sdpa"],
        "ratio_cpu": timed["median_cpu_s"]["tiled"] / timed["median_cpu_s"]["sdpa"],
        "ratio_fastest": timed["min_s"]["tiled"] / timed["min_s"]["sdpa"],
    }


def decoding(tokens: int, repeats: int) -> dict:
    """Time per generated token against its position: a linear-attention state vs a growing KV cache."""
    import torch
    import torch.nn.functional as F

    from attnlib.variants import LinearAttentionState

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, tokens, HEAD_DIM, generator=gen) for _ in range(3))
    runs = {"linear_state": [], "kv_cache": []}
    load_before = os.getloadavg()[0]

    def linear_state_pass() -> list[float]:
        state, times = LinearAttentionState(), []
        for t in range(tokens):
            start = time.perf_counter()
            state.step(q[..., t, :], k[..., t, :], v[..., t, :])
            times.append(time.perf_counter() - start)
        return times

    def kv_cache_pass() -> list[float]:
        times = []
        for t in range(tokens):
            start = time.perf_counter()
            F.scaled_dot_product_attention(q[..., t : t + 1, :], k[..., : t + 1, :], v[..., : t + 1, :])
            times.append(time.perf_counter() - start)
        return times

    # Each method generates the whole sequence in a pass of its own, the passes alternating,
    # so that load falls on both alike. Not step by step in one loop: the cache's growing
    # reads then evict the state from the CPU's caches, and the state's step grows with the
    # position for a reason that is the cache's, not its own (relative slope 0.27-0.39
    # interleaved against 0.005-0.13 alone, 2-core AMD EPYC at load 3, 7 repeats).
    with torch.no_grad():
        for _ in range(repeats):
            runs["linear_state"].append(linear_state_pass())
            runs["kv_cache"].append(kv_cache_pass())
    per_step = {
        name: [statistics.median(r[t] for r in rs) for t in range(tokens)] for name, rs in runs.items()
    }
    out = {
        "tokens": tokens,
        "repeats": repeats,
        "per_step_s": per_step,
        "relative_slope": {},
        "quarter_growth": {},
        "load": [load_before, os.getloadavg()[0]],
        "slope_definitions": {
            "relative_slope": "least-squares slope of step time vs position over positions 8.., times "
            "the span of positions, over the mean step time: the line's relative rise over the run",
            "quarter_growth": "median step time of the last quarter of positions over the first "
            "quarter's (from position 8), minus 1",
        },
    }
    for name, ts in per_step.items():
        trimmed = ts[8:]  # the first steps include warm-up
        xs = list(range(8, tokens))
        slope = statistics.linear_regression(xs, trimmed).slope
        out["relative_slope"][name] = slope * (xs[-1] - xs[0]) / statistics.mean(trimmed)
        quarter = max(1, len(trimmed) // 4)
        first, last = statistics.median(trimmed[:quarter]), statistics.median(trimmed[-quarter:])
        out["quarter_growth"][name] = last / first - 1
    return out


def _exponent(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(y) against log(n)."""
    points = [(n, y) for n, y in points if y > 0]
    if len(points) < 2:
        return None
    return statistics.linear_regression(
        [math.log(n) for n, _ in points], [math.log(y) for _, y in points]
    ).slope


def targets(data: dict) -> dict:
    """Issue 46's performance figures, read from this run."""
    h2h = {p["n"]: p for p in data["window"]["head_to_head"]}
    mem = data["window"]["memory"]
    sliding_mem = [(m["n"], m["extra_mb"]) for m in mem if m["impl"] == "sliding"]
    out = {}
    top = max(h2h)
    out["window_speedup"] = {
        "n": top,
        "target": ">= 5",
        "wall": h2h[top]["speedup"],
        "cpu": h2h[top]["speedup_cpu"],
        "fastest": h2h[top]["speedup_fastest"],
        "met_wall": h2h[top]["speedup"] >= 5,
        "met_cpu": h2h[top]["speedup_cpu"] >= 5,
    }
    exponent = _exponent(sliding_mem)
    out["window_memory_exponent"] = {
        "points_mb": sliding_mem,
        "exponent": exponent,
        "target": "linear in n (exponent <= 1.1)",
        "met": exponent is not None and exponent <= 1.1,
    }
    growth = data["decoding"]["quarter_growth"]["linear_state"]
    slope = data["decoding"]["relative_slope"]["linear_state"]
    out["linear_state_slope"] = {
        "relative_slope": slope,
        "quarter_growth": growth,
        "target": "< 0.1 (both definitions)",
        "met": abs(slope) < 0.1 and abs(growth) < 0.1,
    }
    for key, limit in (("tiled_forward", 1.1), ("tiled_forward_backward", 1.2)):
        p = data["tiled"][key]
        out[key] = {
            "n": p["n"],
            "target": f"<= {limit}",
            "wall": p["ratio"],
            "cpu": p["ratio_cpu"],
            "fastest": p["ratio_fastest"],
            "met_wall": p["ratio"] <= limit,
            "met_cpu": p["ratio_cpu"] <= limit,
        }
    return out


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c, d) = plt.subplots(4, 1, figsize=(5, 12), dpi=110)
    h2h = data["window"]["head_to_head"]
    ns = [p["n"] for p in h2h]
    for name, label in (("sliding", "sliding window (attnlib)"), ("sdpa_causal", "full causal SDPA (torch)")):
        a.loglog(ns, [p["median_s"][name] for p in h2h], "o-", label=label)
    a.set(xlabel="n", ylabel="forward time (s)", title=f"window {data['window']['window']}")
    a.legend()
    mem = data["window"]["memory"]
    for name in ("sliding", "sdpa_causal"):
        pts = [m for m in mem if m["impl"] == name]
        b.loglog([m["n"] for m in pts], [max(m["extra_mb"], 1e-3) for m in pts], "o-", label=name)
    b.set(xlabel="n", ylabel="extra peak memory (MB)")
    b.legend()
    dec = data["decoding"]
    for name, ts in dec["per_step_s"].items():
        c.plot(range(len(ts)), [t * 1e6 for t in ts], label=name)
    c.set(xlabel="position of the generated token", ylabel="time per token (us)")
    c.legend()
    tiled = data["tiled"]
    labels = [f"{p['pass']}\nn = {p['n']}" for p in tiled.values()]
    xs = range(len(labels))
    d.bar([x - 0.2 for x in xs], [p["ratio"] for p in tiled.values()], width=0.4, label="wall, median")
    d.bar([x + 0.2 for x in xs], [p["ratio_cpu"] for p in tiled.values()], width=0.4, label="CPU, median")
    d.axhline(1.0, color="k", lw=0.8)
    d.set_xticks(list(xs), labels)
    d.set(ylabel="tiled_attention / SDPA time", title="chapter 08's tiled kernel")
    d.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds (for the test)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--block", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5, help="decoding runs (the median per position)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    mode = "variants_smoke" if args.smoke else "variants"
    sizes = [256, 512] if args.smoke else [1024, 2048, 4096, 8192]
    window = 64 if args.smoke else args.window
    rounds = 2 if args.smoke else args.rounds
    tokens, repeats = (40, 1) if args.smoke else (2048, args.repeats)
    tiled_sizes = (256, 128) if args.smoke else (4096, 2048)
    data = {
        "meta": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpu": platform.processor() or platform.machine(),
            "threads": torch.get_num_threads(),
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "setting": f"float32, batch 1, {HEADS} heads, head dim {HEAD_DIM}, forward only",
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "load_at_start": os.getloadavg()[0],
            "uptime": Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").exists() else None,
            "timing": "alternating calls after a warm-up; wall (perf_counter) and process CPU "
            "(process_time) per call; medians",
        },
        "window": {
            "window": window,
            "block_size": args.block,
            "head_to_head": [head_to_head(n, window, args.block, rounds) for n in sizes],
            "memory": [
                peak_memory(impl, n, window, args.block, args.threads)
                for n in sizes
                for impl in ("sliding", "sdpa_causal")
            ],
        },
        "decoding": decoding(tokens, repeats),
        "tiled": {
            "tiled_forward": tiled_vs_sdpa(tiled_sizes[0], False, rounds),
            "tiled_forward_backward": tiled_vs_sdpa(tiled_sizes[1], True, rounds),
        },
    }
    data["meta"]["load_at_end"] = os.getloadavg()[0]
    data["targets"] = targets(data)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{mode}.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    plot(data, args.out / f"{mode}.png")
    for p in data["window"]["head_to_head"]:
        print(
            f"n={p['n']}: sliding {p['median_s']['sliding']:.4f} s, SDPA causal "
            f"{p['median_s']['sdpa_causal']:.4f} s, speed-up {p['speedup']:.2f}x wall, "
            f"{p['speedup_cpu']:.2f}x CPU (load {p['load'][0]:.1f}-{p['load'][1]:.1f})"
        )
    for name, s in data["decoding"]["relative_slope"].items():
        growth = data["decoding"]["quarter_growth"][name]
        print(f"decoding {name}: relative slope {s:.3f}, last quarter / first - 1 = {growth:.3f}")
    for p in data["tiled"].values():
        print(
            f"tiled / SDPA, {p['pass']}, n={p['n']}: {p['ratio']:.3f} wall, {p['ratio_cpu']:.3f} CPU, "
            f"{p['ratio_fastest']:.3f} fastest (load {p['load'][0]:.1f}-{p['load'][1]:.1f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
