"""``fastapply loadtest``: Locust, headless, in a subprocess that cannot outlive its bound.

1. check the data file and that the target answers Triton gRPC with the model ready
   (a short timeout, a clear message, exit status 3 when it does not);
2. run ``locust -f locustfile.py --headless`` with ``--run-time`` and a ``--stop-timeout``
   past the request timeout (in-flight requests end and are counted); the subprocess
   gets SIGTERM, then SIGKILL (its process group), past duration + stop timeout + a
   margin, so a run never hangs;
   Locust prints a progress line every ``--progress-interval`` seconds;
3. read Locust's ``--json-file`` (exact totals, not the CSV snapshot) and the run record
   (wall time, failure kinds, the other figures), print P50/P90/P99 of every figure and
   completed requests per second of wall time, write ``--report`` JSON; exit 1 above
   ``--max-failure-ratio``.

Exit status: 0 passed, 1 too many failures or the run itself failed, 2 bad arguments
or data, 3 target unreachable.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from fastapply.loadtest.workload import FORMATS, WorkloadError, load_workload, parse_think_time

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
#: Seconds allowed beyond duration + stop timeout for Locust to start and write its files.
MARGIN_S = 15
#: Seconds between SIGTERM and SIGKILL when the bound is reached.
KILL_GRACE_S = 10
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


def parse_duration(text: str) -> int:
    """Whole seconds of ``30``, ``30s``, ``2m``, ``1h30m`` (at least 1).

    >>> parse_duration("1m30s"), parse_duration("45"), parse_duration("2h")
    (90, 45, 7200)
    """
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return max(1, round(float(text)))
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    if not text or m is None:
        raise ValueError(f"duration {text!r}: use e.g. 30s, 5m, 1h30m or a number of seconds")
    h, mi, s = (int(g or 0) for g in m.groups())
    return max(1, h * 3600 + mi * 60 + s)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", required=True, help="HOST:PORT of the server's Triton gRPC port")
    p.add_argument("--users", type=int, default=4, help="concurrent users (default 4)")
    p.add_argument("--spawn-rate", type=float, help="users started per second (default: all)")
    p.add_argument("--duration", default="30s", help="run time, e.g. 30s, 5m (default 30s)")
    p.add_argument("--data", type=Path, help="JSONL of edits (default: the shipped examples)")
    p.add_argument("--formats", default=",".join(FORMATS),
                   help=f"snippet fields to mix (default {','.join(FORMATS)})")
    p.add_argument("--think-time", default="0", help="SECONDS or MIN,MAX between a user's "
                   "requests (default 0)")
    p.add_argument("--no-stream", action="store_true",
                   help="request whole files instead of streamed deltas")
    p.add_argument("--verify", action="store_true",
                   help="a merge that differs from the record's 'updated' is a failure")
    p.add_argument("--report", type=Path, help="write the summary JSON here")
    p.add_argument("--html", type=Path, help="write Locust's HTML report here")
    p.add_argument("--max-failure-ratio", type=float, default=0.01,
                   help="exit 1 above this share of failed requests (default 0.01)")
    p.add_argument("--request-timeout", type=float, default=30.0,
                   help="seconds to wait for the server's next response before the "
                        "request fails (default 30); requests in flight at the end get "
                        "this long + 2 s to finish, then count as failures")
    p.add_argument("--connect-timeout", type=float, default=5.0,
                   help="seconds to wait for the server, up front and per user (default 5)")
    p.add_argument("--seed", type=int, help="seed of the edit picks (reproducible mixes)")
    p.add_argument("--progress-interval", type=float, default=10.0,
                   help="seconds between progress lines during the run; 0: none (default 10)")


def check_reachable(url: str, timeout_s: float, model: str = "fast_apply") -> str | None:
    """None when ``url`` answers Triton gRPC with ``model`` ready, else what is wrong."""
    host, sep, port = url.rpartition(":")
    if not sep or not host or not port.isdigit():
        return f"--url {url!r}: expected HOST:PORT of Triton's gRPC port (e.g. 127.0.0.1:8001)"
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        return (f"cannot connect to {url} ({exc.strerror or exc}): is the server running and "
                f"is this its gRPC port (8001 by default)? For a cluster, port-forward first "
                f"(see docs/loadtest.md)")
    try:
        import tritonclient.grpc as grpcclient
    except ImportError:
        return "tritonclient is not installed: pip install -e '.[loadtest]'"
    client = grpcclient.InferenceServerClient(url=url)
    try:
        if not client.is_server_ready(client_timeout=timeout_s):
            return f"the server at {url} is up but not ready yet; try again when it is"
        if not client.is_model_ready(model, client_timeout=timeout_s):
            return f"the server at {url} is ready but model {model!r} is not loaded"
    except Exception as exc:  # tritonclient's error types vary by version
        return (f"{url} accepts connections but does not answer Triton gRPC ({exc}); "
                f"is it the HTTP port? Point --url at the gRPC port (8001 by default)")
    finally:
        client.close()
    return None


def locust_command(args: argparse.Namespace, duration_s: int, workdir: Path) -> list[str]:
    users = max(1, args.users)
    # Users finish their last request (answer or request timeout) before Locust stops
    # them: a user killed inside a gRPC call can take the process down with it.
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
           "--host", args.url, "--users", str(users),
           "--spawn-rate", str(args.spawn_rate or users),
           "--run-time", f"{duration_s}s", "--stop-timeout", str(stop_timeout_s(args)),
           "--only-summary", "--json-file", str(workdir / "stats"),
           "--fa-errors-file", str(workdir / "errors.json"),
           "--fa-run-file", str(workdir / "run.json"),
           "--fa-progress-interval", str(args.progress_interval),
           "--fa-formats", args.formats, "--fa-think-time", args.think_time,
           "--fa-request-timeout", str(args.request_timeout),
           "--fa-connect-timeout", str(args.connect_timeout),
           "--fa-max-failure-ratio", str(args.max_failure_ratio)]
    if args.data is not None:
        cmd += ["--fa-data", str(args.data.resolve())]
    if args.verify:
        cmd.append("--fa-verify")
    if args.no_stream:
        cmd.append("--fa-no-stream")
    if args.seed is not None:
        cmd += ["--fa-seed", str(args.seed)]
    if args.html is not None:
        cmd += ["--html", str(args.html.resolve())]
    return cmd


def stop_timeout_s(args: argparse.Namespace) -> int:
    """Seconds Locust waits for in-flight requests at the end: past the request timeout."""
    return int(args.request_timeout) + 2


def run_bounded(cmd: list[str], bound_s: float, cwd: Path) -> int | None:
    """Run ``cmd`` in its own process group; None when it had to be killed at ``bound_s``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCUST_")}
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, start_new_session=True)
    try:
        return proc.wait(timeout=bound_s)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGTERM)  # Locust writes its files on SIGTERM
        try:
            proc.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
        return None
    except BaseException:  # Ctrl-C: never leave Locust behind
        _signal_group(proc, signal.SIGKILL)
        proc.wait()
        raise


def _signal_group(proc: subprocess.Popen[Any], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(proc.pid, sig)  # the group start_new_session made: Locust and its children


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def run(args: argparse.Namespace) -> int:
    from fastapply.examples import DataError
    from fastapply.loadtest.figures import RunRecord
    from fastapply.loadtest.report import format_table, summarise

    try:
        duration_s = parse_duration(args.duration)
        parse_think_time(args.think_time)
        if args.progress_interval < 0:
            raise ValueError(f"--progress-interval {args.progress_interval:g}: give seconds "
                             f">= 0 (0: no progress lines)")
        load_workload(args.data, [f.strip() for f in args.formats.split(",") if f.strip()])
    except (ValueError, DataError, WorkloadError) as exc:
        print(f"fastapply loadtest: {exc}", file=sys.stderr)
        return EXIT_USAGE
    problem = check_reachable(args.url, args.connect_timeout)
    if problem is not None:
        print(f"fastapply loadtest: {problem}", file=sys.stderr)
        return EXIT_UNREACHABLE
    bound_s = duration_s + stop_timeout_s(args) + MARGIN_S
    print(f"fastapply loadtest: {args.users} user(s) against {args.url} for {duration_s} s "
          f"(hard bound {bound_s} s)", flush=True)
    with tempfile.TemporaryDirectory(prefix="fastapply-loadtest-") as tmp:
        workdir = Path(tmp)
        code = run_bounded(locust_command(args, duration_s, workdir), bound_s, workdir)
        rows = _read_json(workdir / "stats.json") or _read_json(workdir / "stats")
        errors = _read_json(workdir / "errors.json")
        run_data = _read_json(workdir / "run.json")
    if code is None:
        print(f"fastapply loadtest: Locust did not finish within {bound_s} s and was killed",
              file=sys.stderr)
    if rows is None:
        print(f"fastapply loadtest: Locust wrote no statistics (exit status {code}); see its "
              f"log above", file=sys.stderr)
        return EXIT_FAILED
    run_record = RunRecord.from_dict(run_data) if run_data else None
    report = summarise(rows, errors, run_record, url=args.url, users=args.users,
                       duration_s=duration_s,
                       data=str(args.data) if args.data else "(shipped examples)",
                       formats=args.formats.split(","), verify=args.verify,
                       stream=not args.no_stream, max_failure_ratio=args.max_failure_ratio)
    print(format_table(report))
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"report: {args.report}")
    ratio = report["failure_ratio"]
    if report["requests"] == 0:
        print("fastapply loadtest: no request completed", file=sys.stderr)
        return EXIT_FAILED
    if ratio is not None and ratio > args.max_failure_ratio:
        print(f"fastapply loadtest: failure ratio {100 * ratio:.2f}% is above "
              f"{100 * args.max_failure_ratio:.2f}%", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_FAILED if code is None else EXIT_OK
