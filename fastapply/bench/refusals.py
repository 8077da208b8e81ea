"""How soon a refusal comes: each saved reading (``bench quality --save``) that a policy
refuses is sent again under that policy and, right after it in the same run, under policy
``model`` (the model writing the whole file), so the two times are side by side on one
machine state; the table gives both times, both forward-pass counts and their ratio.
Under an agreement policy the first token where the model leaves the
deterministic reading decides the answer (``fastapply.decoding.witness.plan``).

    python -m fastapply.bench refusals --load readings.jsonl --model DIR --limit 20
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapply.bench.common import percentile, print_table
from fastapply.decoding.witness import Reading, decide
from fastapply.service.config import witness_policy


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--load", type=Path, required=True,
                   help="readings saved by `bench quality --save` (policy model)")
    p.add_argument("--model", type=Path, required=True,
                   help="the model directory those readings were made with")
    p.add_argument("--policy", default=witness_policy(True),
                   help="the policy (default: the torch runtime's witness policy)")
    p.add_argument("--limit", type=int, default=20, help="refused readings to send at most")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fastapply.service import FastApplyService, InvalidRequest, Refused, ServiceConfig

    rows = [json.loads(line) for line in args.load.open()]
    refused = []
    for row in rows:
        det = Reading(row["det"], row["det_certain"], row["det_error"],
                      row["style"] in ("search_replace", "udiff"))
        if not decide(args.policy, row["model"], row["min_token_prob"], det,
                      det.exact_format).serve:
            refused.append(row)
    config = ServiceConfig(runtime="torch", model_dir=str(args.model), policy=args.policy)
    service = FastApplyService(config)
    whole = FastApplyService(replace(config, policy="model"))
    table, out = [], []
    for row in refused[: args.limit]:
        budget = len(service.tokenizer.encode(row["updated"])) + 64
        t0 = time.perf_counter()
        passes, how = 0, "served"
        try:
            service.apply(row["original"], row["snippet"], max_tokens=budget)
        except Refused as exc:
            how = "refused"
            passes = exc.partial.stats.forward_passes if exc.partial else 0
        except InvalidRequest:
            how = "refused (other)"
        refusal_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        try:
            whole_passes = whole.apply(row["original"], row["snippet"],
                                       max_tokens=budget).stats.forward_passes
        except InvalidRequest as exc:  # cut at the budget: its partial holds the passes
            partial = getattr(exc, "partial", None)
            whole_passes = partial.stats.forward_passes if partial else 0
        whole_s = time.perf_counter() - t0
        item = {"id": row["id"], "style": row["style"], "lines": row["original"].count("\n"),
                "outcome": how, "refusal_s": round(refusal_s, 2),
                "refusal_forward_passes": passes, "whole_file_s": round(whole_s, 2),
                "whole_file_forward_passes": whole_passes}
        out.append(item)
        table.append([row["id"][:36], row["style"], item["lines"], how, item["refusal_s"],
                      passes, item["whole_file_s"], whole_passes,
                      round(whole_s / refusal_s, 2) if refusal_s else 0.0])
    print_table(["edit", "style", "lines", "outcome", "refusal s", "passes",
                 "whole file s", "passes", "ratio"], table)
    times = [o["refusal_s"] for o in out]
    whole_times = [o["whole_file_s"] for o in out]
    return {"bench": "refusals", "policy": args.policy, "readings": len(out),
            "refusal_s_p50": round(percentile(times, 50), 2),
            "refusal_s_max": round(max(times, default=0.0), 2),
            "whole_file_s_p50": round(percentile(whole_times, 50), 2),
            "whole_file_s_max": round(max(whole_times, default=0.0), 2),
            "speedup_total": round(sum(whole_times) / sum(times), 2) if sum(times) else 0.0,
            "refused": sum(o["outcome"] != "served" for o in out), "items": out}
