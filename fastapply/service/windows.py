"""The windowed witness: where the merge is unsure, the model reads and writes only windows.

An unsure merge names the readings it weighed (:class:`fastapply.merge.MergeResult`'s
``candidates``). :func:`fastapply.merge.windows.unsure_windows` cuts the chosen file into
windows around the lines where those readings differ (and where the merge reported an
unsure place). For each window the model gets, in the served prompt format, the original
lines of the window and the part of the snippet placed there (:func:`snippet_part`), and
writes the window; every reading's window is a draft source, so speculation still gives
the model's own greedy output token for token. Where its window equals one reading's, that
reading's lines are taken; the file they make is the chosen file with each window
replaced, and only where one reading agrees with every window taken (then it is exactly
that reading's whole file; windows that each match a different, exclusive reading are
refused). The service's policy then judges that file as it judges the model's whole file
(``FastApplyService._windows_served``). Where the model's window leaves every reading, the
edit is refused at once, naming the line and both texts.

The cost follows the unsure place, not the file: a window is a few dozen lines however
long the file is, and a file past the model's context is witnessed in its windows; only a
window that does not fit the context is refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapply.merge.windows import NoWindows, WindowTask, window_tasks
from fastapply.metrics import Stats
from fastapply.service.budget import late_prefill_s, over_budget
from fastapply.service.inputs import InvalidRequest
from fastapply.service.results import ApplyResult, Refused

if TYPE_CHECKING:
    from fastapply.decoding.witness import Reading
    from fastapply.merge.windows import Window

__all__ = ["NoWindows", "WindowTask", "plan_windows", "witness_windows"]

#: An answer may run this many tokens past its longest reading before it is cut (it can
#: then equal none of them).
MARGIN_TOKENS = 16


def plan_windows(original: str, snippet: str, reading: Reading) -> list[WindowTask]:
    """The windows of an unsure merge, or NoWindows where it has none to offer."""
    if reading.merge is None or reading.text is None:
        raise NoWindows
    return window_tasks(original, snippet, reading.merge.with_readings())


def witness_windows(service: Any, original: str, snippet: str,
                    instruction: str | None, reading: Reading,
                    cancelled: Callable[[], bool], deadline: float | None = None) -> ApplyResult:
    """The file the model's windows make of an unsure merge (see the module), or Refused
    where they leave every reading. The service's policy then judges that file as it
    judges the model's whole file: a rival reading's is served only where the policy
    serves rivals, an agreement under the threshold is refused where it asks for
    confidence. ``service`` is the FastApplyService asking (its tokenizer, runtime,
    format); ``deadline`` (time.perf_counter()) is when its witness budget runs out."""
    tasks = plan_windows(original, snippet, reading)
    assert reading.text is not None
    total = Stats(finish_reason="stop")
    chosen = reading.text.splitlines(keepends=True)
    served: list[tuple[int, int, str]] = []
    alive: frozenset[int] | None = None  # the readings every window so far agrees with
    for n, task in enumerate(tasks):
        picked = _one_window(service, task, instruction, total, cancelled, deadline,
                             f"window {n + 1} of {len(tasks)}, lines {task.window.start + 1}-"
                             f"{task.window.end} of the merged file", reading)
        w = task.window
        served.append((w.start, w.end, task.texts[picked]))
        agreeing = w.agreeing(picked)
        if alive is not None and not alive & agreeing:
            # each window matched some reading, but no one reading matches them all (the
            # model wrote a tied change at both of its places, say): their mix is a file
            # no reading of the merge is
            raise Refused(
                f"the model's windows agree with readings of the merge that exclude each "
                f"other (its window at lines {w.start + 1}-{w.end} of the merged file is "
                f"one reading's, an earlier window another's); nothing was merged: show "
                f"more unchanged lines around the change so it matches one place, or send "
                f"it as SEARCH/REPLACE blocks", ApplyResult("", _parted(total)))
        alive = agreeing if alive is None else alive & agreeing
    out: list[str] = []
    cursor = 0
    for start, end, text in served:
        out.extend(chosen[cursor:start])
        out.append(text)
        cursor = end
    out.extend(chosen[cursor:])
    merged = "".join(out)
    total.windows = len(tasks)
    total.witness = "window" if alive is None or 0 in alive else "window-rival"
    return ApplyResult(merged, total)


def _one_window(service: Any, task: WindowTask, instruction: str | None,
                total: Stats, cancelled: Callable[[], bool], deadline: float | None,
                name: str, reading: Reading) -> int:
    """The model writes one window; the index of the reading it equals, or Refused
    (also once ``deadline`` has passed; ``name`` says which window it is)."""
    from fastapply.decoding import prompts
    from fastapply.decoding.speculate import (
        ContextLimitError,
        GenerationRequest,
        TextStream,
        check_context,
    )
    from fastapply.decoding.witness import AnyAgreement
    from fastapply.service.results import RequestCancelled

    tok, runtime, fmt = service.tokenizer, service.runtime, service.format
    assert runtime is not None
    w = task.window
    first_line = w.start + 1
    prompt_ids = prompts.build_prompt_ids(tok, fmt, task.original, task.snippet, instruction)
    try:
        room = check_context(len(prompt_ids), runtime.context_limit)
    except ContextLimitError:
        raise InvalidRequest(
            f"the merge is unsure at lines {first_line}-{w.end} of the merged file and the "
            f"window the model must read there ({len(prompt_ids)} tokens with its part of "
            f"the snippet) does not fit the context limit of {runtime.context_limit} "
            f"tokens; nothing was merged: send that change as SEARCH/REPLACE blocks, or "
            f"show more unchanged lines around it") from None
    sources = [prompts.encode(tok, fmt.expected_output(t)) for t in task.texts]
    longest = max(len(s) for s in sources)
    request = GenerationRequest(
        prompt_ids, sources + [prompts.encode(tok, task.original),
                               prompts.encode(tok, task.snippet)],
        frozenset(service.stop_ids), min(room, longest + MARGIN_TOKENS),
        service.max_draft_len)
    need = late_prefill_s(runtime, prompt_ids, service.seen_ms_per_token, deadline)
    if need is not None:  # the budget would run out before the window's first token
        _add(total, None, 0, len(prompt_ids))
        total.finish_reason = "budget"
        raise Refused(over_budget(reading, service.config.witness_budget_s, read_what=(
            f"only windows; {name} is {len(prompt_ids)} prompt tokens, about {need:.1f} s "
            f"to read on this server")), ApplyResult("", total))
    watch = AnyAgreement(task.texts)
    stream = TextStream(tok, skip_ids=service.stop_ids)
    extractor = prompts.StreamExtractor(fmt)
    passes = 0

    def on_tokens(new: list[int]) -> None:  # after every forward pass
        nonlocal passes
        passes += 1
        if cancelled():
            raise RequestCancelled
        if deadline is not None and time.perf_counter() > deadline:
            raise _OverBudget
        if stream.push(new):
            delta = extractor.feed(stream.text)
            if delta and not watch.feed(delta):
                raise _Parted  # no later token can make it a reading's window

    try:
        gen = runtime.generate(request, on_tokens=on_tokens)
    except _OverBudget:
        _add(total, None, passes, len(prompt_ids))
        total.finish_reason = "budget"
        raise Refused(over_budget(reading, service.config.witness_budget_s,
                                  read_what=f"only windows; it was writing {name}"),
                      ApplyResult("", total)) from None
    except _Parted:
        _add(total, None, passes, len(prompt_ids))
        raise Refused(_refusal(watch, first_line, w, task),
                      ApplyResult(watch.text, _parted(total))) from None
    service.note_prompt_cost(gen.stats)
    stream.flush()
    tail = extractor.finish(stream.text)
    alive = watch.feed(tail) if tail else True
    _add(total, gen.stats, passes, len(prompt_ids))
    picked = watch.agreed() if alive and gen.stats.complete else None
    if picked is not None:
        return picked
    if not gen.stats.complete:
        raise Refused(f"the model did not finish its window at lines {first_line}-{w.end} "
                      f"(it ran past every reading of the merge there); nothing was merged: "
                      f"show more unchanged lines around the change there, or send "
                      f"SEARCH/REPLACE blocks", ApplyResult(watch.text, _parted(total)))
    raise Refused(_refusal(watch, first_line, w, task), ApplyResult(watch.text, _parted(total)))


class _Parted(Exception):
    """The model's window left every reading (raised inside generation to stop it)."""


class _OverBudget(Exception):
    """The request's witness budget ran out (raised inside generation to stop it)."""


def _add(total: Stats, stats: Stats | None, passes: int, prompt_tokens: int) -> None:
    """Add one window's figures to the request's."""
    total.prompt_tokens += prompt_tokens
    total.forward_passes += passes if stats is None else stats.forward_passes
    if stats is None:
        return
    total.completion_tokens += stats.completion_tokens
    total.accepted_draft_tokens += stats.accepted_draft_tokens
    total.rejected_draft_tokens += stats.rejected_draft_tokens
    total.reused_prompt_tokens += stats.reused_prompt_tokens
    total.min_token_prob = min(total.min_token_prob, stats.min_token_prob)
    if not total.ttft_ms:
        total.ttft_ms = stats.ttft_ms


def _parted(total: Stats) -> Stats:
    total.finish_reason = "parted"
    return total


def _refusal(watch: Any, first_line: int, w: Window, task: WindowTask) -> str:
    message = watch.refusal(first_line=first_line).message
    readings = len(task.texts)
    return (f"{message}\n(the merge was unsure at lines {w.start + 1}-{w.end} of the merged "
            f"file and weighed {readings} reading{'s' if readings > 1 else ''} there; the "
            f"model's window matched none: show more unchanged lines around that change, or "
            f"send it as SEARCH/REPLACE blocks)")
