"""What a request ends in: the merged file with its figures (:class:`ApplyResult`), or an
error that says why nothing was served (:class:`IncompleteOutput`, :class:`Refused`,
:class:`RequestCancelled`; :class:`~fastapply.service.inputs.InvalidRequest` for bad input)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapply.metrics import Stats
from fastapply.service.inputs import InvalidRequest

#: What a refusal of a snippet the merge cannot place asks the agent to do.
RESEND = ("make each change match one place (keep a few unchanged lines around it, or send "
          "SEARCH/REPLACE blocks) and send it again")


class IncompleteOutput(InvalidRequest):
    """The model ran out of room (max_tokens or the context) before it finished the file.

    It is an error, never a result: ``partial`` keeps what was produced for diagnostics
    and parity checks only, and must never be written as the file.
    """

    def __init__(self, message: str, partial: ApplyResult) -> None:
        super().__init__(message)
        self.partial = partial


class Refused(InvalidRequest):
    """The two readings of the snippet part (see fastapply.decoding.witness): nothing is served,
    and the message names the region where they part. ``partial``, where the model was
    stopped at the first divergence, keeps what it wrote and its figures (diagnostics
    only: it is not the file)."""

    def __init__(self, message: str, partial: ApplyResult | None = None) -> None:
        super().__init__(message)
        self.partial = partial


class RequestCancelled(Exception):
    """The request was cancelled (its client went away); generation stopped early."""


@dataclass
class ApplyResult:
    """The merged file and the figures of the request that produced it."""

    merged_code: str
    stats: Stats = field(default_factory=Stats)


def incomplete_message(stats: Stats, max_tokens: int | None, context_limit: int) -> str:
    """Why an output with a non-complete ``stats.finish_reason`` is refused, and what to do.

    >>> incomplete_message(Stats(prompt_tokens=90, completion_tokens=5, finish_reason="length"),
    ...                    5, 1024)  # doctest: +ELLIPSIS
    'the merged file is incomplete: the model reached max_tokens=5 before it finished ...'
    """
    room = context_limit - stats.prompt_tokens
    if stats.finish_reason == "length" and max_tokens is None and stats.completion_tokens < room:
        return (f"the merged file is incomplete: the model wrote {stats.completion_tokens} "
                f"tokens, more than the whole prompt ({stats.prompt_tokens} tokens) holds, "
                f"without finishing the file (it was repeating itself), so nothing is "
                f"returned; send max_tokens to allow a longer answer")
    if stats.finish_reason == "length" and max_tokens is not None and max_tokens < room:
        return (f"the merged file is incomplete: the model reached max_tokens={max_tokens} "
                f"before it finished the file, so nothing is returned; send a larger "
                f"max_tokens (the context leaves room for {room} tokens) or leave it out")
    if stats.finish_reason == "length":
        return (f"the merged file is incomplete: the prompt ({stats.prompt_tokens} tokens) "
                f"and the output ({stats.completion_tokens} tokens) filled the context limit "
                f"of {context_limit} tokens before the model finished the file, so nothing "
                f"is returned; send a smaller file or serve a model with a longer context")
    return (f"the merged file is incomplete: the model ended with finish_reason "
            f"{stats.finish_reason!r} before it finished the file, so nothing is returned")

