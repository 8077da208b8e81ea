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
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fastapply.examples import load_edits
from fastapply.loadtest.report import summarise
from fastapply.loadtest.workload import Workload, WorkloadError

EXACT_FORMATS = "search_replace,udiff"
#: Outer safety net of every end-to-end run, in seconds: above the command's own bound
#: (duration + request timeout + 2 + margin 15 + kill grace 10), never reached when it works.
HARD_TIMEOUT_S = 60


def loadtest(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fastapply", "loadtest", *args],
                          capture_output=True, text=True, timeout=HARD_TIMEOUT_S)


# -- no server --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fastapply.loadtest.workload", "fastapply.loadtest.report",
                                  "fastapply.loadtest.cli", "fastapply.metrics"])
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


def test_report_counts_failed_connects_and_ignores_metric_rows() -> None:
    row = {"num_requests": 2, "num_failures": 2, "total_response_time": 2.0,
           "min_response_time": 1, "max_response_time": 1, "response_times": {"1": 2},
           "start_time": 0.0, "last_request_timestamp": 1.0}
    rows = [dict(row, method="fast_apply", name="connect"),
            dict(row, method="metric", name="chars_per_s", num_failures=0)]
    report = summarise(rows)
    assert (report["requests"], report["failures"], report["p50_ms"]) == (2, 2, None)
    assert report["chars_per_s"] == 1.0


# -- against a real server --------------------------------------------------------------


@pytest.mark.server
def test_short_run_reports_requests_and_custom_figures(det_server: Any, tmp_path: Path) -> None:
    report_path, html = tmp_path / "report.json", tmp_path / "report.html"
    done = loadtest("--url", det_server.grpc_url, "--users", "2", "--duration", "4s",
                    "--formats", EXACT_FORMATS, "--verify", "--request-timeout", "5",
                    "--report", str(report_path), "--html", str(html))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["requests"] > 0 and report["failures"] == 0, report["errors"]
    assert report["p50_ms"] is not None and report["p99_ms"] >= report["p50_ms"]
    for figure in ("latency_ms", "ttft_ms", "chars_per_s"):
        assert report["figures"][figure]["count"] == report["requests"], figure
    assert report["ttft_p50_ms"] is not None and report["chars_per_s"] > 0
    assert "ttft_ms" in done.stdout and "p99" in done.stdout  # the printed table
    assert html.is_file() and html.stat().st_size > 0


@pytest.mark.server
def test_dead_port_exits_nonzero_quickly() -> None:
    from fastapply.serving import free_port

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
