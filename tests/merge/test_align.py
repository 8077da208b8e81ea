"""The lazy merge's two steps on small worked examples: ``align`` (one segment against one
window of the original) and ``place`` (where in the file a segment goes)."""

from __future__ import annotations

from fastapply.merge.lazy import (
    DEL_COST,
    GAP_COST,
    SUB_COST,
    UNIT,
    Placement,
    align,
    place,
)

ORIG = ["a = 1", "b = 2", "c = 3", "d = 4"]


def _align(seg: list[str], marker_after: bool = True, context: int | None = None
           ) -> tuple[int, Placement]:
    return align(seg, ORIG, 0, 0, len(ORIG), [UNIT] * len(seg), True, marker_after,
                 context=context)


def test_a_changed_line_between_two_context_lines_is_a_substitution() -> None:
    # b matches, x replaces c (one change block: GAP_COST, SUB_COST), d matches.
    score, p = _align(["b = 2", "x = 9", "d = 4"])
    assert score == 2 * UNIT - GAP_COST - SUB_COST
    assert (p.start, p.end, p.pairs, p.violations) == ((1, 1), (4, 4), ((0, 1), (2, 3)), 0)


def test_a_line_missing_between_two_context_lines_is_a_deletion() -> None:
    score, p = _align(["b = 2", "d = 4"])
    assert score == 2 * UNIT - GAP_COST - DEL_COST
    assert p.pairs == ((0, 1), (1, 3)) and (p.start[0], p.end[1]) == (1, 4)


def test_without_a_marker_after_the_segment_runs_to_the_end_of_the_file() -> None:
    # x takes the place of d, the file's last line: the region ends at the end.
    _, p = _align(["b = 2", "c = 3", "x"], marker_after=False)
    assert p.pairs == ((0, 1), (1, 2)) and p.end == (3, 4)


def test_context_runs_outside_the_contract_are_counted() -> None:
    # One line of context each side of the change: with a contract of 2 lines both
    # runs are too short; with 1 (or none) the reading fits.
    assert _align(["b = 2", "x = 9", "d = 4"], context=2)[1].violations == 2
    assert _align(["b = 2", "x = 9", "d = 4"], context=1)[1].violations == 0
    # No change at all is no reading of an edit.
    assert _align(["b = 2", "c = 3"])[1].violations == 1


def test_a_segment_without_markers_is_aligned_between_its_unique_lines() -> None:
    # A whole file: each of its lines found once is an anchor, the runs between are
    # aligned on their own (here: x replaces c).
    seg = ["a = 1", "b = 2", "x", "d = 4"]
    _, p = align(seg, ORIG, 0, 0, 4, [UNIT] * 4, False, False)
    assert (p.start, p.end, p.pairs) == ((0, 0), (4, 4), ((0, 0), (1, 1), (3, 3)))


FUNCS = ["def a():", "    return 1", "", "def b():", "    return 2", "", "def a2():",
         "    return 1"]


def test_place_finds_the_region_a_segment_replaces() -> None:
    p = place(["def b():", "    return 20", ""], FUNCS, 0, True, True, False)
    assert p is not None
    assert (p.start, p.end, p.pairs, p.rival) == ((3, 3), (6, 6), ((0, 3), (2, 5)), -1)


def test_place_reports_an_anchor_that_fits_two_places_as_a_rival() -> None:
    # `    return 1` ends a() and a2(): the first place is used, the other is its rival
    # (and the alternative the merge may take instead).
    p = place(["    return 1", "    x = 0"], FUNCS, 0, True, True, False)
    assert p is not None and p.alternative is not None
    assert (p.start, p.rival, p.alternative.start, p.alternative.rival) == ((1, 1), 7, (7, 7), 1)


def test_place_starts_looking_after_the_previous_segment() -> None:
    p = place(["    return 1", "    x = 0"], FUNCS, 3, True, True, False)
    assert p is not None and (p.start, p.rival) == ((7, 7), -1)


def test_place_gives_none_when_no_line_matches() -> None:
    assert place(["zzz"], FUNCS, 0, True, True, False) is None
