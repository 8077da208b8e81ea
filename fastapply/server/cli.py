"""``fastapply serve``: the command line around :class:`fastapply.server.triton.TritonServer`.

Renders a model repository from the arguments (or takes ``--model-repository``), starts
the server (and the OpenAI front with ``--openai-port``), prints where it listens, and on
SIGTERM/SIGINT drains it; the exit status says whether every request was answered.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fastapply.server.auth import API_KEYS_ENV, GRPC_KEY_HEADER, ApiKeyError, api_keys
from fastapply.server.triton import (
    ADMIN_APIS,
    ADMIN_HEADER,
    ADMIN_KEY_ENV,
    DEFAULT_GRACE_PERIOD_S,
    KILL_AFTER_S,
    SHUTDOWN_MARGIN_S,
    STOP_RESERVE_S,
    GuardError,
    ServerError,
    StartCancelled,
    TritonServer,
)


def _port(text: str) -> int:
    """A TCP port number (argparse type): 1 to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give 1 to 65535")
    return port


def _grace_period_s(text: str) -> float:
    """Seconds (argparse type): a finite number from 0 to a day."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= 86400:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"{text!r} is not a grace period: give seconds from "
                                         f"0 to 86400")
    return seconds


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-repository", type=Path,
                   help="an already rendered repository (default: render one for --runtime)")
    p.add_argument("--model", type=Path, help="HF model dir (torch, trtllm-pytorch runtimes)")
    p.add_argument("--engine", type=Path, help="TensorRT-LLM engine dir (trtllm-engine)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer dir when not the model's")
    p.add_argument("--tiny-model", action="store_true",
                   help="serve the tiny random model built locally (torch runtime)")
    from fastapply.decoding.prompts import FORMATS
    from fastapply.decoding.runtimes import KV_CACHES, RUNTIMES
    from fastapply.decoding.witness import POLICY_CHOICES
    from fastapply.service import ServiceConfig

    p.add_argument("--runtime", choices=RUNTIMES, default=None,
                   help="default: torch with the embedded default model (SmolLM2-135M + "
                        "the shipped adapter) or --model DIR; deterministic: the "
                        "deterministic merge, no model")
    p.add_argument("--policy", choices=list(POLICY_CHOICES), default=None,
                   help=f"what is served (default: {ServiceConfig.policy}: judge, the "
                        f"merge's readings scored by the judge, on every runtime; the "
                        f"model's witness: certain_or_confident_agree on torch, "
                        f"certain_or_agree on TensorRT-LLM; see docs/model.md)")
    p.add_argument("--threshold", type=float, default=None,
                   help="lowest token probability the confidence policies accept")
    p.add_argument("--witness", choices=["window", "file"], default=None,
                   help=f"where the merge is unsure, the model writes only windows around "
                        f"its unsure places (window) or the whole file (file) (default: "
                        f"{ServiceConfig.witness}; see docs/model.md)")
    p.add_argument("--witness-budget-s", type=float, default=None,
                   help=f"seconds a request may spend while the model witnesses an unsure "
                        f"merge; past them it is refused, naming the unsure place (default "
                        f"{ServiceConfig.witness_budget_s:g}; 0: no budget)")
    # None leaves ServiceConfig's default (fastapply.service), the one place it is written
    p.add_argument("--prompt-format", choices=sorted(FORMATS),
                   help=f"default: {ServiceConfig.prompt_format}")
    p.add_argument("--max-draft-len", type=int,
                   help="largest draft per verification pass (K); 0: no speculation "
                        "(default: the runtime's own; torch measures its pass cost at load "
                        "and picks K from it)")
    p.add_argument("--context-limit", type=int)
    p.add_argument("--device", choices=["cpu", "cuda"])
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"],
                   help="default: float32 on CPU (the output equals greedy decoding token "
                        "for token), bfloat16 on CUDA; bfloat16 on a CPU with avx512_bf16/"
                        "AMX is faster but its output can differ (docs/benchmarks.md)")
    p.add_argument("--prompt-cache-mb", type=int,
                   help=f"MiB of recent prompts' keys and values the torch runtime keeps "
                        f"to reuse for prompts that start the same way, e.g. the same file "
                        f"edited again (default {ServiceConfig.prompt_cache_mb}; 0: off)")
    p.add_argument("--prompt-cache-entries", type=int,
                   help=f"most prompts kept (default {ServiceConfig.prompt_cache_entries})")
    p.add_argument("--kv-cache", choices=KV_CACHES,
                   help=f"the torch runtime's KV cache (default {ServiceConfig.kv_cache}): "
                        f"static holds one cache sized to the context (requests take turns) "
                        f"and on CUDA replays each verification pass from a CUDA graph")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--grpc-port", type=_port, default=8001)
    p.add_argument("--http-port", type=_port, default=8000)
    p.add_argument("--metrics-port", type=_port, default=8002)
    p.add_argument("--http-guard", choices=["on", "off"], default="on",
                   help="on (default): the HTTP port answers client errors in generate "
                        "requests with 400 and a message (fastapply.server.http.guard) and relays "
                        "the rest to tritonserver on a loopback port; off: tritonserver's "
                        "own HTTP on the port, as is (500 for such errors)")
    p.add_argument("--openai-port", type=lambda t: 0 if t.strip() == "0" else _port(t), default=0,
                   help="also serve OpenAI/Morph/Relace-compatible HTTP on this port "
                        "(fastapply.server.openai.server; 0: off)")
    p.add_argument("--api-key", action="append", metavar="KEY",
                   help="a key clients must send to get an edit, on every port that serves "
                        "one (repeat it to keep two live while rotating; default: "
                        "$FASTAPPLY_API_KEYS, comma-separated, which keeps keys out of ps); "
                        "without any, inference is open to whoever reaches the ports")
    p.add_argument("--grace-period-s", type=_grace_period_s, default=DEFAULT_GRACE_PERIOD_S,
                   help="on SIGTERM/SIGINT, seconds within which serve stops: requests in "
                        f"flight get this less {STOP_RESERVE_S:g} s to finish before they are "
                        "answered UNAVAILABLE (default %(default)s); tritonserver's "
                        f"--exit-timeout-secs is this + {SHUTDOWN_MARGIN_S:.0f}, so give the "
                        f"pod a terminationGracePeriodSeconds above this + "
                        f"{SHUTDOWN_MARGIN_S + KILL_AFTER_S:.0f}")


def _keys_line(keys: tuple[str, ...], guard: bool) -> str:
    """What the start-up message says of the API keys (how many, never which)."""
    if not keys:
        return (f"none: inference is open to whoever reaches these ports (set "
                f"{API_KEYS_ENV} or --api-key to close it)")
    where = "the OpenAI front and the HTTP port take any of them ('Authorization: Bearer "\
        "KEY')" if guard else "the OpenAI front takes any of them ('Authorization: Bearer KEY')"
    return (f"{len(keys)} key(s) close inference on every port: {where}, Triton's gRPC any "
            f"of them too (metadata {GRPC_KEY_HEADER}); health stays open")


def render_for(args: argparse.Namespace, out_dir: Path) -> Path:
    """Render a repository from serve/demo arguments."""
    from fastapply.server.model_repo import render_repository

    return render_repository(out_dir, **repository_parameters(args))


def repository_parameters(args: argparse.Namespace) -> dict[str, Any]:
    """The parameters serve/demo arguments render a repository with (None leaves
    ServiceConfig's default): without ``--runtime``, torch with ``--model`` or the embedded
    default model (built into the cache on first use)."""
    model = args.model
    if getattr(args, "tiny_model", False):
        from fastapply.model.tiny import ensure_tiny_model

        model = ensure_tiny_model()
    engine = getattr(args, "engine", None)
    runtime = args.runtime or ("trtllm-engine" if engine and not model else "torch")
    if runtime in ("torch", "trtllm-pytorch") and not model:
        from fastapply.model.default import default_model_dir

        model = default_model_dir(quiet=False)  # the embedded default
    return dict(
        runtime=runtime, model_dir=model, engine_dir=getattr(args, "engine", None),
        tokenizer_dir=getattr(args, "tokenizer", None), prompt_format=args.prompt_format,
        max_draft_len=args.max_draft_len, context_limit=args.context_limit,
        device=args.device, dtype=args.dtype, policy=getattr(args, "policy", None),
        prompt_cache_mb=getattr(args, "prompt_cache_mb", None),
        prompt_cache_entries=getattr(args, "prompt_cache_entries", None),
        kv_cache=getattr(args, "kv_cache", None),
        threshold=getattr(args, "threshold", None), witness=getattr(args, "witness", None),
        witness_budget_s=getattr(args, "witness_budget_s", None))


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="fastapply-repo-") as tmp:
        from fastapply.model.base import BaseModelError
        from fastapply.server.model_repo import RenderError

        try:
            repo = args.model_repository or render_for(args, Path(tmp))
        except BaseModelError as exc:
            print(f"fastapply serve: {exc}; or serve without a model: --runtime "
                  f"deterministic", file=sys.stderr)
            return 2
        except RenderError as exc:  # a setting the service refuses (a policy, a budget)
            print(f"fastapply serve: {exc}", file=sys.stderr)
            return 2
        admin_key = os.environ.get(ADMIN_KEY_ENV) or None
        try:
            keys = api_keys(getattr(args, "api_key", None), os.environ.get(API_KEYS_ENV))
        except ApiKeyError as exc:
            print(f"fastapply serve: {exc}", file=sys.stderr)
            return 2
        try:
            server = TritonServer(repo, host=args.host, grpc_port=args.grpc_port,
                                  http_port=args.http_port, metrics_port=args.metrics_port,
                                  admin_key=admin_key, grace_period_s=args.grace_period_s,
                                  http_guard=args.http_guard == "on", api_keys=keys)
        except ServerError as exc:
            print(f"fastapply serve: {exc}", file=sys.stderr)
            return 2
        stop = {"now": False}

        def on_signal(signum: int, frame: object) -> None:
            stop["now"] = True

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        try:
            server.start(cancelled=lambda: stop["now"])
        except StartCancelled:
            print("fastapply serve: stopped before the model was ready; no request was "
                  "taken.", file=sys.stderr)
            return 0
        except ServerError as exc:
            what = "the server did not start" if isinstance(exc, GuardError) else \
                "the model did not load"
            print(f"fastapply serve: {what}.\n{exc}", file=sys.stderr)
            return 1
        front = None
        try:
            if getattr(args, "openai_port", 0):
                from fastapply.server.openai.server import OpenAIFront

                front = OpenAIFront(server.grpc_url, host=args.host, port=args.openai_port,
                                    api_keys=keys)
                front.start()
        except ServerError as exc:
            server.stop()
            print(f"fastapply serve: {exc}", file=sys.stderr)
            return 1
        admin = (f"header {ADMIN_HEADER}" if admin_key else
                 f"closed (set {ADMIN_KEY_ENV} to open them)")
        print(f"fastapply serving model 'fast_apply' from {repo}\n"
              f"  gRPC     {server.grpc_url}\n"
              f"  HTTP     {server.http_url}\n"
              f"  metrics  {server.metrics_url}\n"
              + (f"  OpenAI   {front.url}/v1\n" if front else "") +
              f"  log      {server.log_path}\n"
              f"  admin    {', '.join(ADMIN_APIS)}: {admin}\n"
              f"  keys     {_keys_line(keys, args.http_guard == 'on')}\n"
              + (f"  guard    HTTP generate requests checked (log {server.guard_log_path}); "
                 f"tritonserver's own HTTP on {server.triton_http_url}\n"
                 if server.http_guard else "") +
              "Ctrl-C stops it.", flush=True)
        problems: list[str] = []
        try:
            while not stop["now"]:
                if server.process is None or server.process.poll() is not None:
                    print(f"fastapply serve: tritonserver exited; log tail:\n"
                          f"{server.log_tail()}", file=sys.stderr)
                    return 1
                if server.http_guard and (server.guard is None or
                                          server.guard.poll() is not None):
                    print(f"fastapply serve: the HTTP guard exited; its log: "
                          f"{server.guard_log_path}", file=sys.stderr)
                    return 1
                if front and (front.process is None or front.process.poll() is not None):
                    print("fastapply serve: the OpenAI front exited", file=sys.stderr)
                    return 1
                time.sleep(0.2)
            print(f"fastapply serve: stopping: new requests are refused, requests in flight "
                  f"get {server.drain_s:g} s to finish (the grace period of "
                  f"{server.grace_period_s:g} s less {STOP_RESERVE_S:g} s to stop).", flush=True)
            problems = server.stop()  # drains first: the OpenAI front relays the answers
        finally:
            if front:
                front.stop()
            server.stop()  # a no-op after the drain
        if problems:
            print("fastapply serve: stopped, but not cleanly:\n  " + "\n  ".join(problems),
                  file=sys.stderr)
            return 1
        print("fastapply serve: stopped; every request in flight was answered.")
        return 0
