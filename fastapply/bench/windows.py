"""The windowed witness against the whole-file witness, side by side, by file length.

Each record of ``--data`` (corpus records, the validation split) is sent whole in each
lazy and agent style of ``--styles``. The deterministic merge reads every snippet; a
certain merge is served at once under ``--policy`` (``auto`` by default, as ``fastapply
serve``) whatever the witness (counted as certain exact or wrong). Up to ``--unsure``
unsure merges per length bucket are then sent to the model twice in one run, once under
each witness (``window``: only windows around the merge's unsure places; ``file``: the
whole file), so the two are timed on the same machine state. Per bucket it prints what
each serves (exact, wrong, refused), the forward passes, prompt tokens and seconds per
unsure edit, and how often the right file is among the merge's readings (the ceiling of
any witness there).

    python -m fastapply.bench windows --data valid-corpus.jsonl --unsure 8
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from fastapply.bench.common import print_table

#: (name, most lines) of the length buckets.
BUCKETS = (("<=200 lines", 200), ("201-1000 lines", 1000), ("1001-3000 lines", 3000))
STYLES = ("lazy", "named", "signature", "whole_block")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, required=True, help="JSONL of corpus records")
    p.add_argument("--model", type=Path, default=None,
                   help="model directory (default: the embedded default model)")
    p.add_argument("--styles", default=",".join(STYLES))
    p.add_argument("--unsure", type=int, default=8,
                   help="unsure merges per length bucket sent to the model (each twice)")
    p.add_argument("--witnesses", default="window,file")
    p.add_argument("--policy", default="auto",
                   help="the serve --policy both witnesses serve under (default auto)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", type=Path, help="write every reading here (JSONL)")


def _bucket(lines: int) -> str | None:
    return next((name for name, most in BUCKETS if lines <= most), None)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from fastapply.decoding.witness import deterministic_reading
    from fastapply.examples import load_edits
    from fastapply.metrics import Stats
    from fastapply.model.sft_data import snippet_of
    from fastapply.service import FastApplyService, InvalidRequest, ServiceConfig

    model = args.model
    if model is None:
        from fastapply.model.default import default_model_dir

        model = default_model_dir(quiet=False)
    witnesses = args.witnesses.split(",")
    services = {w: FastApplyService(ServiceConfig(runtime="torch", model_dir=str(model),
                                                  policy=args.policy, witness=w))
                for w in witnesses}
    rng = random.Random(args.seed)
    recs = load_edits(args.data)
    rng.shuffle(recs)
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    runs: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    if args.save:
        args.save.write_text("")
    for rec in recs:
        bucket = _bucket(rec["original"].count("\n"))
        if bucket is None:
            continue
        for style in args.styles.split(","):
            snippet = snippet_of(style, rec["original"], rec["updated"], rec["language"],
                                 rec["path"], rng)
            if not snippet.strip():
                continue
            c = counts[bucket]
            c["readings"] += 1
            det = deterministic_reading(rec["original"], snippet)
            if det.text is not None and det.certain:
                c["certain_exact" if det.text == rec["updated"] else "certain_wrong"] += 1
                continue
            if det.text is None:
                c["merge_refused"] += 1
                continue
            c["unsure"] += 1
            merge = det.merge.with_readings() if det.merge is not None else None
            texts = [x.text for x in merge.candidates] if merge is not None else []
            c["right_among_readings"] += int(rec["updated"] in texts)
            if c["unsure_run"] >= args.unsure:
                continue
            c["unsure_run"] += 1
            for w in witnesses:
                stats: Stats | None
                t0 = time.perf_counter()
                try:
                    res = services[w].apply(rec["original"], snippet)
                    outcome = "exact" if res.merged_code == rec["updated"] else "wrong"
                    stats, why = res.stats, ""
                except InvalidRequest as exc:
                    partial = getattr(exc, "partial", None)
                    outcome, why = "refused", str(exc).split("\n")[0][:160]
                    stats = partial.stats if partial is not None else None
                row = {"id": rec["id"], "style": style, "bucket": bucket, "witness": w,
                       "lines": rec["original"].count("\n"), "outcome": outcome,
                       "seconds": round(time.perf_counter() - t0, 2),
                       "forward_passes": stats.forward_passes if stats else 0,
                       "prompt_tokens": stats.prompt_tokens if stats else 0,
                       "windows": stats.windows if stats else 0, "why": why,
                       "served_by": stats.witness if stats and outcome != "refused" else None,
                       "min_token_prob": round(stats.min_token_prob, 4) if stats else None}
                runs[bucket, w].append(row)
                print(f"{bucket:16s} {w:6s} {style:11s} {row['lines']:5d} lines "
                      f"{outcome:8s} {row['seconds']:5.1f} s {row['forward_passes']:3d} passes "
                      f"{row['prompt_tokens']:6d} prompt tokens {why[:70]}", flush=True)
                if args.save:
                    with args.save.open("a") as f:
                        f.write(json.dumps(row) + "\n")
    rows: list[list[Any]] = []
    buckets: dict[str, Any] = {}
    result: dict[str, Any] = {"bench": "windows", "buckets": buckets}
    for bucket, _ in BUCKETS:
        c = counts[bucket]
        entry: dict[str, Any] = {k: int(v) for k, v in c.items()}
        for w in witnesses:
            got = runs[bucket, w]
            if not got:
                continue
            med = {k: statistics.median(r[k] for r in got)
                   for k in ("forward_passes", "prompt_tokens", "seconds")}
            figures = {"sent": len(got),
                       **{o: sum(r["outcome"] == o for r in got)
                          for o in ("exact", "wrong", "refused")},
                       "median_forward_passes": med["forward_passes"],
                       "median_prompt_tokens": med["prompt_tokens"],
                       "median_s": med["seconds"], "max_s": max(r["seconds"] for r in got)}
            entry[w] = figures
            rows.append([bucket, w, c["readings"], c["certain_exact"], c["certain_wrong"],
                         c["unsure"], c["right_among_readings"], figures["sent"],
                         figures["exact"], figures["wrong"], figures["refused"],
                         figures["median_forward_passes"], figures["median_prompt_tokens"],
                         figures["median_s"], figures["max_s"]])
        buckets[bucket] = entry
    print_table(["bucket", "witness", "readings", "certain exact", "certain wrong", "unsure",
                 "right among readings", "unsure sent", "exact", "wrong", "refused",
                 "passes (median)", "prompt tokens (median)", "s (median)", "s (max)"], rows)
    return result
