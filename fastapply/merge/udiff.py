"""Unified diffs inside a snippet: file headers (git's, diff's, OpenAI's patch format),
hunks with or without ``@@`` headers, and where a diff ends; :func:`.edits.parse_edit`
calls these as it meets a diff.

>>> _bare_diff([" a = 1", "-b = 2", "+b = 3"])
True
"""

from __future__ import annotations

import re
from collections.abc import Callable

from fastapply.merge.syntax import (
    _BINARY,
    _FENCE,
    _GIT_DIFF,
    _GIT_META,
    _NULL,
    _PATCH_FILE,
    _SR_END,
    _SR_START,
    _UDIFF_FILE,
    _UDIFF_HUNK,
    EditError,
    is_marker,
)


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
    fastapply.merge.syntax.EditError: the diff edits 2 files (app.py, util.py); a request edits ...
    """
    names: list[str] = []
    for f in files:
        if not any(f == g or f.endswith("/" + g) or g.endswith("/" + f) for g in names):
            names.append(f)
    if len(names) > 1:
        raise EditError(f"the diff edits {len(names)} files ({', '.join(names)}); a request "
                        f"edits one file, and which of them is this one cannot be told: "
                        f"send each file's part of the diff with that file")


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
