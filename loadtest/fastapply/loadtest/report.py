"""The load-test report: Locust's ``--json-file`` rows + the run record -> a summary.

Request counts and latency come from Locust's rows (exact counts; percentiles from the
histogram Locust keeps of every value, rounded to about two significant digits:
147 -> 150, 3432 -> 3400). Everything else comes from the run record
(:class:`fastapply.loadtest.figures.RunRecord`): the run's wall time, failures by kind
and the per-request figures. Throughput is completed requests over the run's wall time,
never over the span between the first and the last completion (which, when every request
times out at once, is a few milliseconds and gave 1,898.8 requests/s for 24 requests that
all failed). This module does not import Locust (importing it monkey-patches the process).

>>> rows = [{"method": "fast_apply", "name": "merge", "num_requests": 4, "num_failures": 1,
...          "total_response_time": 100.0, "min_response_time": 10, "max_response_time": 40,
...          "response_times": {"10": 1, "20": 1, "30": 1, "40": 1},
...          "start_time": 0.0, "last_request_timestamp": 2.0}]
>>> run = RunRecord(started_s=0.0, stopped_s=6.0)
>>> run.add_failure("timeout")
>>> for ttft_ms in (1.0, 2.0, 3.0):
...     run.add_success({"ttft_ms": ttft_ms}, completion_tokens=40)
>>> r = summarise(rows, run=run)
>>> r["requests"], r["completed"], r["failures"], r["timeouts"], r["wall_s"]
(4, 3, 1, 1, 6.0)
>>> r["requests_per_s"], r["completion_tokens_per_s"], r["p50_ms"], r["ttft_p50_ms"]
(0.5, 20.0, 20.0, 2.0)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapply.loadtest.figures import (
    FAILURE_KINDS,
    LOCUST_MERGE,
    LOCUST_REQUEST_TYPE,
    TIMEOUT,
    UNFINISHED,
    RunRecord,
    percentile,
)
from fastapply.metrics import LOADTEST_DEFINITIONS, LOADTEST_RUN_DEFINITIONS

PERCENTILES = (50, 90, 95, 99)
#: Figures in the order they are printed.
FIGURE_ORDER = tuple(LOADTEST_DEFINITIONS)


def figure_summary(row: dict[str, Any]) -> dict[str, Any]:
    """count, mean, min, max and percentiles of one Locust row."""
    n = int(row.get("num_requests", 0))
    out: dict[str, Any] = {
        "count": n,
        "mean": row["total_response_time"] / n if n else None,
        "min": row.get("min_response_time"),
        "max": row.get("max_response_time") if n else None,
    }
    for q in PERCENTILES:
        out[f"p{q}"] = percentile(row.get("response_times", {}), q)
    return out


def summarise(rows: Iterable[dict[str, Any]], errors: list[dict[str, Any]] | None = None,
              run: RunRecord | None = None, **meta: Any) -> dict[str, Any]:
    """The report of one run from Locust's JSON rows, its error table, the run record
    (None when Locust wrote none: no wall time, no rates) and the run's setup."""
    rows = [r for r in rows if r["method"] == LOCUST_REQUEST_TYPE]
    run = run or RunRecord()
    requests = sum(r["num_requests"] for r in rows)
    failures = sum(r["num_failures"] for r in rows)
    completed = requests - failures
    figures: dict[str, dict[str, Any]] = {}
    merge = next((r for r in rows if r["name"] == LOCUST_MERGE), None)
    if merge is not None:
        figures["latency_ms"] = figure_summary(merge)
    for name, histogram in run.figures.items():
        figures[name] = histogram.summary(PERCENTILES)
    latency = figures.get("latency_ms", {})
    ttft = figures.get("ttft_ms", {})
    wall_s = run.wall_s

    def per_s(count: int) -> float | None:
        return count / wall_s if wall_s else None

    report: dict[str, Any] = dict(meta)
    report.update({
        "wall_s": wall_s,
        "requests": requests,
        "completed": completed,
        "failures": failures,
        "failure_ratio": failures / requests if requests else None,
        "timeouts": run.failures[TIMEOUT] + run.failures[UNFINISHED],
        "failures_by_kind": {k: run.failures[k] for k in FAILURE_KINDS if run.failures[k]},
        "requests_per_s": per_s(completed),
        "failures_per_s": per_s(failures),
        "completion_tokens_per_s": per_s(run.completion_tokens) if run.completion_tokens
        else None,
        "p50_ms": latency.get("p50"), "p90_ms": latency.get("p90"),
        "p95_ms": latency.get("p95"), "p99_ms": latency.get("p99"),
        "mean_ms": latency.get("mean"), "max_ms": latency.get("max"),
        "ttft_p50_ms": ttft.get("p50"), "ttft_p90_ms": ttft.get("p90"),
        "ttft_p99_ms": ttft.get("p99"),
        # medians over successful requests of the per-request figure (None without a model)
        "tokens_per_s": figures.get("tokens_per_s", {}).get("p50"),
        "chars_per_s": figures.get("chars_per_s", {}).get("p50"),
        "figures": figures,
        "errors": errors or [],
        "definitions": {**{k: LOADTEST_DEFINITIONS[k] for k in figures
                           if k in LOADTEST_DEFINITIONS}, **LOADTEST_RUN_DEFINITIONS},
    })
    return report


def totals_line(report: dict[str, Any]) -> str:
    """Requests, completed, failures (by kind) and the rates over the wall time.

    >>> totals_line({"requests": 24, "completed": 0, "failures": 24, "failure_ratio": 1.0,
    ...              "failures_by_kind": {"timeout": 24}, "wall_s": 31.5,
    ...              "requests_per_s": 0.0, "completion_tokens_per_s": None})
    'requests 24, completed 0, failures 24 (100.00%: timeout 24) in 31.5 s: 0.0 requests/s'
    """
    ratio, kinds = report["failure_ratio"], report["failures_by_kind"]
    line = f"requests {report['requests']}, completed {report['completed']}, " \
           f"failures {report['failures']}"
    if ratio is not None:
        line += f" ({100 * ratio:.2f}%" + (": " + ", ".join(
            f"{k} {n}" for k, n in kinds.items()) if kinds else "") + ")"
    if report["wall_s"] is None:
        return line + " (no wall time recorded: no rates)"
    line += f" in {report['wall_s']:.1f} s: {report['requests_per_s']:.1f} requests/s"
    if report["completion_tokens_per_s"] is not None:
        line += f", {report['completion_tokens_per_s']:.0f} completion tokens/s"
    return line


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def format_table(report: dict[str, Any]) -> str:
    """P50, P90 and P99 of every figure, then the totals, as printed at the end of a run."""
    names = [n for n in FIGURE_ORDER if n in report["figures"]]
    names += [n for n in report["figures"] if n not in names]
    lines = [f"{'figure':<24}{'count':>8}{'p50':>10}{'p90':>10}{'p99':>10}{'mean':>10}"]
    for name in names:
        f = report["figures"][name]
        lines.append(f"{name:<24}{f['count']:>8}{_fmt(f['p50']):>10}{_fmt(f['p90']):>10}"
                     f"{_fmt(f['p99']):>10}{_fmt(f['mean']):>10}")
    lines.append(totals_line(report))
    for e in report["errors"][:10]:
        lines.append(f"  {e['occurrences']:>6} x {e['method']} {e['name']}: {e['error'][:160]}")
    if len(report["errors"]) > 10:
        lines.append(f"  ... {len(report['errors']) - 10} more error kinds in the report")
    return "\n".join(lines)
