"""float32 against bfloat16 on the CPU: same merges? same exact rate? how much faster?

Each window of ``--data`` (``sft-valid.jsonl``: ``original``, ``snippet``, ``updated``,
``format``, what the model was trained on; ``--limit`` of them taken in turn from each
repository) is merged by the service (torch runtime, the model's own output: policy
``model``, speculative loop, prompt reuse off) once per dtype, the dtypes taking turns.
The budget is the true file's tokens + 64, as in ``bench quality``.

* ``identical_pct``: windows whose two answers are the same text (or the same refusal);
* ``exact_pct``: windows whose answer is the true updated file, per dtype;
* ``total_ms``/``ttft_ms``: the service's own figures, medians per dtype, and the
  per-window ratio float32 / bfloat16 (its median): the end-to-end speed-up.

    python -m fastapply.bench dtype_parity --data /work/data/sft-valid.jsonl --limit 70
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from fastapply.bench.common import (
    add_cpu_model_arguments,
    cpu_description,
    cpu_model,
    load_edits,
    print_table,
    spread_over_repos,
)

DTYPES = ("float32", "bfloat16")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, required=True, help="JSONL of windows (sft-valid)")
    p.add_argument("--limit", type=int, default=70, help="windows (default 70)")
    add_cpu_model_arguments(p)
    p.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fastapply.service import FastApplyService, InvalidRequest, ServiceConfig

    model = cpu_model(args)
    services: dict[tuple[str, str], FastApplyService] = {}

    def service(dtype: str, fmt: str) -> FastApplyService:
        if (dtype, fmt) not in services:
            services[dtype, fmt] = FastApplyService(ServiceConfig(
                runtime="torch", model_dir=str(model), device="cpu", dtype=dtype,
                prompt_format=fmt, policy="model", prompt_cache_mb=0))
        return services[dtype, fmt]

    windows = spread_over_repos(load_edits(args.data), args.limit, args.seed)
    rows: list[dict[str, Any]] = []
    for i, rec in enumerate(windows):
        fmt = rec.get("format", "kortix")
        budget = len(service(DTYPES[0], fmt).tokenizer.encode(rec["updated"])) + 64
        row: dict[str, Any] = {"id": rec["id"], "style": rec.get("style", "")}
        for dtype in DTYPES:
            try:
                res = service(dtype, fmt).apply(rec["original"], rec["snippet"],
                                                max_tokens=budget)
                text, stats = res.merged_code, res.stats
                row[dtype] = {"text": text, "total_ms": stats.total_ms,
                              "ttft_ms": stats.ttft_ms, "prompt_tokens": stats.prompt_tokens}
            except InvalidRequest as exc:
                row[dtype] = {"text": None, "error": str(exc)}
            row[dtype]["exact"] = row[dtype]["text"] == rec["updated"]
        a, b = row[DTYPES[0]], row[DTYPES[1]]
        row["identical"] = (a["text"], a.get("error")) == (b["text"], b.get("error"))
        rows.append(row)
        print(f"{i + 1:3d} {rec['id'][:50]:50s} {row['style']:14s} "
              f"fp32 {'exact' if a['exact'] else 'wrong'} bf16 {'exact' if b['exact'] else 'wrong'}"
              f" {'same' if row['identical'] else 'DIFFERENT'}", flush=True)

    n = len(rows)
    timed = [r for r in rows if all("total_ms" in r[d] for d in DTYPES)]
    out: dict[str, Any] = {"bench": "dtype_parity", "model": str(model), "windows": n,
                           "identical_pct": 100 * sum(r["identical"] for r in rows) / n}
    table = []
    for d in DTYPES:
        exact = 100 * sum(r[d]["exact"] for r in rows) / n
        total = statistics.median(r[d]["total_ms"] for r in timed)
        ttft = statistics.median(r[d]["ttft_ms"] for r in timed)
        out[d] = {"exact_pct": exact, "total_ms_median": total, "ttft_ms_median": ttft}
        table.append([d, exact, total, ttft])
    out["total_speedup_median"] = statistics.median(
        r[DTYPES[0]]["total_ms"] / r[DTYPES[1]]["total_ms"] for r in timed)
    out["ttft_speedup_median"] = statistics.median(
        r[DTYPES[0]]["ttft_ms"] / r[DTYPES[1]]["ttft_ms"] for r in timed)
    out["prompt_tokens_median"] = statistics.median(r[DTYPES[0]]["prompt_tokens"]
                                                    for r in timed)
    cpu = cpu_description()
    print(f"cpu: {cpu['cpu_model']}, {cpu['logical_cpus']} logical CPUs, torch threads "
          f"{cpu['torch_threads']}; {n} windows, identical {out['identical_pct']:.1f}%")
    print_table(["dtype", "exact_pct", "total_ms_median", "ttft_ms_median"], table)
    print(f"bfloat16 speed-up (median of per-window float32/bfloat16): total "
          f"{out['total_speedup_median']:.2f}x, ttft {out['ttft_speedup_median']:.2f}x")
    return {**out, **cpu}
