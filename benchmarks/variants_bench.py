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
  KV cache (``F.scaled_dot_product_attention`` of one query over every cached key):
  the time of each step against its position, and the fitted slope of time vs position
  (relative: the slope's rise over the whole run divided by the mean step time).

Output: ``<out>/<mode>.json`` and ``<out>/<mode>.png``. Nothing here is a timed test.
"""

from __future__ import annotations

import argparse
import json
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


def _peak_memory_worker(impl: str, n: int, window: int, block: int) -> dict:
    """One call of ``impl`` at ``n`` in this (fresh) process: the extra peak RSS it needed."""
    import torch
    import torch.nn.functional as F

    from attnlib.variants import sliding_window_attention

    torch.set_num_threads(2)
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


def peak_memory(impl: str, n: int, window: int, block: int) -> dict:
    code = (
        f"import json, sys; sys.path.insert(0, {str(HERE)!r}); import variants_bench as b; "
        f"print(json.dumps(b._peak_memory_worker({impl!r}, {n}, {window}, {block})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


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
    times: dict[str, list[float]] = {name: [] for name in calls}
    with torch.no_grad():
        for call in calls.values():
            call()  # warm-up
        for _ in range(rounds):
            for name, call in calls.items():
                start = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - start)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    return {
        "n": n,
        "window": window,
        "block_size": block,
        "median_s": med,
        "speedup": med["sdpa_causal"] / med["sliding"],
        "rounds": rounds,
        "load": os.getloadavg()[0],
    }


def decoding(tokens: int, repeats: int) -> dict:
    """Time per generated token against its position: a linear-attention state vs a growing KV cache."""
    import torch
    import torch.nn.functional as F

    from attnlib.variants import LinearAttentionState

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, tokens, HEAD_DIM, generator=gen) for _ in range(3))
    per_step = {"linear_state": [0.0] * tokens, "kv_cache": [0.0] * tokens}
    with torch.no_grad():
        for _ in range(repeats):
            state = LinearAttentionState()
            for t in range(tokens):
                start = time.perf_counter()
                state.step(q[..., t, :], k[..., t, :], v[..., t, :])
                per_step["linear_state"][t] += (time.perf_counter() - start) / repeats
            for t in range(tokens):
                start = time.perf_counter()
                F.scaled_dot_product_attention(q[..., t : t + 1, :], k[..., : t + 1, :], v[..., : t + 1, :])
                per_step["kv_cache"][t] += (time.perf_counter() - start) / repeats
    out = {"tokens": tokens, "repeats": repeats, "per_step_s": per_step, "relative_slope": {}}
    for name, ts in per_step.items():
        trimmed = ts[8:]  # the first steps include warm-up
        xs = list(range(8, tokens))
        slope = statistics.linear_regression(xs, trimmed).slope
        out["relative_slope"][name] = slope * (xs[-1] - xs[0]) / statistics.mean(trimmed)
    return out


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c) = plt.subplots(3, 1, figsize=(5, 9), dpi=110)
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
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(2)
    mode = "variants_smoke" if args.smoke else "variants"
    sizes = [256, 512] if args.smoke else [1024, 2048, 4096, 8192]
    window = 64 if args.smoke else args.window
    rounds = 2 if args.smoke else args.rounds
    tokens, repeats = (40, 1) if args.smoke else (2048, 3)
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
        },
        "window": {
            "window": window,
            "block_size": args.block,
            "head_to_head": [head_to_head(n, window, args.block, rounds) for n in sizes],
            "memory": [
                peak_memory(impl, n, window, args.block) for n in sizes for impl in ("sliding", "sdpa_causal")
            ],
        },
        "decoding": decoding(tokens, repeats),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{mode}.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    plot(data, args.out / f"{mode}.png")
    for p in data["window"]["head_to_head"]:
        print(
            f"n={p['n']}: sliding {p['median_s']['sliding']:.4f} s, SDPA causal "
            f"{p['median_s']['sdpa_causal']:.4f} s, speed-up {p['speedup']:.2f}x (load {p['load']:.1f})"
        )
    for name, s in data["decoding"]["relative_slope"].items():
        print(f"decoding {name}: relative slope of time vs position {s:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
