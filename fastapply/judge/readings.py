"""The merge's readings of a snippet, each with its features: what the judge weighs.

:func:`readings_of` runs the merge once and lists every reading it proposes (a certain
merge: one; an unsure one: the chosen reading and each rival it built), with the
features of each (:func:`fastapply.judge.features.reading_features`). The same function
feeds the server's judge and its training data, so what is trained on is what is served.

>>> rs = readings_of("a\\nb\\nc\\nb\\nd\\n", "# ...\\nb\\nX\\n# ...\\n")
>>> [(r.chosen, r.text.splitlines()) for r in rs.readings]
[(True, ['a', 'b', 'X', 'c', 'b', 'd']), (False, ['a', 'b', 'c', 'b', 'X', 'd'])]
>>> blocks = "<<<<<<< SEARCH\\nb\\n=======\\nc\\n>>>>>>> REPLACE\\n"
>>> rs.certain, readings_of("a\\nb\\n", blocks).certain
(False, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapply.judge.features import reading_features, relative
from fastapply.judge.syntax import Syntax
from fastapply.merge import EditError, MergeResult, apply_snippet, detect_format


@dataclass(frozen=True)
class Reading:
    """One whole file the merge proposes, and what the judge reads of it."""

    text: str
    #: The merge's chosen reading (a certain merge's only one).
    chosen: bool
    #: How a rival differs from the chosen reading, for a person ("chosen" for it).
    how: str
    features: dict[str, float] = field(repr=False)


@dataclass(frozen=True)
class Readings:
    """Every reading of one merge; ``error`` where the merge cannot read the snippet."""

    readings: tuple[Reading, ...] = ()
    certain: bool = False
    #: The snippet is SEARCH/REPLACE or udiff only: a certain merge of it is exact.
    exact_format: bool = False
    merge: MergeResult | None = None
    error: str = ""


def readings_of(original: str, snippet: str, syntax: bool = True) -> Readings:
    """The merge's readings of ``snippet`` and their features (``syntax``: with the
    parser's signals, the original parsed once)."""
    try:
        merge = apply_snippet(original, snippet)
    except EditError as exc:
        return Readings(error=str(exc))
    exact = detect_format(snippet) in ("search_replace", "udiff")
    certain = not merge.uncertain
    if not certain:
        merge = merge.with_readings()
    texts = [(c.text, c.how) for c in merge.candidates] or [(merge.text, "chosen")]
    if texts[0][0] != merge.text:  # the chosen reading first, always
        texts.insert(0, (merge.text, "chosen"))
    first: dict[str, str] = {}
    for text, how in texts:  # each text once, where it first comes
        first.setdefault(text, how)
    texts = list(first.items())
    parsed = Syntax.of(original) if syntax else None
    doubts = [u.message for u in merge.uncertain]
    rows = [reading_features(original, snippet, text, certain=certain, chosen=k == 0,
                             readings=len(texts), reading_index=k, lazy=not exact,
                             doubts=doubts, how="" if k == 0 else how, syntax=parsed)
            for k, (text, how) in enumerate(texts)]
    relative(rows)
    return Readings(tuple(Reading(text, k == 0, how, row)
                          for k, ((text, how), row) in enumerate(zip(texts, rows, strict=True))),
                    certain, exact, merge)
