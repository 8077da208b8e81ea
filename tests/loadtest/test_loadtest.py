"""The load test: workload and report logic, then ``fastapply loadtest`` end to end.

End-to-end runs go through the real command (``python -m fastapply loadtest``) against a
real tritonserver on the deterministic runtime (conftest's ``det_server``), each a few
seconds long under a hard subprocess timeout. The deterministic runtime merges
SEARCH/REPLACE and udiff snippets exactly but is no model: it refuses some lazy
snippets, so these runs send only the two exact formats.

``--verify`` is shown to catch a wrong merge with the same server and a data file whose
``updated`` texts were altered: the comparison is symmetric, so "served text differs
from expected text" is exercised honestly without a model that merges wrongly, and the
first run (unaltered data, ``--verify`` on, zero failures) is its control.
"""

from __future__ import annotations

import doctest
import importlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from importlib.metadata import requires
from pathlib import Path
from typing import Any

import pytest

from fastapply.examples import load_edits
from fastapply.loadtest.figures import RunRecord
from fastapply.loadtest.report import format_table, summarise
from fastapply.loadtest.workload import Workload, WorkloadError

EXACT_FORMATS = "search_replace,udiff"
#: Outer safety net of every end-to-end run, in seconds: above the command's own bound
#: (duration + request timeout + 2 + margin 15 + kill grace 10), never reached when it works.
HARD_TIMEOUT_S = 60


#: Top-level modules a load-test install does not have (the `loadtest` extra: Locust and
#: the client only); imported by the load test, they make it fail.
SERVER_ONLY_MODULES = ("torch", "transformers", "tokenizers", "safetensors", "pytriton",
                       "modelopt", "tensorrt_llm", "peft")
_BLOCK_SERVER_MODULES = f"""
import sys
class _Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {SERVER_ONLY_MODULES!r}:
            raise ImportError(f"{{name}} is not part of a load-test install")
        return None
sys.meta_path.insert(0, _Blocker())
"""


def loadtest(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fastapply", "loadtest", *args],
                          capture_output=True, text=True, timeout=HARD_TIMEOUT_S, env=env)


def without_server_modules(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python processes (and their children) cannot import torch & co."""
    site = tmp_path / "block"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_BLOCK_SERVER_MODULES)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}


# -- no server --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fastapply.loadtest.workload", "fastapply.loadtest.report",
                                  "fastapply.loadtest.figures", "fastapply.loadtest.cli",
                                  "fastapply.metrics"])
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_workload_mixes_sizes_and_formats() -> None:
    w = Workload(load_edits(), formats=("search_replace", "udiff"), seed=1)
    sizes = [max(len(e.original) for e in c) for c in w.size_classes]
    assert sizes == sorted(sizes) and len(sizes) == 3
    picks = [w.pick() for _ in range(300)]
    assert {p.format for p in picks} == {"search_replace", "udiff"}
    assert all(any(p in c for p in picks) for c in w.size_classes)


def test_workload_refuses_unknown_formats_and_empty_data() -> None:
    with pytest.raises(WorkloadError, match="unknown snippet format"):
        Workload(load_edits(), formats=("diff",))
    with pytest.raises(WorkloadError, match="no record"):
        Workload([{"id": "a", "original": "x", "updated": "y", "udiff": " "}], ("udiff",))


def locust_row(name: str, requests: int, failures: int, **extra: Any) -> dict[str, Any]:
    """A row of Locust's --json-file for request_type fast_apply."""
    return {"method": "fast_apply", "name": name, "num_requests": requests,
            "num_failures": failures, "total_response_time": 1.0 * requests,
            "min_response_time": 1, "max_response_time": 1, "response_times": {"1": requests},
            "start_time": 0.0, "last_request_timestamp": 1.0, **extra}


def test_throughput_when_every_request_times_out_is_zero_not_thousands() -> None:
    """The reported bug: 24 users, every request timed out at 30 s, and the report said
    1,898.8 requests/s (24 requests over the ~13 ms between the first and last timeout)."""
    rows = [locust_row("merge", 24, 24, start_time=1000.0, last_request_timestamp=1000.0126,
                       total_response_time=24 * 30_000.0, response_times={"30000": 24})]
    run = RunRecord(failures=Counter(timeout=24), started_s=970.0, stopped_s=1001.5)
    report = summarise(rows, run=run)
    assert (report["requests"], report["completed"], report["failures"]) == (24, 0, 24)
    assert report["requests_per_s"] == 0.0
    assert report["timeouts"] == 24 and report["failures_by_kind"] == {"timeout": 24}
    assert report["failures_per_s"] == pytest.approx(24 / 31.5)
    assert "0.0 requests/s" in format_table(report) and "timeout 24" in format_table(report)


def test_throughput_is_completed_requests_over_the_wall_time() -> None:
    rows = [locust_row("merge", 100, 10, start_time=5.0, last_request_timestamp=6.0),
            locust_row("connect", 2, 2)]
    run = RunRecord(started_s=0.0, stopped_s=20.0, failures=Counter(error=10, connect=2))
    for _ in range(90):
        run.add_success({"chars_per_s": 1000.0}, completion_tokens=10)
    report = summarise(rows, run=run)
    assert (report["requests"], report["completed"], report["failures"]) == (102, 90, 12)
    assert report["requests_per_s"] == 90 / 20 and report["completion_tokens_per_s"] == 45.0
    assert report["timeouts"] == 0 and report["wall_s"] == 20.0


def test_without_a_run_record_there_are_no_rates() -> None:
    report = summarise([locust_row("merge", 3, 0)])
    assert report["wall_s"] is None and report["requests_per_s"] is None
    assert "no wall time recorded" in format_table(report)


def test_report_keeps_only_fast_apply_rows() -> None:
    """A locustfile may add its own request types; they are not fastapply requests."""
    rows = [locust_row("connect", 2, 2), dict(locust_row("login", 5, 0), method="http")]
    report = summarise(rows)
    assert (report["requests"], report["failures"], report["p50_ms"]) == (2, 2, None)


def test_worker_records_merge_into_the_masters() -> None:
    master, worker = RunRecord(), RunRecord()
    master.start(0.0)
    worker.start(0.5)
    for ttft_ms in (1.0, 2.0, 3.0):
        worker.add_success({"ttft_ms": ttft_ms}, completion_tokens=7)
    worker.add_failure("timeout")
    master.add_success({"ttft_ms": 100.0})
    master.merge(json.loads(json.dumps(worker.take())))  # as sent over the wire
    assert worker.completed == 0 and not worker.figures  # taken: not sent twice
    master.stop(10.0)
    assert (master.completed, master.completion_tokens, master.failures["timeout"]) == (4, 21, 1)
    ttft = master.figures["ttft_ms"]
    assert (ttft.count, ttft.min, ttft.max, ttft.percentile(50)) == (4, 1.0, 100.0, 2.0)
    assert master.wall_s == 10.0  # the master's own start and stop
    with pytest.raises(ValueError, match="unknown failure kind"):
        master.add_failure("slow")


def test_a_negative_progress_interval_is_refused_before_any_run() -> None:
    done = loadtest("--url", "127.0.0.1:1", "--progress-interval", "-1")
    assert done.returncode == 2 and "--progress-interval -1" in done.stderr


def test_the_loadtest_extra_needs_no_torch() -> None:
    """`pip install fastapply[loadtest]` (the load-test image) pulls Locust and the client
    only: follow the extras through the installed metadata."""
    extras: dict[str, list[str]] = {}
    for req in requires("fastapply") or []:
        spec, _, marker = req.partition(";")
        found = re.search(r'extra == "([^"]+)"', marker)
        if found:
            extras.setdefault(found.group(1), []).append(spec.strip())
    todo, closure = ["loadtest"], set()
    while todo:
        for spec in extras[todo.pop()]:
            inner = re.fullmatch(r"fastapply\[([^\]]+)\]", spec)
            if inner:
                todo += inner.group(1).split(",")
            else:
                closure.add(re.split(r"[\[<>=!~ ]", spec)[0].lower())
    assert closure == {"locust", "tritonclient"}


# -- against a real server --------------------------------------------------------------


@pytest.mark.server
def test_short_run_reports_requests_figures_and_progress_without_torch(
        det_server: Any, tmp_path: Path) -> None:
    """A whole run as a load-test install runs it: torch and the server's modules cannot
    be imported (in the wrapper and in Locust), progress lines every second."""
    report_path, html = tmp_path / "report.json", tmp_path / "report.html"
    done = loadtest("--url", det_server.grpc_url, "--users", "2", "--duration", "4s",
                    "--formats", EXACT_FORMATS, "--verify", "--request-timeout", "5",
                    "--progress-interval", "1", "--report", str(report_path),
                    "--html", str(html), env=without_server_modules(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["requests"] > 0 and report["failures"] == 0, report["errors"]
    assert report["completed"] == report["requests"] and report["timeouts"] == 0
    assert report["p50_ms"] is not None and report["p99_ms"] >= report["p50_ms"]
    for figure in ("latency_ms", "ttft_ms", "chars_per_s"):
        assert report["figures"][figure]["count"] == report["requests"], figure
    assert report["ttft_p50_ms"] is not None and report["chars_per_s"] > 0
    # Throughput over the run's wall time (Locust's --run-time clock starts a little
    # before the first user: the wall time is what the record measured, not the duration).
    assert report["wall_s"] > 0
    assert report["requests_per_s"] == pytest.approx(report["completed"] / report["wall_s"])
    assert "ttft_ms" in done.stdout and "p99" in done.stdout  # the printed table
    assert html.is_file() and html.stat().st_size > 0
    output = done.stdout + done.stderr
    progress = re.findall(r"fastapply progress: \d+ s, (\d+) requests, (\d+) failed "
                          r"\(\d+ timeouts\), [\d.]+ completed/s, p50 \S+ ms", output)
    assert len(progress) >= 3, output  # one a second over 4 s, and the last one at the stop
    assert int(progress[-1][0]) == report["requests"] and progress[-1][1] == "0"


@pytest.mark.server
def test_locusts_own_tables_count_requests_only(det_server: Any, tmp_path: Path) -> None:
    """Bare `locust -f`, distributed over two worker processes: Locust's rows (and so its
    "Aggregated" row) hold the merges and nothing else; the other figures travel from the
    workers to the master, which prints them when Locust quits, one per merge."""
    from fastapply.loadtest.cli import LOCUSTFILE

    done = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
         "--host", det_server.grpc_url, "--users", "4", "--spawn-rate", "4", "--processes", "2",
         "--run-time", "3s", "--stop-timeout", "7", "--json-file", str(tmp_path / "stats"),
         "--fa-formats", EXACT_FORMATS, "--fa-request-timeout", "5",
         "--fa-progress-interval", "0"],
        capture_output=True, text=True, timeout=HARD_TIMEOUT_S, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # Every request event feeds Locust's "Aggregated" row: these rows are all there is.
    rows = json.loads((tmp_path / "stats.json").read_text())
    assert [(r["method"], r["name"]) for r in rows] == [("fast_apply", "merge")]
    merges = rows[0]["num_requests"]
    assert "fastapply figures:" in output and "ttft_ms" in output
    assert re.search(rf"^ttft_ms\s+{merges}\s", output, flags=re.MULTILINE), output
    assert "fastapply progress" not in output  # --fa-progress-interval 0


@pytest.mark.server
@pytest.mark.slow
def test_a_saturated_server_reports_timeouts_and_no_throughput(
        tiny_server: Any, tmp_path: Path) -> None:
    """Requests outlive a 50 ms request timeout on the tiny model (CPU): the report counts
    them as timeouts beside a throughput of the completed ones only (the watchdog's race
    with a late delta once showed as "stream failed: Locally cancelled")."""
    record = min((r for r in load_edits() if 500 < len(r["original"]) < 900),
                 key=lambda r: len(r["original"]))
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps(record) + "\n")
    report_path = tmp_path / "report.json"
    done = loadtest("--url", tiny_server.grpc_url, "--users", "3", "--duration", "3s",
                    "--data", str(data), "--formats", "search_replace",
                    "--request-timeout", "0.05", "--report", str(report_path))
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    timeouts, completed = report["timeouts"], report["completed"]
    # The odd request may end in time: merged, or refused because the random tiny model
    # filled its context before finishing the file (an "error", never a success).
    refused = report["failures_by_kind"].get("error", 0)
    assert timeouts > completed + refused, report
    assert timeouts + completed + refused == report["requests"]
    assert report["failures_by_kind"] == {"timeout": timeouts, **({"error": refused} if refused
                                                                  else {})}
    assert report["failures"] == timeouts + refused
    assert report["requests_per_s"] == pytest.approx(completed / report["wall_s"])
    assert report["failures_per_s"] == pytest.approx(report["failures"] / report["wall_s"])
    assert "no answer from" in report["errors"][0]["error"]


@pytest.mark.server
def test_dead_port_exits_nonzero_quickly() -> None:
    from fastapply.server.processes import free_port

    done = loadtest("--url", f"127.0.0.1:{free_port()}", "--duration", "30s",
                    "--connect-timeout", "2")
    assert done.returncode == 3
    assert "cannot connect" in done.stderr


@pytest.mark.server
def test_verify_counts_a_wrong_merge_as_a_failure(det_server: Any, tmp_path: Path) -> None:
    data = tmp_path / "altered.jsonl"
    with data.open("w") as fh:
        for record in load_edits():
            record["updated"] += "# not what the server returns\n"
            fh.write(json.dumps(record) + "\n")
    report_path = tmp_path / "report.json"
    done = loadtest("--url", det_server.grpc_url, "--users", "2", "--duration", "3s",
                    "--data", str(data), "--formats", EXACT_FORMATS, "--verify",
                    "--request-timeout", "5", "--report", str(report_path))
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["requests"] > 0 and report["failures"] == report["requests"]
    assert all("merge differs from 'updated'" in e["error"] for e in report["errors"])
    assert "ttft_ms" not in report["figures"]  # figures only for successful merges
