"""Parse an edit snippet into an edit plan.

Three notations, alone or mixed in one snippet:

* **lazy** snippets: the changed code with some context, unchanged runs elided by a
  marker comment in any comment syntax: ``// ... existing code ...``,
  ``# ... rest of code ...``, ``<!-- ... -->``, ``/* ... */``, ``-- ...``, a bare
  ``...``, and wordings such as ``keep existing code``, ``unchanged``,
  ``code remains the same`` or ``keep foo()``;
* **SEARCH/REPLACE** blocks, Aider's (``<<<<<<< SEARCH`` / ``=======`` /
  ``>>>>>>> REPLACE``) and Cline's (``------- SEARCH`` / ``=======`` /
  ``+++++++ REPLACE``), with runs of 3 or more of the marker character and separators of
  3 or more ``=`` (models write other lengths than 7); the file path and code fence
  that Aider writes around a block are skipped; Roo-Code's forms are read too: a
  ``:start_line:N`` / ``-------`` head or ``SEARCH (N)`` (where to look), lines copied
  with their numbers (``12 | code``) and marker lines escaped as ``\\=======``;
* **unified diffs**, with or without line numbers in the ``@@`` headers (whose counts are
  not trusted: a hunk is every following line with a diff prefix), or without headers;
  git's and diff's file headers (``--- /dev/null``: a new file, ``+++ /dev/null``: a
  deleted one), ``\\ No newline at end of file``, Aider's code fence around a diff and
  OpenAI's patch format (``*** Begin Patch``, ``*** Update File: path``, ``@@``) are
  read. A diff of several files, of a binary file, or a context diff (``diff -c``) is
  refused: which file it edits, or what it says, cannot be told.

Lines that look like block or merge-conflict markers but were not read as one (a
malformed block) are refused by the merge unless the original file holds them.

>>> plan = parse_edit("<<<<<<< SEARCH\\na = 1\\n=======\\na = 2\\n>>>>>>> REPLACE\\n")
>>> [(h.kind, h.old, h.new) for h in plan.hunks]
[('search_replace', ('a = 1',), ('a = 2',))]
>>> [h.kind for h in parse_edit("# ... existing code ...\\nx = 1\\n").hunks]
['lazy']
>>> is_marker("    // ... keep existing code ..."), is_marker("...options,")
(True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fastapply.merge.syntax import (
    _CONTEXT_DIFF,
    _ESCAPED,
    _FENCE,
    _FILE_NAME,
    _HINT_END,
    _NUMBERED,
    _PATCH_FRAME,
    _SR_END,
    _SR_SEP,
    _SR_START,
    _START_LINE,
    _UDIFF_HUNK,
    BLOCK_FORM,
    BLOCK_MARKER,
    SEPARATOR,
    EditError,
    EditPlan,
    Hunk,
    _split_lines,
    is_marker,
    says_removed,
)
from fastapply.merge.udiff import (
    _bare_diff,
    _diff_file,
    _diff_follows,
    _ends_hunk,
    _file_header,
    _one_file,
    _parse_udiff_hunk,
    _skip_file_header,
)

__all__ = ["BLOCK_FORM", "BLOCK_MARKER", "SEPARATOR", "EditError", "EditPlan", "Hunk",
           "detect_format", "is_marker", "parse_edit"]


def parse_edit(snippet: str, original: str | None = None) -> EditPlan:
    """Parse ``snippet``; raise EditError naming the line of malformed syntax. Given the
    ``original``, a line that looks like a marker but is its code, between the lines it
    has there (see :func:`code_dots`), is read as code."""
    lines = _split_lines(snippet)
    if lines and lines[-1] == "":
        lines.pop()
    code = code_dots(lines, original) if original else frozenset()
    # a removal marker the original has as a line of its own is that line (a comment)
    present = frozenset(s.strip() for s in original.split("\n")) if original else frozenset()
    code |= {i for i, s in enumerate(lines) if s.strip() in present and says_removed(s)}
    ranges = [s for s in lines if s[:4] in ("*** ", "--- ") and _CONTEXT_DIFF.match(s)]
    if any(s[0] == "*" for s in ranges) and any(s[0] == "-" for s in ranges):
        raise EditError(f"the snippet is a context diff ({ranges[0].strip()!r}: diff -c), "
                        f"which is not read; send a unified diff (diff -u, git diff)")
    hunks: list[Hunk] = []
    counts = {"lazy": 0, "search_replace": 0, "udiff": 0}
    lazy: list[str] = []
    lazy_start = 0
    marker_before = False
    i = 0

    def add(kind: str, old: list[str], new: list[str], start: int, **kw: object) -> None:
        counts[kind] += 1
        hunks.append(Hunk(kind, tuple(old), tuple(new), counts[kind], start, **kw))  # type: ignore

    removal: tuple[str, int, str] | None = None  # a removal marker before the segment

    marker_indent: str | None = None  # the plain marker right before the segment

    def flush_lazy(marker_after: bool, after: tuple[str, int, str] | None = None) -> None:
        nonlocal lazy, marker_before, removal, marker_indent
        if any(s.strip() for s in lazy):
            add("lazy", [], lazy, lazy_start + 1, marker_before=marker_before,
                marker_after=marker_after, removal=after or removal,
                marker_indent=marker_indent if marker_before else None)
        lazy, removal, marker_indent = [], None, None

    after_block = False  # only blank lines since the last SEARCH/REPLACE block (or diff)
    files: list[str] = []  # the files that a diff's file headers name
    change = ""  # the current diff file's Hunk.file_change
    fenced = False  # in a diff that a code fence opened
    in_diff = False  # only diff hunks, markers and blank lines since a diff header
    while i < len(lines):
        line = lines[i]
        if _SR_START.match(line):
            _drop_block_heading(lazy)
            flush_lazy(marker_after=True)
            i = _parse_block(lines, i, counts["search_replace"] + 1, add)
            marker_before = after_block = True
            in_diff = False
            continue
        if _PATCH_FRAME.match(line):  # OpenAI's patch: its first and last lines
            i += 1
            continue
        if after_block and _FENCE.match(line):  # the fence that closes a block
            i += 1
            after_block = fenced = False
            continue
        after_block = after_block and not line.strip()
        header = _UDIFF_HUNK.match(line)
        if header or _file_header(lines, i) or (i == 0 and _bare_diff(lines)):
            fenced = _drop_fence(lazy) or fenced  # Aider's ```diff fence
            in_diff = True
            flush_lazy(marker_after=True)
            if not header:  # file headers, or a diff body without any header
                if _file_header(lines, i):
                    end = _skip_file_header(lines, i)
                    change = _diff_file(lines[i:end], lines[end:end + 1], files)
                    i = end
                if i < len(lines) and not _UDIFF_HUNK.match(lines[i]) and \
                        not _ends_hunk(lines, i):
                    i = _parse_udiff_hunk(lines, i - 1, None, add, change)
                    marker_before = True
                after_block = fenced
                continue
            i = _parse_udiff_hunk(lines, i, header, add, change)
            marker_before = True
            after_block = fenced
            continue
        marker = is_marker(line) and i not in code
        if marker and in_diff and _diff_follows(lines, i + 1):
            # A marker inside a diff hunk (the lines between elided): the hunk goes on
            # after it, headerless; read as lazy lines, its +/- signs would be written.
            lazy = []
            i = _parse_udiff_hunk(lines, i, None, add, change)
            continue
        if marker and (word := says_removed(line)):
            if _joins(lines, i, lazy, code, top=not hunks and not marker_before):
                # The lines on its two sides follow each other: a removal shown by
                # adjacency, as agents write it. The snippet is split there and the
                # original lines between the two parts go (at the snippet's end: the rest
                # of the file; at its start: what comes before).
                said = (i + 1, line)
                blank = bool(lazy) and not lazy[-1].strip()  # blank lines on both sides: one run
                if any(s.strip() for s in lazy):
                    flush_lazy(marker_after=True, after=("after", *said))
                else:
                    removal = ("before", *said)
                marker_before, marker_indent = True, None
                i += 1
                while blank and i < len(lines) and not lines[i].strip():
                    i += 1
                continue
            raise EditError(
                f"snippet line {i + 1}: the marker {line.strip()[:120]!r} says lines were "
                f"{word}, but no line of code stands on one side of it (another marker "
                f"does), so the snippet does not show which lines to remove; nothing was "
                f"merged: show the unchanged lines on both sides of the removal with no "
                f"marker between them, or send SEARCH/REPLACE blocks or a unified diff")
        if marker:
            flush_lazy(marker_after=True)
            marker_before = True
            marker_indent = line[:len(line) - len(line.lstrip())]
            lazy_start = i + 1
            i += 1
            continue
        if not lazy:
            lazy_start = i
        lazy.append(line)
        in_diff = in_diff and not line.strip()
        i += 1
    flush_lazy(marker_after=False)
    _one_file(files)
    if not hunks and files:
        raise EditError(f"the diff of {files[0]} has file headers but no hunk: it changes "
                        f"no line (a rename, a mode change or a deletion?); nothing to "
                        f"merge: send the @@ hunks of the lines that change")
    if not hunks:
        raise EditError("the snippet holds no edit (only markers or blank lines); send the "
                        "changed code with some context")
    return EditPlan(tuple(hunks))


def _joins(lines: Sequence[str], i: int, lazy: Sequence[str], code: frozenset[int],
           top: bool) -> bool:
    """Can the removal marker at ``lines[i]`` be read by adjacency: code of the current
    segment before it (or the snippet's start) and code after it (or the snippet's end),
    with no other marker or block on the way?

    >>> _joins(["a", "# ... b removed ...", "c"], 1, ["a"], frozenset(), False)
    True
    >>> _joins(["# ...", "# ... b removed ...", "c"], 1, [], frozenset(), False)
    False
    >>> _joins(["# ... b removed ...", "# ...", "c"], 0, [], frozenset(), True)
    False
    """
    before = any(s.strip() for s in lazy)
    after = next((s for s in lines[i + 1:] if s.strip()), None)
    if after is not None and ((is_marker(after) and lines.index(after, i + 1) not in code)
                              or _SR_START.match(after) or _UDIFF_HUNK.match(after)):
        return False
    return before or (top and after is not None)


def code_dots(lines: Sequence[str], original: str) -> frozenset[int]:
    """Snippet lines (0-based) that look like markers but are code of the original: a
    Python ``...`` body, a ``# ...`` comment. Such a line is code where the original has
    it between the same two lines as the snippet (read as a marker there it would keep
    just that line, so either reading merges alike; read as code it spares a whole file
    sent as the snippet from being cut into segments at its own lines).

    >>> code_dots(["def f():", "    ...", "x = 1", "# ...", "y = 2"],
    ...           "def f():\\n    ...\\nx = 1\\nz = 0\\ny = 2\\n")
    frozenset({1})
    """
    dots = [i for i in range(1, len(lines) - 1) if is_marker(lines[i])]
    if not dots:
        return frozenset()
    orig = _split_lines(original)
    runs = {(orig[j - 1].rstrip(), orig[j].rstrip(), orig[j + 1].rstrip())
            for j in range(1, len(orig) - 1) if is_marker(orig[j])}
    return frozenset(i for i in dots if (lines[i - 1].rstrip(), lines[i].rstrip(),
                                         lines[i + 1].rstrip()) in runs)


def _drop_block_heading(lazy: list[str]) -> None:
    """Remove what heads a SEARCH/REPLACE block from the end of ``lazy``: blank lines, an
    opening code fence and the file's path.

    >>> lazy = ["x = 1", "", "src/app.py", "```python"]
    >>> _drop_block_heading(lazy); lazy
    ['x = 1']
    """
    def strip() -> None:
        while lazy and (not lazy[-1].strip() or _FENCE.match(lazy[-1])):
            lazy.pop()

    strip()
    if lazy and _FILE_NAME.match(lazy[-1]) and not is_marker(lazy[-1]):
        lazy.pop()
        strip()


def _drop_fence(lazy: list[str]) -> bool:
    """Remove the code fence that opens a diff (and the path before it, as Aider writes
    them) from the end of ``lazy``; was there one?

    >>> lazy = ["x = 1", "app.py", "```diff"]
    >>> _drop_fence(lazy), lazy
    (True, ['x = 1'])
    """
    last = next((s for s in reversed(lazy) if s.strip()), "")
    if not _FENCE.match(last):
        return False
    _drop_block_heading(lazy)
    return True


def _listing_numbers(old: list[str], new: list[str]) -> list[int]:
    """The line numbers a block's text was copied with from a numbered listing
    (``12 | code``), or []: every SEARCH line numbered, consecutively, and every
    REPLACE line numbered too, or none of them, as Roo-Code strips them.

    >>> _listing_numbers(["7 | a", "8 | b"], ["7 | a", "8 | c"]), _listing_numbers(["1 | x"], ["y"])
    ([7, 8], [1])
    >>> _listing_numbers(["1 | x", "2 | y"], ["1 | x", "z"])  # some REPLACE lines numbered
    []
    >>> _listing_numbers(["1 | x", "3 | y"], [])  # not consecutive: a table, say
    []
    """
    found = [_NUMBERED.match(s) for s in old]
    if not old or not all(found):
        return []
    numbers = [int(m.group(1)) for m in found if m]
    if numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        return []
    numbered = [bool(_NUMBERED.match(s)) for s in new if s.strip()]
    return numbers if all(numbered) or not any(numbered) else []


def _parse_block(lines: list[str], start: int, number: int,
                 add: Callable[..., None]) -> int:
    """Parse the SEARCH/REPLACE block starting at ``lines[start]``; return the index after
    it. Its separator is its line of exactly seven ``=``, else its only line of three or
    more (a Markdown heading underline in the text makes a shorter one ambiguous)."""
    label = f"SEARCH block {number} (snippet line {start + 1})"
    end = start + 1
    while end < len(lines) and not (_SR_END.match(lines[end]) or _SR_START.match(lines[end])):
        end += 1
    before = f" before line {end + 1}" if end < len(lines) else ""
    seps = [k for k in range(start + 1, end) if _SR_SEP.match(lines[k])]
    if not seps:
        raise EditError(f"{label} has no ======= line{before}")
    if end == len(lines) or _SR_START.match(lines[end]):
        raise EditError(f"{label} has no >>>>>>> REPLACE line{before}")
    sevens = [k for k in seps if SEPARATOR.match(lines[k])]
    if not sevens and len(seps) > 1:
        where = ", ".join(str(k + 1) for k in seps[:-1]) + f" and {seps[-1] + 1}"
        raise EditError(f"{label} has {len(seps)} lines that could be its separator (lines "
                        f"{where}); separate the SEARCH and REPLACE text by one line "
                        f"'======='")
    numbered = _SR_START.match(lines[start])
    given = int(numbered.group(1)) or None if numbered and numbered.group(1) else None
    # A second candidate is the only other reading needed (see Hunk.readings); more
    # would cost a copy of the block each.
    splits = [_split_block(lines[start + 1:sep], lines[sep + 1:end], given)
              for sep in (sevens or seps)[:2]]
    old, new, old_start, escaped = splits[0]
    add("search_replace", old, new, start + 1, old_start=old_start, escaped=escaped,
        readings=tuple((tuple(o), tuple(n)) for o, n, _, _ in splits[1:]))
    return end + 1


def _split_block(old: list[str], new: list[str], old_start: int | None
                 ) -> tuple[list[str], list[str], int | None, frozenset[int]]:
    """A block's SEARCH and REPLACE text as written -> (old, new, old_start, escaped):
    Roo-Code's line hint and listing numbers read and removed, escaped marker lines
    unescaped (``escaped``: their places in new)."""
    hint = _START_LINE.match(old[0]) if old else None
    if hint:  # Roo-Code's ":start_line:N" and "-------" lines: where to look first
        old_start = int(hint.group(1)) or None
        old = old[1:]
        while old and _HINT_END.match(old[0]):
            old = old[1:]
    numbers = _listing_numbers(old, new)
    if numbers:
        old_start = old_start or numbers[0]
        old, new = [_NUMBERED.sub("", s) for s in old], [_NUMBERED.sub("", s) for s in new]
    escaped = frozenset(k for k, s in enumerate(new) if _ESCAPED.match(s))
    return ([_ESCAPED.sub("", s) for s in old], [_ESCAPED.sub("", s) for s in new],
            old_start, escaped)


def detect_format(snippet: str) -> str:
    """"lazy", "search_replace", "udiff" or "mixed".

    >>> detect_format("@@ -1 +1 @@\\n-a\\n+b\\n")
    'udiff'
    """
    return parse_edit(snippet).format
