"""Every figure fastapply reports, defined once.

The server (the ``stats`` output tensor and its Prometheus counters), the client, the
benchmarks and the load test all use these names and definitions. Units are in the
names: ``_ms`` milliseconds, ``_per_s`` per second of wall time, ``_tokens`` counts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

#: name -> definition, for documentation, ``--help`` texts and the load-test report.
DEFINITIONS: dict[str, str] = {
    "prompt_tokens": "tokens in the prompt sent to the model",
    "reused_prompt_tokens": "prompt tokens whose keys and values came from a recent prompt "
                            "that starts the same way (torch runtime's prompt cache), not "
                            "computed again",
    "completion_tokens": "tokens the model produced (including the stop token, if any)",
    "forward_passes": "model forward passes, prefill included",
    "accepted_draft_tokens": "draft tokens the model confirmed",
    "rejected_draft_tokens": "draft tokens the model refused",
    "ttft_ms": "time from the request's start to its first output token, in ms",
    "total_ms": "time from the request's start to its end, in ms",
    "tokens_per_s": "completion_tokens / total time, tokens per second",
    "chars_per_s": "characters of the merged file / total time, characters per second",
    "finish_reason": "stop (the model ended), length (token budget reached), merged "
                     "(the deterministic merge was served) or parted (stopped where the "
                     "model left the deterministic merge, under a policy that serves only "
                     "a file both agree on), budget (the witness of an unsure merge ran "
                     "past witness_budget_s); only stop and merged are a complete file, "
                     "anything else is refused",
    "min_token_prob": "lowest probability the model gave a token it wrote (1.0: not "
                      "reported), where it hesitated",
    "witness": "which reading was served: judge (the reading of an unsure merge the judge "
               "accepted), judge-certain (a certain merge the judge did not veto), "
               "deterministic-exact (SEARCH/REPLACE or udiff), agree (the model wrote the "
               "merge's file), model, ...",
}

#: Finish reasons of a complete file: the model ended it, or no model ran. Any other
#: (length: max_tokens or the context ran out) means the file was cut off.
COMPLETE_FINISH_REASONS = ("stop", "merged")


@dataclass
class Stats:
    """Statistics of one request (all figures carry their unit in their name)."""

    prompt_tokens: int = 0
    #: Prompt tokens reused from the prompt cache (0 where the runtime has none).
    reused_prompt_tokens: int = 0
    completion_tokens: int = 0
    forward_passes: int = 0
    accepted_draft_tokens: int = 0
    rejected_draft_tokens: int = 0
    ttft_ms: float = 0.0
    total_ms: float = 0.0
    tokens_per_s: float = 0.0
    chars_per_s: float = 0.0
    finish_reason: str = ""
    #: Lowest probability the model gave a token it wrote (1.0 where the runtime does
    #: not report probabilities): where it hesitated.
    min_token_prob: float = 1.0
    #: Which reading was served and why (see fastapply.decoding.witness): "agree", "model", ...
    witness: str = ""
    #: Windows the model wrote where the merge was unsure (the windowed witness; 0 when
    #: it was not asked, or asked about the whole file).
    windows: int = 0

    def finalise(self, total_s: float, chars: int) -> Stats:
        """Fill the derived figures from the wall time and the output size."""
        self.total_ms = total_s * 1e3
        self.tokens_per_s = self.completion_tokens / total_s if total_s > 0 else 0.0
        self.chars_per_s = chars / total_s if total_s > 0 else 0.0
        return self

    @property
    def complete(self) -> bool:
        """Whether the output is a whole file (see COMPLETE_FINISH_REASONS)."""
        return self.finish_reason in COMPLETE_FINISH_REASONS

    @property
    def acceptance_rate(self) -> float:
        """Accepted / proposed draft tokens (0.0 when nothing was proposed)."""
        proposed = self.accepted_draft_tokens + self.rejected_draft_tokens
        return self.accepted_draft_tokens / proposed if proposed else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Stats:
        """Build from a stats JSON object, ignoring unknown keys (newer servers)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


#: Prometheus counters the Triton model exports (name, help, Stats field).
PROMETHEUS_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("fastapply_completion_tokens_total", "Completion tokens produced", "completion_tokens"),
    ("fastapply_accepted_draft_tokens_total", "Draft tokens accepted", "accepted_draft_tokens"),
    ("fastapply_rejected_draft_tokens_total", "Draft tokens rejected", "rejected_draft_tokens"),
    ("fastapply_forward_passes_total", "Model forward passes", "forward_passes"),
    ("fastapply_reused_prompt_tokens_total", "Prompt tokens reused from recent prompts",
     "reused_prompt_tokens"),
)
#: Request latency counter (sum of total_ms) and request count, for an average.
PROMETHEUS_LATENCY = ("fastapply_request_latency_ms_total", "Sum of request latency in ms")
PROMETHEUS_REQUESTS = ("fastapply_requests_total", "Requests served, by outcome")
#: The model's own queue, which Triton does not see (its pending-request count stays 0:
#: the decoupled model hands requests to its worker threads at once). Gauges: requests
#: waiting for a worker, requests running on one; counter: ms they waited, summed.
#: Order fixed: (queued, in_flight, queue time).
PROMETHEUS_QUEUE: tuple[tuple[str, str], ...] = (
    ("fastapply_requests_queued", "Requests accepted by the model, waiting for a worker"),
    ("fastapply_requests_in_flight", "Requests running on a worker"),
    ("fastapply_queue_time_ms_total", "Sum of ms requests waited before a worker took them"),
)


# -- Load test (fastapply.loadtest) ------------------------------------------------------
# Measured at the client, one value per request (how they reach Locust and the report is
# fastapply.loadtest's business), and per run.

#: name -> definition of every figure the load test reports.
LOADTEST_DEFINITIONS: dict[str, str] = {
    "latency_ms": "request sent -> final response received, at the client, in ms",
    "ttft_ms": "request sent -> first non-empty text delta received, at the client, in ms "
               "(with streaming off: the server's ttft_ms)",
    "tokens_per_s": "the server's completion_tokens / latency_ms, tokens per second "
                    "(only when a model produced tokens)",
    "chars_per_s": "characters of the merged file / latency_ms, characters per second",
    "accepted_draft_tokens": "draft tokens the model confirmed, per request (model only)",
    "rejected_draft_tokens": "draft tokens the model refused, per request (model only)",
    "acceptance_pct": "accepted / proposed draft tokens, in percent (when any were proposed)",
}

#: name -> definition of every whole-run figure of the load-test report.
LOADTEST_RUN_DEFINITIONS: dict[str, str] = {
    "wall_s": "the run's wall time: first user started -> last user stopped (requests in "
              "flight at the end finished or failed), in seconds",
    "requests": "requests sent: merges plus failed connections",
    "completed": "requests that succeeded",
    "failures": "requests that failed (timeouts included), by kind in failures_by_kind",
    "timeouts": "requests with no answer within the request timeout, or still in flight "
                "when the run stopped",
    "requests_per_s": "completed / wall_s: successful requests per second of the run",
    "failures_per_s": "failures / wall_s",
    "completion_tokens_per_s": "completion tokens of successful requests / wall_s: the "
                               "served token throughput (model only)",
}


def client_figures(stats: Stats, latency_s: float, ttft_s: float | None,
                   chars: int) -> dict[str, float]:
    """The load-test figures of one request (names of LOADTEST_DEFINITIONS, no latency).

    Token figures are left out when no model produced tokens (deterministic runtime).

    >>> client_figures(Stats(completion_tokens=50, accepted_draft_tokens=30,
    ...                      rejected_draft_tokens=10), 0.5, 0.1, 200)
    ... # doctest: +NORMALIZE_WHITESPACE
    {'ttft_ms': 100.0, 'chars_per_s': 400.0, 'tokens_per_s': 100.0,
     'accepted_draft_tokens': 30.0, 'rejected_draft_tokens': 10.0, 'acceptance_pct': 75.0}
    >>> client_figures(Stats(ttft_ms=2.5), 0.01, None, 100)
    {'ttft_ms': 2.5, 'chars_per_s': 10000.0}
    """
    figures = {"ttft_ms": ttft_s * 1e3 if ttft_s is not None else stats.ttft_ms,
               "chars_per_s": chars / latency_s if latency_s > 0 else 0.0}
    if stats.completion_tokens > 0:
        figures["tokens_per_s"] = stats.completion_tokens / latency_s if latency_s > 0 else 0.0
        figures["accepted_draft_tokens"] = float(stats.accepted_draft_tokens)
        figures["rejected_draft_tokens"] = float(stats.rejected_draft_tokens)
        if stats.accepted_draft_tokens + stats.rejected_draft_tokens:
            figures["acceptance_pct"] = 100.0 * stats.acceptance_rate
    return figures
