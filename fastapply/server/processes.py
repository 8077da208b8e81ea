"""Child processes that fastapply owns (tritonserver, the HTTP guard, the OpenAI front).

:func:`spawn_server` starts one in a session of its own that dies with its owner;
:func:`free_port` picks a port for it. Nothing here knows about Triton: the servers
themselves are in :mod:`fastapply.server.triton`, :mod:`fastapply.server.http.guard` and
:mod:`fastapply.server.openai.server`.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now on ``host``."""
    return free_ports(1, host)[0]


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct TCP ports free right now on ``host``: each socket is held until all
    are picked (picked one at a time, the kernel may hand the same port out twice: a
    server once got one port for gRPC and metrics and could not start).

    >>> a, b, c = free_ports(3)
    >>> len({a, b, c})
    3
    """
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in sockets:
            s.bind((host, 0))
        return [int(s.getsockname()[1]) for s in sockets]


def _die_with_parent() -> None:
    """In the child, before exec: Linux sends it SIGTERM when its parent dies, so a
    killed test run or demo does not leave a server behind."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def spawn_server(cmd: list[str], log_path: Path | None,
                 env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start a server process that `fastapply serve` (or a test) owns: in a session of
    its own, so a terminal's Ctrl-C reaches its owner alone, which stops it in order; it
    gets SIGTERM if its owner dies; its output goes to ``log_path`` (else inherited)."""
    log = log_path.open("wb") if log_path is not None else None
    try:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT if log else None,
                                env=env, start_new_session=True, preexec_fn=_die_with_parent)
    finally:
        if log is not None:
            log.close()


def front_parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """The command line of an HTTP front run as a child (``python -m ...``): its
    description and the address it binds (``--host``, ``--port``)."""
    parser = argparse.ArgumentParser(prog=prog, description=(doc or "").split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port to bind (8080)")
    return parser


def positive(kind: type[int] | type[float]) -> Any:
    """An argparse type: a finite number of ``kind`` above 0 (a concurrency of 0 left
    every request waiting forever; a timeout of -1 failed every one)."""
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not 0 < value < float("inf"):  # NaN fails this too
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__} above 0")
        return value

    return parse


def run_front(app: Any, host: str, port: int, **options: Any) -> None:
    """Serve the ASGI ``app`` with uvicorn until SIGTERM: no access log, 5 s to finish
    open requests; loop/http "auto" take uvloop and httptools where installed (the serve
    extra has them). ``options`` go to ``uvicorn.run``."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                timeout_graceful_shutdown=5, **options)
