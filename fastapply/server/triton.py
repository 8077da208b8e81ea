"""Run a real tritonserver with the fast_apply model (the ``fastapply serve`` command
around it is :mod:`fastapply.server.cli`; child-process plumbing is
:mod:`fastapply.server.processes`).

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
closes them. Health and metadata stay open; inference too, unless API keys are set
(``api_keys``, :mod:`fastapply.server.auth`): one key restricts Triton's inference on HTTP
and gRPC the same way (header ``fastapply-api-key``); several are checked by the model
(``_key_options``).

The HTTP port is served by :mod:`fastapply.server.http.guard` (``http_guard=True``, the
default): it answers client errors in generate requests with 400 and a message where
Triton's own parsing answers 500, and relays everything else to tritonserver's HTTP,
which then listens on a loopback port of its own (``triton_http_port``).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from fastapply.server.auth import API_KEY_HEADER, GRPC_KEY_HEADER, MODEL_KEYS_ENV
from fastapply.server.lifecycle import SHUTDOWN_DIR_ENV, drained, read_dropped, request_drain
from fastapply.server.processes import free_ports, spawn_server

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


class GuardError(ServerError):
    """The HTTP guard did not start (its port taken, ...): the model is not at fault."""


class StartCancelled(ServerError):
    """The caller stopped the server (a signal) before the model was ready."""


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
    backends = _backends_dir(root, stub, version)
    libs = [str(root.parent.parent / "nvidia_pytriton.libs"), sysconfig.get_config_var("LIBDIR")]
    old = os.environ.get("LD_LIBRARY_PATH")
    env = {"LD_LIBRARY_PATH": ":".join([*libs, *([old] if old else [])])}
    return root / "bin" / "tritonserver", backends, env


def _backends_dir(root: Path, stub: Path, version: str) -> Path:
    """The backends folder for the wheel's server: links to its Python backend and the
    stub for this Python. Made once per environment and reused (a folder per call, in
    the temporary directory, leaked one per test run and per ``find_server()``): in
    ``sys.prefix`` (a venv's own folder), else under the temporary directory, named by
    user and environment."""
    links = {"libtriton_python.so": root / "backends" / "python" / "libtriton_python.so",
             "triton_python_backend_utils.py":
                 root / "backends" / "python" / "triton_python_backend_utils.py",
             "triton_python_backend_stub": stub}
    name = f"triton-backends-py{version}"
    prefix = Path(sys.prefix) / "var" / "fastapply"
    if not os.access(prefix if prefix.exists() else sys.prefix, os.W_OK):
        tag = hashlib.sha256(str(root).encode()).hexdigest()[:12]
        prefix = Path(tempfile.gettempdir()) / f"fastapply-{os.getuid()}-{tag}"
    backends = prefix / name
    if all(os.path.realpath(backends / "python" / k) == os.path.realpath(v)
           for k, v in links.items()):
        return backends
    prefix.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=prefix))
    (fresh / "python").mkdir()
    for link, target in links.items():
        (fresh / "python" / link).symlink_to(target)
    shutil.rmtree(backends, ignore_errors=True)
    try:
        fresh.rename(backends)  # atomic: a concurrent start sees all links or none
    except OSError:  # another process put its (identical) folder there first
        shutil.rmtree(fresh, ignore_errors=True)
    return backends


#: Seconds tritonserver gets after the drain grace period: the model answers what is
#: left, unloads, and its stub exits (``--exit-timeout-secs`` = grace period + this).
SHUTDOWN_MARGIN_S = 10.0
#: Seconds stop() waits past tritonserver's exit timeout before it kills the server.
KILL_AFTER_S = 5.0
#: Seconds the model's last answers get to reach the clients once it drained, before a
#: server that idle client streams keep alive is killed.
SETTLE_S = 1.0
#: Seconds of the grace period kept for stopping once the drain is over: the last answers'
#: SETTLE_S, then killing tritonserver and stopping the HTTP guard (measured here: 1.4 s
#: past a 3 s grace period with no reserve, issue 57). Requests get the grace period less
#: this, so the whole stop fits in the grace period.
STOP_RESERVE_S = SETTLE_S + 0.5
#: Server-log lines that say the server crashed or gave up on requests while stopping.
_CRASH_MARKS = ("Signal (11)", "Signal (6)", "Segmentation fault", "Aborted",
                "Exit timeout expired", "byte_buffer->Valid()")
DEFAULT_GRACE_PERIOD_S = 30.0


class TritonServer:
    """A tritonserver process on loopback (or ``host``) ports, stopped on exit.

    :meth:`stop` drains: requests in flight get ``drain_s`` (the grace period less
    STOP_RESERVE_S, so the stop fits in it) to finish (new ones
    are refused by Triton once it has the SIGTERM), the rest are answered
    ``UNAVAILABLE`` by the model; it returns what was dropped (see fastapply.server.lifecycle).
    """

    def __init__(self, model_repository: str | Path, host: str = "127.0.0.1",
                 grpc_port: int | None = None, http_port: int | None = None,
                 metrics_port: int | None = None, log_path: str | Path | None = None,
                 startup_timeout_s: float = 120.0, admin_key: str | None = None,
                 grace_period_s: float = DEFAULT_GRACE_PERIOD_S,
                 http_guard: bool = True, api_keys: tuple[str, ...] = ()) -> None:
        if admin_key is not None and not _ADMIN_KEY_RE.fullmatch(admin_key):
            raise ServerError(f"the admin key must be at least 16 characters of A-Z a-z 0-9 "
                              f". _ ~ - (set {ADMIN_KEY_ENV}); e.g. python3 -c 'import "
                              f"secrets; print(secrets.token_urlsafe(32))'")
        #: Key of the admin APIs (header ADMIN_HEADER); random when none was given.
        self.admin_key = admin_key or secrets.token_urlsafe(32)
        #: The API keys inference needs (fastapply.server.auth; none: inference is open):
        #: one is Triton's own restriction, several the model's check (_key_options).
        self.api_keys = tuple(api_keys)
        self.model_repository = Path(model_repository)
        self.host = host
        spare = iter(free_ports(4))  # distinct (see free_ports), those not given
        self.grpc_port = grpc_port or next(spare)
        self.http_port = http_port or next(spare)
        #: tritonserver's own HTTP port: on loopback behind the guard, else the public one
        self.triton_http_port = next(spare) if http_guard else self.http_port
        self.http_guard = http_guard
        self.guard: subprocess.Popen[bytes] | None = None  # fastapply.server.http.guard
        self.metrics_port = metrics_port or next(spare)
        self.startup_timeout_s = startup_timeout_s
        self.grace_period_s = grace_period_s
        self.exit_timeout_s = math.ceil(grace_period_s + SHUTDOWN_MARGIN_S)
        self.log_path = Path(log_path) if log_path else Path(
            tempfile.mkstemp(prefix="tritonserver-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None
        self._shutdown_dir: Path | None = None  # shared with the model (fastapply.server.lifecycle)

    @property
    def drain_s(self) -> float:
        """Seconds requests in flight get to finish once the drain begins: the grace
        period less what stopping takes after it (STOP_RESERVE_S), so that the server is
        gone within the grace period (0 for a grace period shorter than that)."""
        return max(0.0, self.grace_period_s - STOP_RESERVE_S)

    @property
    def grpc_url(self) -> str:
        return f"{self._connect_host}:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"http://{self._connect_host}:{self.http_port}"

    @property
    def triton_http_url(self) -> str:
        """tritonserver's own HTTP, without the guard (loopback when there is one)."""
        host = "127.0.0.1" if self.http_guard else self._connect_host
        return f"http://{host}:{self.triton_http_port}"

    @property
    def guard_log_path(self) -> Path:
        return self.log_path.with_name(f"{self.log_path.stem}.http-guard.log")

    def _guard_log(self, lines: int = 5) -> str:
        try:
            text = self.guard_log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(line for line in text[-lines:] if line.strip())

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

    def _key_options(self) -> list[str]:
        """tritonserver's options for the API keys: one key closes inference with Triton's
        restricted protocol (HTTP and gRPC), the way the admin APIs are. Several (a
        rotation) cannot: Triton holds one value per API group ("can not be specified in
        multiple config groups", measured on 2.51), so Triton forwards the key headers to
        the model, which checks them against every key (MODEL_KEYS_ENV). Over HTTP Triton
        2.51 forwards no header to a generate request, so there the key is a field of the
        request's JSON (a request parameter to the model): the HTTP guard adds it after
        checking the client's header."""
        if len(self.api_keys) == 1:
            return [f"{option}=inference:{API_KEY_HEADER}={self.api_keys[0]}"
                    for option in ("--http-restricted-api", "--grpc-restricted-protocol")]
        if self.api_keys:
            return [f"--grpc-header-forward-pattern=^{GRPC_KEY_HEADER}$"]
        return []

    def start(self, cancelled: Callable[[], bool] | None = None) -> TritonServer:
        """Start the server and wait until the model is ready; ``cancelled()`` true
        meanwhile (asked every 0.2 s) stops it and raises StartCancelled, so a signal
        need not wait for a model that loads for minutes."""
        binary, backends, extra_env = find_server()
        self._shutdown_dir = Path(tempfile.mkdtemp(prefix="fastapply-shutdown-"))
        env = dict(os.environ, **extra_env)
        env[SHUTDOWN_DIR_ENV] = str(self._shutdown_dir)
        env.pop(MODEL_KEYS_ENV, None)
        if len(self.api_keys) > 1:  # the model checks them (see _key_options)
            env[MODEL_KEYS_ENV] = ",".join(self.api_keys)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        cmd = [str(binary), f"--model-repository={self.model_repository}",
               f"--backend-directory={backends}",
               f"--grpc-address={self.host}", f"--grpc-port={self.grpc_port}",
               f"--http-address={'127.0.0.1' if self.http_guard else self.host}",
               f"--http-port={self.triton_http_port}",
               f"--metrics-address={self.host}", f"--metrics-port={self.metrics_port}",
               "--allow-metrics=true", "--allow-gpu-metrics=false",
               "--strict-readiness=true", "--exit-on-error=true", "--log-verbose=0",
               f"--exit-timeout-secs={self.exit_timeout_s}",
               *(f"{option}={','.join(ADMIN_APIS)}:{ADMIN_HEADER}={self.admin_key}"
                 for option in ("--http-restricted-api", "--grpc-restricted-protocol")),
               *self._key_options()]
        if self.http_guard:
            from fastapply.server.http import guard as http_guard

            self.guard = http_guard.spawn(f"127.0.0.1:{self.triton_http_port}", self.host,
                                          self.http_port, self.guard_log_path, self.api_keys)
        self.process = spawn_server(cmd, self.log_path, env)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            status = self.process.poll()
            if status is not None:
                tail = self.log_tail()
                self.stop()
                raise ServerError(f"tritonserver exited with status {status} while loading; "
                                  f"log tail:\n{tail}")
            if self.guard is not None and self.guard.poll() is not None:
                status = self.guard.returncode
                self.stop()
                raise GuardError(f"the HTTP guard for port {self.http_port} exited with "
                                  f"status {status} on start; its log:\n{self._guard_log()}")
            if self.ready():
                return self
            if cancelled is not None and cancelled():
                self.stop()
                raise StartCancelled("stopped before the model was ready")
            time.sleep(0.2)
        tail = self.log_tail()
        self.stop()
        raise ServerError(f"tritonserver not ready after {self.startup_timeout_s:.0f} s; "
                          f"log tail:\n{tail}")

    def ready(self) -> bool:
        """The model is ready (through the guard, when there is one) and the metrics
        endpoint answers too, so that a caller can read /metrics at once."""
        try:
            with urllib.request.urlopen(f"{self.http_url}/v2/health/ready", timeout=1) as r:
                if r.status != 200:
                    return False
            with urllib.request.urlopen(self.metrics_url, timeout=1) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def stop(self) -> list[str]:
        """Drain and stop the server (by PID); clean up. Returns what went wrong: one
        line per request the model answered UNAVAILABLE or the server dropped, per crash
        sign in the log; empty after a clean drain.

        Asks the model to finish by now + grace period (fastapply.server.lifecycle), SIGTERMs
        the server (Triton refuses new requests from then on and unloads the model once
        every request had its final response), and kills it if it is still there
        ``KILL_AFTER_S`` after its exit timeout. The server runs in a session of its
        own; whatever is left in that process group afterwards (Python-backend stubs of
        a server that crashed outlive it and ignore SIGTERM) is killed too.
        """
        proc, self.process = self.process, None
        problems: list[str] = []
        log_start = self._log_size()
        if proc is not None:
            if proc.poll() is None:
                if self._shutdown_dir is not None:
                    request_drain(self._shutdown_dir, time.time() + self.drain_s)
                proc.send_signal(signal.SIGTERM)
                how = self._wait_stopped(proc)
                if how == "timeout":
                    problems.append(f"tritonserver did not exit within "
                                    f"{self.exit_timeout_s + KILL_AFTER_S:.0f} s of SIGTERM; "
                                    f"killed it, dropping whatever it still had in flight")
                problems += self._stop_problems(proc.returncode if how == "exited" else 0,
                                                log_start)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        # The guard goes last: it relays the answers of the drain.
        from fastapply.server.http import guard as http_guard

        guard, self.guard = self.guard, None
        problem = http_guard.stop(guard) if guard is not None else None
        if problem is not None:
            problems.append(problem)
        if self._shutdown_dir is not None:
            problems += list(read_dropped(self._shutdown_dir))
            shutil.rmtree(self._shutdown_dir, ignore_errors=True)
            self._shutdown_dir = None
        return problems

    def _wait_stopped(self, proc: subprocess.Popen[bytes]) -> str:
        """Wait for the SIGTERMed server: "exited" (by itself), "drained" (killed once the
        model had answered everything) or "timeout" (killed, requests maybe dropped).

        Triton keeps the model loaded, and itself running, while a client holds a gRPC
        stream open, even an idle one; once the model says it answered everything
        (fastapply.server.lifecycle.drained) and its answers had ``SETTLE_S`` to reach the
        clients, killing the server drops nothing.
        """
        deadline_s = time.monotonic() + self.exit_timeout_s + KILL_AFTER_S
        settled_s: float | None = None
        while proc.poll() is None:
            now_s = time.monotonic()
            if settled_s is None and self._shutdown_dir and drained(self._shutdown_dir):
                settled_s = now_s + SETTLE_S
            if now_s >= deadline_s or (settled_s is not None and now_s >= settled_s):
                proc.kill()
                proc.wait(timeout=5)
                return "drained" if now_s < deadline_s else "timeout"
            time.sleep(0.05)
        return "exited"

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def _stop_problems(self, status: int, log_start: int) -> list[str]:
        """Non-zero exit status and crash lines the server logged while stopping."""
        problems = []
        if status < 0:
            problems.append(f"tritonserver was killed by {signal.Signals(-status).name}")
        elif status > 0:
            problems.append(f"tritonserver exited with status {status}")
        try:
            with self.log_path.open("rb") as log:
                log.seek(log_start)
                lines = log.read().decode(errors="replace").splitlines()
        except OSError:
            lines = []
        problems += [f"server log: {line.strip()}" for line in lines
                     if any(mark in line for mark in _CRASH_MARKS)]
        return problems

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
