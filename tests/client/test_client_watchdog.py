"""The client's watchdog: a late response is a timeout, also when a delta slips in late.

The watchdog thread marks a late call expired under its lock and cancels it just after.
A streamed delta that arrived in between re-arms the same call; its next read then fails
with gRPC's "Locally cancelled" and must still be reported as the timeout it is (it was
reported as "stream failed", so the load test counted timeouts as errors).
"""

from __future__ import annotations

import threading

from fastapply.client.grpc import _Watchdog


class _Call:
    """Stands in for a gRPC call: the watchdog only ever calls ``cancel()`` on it."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        self.cancelled.set()


def test_a_call_cancelled_for_lateness_stays_late_when_rearmed() -> None:
    watchdog = _Watchdog(timeout_s=0.01)
    call = _Call()
    try:
        watchdog.arm(call, 0.01)
        assert call.cancelled.wait(10), "the watchdog never cancelled the late call"
        watchdog.arm(call, 0.01)  # a delta arrived before the cancel took effect
        assert watchdog.disarm() is True
        fresh = _Call()  # the client resets the stream after a timeout: a new call is on time
        watchdog.arm(fresh, 60.0)
        assert watchdog.disarm() is False and not fresh.cancelled.is_set()
    finally:
        watchdog.close()
