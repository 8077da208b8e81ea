"""The front's errors: every refusal is an :class:`ApiError`, answered in OpenAI's shape;
a merged file cut off by the token budget is one (:func:`check_complete`), and so is a
failed gRPC request, by what failed (:func:`upstream_error`)."""

from __future__ import annotations

from typing import Any

from fastapply.metrics import Stats


class ApiError(Exception):
    """An error answered in OpenAI's shape: ``{"error": {message, type, param, code}}``."""

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    @property
    def type(self) -> str:
        return "invalid_request_error" if self.status < 500 else "server_error"

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


def check_complete(stats: Stats | None) -> Stats:
    """The request's stats if its file is complete; a 400 if the token budget cut it off.

    A merged file cut off by the budget is never returned as success (``finish_reason``
    ``length`` in OpenAI's API would hand the client a fragment).
    """
    if stats is None:
        raise ApiError(502, "the server ended the request without its statistics, so "
                            "whether the file is complete is unknown", code="incomplete")
    if stats.finish_reason == "length":
        raise ApiError(400, f"the merged file did not fit in the token budget: it was cut "
                            f"off after {stats.completion_tokens} tokens; raise max_tokens "
                            f"(or leave it out) or send a smaller file",
                       param="max_tokens", code="output_truncated")
    return stats


# -- upstream errors ----------------------------------------------------------------------

#: Prefixes of errors the server reports for its own faults (model.py's wording, Triton's).
_SERVER_FAULTS = ("internal error", "request for unknown model", "model is not ready")


def upstream_error(message: str, reported: bool) -> ApiError:
    """Map a failed gRPC request to an HTTP error.

    ``reported``: the server answered the request with this error (Triton's INVALID_ARG
    for bad input, whose message says what to fix: 400), as opposed to a transport
    failure (server unreachable or stream broken: 502; no answer in time: 504).

    >>> upstream_error("edit_snippet is empty; send the edit", True).status
    400
    >>> upstream_error("internal error: RuntimeError: boom", True).status
    500
    >>> upstream_error("the server is shutting down and takes no new requests; ...", True).status
    503
    >>> upstream_error("no answer from 127.0.0.1:8001 within 300 s", False).status
    504
    """
    if reported:
        lowered = message.lower()
        if lowered.startswith("request cancelled"):
            return ApiError(499, message, code="cancelled")
        if lowered.startswith("the server is shutting down"):  # model.py's UNAVAILABLE
            return ApiError(503, message, code="server_shutting_down")
        if any(lowered.startswith(p) for p in _SERVER_FAULTS):
            return ApiError(500, message, code="server_error")
        return ApiError(400, message, code="invalid_request")
    if message.startswith("no answer from"):
        return ApiError(504, message, code="upstream_timeout")
    return ApiError(502, message, code="upstream_unavailable")
