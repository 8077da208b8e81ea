"""The load-test report: Locust's ``--json-file`` rows -> one summary dict and a table.

Counts are exact (Locust's JSON keeps every request and failure); percentiles come from
the histogram Locust keeps of every value, rounded to about two significant digits
(``bucket_response_time``: 147 -> 150, 3432 -> 3400), means from the exact sums. This
module does not import Locust (importing it monkey-patches the process).

>>> rows = [{"method": "fast_apply", "name": "merge", "num_requests": 4, "num_failures": 1,
...          "total_response_time": 100.0, "min_response_time": 10, "max_response_time": 40,
...          "response_times": {"10": 1, "20": 1, "30": 1, "40": 1},
...          "start_time": 0.0, "last_request_timestamp": 2.0},
...         {"method": "metric", "name": "ttft_ms", "num_requests": 3, "num_failures": 0,
...          "total_response_time": 6.0, "min_response_time": 1, "max_response_time": 3,
...          "response_times": {"1": 1, "2": 1, "3": 1},
...          "start_time": 0.0, "last_request_timestamp": 2.0}]
>>> r = summarise(rows)
>>> r["requests"], r["failures"], r["p50_ms"], r["p99_ms"], r["ttft_p50_ms"]
(4, 1, 20.0, 40.0, 2.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from fastapply.metrics import LOADTEST_DEFINITIONS, LOADTEST_METRIC_TYPE, LOADTEST_REQUEST

PERCENTILES = (50, 90, 95, 99)
#: Figures in the order they are printed.
FIGURE_ORDER = tuple(LOADTEST_DEFINITIONS)


def percentile(histogram: dict[Any, int], q: float) -> float | None:
    """Nearest-rank ``q``-th percentile of a {value: count} histogram (None when empty).

    >>> percentile({"1": 1, "2": 1, "10": 2}, 50), percentile({"1": 1, "2": 1, "10": 2}, 99)
    (2.0, 10.0)
    """
    items = sorted((float(k), int(n)) for k, n in histogram.items())
    total = sum(n for _, n in items)
    if total == 0:
        return None
    rank = max(1, math.ceil(q / 100 * total))
    seen = 0
    for value, n in items:
        seen += n
        if seen >= rank:
            return value
    return items[-1][0]


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
              **meta: Any) -> dict[str, Any]:
    """The report of one run from Locust's JSON rows, its error table and the run's setup."""
    rows = list(rows)
    requests = sum(r["num_requests"] for r in rows if r["method"] == LOADTEST_REQUEST[0])
    failures = sum(r["num_failures"] for r in rows if r["method"] == LOADTEST_REQUEST[0])
    figures: dict[str, dict[str, Any]] = {}
    merge = next((r for r in rows if (r["method"], r["name"]) == LOADTEST_REQUEST), None)
    if merge is not None:
        figures["latency_ms"] = figure_summary(merge)
    for r in rows:
        if r["method"] == LOADTEST_METRIC_TYPE:
            figures[r["name"]] = figure_summary(r)
    latency = figures.get("latency_ms", {})
    ttft = figures.get("ttft_ms", {})
    elapsed = ((merge.get("last_request_timestamp") or 0) - merge.get("start_time", 0)
               if merge else 0)
    report: dict[str, Any] = dict(meta)
    report.update({
        "requests": requests,
        "failures": failures,
        "failure_ratio": failures / requests if requests else None,
        "requests_per_s": (merge["num_requests"] / elapsed) if merge and elapsed > 0 else None,
        "p50_ms": latency.get("p50"), "p90_ms": latency.get("p90"),
        "p95_ms": latency.get("p95"), "p99_ms": latency.get("p99"),
        "mean_ms": latency.get("mean"), "max_ms": latency.get("max"),
        "ttft_p50_ms": ttft.get("p50"), "ttft_p90_ms": ttft.get("p90"),
        "ttft_p99_ms": ttft.get("p99"),
        # medians over successful requests (None when the runtime has no model)
        "tokens_per_s": figures.get("tokens_per_s", {}).get("p50"),
        "chars_per_s": figures.get("chars_per_s", {}).get("p50"),
        "figures": figures,
        "errors": errors or [],
        "definitions": {k: LOADTEST_DEFINITIONS[k] for k in figures if k in LOADTEST_DEFINITIONS},
    })
    return report


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
    ratio = report["failure_ratio"]
    lines.append(f"requests {report['requests']}, failures {report['failures']}"
                 + (f" ({100 * ratio:.2f}%)" if ratio is not None else "")
                 + (f", {report['requests_per_s']:.1f} requests/s"
                    if report.get("requests_per_s") else ""))
    for e in report["errors"][:10]:
        lines.append(f"  {e['occurrences']:>6} x {e['method']} {e['name']}: {e['error'][:160]}")
    if len(report["errors"]) > 10:
        lines.append(f"  ... {len(report['errors']) - 10} more error kinds in the report")
    return "\n".join(lines)
