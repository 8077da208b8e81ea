"""Request -> result: the one function the Triton model and the command line both call.

``FastApplyService(config).apply(initial_code, edit_snippet, ...)`` validates the input,
builds the prompt and the drafter's sources (the deterministic merge of the snippet, the
original, the snippet), runs speculative decoding on the configured runtime, extracts
the file from the model's answer and returns it with its statistics. The
``deterministic`` runtime needs no model: it returns the deterministic merge, or refuses
with the spot where the merge is ambiguous.

Every user error is an :class:`InvalidRequest` whose message says what was wrong and
what to do; the server maps it to ``INVALID_ARG`` and keeps serving. A file the model
did not finish (``max_tokens`` or the context ran out) is never a result: it is an
:class:`IncompleteOutput` error naming the budget. A request whose client went away stops
generating at the next check of ``is_cancelled`` (:class:`RequestCancelled`).

Inside: :mod:`.config` (:class:`ServiceConfig`, :func:`make_runtime`), :mod:`.inputs`
(each request field decoded and checked), :mod:`.apply` (:class:`FastApplyService`),
:mod:`.windows` (the windowed witness: the model reads and writes only the merge's unsure
places), :mod:`.budget` (the witness's time budget) and :mod:`.results` (what a request
ends in).
"""

from fastapply.service.apply import (
    CANCEL_CHECK_PERIOD_S,
    UNASKED_MARGIN_TOKENS,
    FastApplyService,
)
from fastapply.service.config import (
    DEFAULT_MAX_INPUT_BYTES,
    TRTLLM_DEFAULT_DRAFT_LEN,
    ServiceConfig,
    make_runtime,
)
from fastapply.service.inputs import InvalidRequest
from fastapply.service.results import (
    ApplyResult,
    IncompleteOutput,
    Refused,
    RequestCancelled,
    incomplete_message,
)

__all__ = ["CANCEL_CHECK_PERIOD_S", "DEFAULT_MAX_INPUT_BYTES", "TRTLLM_DEFAULT_DRAFT_LEN",
           "UNASKED_MARGIN_TOKENS", "ApplyResult", "FastApplyService", "IncompleteOutput",
           "InvalidRequest", "Refused", "RequestCancelled", "ServiceConfig",
           "incomplete_message", "make_runtime"]
