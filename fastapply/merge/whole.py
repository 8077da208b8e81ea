"""Snippets without markers: the whole new file, or a fragment anchored where it matches?

Pure functions over lists of lines, used by :mod:`.merger` for a lazy segment with no marker
before or after it.

Example: a file of 10 lines and a snippet of 9 lines that starts with the file's first line
and ends with a line the file lacks is the whole new file edited at its end
(:func:`looks_whole`); a snippet of 3 lines from the middle of it is a fragment.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from fastapply.merge.syntax import is_commented

#: A snippet without markers as long as half the file, that ends as the file does, is the
#: whole file if its first line is the file's or one of the next EDGE_LINES non-blank
#: lines (the lines before it were removed; likewise at the end).
EDGE_LINES = 3
#: ... or, edited at both ends, if it is at least 1/WHOLE of the file's length.
WHOLE = 1.1
#: An original line is an edit of a new line when their similarity (difflib's ratio of the
#: stripped lines) is at least this.
ALIKE = 0.5
#: Original lines at most, and characters of a line, that header_left_out compares.
HEADER_LINES = 10
ALIKE_CHARS = 200


def _nonblank(lines: list[str], strip: bool) -> list[str]:
    """The non-blank lines, stripped (``strip``) or with their indentation kept."""
    return [s.strip() if strip else s.rstrip() for s in lines if s.strip()]


def looks_whole(seg: list[str], orig: list[str], eof: int) -> bool:
    """Does a snippet without markers look like the whole new file?

    Yes when its first and last non-blank lines are the file's (loosely), when it is
    at least as long as the file, or when it is at least half as long, one of its
    ends is the file's (indentation included) and its other end is a line the file
    lacks or has only within EDGE_LINES non-blank lines of that end (a whole file
    edited in its first or last lines, not a block that ends the file); also when
    neither end is the file's but both are such lines and it is nearly as long as the
    file (1/WHOLE of it: a whole file edited at both ends, less a few lines);
    otherwise it is a fragment anchored where its lines match. ``eof``: the file's
    length in lines.
    """
    ends, file_ends = _nonblank(seg, True), _nonblank(orig, True)
    if len(seg) >= eof or not ends or not file_ends:
        return True
    if ends[0] == file_ends[0] and ends[-1] == file_ends[-1]:
        return True
    exact, file_exact = _nonblank(seg, False), _nonblank(orig, False)
    first, last = exact[0] == file_exact[0], exact[-1] == file_exact[-1]
    if 2 * len(seg) < eof:
        return False

    def near(line: str, lines: list[str]) -> bool:  # lines from the end it is at
        return line not in lines or lines.index(line) <= EDGE_LINES

    if first or last:
        return near(ends[-1], file_ends[::-1]) if first else near(ends[0], file_ends)
    return WHOLE * len(seg) >= eof and near(ends[0], file_ends) and \
        near(ends[-1], file_ends[::-1])


def top_fragment(seg: list[str], orig: list[str], eof: int,
                 pairs: tuple[tuple[int, int], ...], end: int) -> bool:
    """Is a snippet without markers, placed to end at original line ``end`` (``pairs``: its
    aligned (snippet, original) lines), one that starts with the file's first line, is at
    least half as long as the file and ends on a line found once in the file, before more
    lines? (Read as the file's first part, or as the whole new file with its end removed:
    its text fits both.)"""
    ends, lines = _nonblank(seg, False), _nonblank(orig[:eof], False)
    if not ends or not lines or ends[0] != lines[0] or ends[-1] == lines[-1] or \
            2 * len(ends) < len(lines) or not pairs or lines.count(ends[-1]) != 1:
        return False
    i, j = pairs[-1]
    if seg[i].rstrip() != ends[-1] or orig[j].rstrip() != ends[-1]:
        return False
    return any(s.strip() for s in orig[end:eof])


def header_left_out(old: Sequence[str], new: Sequence[str], top: bool = True) -> bool:
    """Are the original lines that a segment's new edge lines would replace, at an edge with
    no marker, only comments (and blank lines) unlike every one of those new lines? A magic
    comment, a shebang or a licence header is what a snippet leaves out, not what it
    rewrites: such a replacement is a guess. (Code replaced there, or a comment rewritten
    into a like one, reads as the edit the snippet shows.) ``top``: the edge is the
    segment's first (else its last); the new lines nearest the file's edge are compared.

    Bounded work on any input: at most HEADER_LINES original lines (a longer run is no
    header), 2 * HEADER_LINES new lines, each cut to ALIKE_CHARS characters.

    >>> header_left_out(["# -*- coding: utf-8 -*-", ""], ["import re"])
    True
    >>> header_left_out(["# encoding: utf-8", "require 'helper'"], ["require_relative 'x'"])
    False
    >>> header_left_out(["# Copyright 2020 Ann"], ["# Copyright 2024 Ann"])
    False
    >>> header_left_out(["# x"] * 11, ["import re"])  # a run this long is no header
    False
    """
    olds = [a.strip()[:ALIKE_CHARS] for a in old if a.strip()]
    if not olds or len(olds) > HEADER_LINES or not all(is_commented(a) for a in olds):
        return False
    news = [b.strip()[:ALIKE_CHARS] for b in new if b.strip()]
    news = news[:2 * HEADER_LINES] if top else news[-2 * HEADER_LINES:]
    return not any(_alike(a, b) for a in olds for b in news)


def _alike(a: str, b: str) -> bool:
    """difflib's ratio of the two lines is at least ALIKE (cheap upper bounds first)."""
    m = difflib.SequenceMatcher(None, a, b)
    return m.real_quick_ratio() >= ALIKE and m.quick_ratio() >= ALIKE and m.ratio() >= ALIKE
