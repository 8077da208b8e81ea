"""The snippet syntax every reader shares: the markers of a lazy edit, of SEARCH/REPLACE
blocks and of unified diffs (as patterns), the parsed form of an edit (:class:`Hunk`,
:class:`EditPlan`) and :class:`EditError`, the error of a snippet that cannot be read or
merged. :mod:`.edits` reads snippets with these; the merge modules import them from here,
not from the parser.

>>> is_marker("    // ... keep existing code ..."), is_marker("...options,")
(True, False)
>>> is_marker("# ... (the 5.6 through 8.0 entries are removed) ...")  # a dot inside a word
True
>>> EditPlan((Hunk("lazy", (), ("x = 1",), 1, 1),)).format
'lazy'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["BLOCK_FORM", "BLOCK_MARKER", "SEPARATOR", "EditError", "EditPlan", "Hunk",
           "copied_markers", "is_marker", "says_removed"]


class EditError(ValueError):
    """A snippet that cannot be parsed or merged; the message says where and what."""


_COMMENT_OPEN = r"(?://+|#+|--|;+|%+|/\*+|<!--|\{/\*|\(\*|'|\*)"
_COMMENT_CLOSE = r"(?:\*+/\}?|-->|\*\))"
_DOTS = r"(?:\.\.\.+|…)"
#: A marker line: optional comment opener, dots, optional words, optional dots/closer. A
#: dot inside the words is one that a character other than a space or a dot follows
#: (``foo.bar``, ``./common``); a sentence's full stop ends no marker (``// ... but only
#: if x.`` is a comment of the file).
_MARKER_RE = re.compile(
    rf"^\s*(?:{_COMMENT_OPEN}\s*)?{_DOTS}(?:\s*(?P<words>(?:[^.…]|\.(?=[^\s.…]))*?)\s*"
    rf"{_DOTS}?)?\s*(?:{_COMMENT_CLOSE})?\s*$"
)
_COMMENTED_RE = re.compile(rf"^\s*{_COMMENT_OPEN}")


def is_commented(line: str) -> bool:
    """Does ``line`` open with a comment (``#``, ``//``, ``/*``, ``<!--``, ``--``, ...)?"""
    return _COMMENTED_RE.match(line) is not None
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


def _marker_words(line: str) -> str | None:
    """The words of a marker line ("" for a bare one), or None if ``line`` is no marker."""
    m = _MARKER_RE.match(line)
    if not m:
        return None
    words = (m.group("words") or "").strip()
    # "... rest" without a comment could be code (spread syntax); with one it is a marker.
    return None if words and not is_commented(line) else words


def is_marker(line: str) -> bool:
    """Is this line a lazy-edit marker ("keep the original's lines here")?"""
    return _marker_words(line) is not None


#: Words of a marker that say the lines it stands for were taken out ("// ... removed the
#: old handler ...", "<!-- ... section deleted ... -->"): unlike other markers it keeps no
#: lines; the lines on its two sides follow each other (:func:`.edits.parse_edit`; whole
#: words: ``removedItems`` is a name).
_REMOVAL_WORDS = re.compile(r"\b(?:removed|deleted|dropped|remove|delete)\b", re.IGNORECASE)
_PAST = {"remove": "removed", "delete": "deleted"}


def says_removed(line: str) -> str | None:
    """How a marker line says its lines were removed ("removed", "deleted", "dropped"),
    or None.

    >>> says_removed("<!-- ... Legacy section removed ... -->"), says_removed("# ... DELETE x ...")
    ('removed', 'deleted')
    >>> says_removed("// ... existing code ...")
    >>> says_removed("// ... removedItems handlers ..."), says_removed("x = removed  # ...")
    (None, None)
    """
    found = _REMOVAL_WORDS.search(_marker_words(line) or "")
    if not found:
        return None
    word = found.group(0).lower()
    return _PAST.get(word, word)


def copied_markers(output: str, original: str, snippet: str) -> list[tuple[int, str]]:
    """(1-based line, text) of every line of ``output`` that is a marker line of
    ``snippet`` the original lacks: a marker copied into a merged file where code belongs,
    never a right answer.

    >>> copied_markers("a\\n    // ... existing code ...\\nb\\n", "a\\nb\\n",
    ...                "a\\n// ... existing code ...\\n")
    [(2, '    // ... existing code ...')]
    >>> copied_markers("a\\n# ...\\n", "a\\n# ...\\n", "# ...\\na\\n")  # the original has it
    []
    """
    markers = {ln.strip() for ln in snippet.splitlines() if is_marker(ln)}
    if not markers:
        return []
    have = {ln.strip() for ln in original.splitlines()}
    return [(i, ln) for i, ln in enumerate(output.splitlines(), 1)
            if ln.strip() in markers and ln.strip() not in have]


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
    #: Lazy: a marker whose words say lines were removed (``# ... old helper removed
    #: ...``) stood right "after" or "before" the segment, as (side, its 1-based snippet
    #: line, the marker): the original lines between the segment and its neighbour (the
    #: file's edge, if none) go, a removal shown by adjacency.
    removal: tuple[str, int, str] | None = None
    #: Lazy: the indentation of the plain marker right before the segment (None: no such
    #: marker; a SEARCH block, a diff hunk or a removal marker came before it).
    marker_indent: str | None = None

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
