"""``fastapply serve``: run a real tritonserver with the fast_apply model.

:class:`TritonServer` finds the server binary (the system one inside NVIDIA's container,
``/opt/tritonserver/bin/tritonserver``, else the one the ``nvidia-pytriton`` wheel ships),
assembles a backends folder for the Python backend, starts the server on the given
ports, waits for ``/v2/health/ready`` and stops it (by PID) on exit. ``serve``, ``demo``,
the tests and the benchmarks all use it.

The Python-backend stub finds site-packages through the ``python3`` first on PATH
(PYTHONPATH is ignored), so this environment's ``bin`` goes first on PATH.

Triton's administrative APIs (ADMIN_APIS: logging, model configuration, loading models,
statistics, ...) are restricted on HTTP and gRPC: a request must carry the header
ADMIN_HEADER (gRPC: ``triton-grpc-protocol-`` + ADMIN_HEADER) with the operator's key,
``$FASTAPPLY_ADMIN_KEY`` for ``fastapply serve``; without one, a random key nobody knows
closes them. Health, metadata and inference stay open.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType

SYSTEM_TRITON = Path("/opt/tritonserver")

#: Triton API groups (its --http-restricted-api / --grpc-restricted-protocol names) that
#: only the operator may use; health, metadata and inference stay open to clients.
ADMIN_APIS = ("logging", "model-config", "model-repository", "shared-memory", "statistics",
              "trace")
#: Header carrying the admin key (Triton prefixes it with triton-grpc-protocol- on gRPC).
ADMIN_HEADER = "fastapply-admin-key"
#: Environment variable holding the admin key for `fastapply serve`.
ADMIN_KEY_ENV = "FASTAPPLY_ADMIN_KEY"
#: Characters an admin key may use (Triton's option syntax splits on , : and =).
_ADMIN_KEY_RE = re.compile(r"[A-Za-z0-9._~-]{16,}")

#: Log lines worth showing when the model does not load.
_FAILURE_MARKS = ("failed to load", "Failed to", "ERROR", "error:")


class ServerError(RuntimeError):
    """The server did not start or the model did not load; carries the log's tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now on ``host``."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _pytriton_root() -> Path | None:
    try:
        import pytriton
    except ImportError:
        return None
    return Path(pytriton.__file__).parent / "tritonserver"


def find_server() -> tuple[Path, Path, dict[str, str]]:
    """(tritonserver binary, backends dir, extra environment)."""
    system = SYSTEM_TRITON / "bin" / "tritonserver"
    if system.is_file():
        return system, SYSTEM_TRITON / "backends", {}
    root = _pytriton_root()
    if root is None or not (root / "bin" / "tritonserver").is_file():
        raise ServerError("no tritonserver found: install the serve extra "
                          "(pip install -e '.[serve]', x86-64 Linux) or run inside "
                          "nvcr.io/nvidia/tritonserver")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = root / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.is_file():
        raise ServerError(f"nvidia-pytriton ships no Python-backend stub for Python {version}")
    backends = Path(tempfile.mkdtemp(prefix="fastapply-backends-"))
    python = backends / "python"
    python.mkdir()
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        (python / name).symlink_to(root / "backends" / "python" / name)
    (python / "triton_python_backend_stub").symlink_to(stub)
    libs = [str(root.parent.parent / "nvidia_pytriton.libs"), sysconfig.get_config_var("LIBDIR")]
    old = os.environ.get("LD_LIBRARY_PATH")
    env = {"LD_LIBRARY_PATH": ":".join([*libs, *([old] if old else [])])}
    return root / "bin" / "tritonserver", backends, env


def _die_with_parent() -> None:
    """In the child, before exec: Linux sends it SIGTERM when its parent dies, so a
    killed test run or demo does not leave a server behind."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class TritonServer:
    """A tritonserver process on loopback (or ``host``) ports, stopped on exit."""

    def __init__(self, model_repository: str | Path, host: str = "127.0.0.1",
                 grpc_port: int | None = None, http_port: int | None = None,
                 metrics_port: int | None = None, log_path: str | Path | None = None,
                 startup_timeout_s: float = 120.0, admin_key: str | None = None) -> None:
        if admin_key is not None and not _ADMIN_KEY_RE.fullmatch(admin_key):
            raise ServerError(f"the admin key must be at least 16 characters of A-Z a-z 0-9 "
                              f". _ ~ - (set {ADMIN_KEY_ENV}); e.g. python3 -c 'import "
                              f"secrets; print(secrets.token_urlsafe(32))'")
        #: Key of the admin APIs (header ADMIN_HEADER); random when none was given.
        self.admin_key = admin_key or secrets.token_urlsafe(32)
        self.model_repository = Path(model_repository)
        self.host = host
        self.grpc_port = grpc_port or free_port()
        self.http_port = http_port or free_port()
        self.metrics_port = metrics_port or free_port()
        self.startup_timeout_s = startup_timeout_s
        self.log_path = Path(log_path) if log_path else Path(
            tempfile.mkstemp(prefix="tritonserver-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None
        self._backends: Path | None = None

    @property
    def grpc_url(self) -> str:
        return f"{self._connect_host}:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"http://{self._connect_host}:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self._connect_host}:{self.metrics_port}/metrics"

    @property
    def _connect_host(self) -> str:
        return "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host

    def log_tail(self, lines: int = 12) -> str:
        """The server log's errors (model load failures) and its last lines, without
        the option tables that fill most of it."""
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        text = [line for line in text if line.strip() and not line.startswith(("+", "|"))
                and not line.rstrip().endswith("]")]  # table rows, empty log records
        errors = [line for line in text if any(m in line for m in _FAILURE_MARKS)]
        tail = [line for line in text[-lines:] if line not in errors]
        return "\n".join(errors + tail)

    def start(self) -> TritonServer:
        binary, backends, extra_env = find_server()
        if backends.name.startswith("fastapply-backends-"):
            self._backends = backends  # a temporary folder we made: removed on stop
        env = dict(os.environ, **extra_env)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        cmd = [str(binary), f"--model-repository={self.model_repository}",
               f"--backend-directory={backends}",
               f"--grpc-address={self.host}", f"--grpc-port={self.grpc_port}",
               f"--http-address={self.host}", f"--http-port={self.http_port}",
               f"--metrics-address={self.host}", f"--metrics-port={self.metrics_port}",
               "--allow-metrics=true", "--allow-gpu-metrics=false",
               "--strict-readiness=true", "--exit-on-error=true", "--log-verbose=0",
               "--exit-timeout-secs=10",
               *(f"{option}={','.join(ADMIN_APIS)}:{ADMIN_HEADER}={self.admin_key}"
                 for option in ("--http-restricted-api", "--grpc-restricted-protocol"))]
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True, preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            status = self.process.poll()
            if status is not None:
                self.stop()
                raise ServerError(f"tritonserver exited with status {status} while loading; "
                                  f"log tail:\n{self.log_tail()}")
            if self.ready():
                return self
            time.sleep(0.2)
        self.stop()
        raise ServerError(f"tritonserver not ready after {self.startup_timeout_s:.0f} s; "
                          f"log tail:\n{self.log_tail()}")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.http_url}/v2/health/ready", timeout=1) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM the server (by PID), SIGKILL it if it lingers; clean up.

        The server runs in a session of its own; whatever is left in that process
        group afterwards (Python-backend stubs of a server that crashed outlive it and
        ignore SIGTERM) is killed too.
        """
        proc, self.process = self.process, None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if self._backends is not None:
            shutil.rmtree(self._backends, ignore_errors=True)
            self._backends = None

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


# -- the command ------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-repository", type=Path,
                   help="an already rendered repository (default: render one for --runtime)")
    p.add_argument("--model", type=Path, help="HF model dir (torch, trtllm-pytorch runtimes)")
    p.add_argument("--engine", type=Path, help="TensorRT-LLM engine dir (trtllm-engine)")
    p.add_argument("--tokenizer", type=Path, help="tokenizer dir when not the model's")
    p.add_argument("--tiny-model", action="store_true",
                   help="serve the tiny random model built locally (torch runtime)")
    from fastapply.prompts import FORMATS
    from fastapply.runtimes import RUNTIMES
    from fastapply.service import ServiceConfig

    p.add_argument("--runtime", choices=RUNTIMES, default=None,
                   help="default: deterministic without a model, torch with --model")
    # None leaves ServiceConfig's default (fastapply.service), the one place it is written
    p.add_argument("--prompt-format", choices=sorted(FORMATS),
                   help=f"default: {ServiceConfig.prompt_format}")
    p.add_argument("--max-draft-len", type=int, help=f"default: {ServiceConfig.max_draft_len}")
    p.add_argument("--context-limit", type=int)
    p.add_argument("--device", choices=["cpu", "cuda"])
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--grpc-port", type=int, default=8001)
    p.add_argument("--http-port", type=int, default=8000)
    p.add_argument("--metrics-port", type=int, default=8002)
    p.add_argument("--openai-port", type=int, default=0,
                   help="also serve OpenAI/Morph/Relace-compatible HTTP on this port "
                        "(fastapply.openai_server; 0: off)")


def render_for(args: argparse.Namespace, out_dir: Path) -> Path:
    """Render a repository from serve/demo arguments."""
    from fastapply.model_repo import render_repository

    model = args.model
    if getattr(args, "tiny_model", False):
        from fastapply.tinymodel import ensure_tiny_model

        model = ensure_tiny_model()
    runtime = args.runtime or ("torch" if model else
                               "trtllm-engine" if getattr(args, "engine", None) else
                               "deterministic")
    return render_repository(
        out_dir, runtime=runtime, model_dir=model, engine_dir=getattr(args, "engine", None),
        tokenizer_dir=getattr(args, "tokenizer", None), prompt_format=args.prompt_format,
        max_draft_len=args.max_draft_len, context_limit=args.context_limit,
        device=args.device, dtype=args.dtype)


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="fastapply-repo-") as tmp:
        repo = args.model_repository or render_for(args, Path(tmp))
        admin_key = os.environ.get(ADMIN_KEY_ENV) or None
        try:
            server = TritonServer(repo, host=args.host, grpc_port=args.grpc_port,
                                  http_port=args.http_port, metrics_port=args.metrics_port,
                                  admin_key=admin_key)
        except ServerError as exc:
            print(f"fastapply serve: {exc}", file=sys.stderr)
            return 2
        stop = {"now": False}

        def on_signal(signum: int, frame: object) -> None:
            stop["now"] = True

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        try:
            server.start()
        except ServerError as exc:
            print(f"fastapply serve: the model did not load.\n{exc}", file=sys.stderr)
            return 1
        front = None
        try:
            if getattr(args, "openai_port", 0):
                from fastapply.openai_server import OpenAIFront

                front = OpenAIFront(server.grpc_url, host=args.host, port=args.openai_port)
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
              f"Ctrl-C stops it.", flush=True)
        try:
            while not stop["now"]:
                if server.process is None or server.process.poll() is not None:
                    print(f"fastapply serve: tritonserver exited; log tail:\n"
                          f"{server.log_tail()}", file=sys.stderr)
                    return 1
                if front and (front.process is None or front.process.poll() is not None):
                    print("fastapply serve: the OpenAI front exited", file=sys.stderr)
                    return 1
                time.sleep(0.5)
        finally:
            if front:
                front.stop()
            server.stop()
        print("fastapply serve: stopped.")
        return 0
