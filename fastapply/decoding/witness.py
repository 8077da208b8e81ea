"""What gets served: two witnesses of one snippet, and the policy that decides between them.

The deterministic merge (:func:`fastapply.merge.apply_snippet`) and the model's output
are two independent readings of a snippet; the model's own token probabilities (free
during verification) say where it hesitated. A policy (:data:`POLICIES`) turns the two
readings into a file to serve or a refusal that names where they part, so the agent
that sent the snippet can resend it with more context. The policies and their measured
served-exact and wrong-served rates are in docs/benchmarks.md
(``python -m fastapply.bench quality``).

>>> det = Reading("a = 2\\n", certain=False, error="a tie at line 1")
>>> decide("certain_or_agree", "a = 2\\n", 0.99, det, exact_format=False).serve
True
>>> decide("certain_or_agree", "a = 3\\n", 0.99, det, exact_format=False).serve
False
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapply.merge import MergeResult
    from fastapply.merge.apply import Candidate

#: policy -> what it serves. Those a measurement shows winning somewhere (docs/model.md,
#: "What gets served"); the others measured in issues 26-46 (agree, confident,
#: agree_or_confident, model_unless_certain_disagree, certain_or_agree_any,
#: certain_unless_confident_disagree) lost everywhere and were dropped in issue 56.
POLICIES: dict[str, str] = {
    "model": "the model's output, always: the model alone, what the benches measure it by "
             "(docs/model.md's 'model alone exact')",
    "deterministic": "the deterministic merge when it is certain (the model is not run): "
                     "the merge alone, what --runtime deterministic measures",
    "agree_or_exact": "a file both readings agree on; for SEARCH/REPLACE and udiff snippets "
                      "the deterministic merge when it is certain (a lazy edit served only "
                      "where the model writes it too: 51 of 83, none wrong)",
    "certain_or_agree": "the deterministic merge when it is certain; where it is unsure, "
                        "its reading only when the model wrote the same file (the judge's "
                        "witness on runtimes without token probabilities; 73 of 83 model "
                        "readings served, none wrong)",
    "certain_or_confident_agree": "the deterministic merge when it is certain; where it is "
                                  "unsure, its reading only where the model wrote the same "
                                  "file with its lowest token probability reaching the "
                                  "threshold (the judge's witness on the torch runtime: the "
                                  "same files as certain_or_agree, 2 fewer wrong)",
    "judge": "the merge's readings scored by the judge (fastapply.judge): a certain merge "
             "unless the judge vetoes it, else the one reading it accepts; an unsure merge "
             "it does not settle is, where a model runs, witnessed by the model "
             "(certain_or_confident_agree, or certain_or_agree where the runtime reports no "
             "token probabilities); the shipped policy (agent-dev 69 of 132 served, 1 wrong)",
}
#: Policies whose answer turns on how sure the model is (its lowest token probability):
#: they need a runtime that reports the probability of each token it writes.
NEEDS_PROBS = frozenset({"certain_or_confident_agree"})
#: Why a file the two readings part on is refused.
READ_DIFFERENTLY = "the model and the deterministic merge read the snippet differently"
#: Policies that serve a certain deterministic merge at once, whatever the model writes.
ANY_CERTAIN = frozenset({"certain_or_agree", "certain_or_confident_agree"})
#: The shipped policy and its threshold (chosen on the validation split; ``auto``:
#: :func:`fastapply.service.config.resolve_policy`, once the runtime is known).
DEFAULT_POLICY = "auto"
#: What a server may be set to: ``auto`` or one of :data:`POLICIES`.
POLICY_CHOICES = ("auto", *POLICIES)
DEFAULT_THRESHOLD = 0.5


@dataclass(frozen=True)
class Reading:
    """The deterministic merge's reading: its text (None when it refused), whether it
    was certain (no unsure place), and whether the snippet is SEARCH/REPLACE or udiff
    only (no lazy part: a certain merge of it is exact by construction)."""

    text: str | None
    certain: bool = False
    error: str = ""
    exact_format: bool = False
    #: The merge itself (an unsure one names its rival readings: the windowed witness's
    #: candidates), where the caller has it.
    merge: MergeResult | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Decision:
    """What to serve: ``text`` when ``serve``, else a refusal ``message``."""

    serve: bool
    text: str = ""
    witness: str = ""
    message: str = ""


def deterministic_reading(original: str, snippet: str,
                          merged: MergeResult | None = None) -> Reading:
    """The deterministic merge of ``snippet`` as a witness (``merged``: that merge, where
    the caller already ran it).

    An unsure merge that leaves the file as it is counts as refused: a model that copies
    the file agrees with it whatever the snippet meant, so no policy may serve it on the
    model's agreement (on the validation split, such agreements served a file the commit
    changed twice in 119 unsure edits; docs/benchmarks.md). A policy that serves the
    model's own reading still may.

    >>> deterministic_reading("a = 1\\nb = 2\\n", "# ...\\na = 1\\nb = 2\\n# ...\\n").text is None
    True
    """
    from fastapply.merge import EditError, apply_snippet, detect_format

    try:
        result = merged if merged is not None else apply_snippet(original, snippet)
    except EditError as exc:
        return Reading(None, False, str(exc))
    unsure = "; ".join(u.message for u in result.uncertain)
    if result.uncertain and result.text == original:
        return Reading(None, False, f"the merge leaves the file unchanged and is unsure "
                                    f"({unsure}), so a model that copies the file would "
                                    f"agree with it whatever the snippet meant")
    return Reading(result.text, not result.uncertain, unsure,
                   detect_format(snippet) in ("search_replace", "udiff"), result)


def readings_of(det: Reading) -> Reading:
    """``det`` with its merge's rival readings built (an unsure merge's; each costs a
    reading of the snippet, within the merge's work budget)."""
    if det.merge is None or det.certain or det.merge.candidates:
        return det
    return replace(det, merge=det.merge.with_readings())


def _rivals(det: Reading) -> list[Candidate]:
    """The rival readings ``det``'s merge built (:func:`readings_of`), the chosen one left
    out."""
    if det.merge is None:
        return []
    return [c for c in det.merge.candidates if c.text != det.text]


def _differing(a: list[str], b: list[str]) -> tuple[int, int, int]:
    """(first line, end in ``a``, end in ``b``) of the region where two files differ: the
    lines between their common head and their common tail (linear, no diff)."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return head, len(a) - tail, len(b) - tail


def readings_there(det: Reading, model_text: str | None = None, most: int = 4,
                   rivals: int = 3) -> str:
    """What an unsure merge's readings hold where they differ, for a refusal: the window
    (lines of the chosen reading) and each reading's lines there, the reading the model's
    text followed longest named first, so an agent can resend the snippet with an anchor
    that picks one. "" for a merge without rivals.

    >>> det = deterministic_reading("a\\nb\\nc\\nb\\nd\\n", "# ...\\nb\\nX\\n# ...\\n")
    >>> print(readings_there(det))
    the merge's readings differ at lines 3-5 of its chosen reading:
      chosen:
        X
        c
        b
      rival (lazy segment 1 at its other match):
        c
        b
        X
    """
    det = readings_of(det)
    if det.text is None:
        return ""
    chosen = det.text.splitlines()
    others = _rivals(det)[:rivals]
    if not others:
        return ""
    texts = [chosen] + [c.text.splitlines() for c in others]
    names = ["chosen"] + [f"rival ({c.how})" for c in others]
    first, last = len(chosen), 0
    for lines in texts[1:]:
        head, end, _ = _differing(chosen, lines)
        first, last = min(first, head), max(last, end)
    tail = len(chosen) - last  # the window: the same lines before and after, in each
    order = list(range(len(texts)))
    if model_text is not None:  # the reading the model followed longest first
        whole = [det.text] + [c.text for c in others]
        order.sort(key=lambda k: -len(os.path.commonprefix([whole[k], model_text])))  # noqa: RUF071 (characters, as meant)
    where = f"line {first + 1}" if last - first <= 1 else f"lines {first + 1}-{last}"
    out = [f"the merge's readings differ at {where} of its chosen reading:"]
    for k in order:
        shown = texts[k][first:len(texts[k]) - tail]
        out.append(f"  {names[k]}:\n" + "\n".join("  " + s for s in _show(
            shown, most).splitlines()))
    return "\n".join(out)


def parting(model_text: str, det_text: str, context: int = 2, most: int = 6) -> str:
    """Where two readings part: the first differing region's line numbers and both
    versions of it (at most ``most`` lines each).

    >>> print(parting("a\\nb\\nc\\n", "a\\nB\\nc\\n"))
    line 2: the model wrote
      b
    the deterministic merge wrote
      B
    >>> parting("a\\n", "a")
    'the last line: one reading ends it with a newline, the other does not'
    """
    a, b = model_text.splitlines(), det_text.splitlines()
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    op = next((o for o in sm.get_opcodes() if o[0] != "equal"), None)
    if op is None:  # the same lines: they part only in the file's last line ending
        return "the last line: one reading ends it with a newline, the other does not"
    _tag, i1, i2, j1, j2 = op
    where = f"line {i1 + 1}" if i2 - i1 <= 1 else f"lines {i1 + 1}-{i2}"
    return (f"{where}: the model wrote\n{_show(a[i1:i2], most)}\n"
            f"the deterministic merge wrote\n{_show(b[j1:j2], most)}")


def _show(lines: list[str], most: int) -> str:
    """``lines`` indented, at most ``most`` of them."""
    if not lines:
        return "  (nothing)"
    more = f"\n  ... ({len(lines) - most} more lines)" if len(lines) > most else ""
    return "\n".join("  " + s for s in lines[:most]) + more


def decide(policy: str, model_text: str | None, min_prob: float, det: Reading,
           exact_format: bool, threshold: float = DEFAULT_THRESHOLD) -> Decision:
    """Apply ``policy`` to the two readings. ``model_text`` is None when the model's
    answer was incomplete; ``exact_format`` says the snippet is SEARCH/REPLACE or udiff
    only (no lazy part), where a certain deterministic merge is exact by construction."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
    agree = model_text is not None and det.text == model_text
    confident = model_text is not None and min_prob >= threshold
    if policy == "deterministic":
        return (Decision(True, det.text, "deterministic") if det.text is not None and det.certain
                else _refuse(model_text, det, "the deterministic merge is unsure"))
    certain = det.text is not None and det.certain
    if certain and policy == "agree_or_exact" and exact_format:
        return Decision(True, det.text or "", "deterministic-exact")
    if certain and policy in ANY_CERTAIN:
        return Decision(True, det.text or "", "deterministic-certain")
    if model_text is None:
        return Decision(False, message="the model did not finish the file")
    if policy == "model":
        return Decision(True, model_text, "model")
    if agree and policy == "certain_or_confident_agree" and not confident:
        # the model wrote the unsure merge's file, but was unsure itself somewhere in it
        return Decision(False, message=f"the model wrote the deterministic merge's file but "
                                       f"was unsure (lowest token probability "
                                       f"{min_prob:.2f} < {threshold}); nothing was merged: "
                                       f"{det.error}")
    return agreed(model_text, det)


def agreed(model_text: str | None, det: Reading) -> Decision:
    """Serve ``model_text`` only where it is the deterministic merge's file (what every
    policy but ``model`` serves of an unsure merge, and all a stream whose deltas were the
    model's text can still serve); else the refusal naming where the two part."""
    if model_text is not None and model_text == det.text:
        return Decision(True, model_text, "agree")
    return _refuse(model_text, det, READ_DIFFERENTLY)


def _refuse(model_text: str | None, det: Reading, why: str) -> Decision:
    if det.text is None:
        where = f"the deterministic merge refused it ({det.error})"
    elif model_text is None or model_text == det.text:
        where = det.error or "the model gave no reading"
    else:
        where = parting(model_text, det.text)
    return Decision(False, message=f"{why}; nothing was merged: {where}")


#: What a policy needs of the model (:attr:`Plan.model`): nothing (the answer is decided
#: without it), its output only as long as it is the deterministic text, or all of it.
SKIP, UNTIL_PARTING, TO_END = "skip", "until_parting", "to_end"


@dataclass(frozen=True)
class Plan:
    """What a policy needs of the model, known from the deterministic reading alone."""

    #: SKIP: ``decided`` is the answer, whatever the model would write (it is not run);
    #: UNTIL_PARTING: only the deterministic text can be served, so generation stops,
    #: refused, at the first character where the model's file leaves it (see
    #: :class:`Agreement`); TO_END: the model's whole output (and its lowest token
    #: probability) decides.
    model: str
    #: The answer when ``model`` is SKIP: the served merge or the refusal.
    decided: Decision | None = None


def plan(policy: str, det: Reading) -> Plan:
    """What ``policy`` needs of the model, given the deterministic reading ``det`` (its
    text, whether it is certain, whether the snippet is SEARCH/REPLACE or udiff only).

    It agrees with :func:`decide` on every output the model could write; a policy that
    serves a file both readings agree on, and nothing else, is settled by the first
    character where the model leaves the deterministic text. Worked example, the policy
    ``agree_or_exact``:

    >>> exact = Reading("a = 2\\n", certain=True, exact_format=True)
    >>> plan("agree_or_exact", exact).decided.text  # a certain SEARCH/REPLACE merge
    'a = 2\\n'
    >>> plan("agree_or_exact", Reading("a = 2\\n", certain=True)).model  # a lazy snippet
    'until_parting'
    >>> plan("agree_or_exact", Reading(None, error="no line matches")).decided.serve
    False
    >>> plan("model", exact).model  # the model's output is served whatever it is
    'to_end'
    """
    if policy not in POLICIES or policy == "judge":
        raise ValueError(f"policy {policy!r} has no witness plan; use one of "
                         f"{', '.join(p for p in POLICIES if p != 'judge')} (judge: "
                         f"fastapply.service.judged)")
    if policy == "model":  # the model's output alone decides
        return Plan(TO_END)
    certain = det.text is not None and det.certain
    if certain:
        served = {"deterministic": "deterministic",
                  "agree_or_exact": "deterministic-exact" if det.exact_format else "",
                  **dict.fromkeys(ANY_CERTAIN, "deterministic-certain")}
        if served.get(policy):
            return Plan(SKIP, Decision(True, det.text or "", served[policy]))
        return Plan(UNTIL_PARTING)  # agree_or_exact on a lazy snippet: agreement only
    if policy == "deterministic":
        return Plan(SKIP, _refuse(None, det, "the deterministic merge is unsure"))
    if det.text is None:  # nothing for the model to agree with
        return Plan(SKIP, _refuse(None, det, f"policy {policy} serves only a file the "
                                             f"deterministic merge reads too"))
    return Plan(UNTIL_PARTING)


class Agreement:
    """Follows the model's file as it grows, against the deterministic text.

    ``feed`` takes each new piece of the file (what a stream would send: never a cut
    character, never a tag that may still be closing) and says whether the file so far
    is still a prefix of ``expected``. The cost is the length of the piece; once False,
    no later text can make the files equal, so generation can stop.

    >>> watch = Agreement("a = 2\\nb = 3\\n")
    >>> watch.feed("a = 2\\nb"), watch.feed(" = 4\\n")
    (True, False)
    >>> print(watch.refusal().message)
    the model and the deterministic merge read the snippet differently; nothing was \
merged: line 2: the model wrote
      b = 4
    the deterministic merge wrote
      b = 3
    """

    def __init__(self, expected: str) -> None:
        #: The deterministic merge's text.
        self.expected = expected
        #: Characters of the model's file compared so far (all equal but maybe the last piece).
        self.checked = 0
        #: The model's file up to and including the piece that left ``expected``.
        self.written: str | None = None

    def feed(self, piece: str) -> bool:
        """Compare the next piece of the model's file; False once it has left ``expected``."""
        if self.written is not None:
            return False
        agrees = (self.checked + len(piece) <= len(self.expected)
                  and self.expected.startswith(piece, self.checked))
        if not agrees:
            self.written = self.expected[:self.checked] + piece
        self.checked += len(piece)
        return agrees

    def refusal(self, most: int = 6, first_line: int = 1) -> Decision:
        """The refusal once the model has left ``expected``: the line where the two part,
        what the model wrote from there (``...`` where it was stopped inside a line) and
        the deterministic merge's lines there, as :func:`decide` names them (lines
        counted from ``first_line``: a window's first line in the file)."""
        written = self.written or ""
        same = next((i for i, (a, b) in enumerate(zip(written, self.expected, strict=False))
                     if a != b), min(len(written), len(self.expected)))
        start = self.expected.rfind("\n", 0, same) + 1
        mine = written[start:].splitlines() or [""]
        if not written.endswith("\n"):
            mine[-1] += " ..."
        theirs = self.expected[start:].splitlines()[:len(mine)]
        where = (f"line {self.expected.count(chr(10), 0, start) + first_line}: the model wrote\n"
                 f"{_show(mine, most)}\nthe deterministic merge wrote\n{_show(theirs, most)}")
        return Decision(False, message=f"{READ_DIFFERENTLY}; nothing was merged: {where}")


class AnyAgreement:
    """:class:`Agreement` with several expected texts (the readings of an unsure merge, in
    one window): ``feed`` is False once the model's text has left every one of them.

    >>> watch = AnyAgreement(["a\\nb\\n", "a\\nc\\n"])
    >>> watch.feed("a\\n"), watch.feed("c"), watch.feed("\\n")
    (True, True, True)
    >>> watch.agreed()
    1
    >>> watch = AnyAgreement(["a\\nb\\n", "a\\nc\\n"])
    >>> watch.feed("a\\nd")
    False
    """

    def __init__(self, expected: Sequence[str]) -> None:
        self.watches = [Agreement(text) for text in expected]
        #: The model's text so far.
        self.text = ""

    def feed(self, piece: str) -> bool:
        """Compare the next piece; False once no expected text starts with the model's."""
        self.text += piece
        alive = [w.feed(piece) for w in self.watches if w.written is None]
        return any(alive)

    @property
    def written(self) -> str | None:
        """The model's text, once it has left every expected text (else None)."""
        return self.text if all(w.written is not None for w in self.watches) else None

    def agreed(self) -> int | None:
        """The expected text the model's whole text equals (its index), or None."""
        return next((k for k, w in enumerate(self.watches) if w.expected == self.text), None)

    def refusal(self, most: int = 6, first_line: int = 1) -> Decision:
        """The refusal, against the expected text the model followed longest."""
        def reach(w: Agreement) -> int:
            return next((i for i, (a, b) in enumerate(zip(self.text, w.expected, strict=False))
                         if a != b), min(len(self.text), len(w.expected)))

        best = max(self.watches, key=reach)
        if best.written is None:
            best.written = self.text
        return best.refusal(most, first_line)
