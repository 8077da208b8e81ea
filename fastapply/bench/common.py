"""Plumbing shared by the benchmark commands: loading edits, percentiles, output."""

from __future__ import annotations

import contextlib
import http.client
import json
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fastapply.examples import load_edits

__all__ = ["add_cpu_model_arguments", "cpu_description", "cpu_model", "emit", "interleaved_ms",
           "load_edits", "percentile", "post_ok", "print_table", "spread_over_repos"]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; 0.0 for no values.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
    2.5
    """
    if not values:
        return 0.0
    if len(values) == 1:
        return float(values[0])
    return float(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]) \
        if 0 < q < 100 else float(min(values) if q <= 0 else max(values))


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print rows as an aligned plain-text table (floats with 3 significant decimals)."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 1000 else f"{v:.1f}"
        return str(v)

    cells = [[fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


def emit(result: dict[str, Any], path: Path | None = None) -> None:
    """Print the result as one JSON line (the benchmark's last line); optionally save it."""
    line = json.dumps(result, sort_keys=True)
    if path is not None:
        path.write_text(line + "\n")
    print(line, flush=True)


def post_ok(conn: http.client.HTTPConnection, path: str, body: bytes, bench: str) -> bytes:
    """POST a JSON ``body`` on a kept-alive connection; its answer, or SystemExit naming
    the benchmark ``bench`` when the status is not 200."""
    conn.request("POST", path, body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise SystemExit(f"bench {bench}: {path} answered {response.status}: {data[:300]!r}")
    return data


def interleaved_ms(calls: Mapping[str, Callable[[], str]], expected: str, warmup: int,
                   requests: int, bench: str) -> dict[str, list[float]]:
    """Each call ``warmup + requests`` times, taking turns (so all see the same machine
    load): per call name, the milliseconds of the timed ones. Every call must return
    ``expected`` (SystemExit naming the benchmark ``bench`` otherwise)."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for i in range(warmup + requests):
        for name, call in calls.items():
            t0 = time.perf_counter()
            merged = call()
            elapsed_ms = (time.perf_counter() - t0) * 1e3
            if merged != expected:
                raise SystemExit(f"bench {bench}: {name} returned a different merge")
            if i >= warmup:
                times[name].append(elapsed_ms)
    return times


#: CPU flags that decide how fast bf16 runs on a CPU: ``avx512_bf16`` (bf16 dot products),
#: ``amx_bf16``/``amx_tile`` (Intel AMX matrix tiles, which oneDNN uses for bf16 GEMMs).
BF16_CPU_FLAGS = ("avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "avx512_fp16")


def add_cpu_model_arguments(p: Any) -> None:
    """``--model`` and ``--threads``, for the benchmarks that run a model on the CPU."""
    p.add_argument("--model", type=Path, help="model dir (default: the embedded default model)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch intra-op threads (default 0: torch's own choice); on a "
                        "shared machine 1 thread gives steadier figures")


def cpu_model(args: Any) -> Path:
    """Apply ``--threads``; the model directory of ``--model`` or the embedded default."""
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.model is not None:
        return Path(args.model)
    from fastapply.model.default import default_model_dir

    return default_model_dir(quiet=False)


def cpu_description() -> dict[str, Any]:
    """The CPU a benchmark ran on: model name, logical CPUs, bf16-relevant flags (from
    ``/proc/cpuinfo``) and torch's intra-op thread count."""
    import os

    import torch

    name, flags = "unknown", set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    return {"cpu_model": name, "logical_cpus": os.cpu_count() or 0,
            "cpu_flags": {f: f in flags for f in BF16_CPU_FLAGS},
            "torch_threads": torch.get_num_threads(), "torch_version": torch.__version__}


def spread_over_repos(records: Sequence[dict[str, Any]], n: int, seed: int = 0
                      ) -> list[dict[str, Any]]:
    """``n`` records taken in turn from each repository (shuffled with ``seed``), so that
    no repository dominates a small sample.

    >>> recs = [{"repo": r, "i": i} for r in "ab" for i in range(3)]
    >>> [(r["repo"]) for r in spread_over_repos(recs, 4)]
    ['a', 'b', 'a', 'b']
    """
    import random

    by_repo: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        by_repo.setdefault(str(rec.get("repo", "")), []).append(rec)
    rng = random.Random(seed)
    for recs in by_repo.values():
        rng.shuffle(recs)
    out: list[dict[str, Any]] = []
    while len(out) < n and any(by_repo.values()):
        for repo in sorted(by_repo):
            if by_repo[repo] and len(out) < n:
                out.append(by_repo[repo].pop())
    return out
