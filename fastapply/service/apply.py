"""The service itself: :class:`FastApplyService` loads the configured runtime once and
serves one request per :meth:`~FastApplyService.apply` call (thread-safe)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapply.decoding.runtimes import Runtime
from fastapply.decoding.witness import Decision, Reading
from fastapply.metrics import Stats
from fastapply.service.budget import late_prefill_s, observed_ms_per_token, over_budget
from fastapply.service.config import TRTLLM_DEFAULT_DRAFT_LEN, ServiceConfig, make_runtime
from fastapply.service.inputs import InvalidRequest, as_max_tokens, as_text
from fastapply.service.results import (
    RESEND,
    ApplyResult,
    IncompleteOutput,
    Refused,
    RequestCancelled,
    incomplete_message,
)

#: Without max_tokens, an answer may be this many tokens longer than its prompt: the
#: merged file restates at most the original and the snippet, which the prompt holds, so a
#: model that goes on is repeating itself (a runaway answer would otherwise run to the
#: context limit, minutes on a CPU).
UNASKED_MARGIN_TOKENS = 64

#: How often a running generation asks whether its request was cancelled, in seconds.
#: In Triton the question is a round trip to the server process (measured 23-116 us per
#: ask on the 2-core CPU machine): every 20 ms costs at most 0.6% of generation time,
#: where every pass of a ~1 ms model would cost up to 10%.
CANCEL_CHECK_PERIOD_S = 0.02


def with_readings(message: str, reading: Reading, model_text: str | None = None) -> str:
    """A refusal of an unsure merge, followed by what its readings hold where they differ
    (:func:`~fastapply.decoding.witness.readings_there`: the closest to the model's text
    first), so the agent sees which anchor would pick the one it meant."""
    from fastapply.decoding.witness import readings_there

    there = readings_there(reading, model_text) if not reading.certain else ""
    return f"{message}\n{there}" if there else message


def _every(period_s: float, check: Callable[[], bool] | None) -> Callable[[], bool]:
    """``check``, asked at most once per ``period_s`` (False in between, and without one)."""
    last_s = time.monotonic()

    def throttled() -> bool:
        nonlocal last_s
        now_s = time.monotonic()
        if check is None or now_s - last_s < period_s:
            return False
        last_s = now_s
        return check()

    return throttled



class FastApplyService:
    """Loads the configured runtime once; ``apply`` serves one request (thread-safe)."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.runtime: Runtime | None = None
        self.tokenizer: Any = None
        self.stop_ids: set[int] = set()
        #: The cost of a prompt token the last request that read one saw, in ms (the
        #: witness budget's prediction takes the lower of it and the cost measured at load).
        self.seen_ms_per_token: float | None = None
        #: The judge of the merge's readings (policy ``judge``), loaded once.
        self.judge: Any = None
        #: The policy the model's answer is judged by: the configured one, or under
        #: ``judge`` the model's witness, asked where the judge settles no unsure merge.
        self.policy = config.policy
        if config.policy == "judge":
            from fastapply.decoding.runtimes import PROB_RUNTIMES
            from fastapply.judge import Judge
            from fastapply.service.config import witness_policy

            self.judge = Judge.load(config.judge_dir)
            self.policy = witness_policy(config.runtime in PROB_RUNTIMES)
        if config.runtime != "deterministic":
            self._load_model()
        else:
            import fastapply.merge  # noqa: F401 - load now, not on the first request

    def _load_model(self) -> None:
        from fastapply.decoding import prompts

        cfg = self.config
        self.format = prompts.get_format(cfg.prompt_format)
        tokenizer_dir = cfg.tokenizer_dir or cfg.model_dir or cfg.engine_dir
        assert tokenizer_dir is not None
        if not Path(tokenizer_dir).is_dir():
            raise ValueError(f"{tokenizer_dir}: no such model/tokenizer directory")
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        self.runtime = make_runtime(cfg)
        #: K of every request: configured, or the runtime's own choice (its pass cost).
        self.max_draft_len: int = cfg.max_draft_len if cfg.max_draft_len is not None else \
            getattr(self.runtime, "max_draft_len", TRTLLM_DEFAULT_DRAFT_LEN)
        self.stop_ids = prompts.stop_token_ids(self.tokenizer, self.runtime.eos_token_id)
        #: Texts the tokenizer reads as one of the stop tokens ("<|im_end|>", ...)
        self.stop_texts = sorted(str(t) for t in self.tokenizer.convert_ids_to_tokens(
            sorted(self.stop_ids)) if t)

    # -- requests -----------------------------------------------------------------
    def validate(self, initial_code: str | bytes | None, edit_snippet: str | bytes | None,
                 instruction: str | bytes | None = None) -> tuple[str, str, str | None]:
        """Decode and check the inputs; raise InvalidRequest naming the problem."""
        original = as_text("initial_code", initial_code)
        snippet = as_text("edit_snippet", edit_snippet)
        instr = as_text("instruction", instruction, required=False)
        assert original is not None and snippet is not None
        if not snippet.strip():
            raise InvalidRequest("edit_snippet is empty; send the edit to merge (lazy "
                                 "markers, SEARCH/REPLACE blocks or a unified diff)")
        size = sum(len(s.encode("utf-8")) for s in (original, snippet, instr or ""))
        if size > self.config.max_input_bytes:
            raise InvalidRequest(
                f"input is {size} bytes, over the limit of {self.config.max_input_bytes} "
                f"bytes; send a smaller file or raise max_input_bytes on the server")
        return original, snippet, instr

    def apply(self, initial_code: str | bytes | None, edit_snippet: str | bytes | None,
              instruction: str | bytes | None = None, max_tokens: int | None = None,
              on_delta: Callable[[str], None] | None = None,
              is_cancelled: Callable[[], bool] | None = None) -> ApplyResult:
        """Merge ``edit_snippet`` into ``initial_code``.

        ``on_delta`` receives the merged file as it is produced (text deltas that
        concatenate to ``merged_code``). ``is_cancelled`` is asked every
        CANCEL_CHECK_PERIOD_S while the model generates; True stops it with
        RequestCancelled. Raises InvalidRequest for bad input, and IncompleteOutput (an
        InvalidRequest) when the model ran out of room before it finished the file:
        deltas already passed to ``on_delta`` are then a fragment, not a file.
        """
        start = time.perf_counter()
        original, snippet, instr = self.validate(initial_code, edit_snippet, instruction)
        limit = self.runtime.context_limit if self.runtime is not None else None
        max_tokens = as_max_tokens(max_tokens, limit)
        unsettled: Any = None  # an unsure merge the judge left to the model (Unsettled)
        if self.judge is not None:  # propose, judge, serve: the model is not run for it
            from fastapply.service.judged import Unsettled, judged

            try:
                return self._whole(judged(self.judge, original, snippet), on_delta, start)
            except Unsettled as exc:
                if self.runtime is None:
                    raise
                unsettled = exc
        elif self.runtime is None:
            return self._whole(self._apply_deterministic(original, snippet), on_delta, start)
        try:
            result = self._apply_model(original, snippet, instr, max_tokens, on_delta,
                                       _every(CANCEL_CHECK_PERIOD_S, is_cancelled), start,
                                       unsettled.merge if unsettled is not None else None)
            result.stats.finalise(time.perf_counter() - start, len(result.merged_code))
            if not result.stats.complete:
                assert limit is not None
                raise IncompleteOutput(incomplete_message(result.stats, max_tokens, limit),
                                       result)
        except InvalidRequest as exc:  # refused, over the context or the budget, cut short
            if unsettled is None:
                raise
            from fastapply.service.judged import WITNESS_AFTER_JUDGE

            # the judge's refusal stands: the model could not witness the merge either
            raise Refused(f"{unsettled}{WITNESS_AFTER_JUDGE}{exc}",
                          getattr(exc, "partial", None)) from None
        return result

    @staticmethod
    def _whole(result: ApplyResult, on_delta: Callable[[str], None] | None,
               started: float) -> ApplyResult:
        """A merge served without the model: streamed as one delta, its figures closed."""
        if on_delta is not None and result.merged_code:
            on_delta(result.merged_code)
        result.stats.finalise(time.perf_counter() - started, len(result.merged_code))
        return result

    def _apply_deterministic(self, original: str, snippet: str) -> ApplyResult:
        from fastapply.merge import MergeResult, apply_snippet
        from fastapply.merge.edits import EditError

        result: MergeResult | None = None
        try:
            result = apply_snippet(original, snippet)
            merged = result.check()
        except EditError as exc:
            message = f"the snippet cannot be merged: {exc}; nothing was merged: {RESEND}"
            if result is not None and result.uncertain:  # unsure: show what it weighed
                message = with_readings(message, Reading(result.text, False, str(exc),
                                                         merge=result))
            raise InvalidRequest(message) from None
        return ApplyResult(merged, Stats(finish_reason="merged"))

    def _apply_model(self, original: str, snippet: str, instruction: str | None,
                     max_tokens: int | None, on_delta: Callable[[str], None] | None,
                     cancelled: Callable[[], bool], started: float,
                     merged: Any = None) -> ApplyResult:
        from fastapply.decoding import prompts, witness
        from fastapply.decoding.speculate import ContextLimitError, TextStream
        from fastapply.merge.syntax import copied_markers

        tok, runtime = self.tokenizer, self.runtime
        assert runtime is not None
        self._refuse_stop_texts(original=original, snippet=snippet, instruction=instruction)
        text_stream = TextStream(tok, skip_ids=self.stop_ids)
        extractor = prompts.StreamExtractor(self.format)
        #: Follows the model's file where only the deterministic text can be served.
        watch: witness.Agreement | None = None
        passes, tokens = 0, 0
        budget = self.config.witness_budget_s
        deadline = started + budget if budget else None

        def on_tokens(new: list[int]) -> None:  # after every forward pass
            nonlocal passes, tokens
            passes, tokens = passes + 1, tokens + len(new)
            if cancelled():
                raise RequestCancelled
            if watch is not None and deadline is not None and \
                    time.perf_counter() > deadline:
                raise Refused(over_budget(reading, budget, watch), ApplyResult(
                    "", Stats(prompt_tokens=len(request.prompt_ids), completion_tokens=tokens,
                              forward_passes=passes, finish_reason="budget")))
            if text_stream.push(new) and (on_delta is not None or watch is not None):
                delta = extractor.feed(text_stream.text)  # the file's new certain part
                if delta and watch is not None and not watch.feed(delta):
                    # no later token can make it the deterministic text: refuse now
                    raise Refused(with_readings(watch.refusal().message, reading,
                                                watch.written), ApplyResult(
                        watch.written or "", Stats(
                        prompt_tokens=len(request.prompt_ids), completion_tokens=tokens,
                        forward_passes=passes, finish_reason="parted")))
                if delta and on_delta is not None:
                    on_delta(delta)

        try:
            # the merge's work is bounded (merge.costs): it runs whatever the file's length,
            # so a certain merge is served and an unsure one witnessed in its windows
            # drafts and witness (``merged``: the merge the judge weighed, not run again)
            reading = witness.deterministic_reading(original, snippet, merged)
            plan = witness.plan(self.policy, reading)
            if plan.decided is not None:  # whatever the model would write
                return self._decided(plan.decided, on_delta)
            if plan.model == witness.UNTIL_PARTING and self.config.witness == "window" and \
                    not reading.certain and reading.text is not None:
                from fastapply.service.windows import NoWindows, witness_windows

                try:
                    windowed = witness_windows(self, original, snippet, instruction, reading,
                                               cancelled, deadline)
                except NoWindows:
                    pass  # no place to put a window on: the whole file is witnessed
                else:
                    served = self._windows_served(reading, windowed)
                    if on_delta is not None and served.merged_code:
                        on_delta(served.merged_code)
                    return served
            # a prompt far over the context is refused before the sources are tokenized
            prompts.refuse_far_over(tok, (original, snippet, instruction or ""),
                                    runtime.context_limit)
            request = prompts.build_request(
                tok, self.format, original, snippet, instruction, stop_ids=self.stop_ids,
                max_new_tokens=max_tokens or runtime.context_limit,
                max_draft_len=self.max_draft_len, context_limit=runtime.context_limit,
                reading=reading)
            if max_tokens is None:  # the answer restates at most what the prompt holds
                request = replace(request, max_new_tokens=min(
                    request.max_new_tokens, len(request.prompt_ids) + UNASKED_MARGIN_TOKENS))
            if plan.model == witness.UNTIL_PARTING:
                watch = witness.Agreement(reading.text or "")
                need = late_prefill_s(runtime, request.prompt_ids, self.seen_ms_per_token,
                                      deadline)
                if need is not None:  # the budget would run out before the first token
                    raise Refused(over_budget(
                        reading, budget, read_what=f"the whole file to witness one place: "
                        f"{len(request.prompt_ids)} prompt tokens, about {need:.1f} s to "
                        f"read on this server"), ApplyResult("", Stats(
                            prompt_tokens=len(request.prompt_ids), finish_reason="budget")))
            gen = runtime.generate(request, on_tokens=on_tokens)
        except ContextLimitError as exc:
            raise InvalidRequest(str(exc)) from None
        self.note_prompt_cost(gen.stats)
        text_stream.flush()
        tail = extractor.finish(text_stream.text)
        if tail and on_delta is not None:
            on_delta(tail)
        result = ApplyResult(self.format.extract(text_stream.text), gen.stats)
        close = self.format.close_tag
        if close and result.stats.complete and close not in text_stream.text:
            raise IncompleteOutput(
                f"the merged file is incomplete: the model ended its answer without "
                f"{close}, so it may have stopped early; nothing is returned", result)
        copied = copied_markers(result.merged_code, original, snippet)
        if copied and result.stats.complete:
            line, text = copied[0]
            raise Refused(
                f"line {line}: the model wrote the snippet's marker {text.strip()!r}, which "
                f"the original file does not hold, where code belongs (a marker is never "
                f"code); nothing was merged: show the lines that marker stands for, or send "
                f"the change as SEARCH/REPLACE blocks", result)
        return self._witness(reading, result, streamed=on_delta is not None)

    def note_prompt_cost(self, stats: Stats) -> None:
        """Keep the cost of a prompt token a finished generation saw, where it tells one
        (the witness budget's prediction, fastapply.service.budget)."""
        self.seen_ms_per_token = observed_ms_per_token(stats) or self.seen_ms_per_token

    @staticmethod
    def _decided(decision: Decision, on_delta: Callable[[str], None] | None) -> ApplyResult:
        """An answer the policy gives without the model: the deterministic merge, streamed
        as one delta as the deterministic runtime does, or the refusal."""
        if not decision.serve:
            raise Refused(decision.message)
        if on_delta is not None and decision.text:
            on_delta(decision.text)
        return ApplyResult(decision.text, Stats(finish_reason="merged",
                                                witness=decision.witness))

    def _windows_served(self, det: Reading, windowed: ApplyResult) -> ApplyResult:
        """What the policy serves of the file the model's windows make, judged as it judges
        the model's whole file (:meth:`_witness`): the chosen reading's under the threshold
        of a confidence policy is refused, a rival reading's is refused (rival windows
        served 2 wrong files of 6 on agent-train with the shipped model under the dropped
        ``certain_or_agree_any``, docs/benchmarks.md)."""
        try:
            served = self._witness(det, windowed, streamed=False)
        except Refused as exc:  # the windows' file is what the model wrote: kept, parted
            windowed.stats.finish_reason = "parted"
            raise Refused(str(exc), windowed) from None
        served.stats.witness = "window"
        return served

    def _witness(self, det: Reading, result: ApplyResult, streamed: bool) -> ApplyResult:
        """Serve what the policy decides between the model's output and the
        deterministic merge; refuse (naming where they part) otherwise. A streamed
        answer is never replaced: its deltas were the model's text."""
        from fastapply.decoding.witness import agreed, decide

        if self.policy == "model" or (streamed and not result.stats.complete):
            result.stats.witness = "model"
            return result  # an incomplete one is refused by apply()
        exact = det.exact_format
        model_text = result.merged_code if result.stats.complete else None
        decision = decide(self.policy, model_text,
                          result.stats.min_token_prob, det, exact, self.config.threshold)
        if decision.serve and streamed and decision.text != result.merged_code:
            decision = agreed(result.merged_code, det)
        if not decision.serve:
            if not result.stats.complete:
                return result  # refused by apply() as incomplete, naming the budget
            raise Refused(with_readings(decision.message, det, model_text))
        result.stats.witness = decision.witness
        if not result.stats.complete:  # the model ran out; the certain merge is served
            result.stats.finish_reason = "merged"
        return ApplyResult(decision.text, result.stats)


    def _refuse_stop_texts(self, **texts: str | None) -> None:
        """Refuse input holding a text that ends the model's answer: a stop token's text
        (the tokenizer reads "<|im_end|>" in a file as the end-of-message token itself, so
        a model copying the file ends its answer there), or the format's closing tag (the
        answer's file ends at the first ``</updated-code>``). Either way the file up to
        that point would come back as a complete merge."""
        ends = [(stop, "which this model's tokenizer reads as a token that ends its answer, so "
                       "the model cannot write it back") for stop in self.stop_texts]
        if self.format.close_tag:
            ends.append((self.format.close_tag, f"which ends the model's answer in the "
                                                f"{self.format.name} prompt format, so the "
                                                f"file would come back cut there"))
        for name, text in texts.items():
            for end, why in ends:
                if text and end in text:
                    line = text.count("\n", 0, text.index(end)) + 1
                    field = {"original": "initial_code", "snippet": "edit_snippet"}.get(
                        name, name)
                    raise InvalidRequest(
                        f"{field} holds {end!r} (line {line}), {why}; nothing was merged: "
                        f"merge this file on a server with the deterministic runtime")
