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

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["BLOCK_FORM", "BLOCK_MARKER", "SEPARATOR", "EditError", "EditPlan", "Hunk",
           "detect_format", "is_marker", "parse_edit"]


class EditError(ValueError):
    """A snippet that cannot be parsed or merged; the message says where and what."""


_COMMENT_OPEN = r"(?://+|#+|--|;+|%+|/\*+|<!--|\{/\*|\(\*|'|\*)"
_COMMENT_CLOSE = r"(?:\*+/\}?|-->|\*\))"
_DOTS = r"(?:\.\.\.+|…)"
#: A marker line: optional comment opener, dots, optional words, optional dots/closer.
_MARKER_RE = re.compile(
    rf"^\s*(?:{_COMMENT_OPEN}\s*)?{_DOTS}(?:\s*(?P<words>[^.…]*?)\s*{_DOTS}?)?\s*"
    rf"(?:{_COMMENT_CLOSE})?\s*$"
)
_COMMENTED_RE = re.compile(rf"^\s*{_COMMENT_OPEN}")
#: Block markers: a run of 3 or more of one character (7 is the norm; models write others).
#: (A start marker may carry the line to look at, ``SEARCH (12)``, as Roo-Code's older
#: format did, or a stray ``>``.)
_SR_START = re.compile(r"^\s*(?:<{3,}|-{3,})\s*SEARCH(?:>|\s*\((\d+)\))?\s*$")
_SR_SEP = re.compile(r"^\s*={3,}\s*$")
#: The separator of the norm (a second one in a block is text, or a doubled separator).
SEPARATOR = re.compile(r"^\s*={7}\s*$")
_SR_END = re.compile(r"^\s*(?:>{3,}|\+{3,})\s*REPLACE\s*$")
#: Lines that look like a block or merge-conflict marker: never file content unless the
#: file has them (a malformed block read as code would write its markers into the file).
BLOCK_MARKER = re.compile(r"^\s*(?:[<>=+\-|]{2,}\s*(?:SEARCH|REPLACE)\W*|"
                          r"(?:SEARCH|REPLACE)\W*|(?:<{7}|>{7}|\|{7})(?:\s.*)?)$")
#: How a SEARCH/REPLACE block is written (for messages).
BLOCK_FORM = ("write each block as a line '<<<<<<< SEARCH', the lines to find, a line "
              "'=======', the lines that replace them, and a line '>>>>>>> REPLACE'")
#: Around SEARCH/REPLACE blocks, not code: a code fence, and (before a block) the path of
#: the file it edits, as Aider and Roo-Code write them (``src/app.py``, `` `app.py` ``).
_FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})[\w+#.-]*\s*$")
_FILE_NAME = re.compile(r"^[\s`*#]*(?:[\w.-]+[/\\])*[\w-]+\.\w+[`*:\s]*$")
#: A marker line inside a block's text, escaped with a backslash (Roo-Code's convention).
_ESCAPED = re.compile(r"^\\(?=<{7}|={7}|>{7}|-{7}|:start_line:|:end_line:)")
#: A line number copied from a numbered listing (Roo-Code shows files as ``N | line``).
_NUMBERED = re.compile(r"^\s*(\d+)\s+\|(?!\|)\s?")
#: Roo-Code's line hint at the top of a SEARCH block: ``:start_line:N`` then ``-------``.
_START_LINE = re.compile(r"^\s*:start_line:\s*(\d+)\s*$")
_HINT_END = re.compile(r"^\s*(?::end_line:\s*\d+|-{3,})\s*$")
#: ``@@ -a,b +c,d @@ ...``, a bare ``@@ ... @@``, or a lone ``@@`` (optionally followed by
#: a context hint, as in OpenAI's patch format).
_UDIFF_HUNK = re.compile(
    r"^@@(?:\s*-(\d+)(?:,(\d+))?\s+\+(\d+)(?:,(\d+))?\s*@@.*|.*@@.*|(?:\s.*)?)$")
_UDIFF_FILE = re.compile(r"^(?:---|\+\+\+) \S")
#: ``diff --git a/x b/x`` and the extended header lines git writes after it.
_GIT_DIFF = re.compile(r"^diff (?:--git|-\S+) \S")
_GIT_META = re.compile(r"^(?:index [0-9a-f]+\.\.[0-9a-f]+|(?:old|new|deleted file|new file) mode "
                       r"\d+|(?:dis)?similarity index \d+%|(?:rename|copy) (?:from|to) \S|"
                       r"Binary files )")
_NULL = "/dev/null"
#: OpenAI's patch format (``apply_patch``): a file's header, and the lines around it.
_PATCH_FILE = re.compile(r"^\*\*\* (Update|Add|Delete) File: (\S.*)$")
_PATCH_FRAME = re.compile(r"^\*\*\* (?:Begin Patch|End Patch|End of File)\s*$")
#: A binary file's diff, as git writes it (``--binary``) or says it differs.
_BINARY = re.compile(r"^(?:GIT binary patch|Binary files .* differ)\s*$")
#: A context diff's (``diff -c``) hunk ranges, which this parser does not read.
_CONTEXT_DIFF = re.compile(r"^(?:\*\*\* \d+(?:,\d+)? \*\*\*\*|--- \d+(?:,\d+)? ----)\s*$")


def is_marker(line: str) -> bool:
    """Is this line a lazy-edit marker ("keep the original's lines here")?"""
    m = _MARKER_RE.match(line)
    if not m:
        return False
    words = (m.group("words") or "").strip().lower()
    if not words:
        return True  # "...", "// ...", "<!-- ... -->"
    # "... rest" without a comment could be code (spread syntax); with one it is a marker.
    return _COMMENTED_RE.match(line) is not None


@dataclass(frozen=True)
class Hunk:
    """One edit, in snippet order.

    ``search_replace`` and ``udiff`` hunks replace the line run ``old`` by ``new``;
    ``lazy`` hunks are one segment of consecutive snippet lines between markers.
    """

    #: "lazy" | "search_replace" | "udiff"
    kind: str
    #: Lines to find in the original (empty for lazy hunks).
    old: tuple[str, ...]
    #: Lines that replace them (for lazy hunks: the segment's lines).
    new: tuple[str, ...]
    #: 1-based number of this hunk among those of its kind (for messages).
    number: int
    #: 1-based line of the snippet where the hunk starts.
    snippet_line: int
    #: Lazy: a marker precedes the segment (it does not start at the top of the file).
    marker_before: bool = False
    #: Lazy: a marker follows the segment (it does not run to the end of the file).
    marker_after: bool = False
    #: SEARCH/REPLACE: lines of ``new`` that were escaped marker lines (``\=======``):
    #: text the writer meant, not a malformed block.
    escaped: frozenset[int] = frozenset()
    #: The old-file line number from a diff's ``@@`` header or a SEARCH block's
    #: ``:start_line:`` (1-based), if any: where to look first.
    old_start: int | None = None
    #: Diff: whether the new file ends with a newline, as its ``\ No newline at end of
    #: file`` lines say (None: they say nothing); it holds if the hunk ends the file.
    eof_newline: bool | None = None
    #: Diff: "new" under a ``--- /dev/null`` header (the file is created), "deleted"
    #: under ``+++ /dev/null``, else "".
    file_change: str = ""
    #: SEARCH/REPLACE: another way to split the block, (old, new), when it has more than
    #: one ``=======`` line (one may be a Markdown heading's underline or a merge
    #: conflict in the text): at its second one. Its SEARCH text starts with the first
    #: reading's, so if it is found in the file, so is that: the merge refuses the block
    #: as ambiguous. (Readings at later ``=======`` lines start with it in turn.)
    readings: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()

    @property
    def label(self) -> str:
        name = {"search_replace": "SEARCH block", "udiff": "diff hunk",
                "lazy": "lazy segment"}[self.kind]
        return f"{name} {self.number} (snippet line {self.snippet_line})"


@dataclass(frozen=True)
class EditPlan:
    """The parsed snippet: hunks in snippet order."""

    hunks: tuple[Hunk, ...]

    @property
    def format(self) -> str:
        kinds = {h.kind for h in self.hunks}
        return kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else "lazy")


def _split_lines(text: str) -> list[str]:
    """Lines as the merge splits the original: at LF and CRLF (a lone CR is text in a
    line, as it is in the file)."""
    return text.replace("\r\n", "\n").split("\n")


def parse_edit(snippet: str) -> EditPlan:
    """Parse ``snippet``; raise EditError naming the line of malformed syntax."""
    lines = _split_lines(snippet)
    if lines and lines[-1] == "":
        lines.pop()
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

    def flush_lazy(marker_after: bool) -> None:
        nonlocal lazy, marker_before
        if any(s.strip() for s in lazy):
            add("lazy", [], lazy, lazy_start + 1, marker_before=marker_before,
                marker_after=marker_after)
        lazy = []

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
        if is_marker(line) and in_diff and _diff_follows(lines, i + 1):
            # A marker inside a diff hunk (the lines between elided): the hunk goes on
            # after it, headerless; read as lazy lines, its +/- signs would be written.
            lazy = []
            i = _parse_udiff_hunk(lines, i, None, add, change)
            continue
        if is_marker(line):
            flush_lazy(marker_after=True)
            marker_before = True
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


def _diff_file(head: list[str], after: list[str], files: list[str]) -> str:
    """Record in ``files`` the file that a diff's file header ``head`` names; return
    its Hunk.file_change ("new", "deleted" or ""). A binary file's diff (said in the
    header or the line ``after`` it) is refused (EditError).

    >>> files = []
    >>> _diff_file(["--- /dev/null", "+++ b/src/new.py"], ["@@ -0,0 +1 @@"], files), files
    ('new', ['src/new.py'])
    """
    binary = next((s for s in head + after if _BINARY.match(s)), None)
    if binary is not None:
        raise EditError(f"the diff changes a binary file ({binary.strip()!r}); fastapply "
                        f"edits text files: send the new file itself")
    old = new = None
    for s in head:
        parts = s.split()
        patch = _PATCH_FILE.match(s)
        if patch:
            path = patch.group(2).strip()
            old = _NULL if patch.group(1) == "Add" else path
            new = _NULL if patch.group(1) == "Delete" else path
        elif _GIT_DIFF.match(s) and len(parts) == 4:
            old, new = parts[2], parts[3]
        elif s.startswith(("--- ", "+++ ")):
            path = s[4:].split("\t")[0].strip()  # a tab starts the timestamp
            if s[0] == "-":
                old = path
            else:
                new = path
    old = old[2:] if old and old.startswith("a/") else old
    new = new[2:] if new and new.startswith("b/") else new
    name = new if new not in (None, _NULL) else old
    if name and name != _NULL:
        files.append(name)
    return "new" if old == _NULL else "deleted" if new == _NULL else ""


def _one_file(files: list[str]) -> None:
    """Raise EditError if a diff's file headers name more than one file (one may be
    written with its folders and once without).

    >>> _one_file(["src/app.py", "app.py", "src/app.py"])
    >>> _one_file(["app.py", "util.py"])
    Traceback (most recent call last):
    ...
    fastapply.merge.edits.EditError: the diff edits 2 files (app.py, util.py); a request edits ...
    """
    names: list[str] = []
    for f in files:
        if not any(f == g or f.endswith("/" + g) or g.endswith("/" + f) for g in names):
            names.append(f)
    if len(names) > 1:
        raise EditError(f"the diff edits {len(names)} files ({', '.join(names)}); a request "
                        f"edits one file, and which of them is this one cannot be told: "
                        f"send each file's part of the diff with that file")


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


def _file_header(lines: list[str], i: int) -> bool:
    """Do ``lines[i:]`` start with a diff's file header (``diff --git``, ``---``/``+++``,
    OpenAI's ``*** Update File: path``)?"""
    return bool(_GIT_DIFF.match(lines[i]) or _PATCH_FILE.match(lines[i])) or (
        lines[i].startswith("--- ") and _UDIFF_FILE.match(lines[i]) is not None
        and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        and _UDIFF_FILE.match(lines[i + 1]) is not None)


def _skip_file_header(lines: list[str], i: int) -> int:
    """Index after the file header at ``lines[i]`` (git's extended lines included)."""
    if _PATCH_FILE.match(lines[i]):
        return i + 1 + (i + 1 < len(lines) and lines[i + 1].startswith("*** Move to: "))
    if _GIT_DIFF.match(lines[i]):
        i += 1
        while i < len(lines) and _GIT_META.match(lines[i]):
            i += 1
        if i < len(lines) and _file_header(lines, i) and not _GIT_DIFF.match(lines[i]):
            i += 2
        return i
    return i + 2


def _is_body(line: str) -> bool:
    """Can this line be in a diff hunk: context, removed, added, ``\\ No newline``, or
    an empty line (a context line whose space an editor stripped)?"""
    return not line or line[0] in " -+\\"


def _bare_diff(lines: list[str]) -> bool:
    """Is the whole snippet one diff hunk without headers? Every line has a diff
    prefix, lines are both removed and added, and none is a marker: a Markdown or YAML
    list has no ``+`` lines, code that starts a line with a sign has other lines too.
    """
    return all(not _ends_hunk(lines, i) and not is_marker(s) for i, s in enumerate(lines)) \
        and any(s.startswith("-") for s in lines) and any(s.startswith("+") for s in lines)


def _ends_hunk(lines: list[str], i: int) -> bool:
    """Does ``lines[i]`` end a diff hunk's body (no prefix, or the start of something
    else: a header, a SEARCH/REPLACE marker, a lazy marker)?"""
    line = lines[i]
    return not _is_body(line) or _file_header(lines, i) or bool(
        _SR_START.match(line) or _SR_END.match(line)
        or (line[:1] != " " and is_marker(line)))


def _diff_follows(lines: list[str], i: int) -> bool:
    """Is ``lines[i:]`` (after a marker in a diff) the rest of a diff hunk: lines with
    diff prefixes, at least one not blank, up to the end, a marker or a header? (Code
    written without prefixes, as in a lazy snippet, stops the run elsewhere.)

    >>> _diff_follows(["+b", " c", "# ..."], 0), _diff_follows(["    return x", "y"], 0)
    (True, False)
    """
    end = i
    while end < len(lines) and not _ends_hunk(lines, end):
        end += 1
    return any(s.strip() for s in lines[i:end]) and (
        end == len(lines) or _file_header(lines, end) or is_marker(lines[end])
        or bool(_UDIFF_HUNK.match(lines[end]) or _FENCE.match(lines[end])))


def _parse_udiff_hunk(lines: list[str], i: int, header: re.Match[str] | None,
                      add: Callable[..., None], change: str = "") -> int:
    """Parse the hunk whose ``@@`` header is ``lines[i]`` (body at ``lines[i + 1]``); return
    the index after it.

    The header's line counts are not trusted (LLMs get them wrong, or leave them out):
    like ``git apply --recount``, the hunk is every following line with a diff prefix.
    Empty lines at its end separate it from what follows; they are not context.
    A ``\\ No newline at end of file`` line says that the line before it ends its side
    of the file without a newline (a context line: both sides).
    """
    start = i
    end = i + 1
    while end < len(lines) and not _ends_hunk(lines, end):
        end += 1
    while end > i + 1 and lines[end - 1] == "":
        end -= 1
    old: list[str] = []
    new: list[str] = []
    tag = ""
    old_open = new_open = False  # a side said to end without a newline
    for line in lines[i + 1:end]:
        if line.startswith("\\"):
            old_open = old_open or tag in (" ", "-")
            new_open = new_open or tag in (" ", "+")
            continue
        tag, body = (line[:1], line[1:]) if line else (" ", "")
        if tag in " -":
            old.append(body)
        if tag in " +":
            new.append(body)
    old_start = int(header.group(1)) if header and header.group(1) else None
    eof_newline = False if new_open else True if old_open else None
    if old or new:
        add("udiff", old, new, start + 1, old_start=old_start, eof_newline=eof_newline,
            file_change=change)
    return end


def detect_format(snippet: str) -> str:
    """"lazy", "search_replace", "udiff" or "mixed".

    >>> detect_format("@@ -1 +1 @@\\n-a\\n+b\\n")
    'udiff'
    """
    return parse_edit(snippet).format
