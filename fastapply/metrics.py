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
    "completion_tokens": "tokens the model produced (including the stop token, if any)",
    "forward_passes": "model forward passes, prefill included",
    "accepted_draft_tokens": "draft tokens the model confirmed",
    "rejected_draft_tokens": "draft tokens the model refused",
    "ttft_ms": "time from the request's start to its first output token, in ms",
    "total_ms": "time from the request's start to its end, in ms",
    "tokens_per_s": "completion_tokens / total time, tokens per second",
    "chars_per_s": "characters of the merged file / total time, characters per second",
    "finish_reason": "stop (the model ended), length (token budget reached) or merged "
                     "(deterministic runtime: no model)",
}


@dataclass
class Stats:
    """Statistics of one request (all figures carry their unit in their name)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    forward_passes: int = 0
    accepted_draft_tokens: int = 0
    rejected_draft_tokens: int = 0
    ttft_ms: float = 0.0
    total_ms: float = 0.0
    tokens_per_s: float = 0.0
    chars_per_s: float = 0.0
    finish_reason: str = ""

    def finalise(self, total_s: float, chars: int) -> Stats:
        """Fill the derived figures from the wall time and the output size."""
        self.total_ms = total_s * 1e3
        self.tokens_per_s = self.completion_tokens / total_s if total_s > 0 else 0.0
        self.chars_per_s = chars / total_s if total_s > 0 else 0.0
        return self

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
)
#: Request latency counter (sum of total_ms) and request count, for an average.
PROMETHEUS_LATENCY = ("fastapply_request_latency_ms_total", "Sum of request latency in ms")
PROMETHEUS_REQUESTS = ("fastapply_requests_total", "Requests served, by outcome")
