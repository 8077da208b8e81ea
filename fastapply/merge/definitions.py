"""Definition and heading lines (``def``, ``class``, ``fn``, typed method headers, test
names, Markdown headings, ...): what a placement removes that the segment never names
(DROP_DEF in :mod:`fastapply.merge.lazy`)."""

from __future__ import annotations

import re
from collections.abc import Container, Sequence

from fastapply.merge.lines import _WORD

_DEF = re.compile(r"^(?:\s*(?:(?:export\s+)?(?:async\s+)?"
                  r"(?:def|class|func(?:\s*\([^)]*\))?|function)"
                  r"|(?:from\s+[\w.]+\s+)?import)"
                  r"|(?:export\s+)?(?:var|let|const|type))\s+(\w+)")  # those at the top level


_HEADING = re.compile(r"^\s*(?:#{2,6}\s+(\S.*)|<h[1-6][^>]*>(.+?)</h[1-6]>"
                      r"""|(?:it|describe|test)\(\s*(['"`].+?['"`])\s*,)""")


#: Modifiers and annotations before a definition (Java, C#, Kotlin, Swift, Rust, PHP, C++).
_MODIFIERS = (r"(?:(?:pub(?:\([^)]*\))?|public|private|protected|internal|static|async|"
              r"export|default|abstract|final|override|open|data|sealed|inline|virtual|"
              r"unsafe|extern|fileprivate|mutating|suspend|operator|partial|readonly|"
              r"required|convenience|synchronized|native|@\w+(?:\([^)]*\))?)\s+)*")
#: Definition lines of the languages ``_DEF`` does not cover, name in the first group
#: that matched: a keyword definition (``fn``, ``fun``, ``struct``, ``enum``, ``impl``,
#: ``interface``, ``protocol``, ``module``, ...), a typed header that opens a function
#: (``public void name(``, ``int name(void)``, ``fun name(``; not a call: no ``;`` or
#: ``=`` after the parenthesis, no statement keyword first), a gtest ``TEST_F(Suite,
#: name)``, an RSpec/minitest ``it "name"``/``describe "name"``.
_DEF_OTHER = re.compile(
    r"^\s*" + _MODIFIERS + r"(?:def|class|func|function|fn|fun|struct|enum|interface|trait|"
    r"impl|module|namespace|protocol|extension|object|record|typealias|mod|union)\s+"
    r"(?:self\.)?([A-Za-z_]\w*)"
    r"|^\s*" + _MODIFIERS + r"(?!(?:return|new|else|elif|throw|raise|assert|case|await|yield|"
    r"delete|del|if|unless|while|until|for|foreach|switch|match|catch|using|lock|when|sizeof|"
    r"typeof|print|puts|echo|go|defer|not|and|or|in|is|goto|import|package|include|"
    r"require|from|with|lambda)\b)[\w\[\].?*&:]+(?:<[^()]*>)?\s+"
    r"[*&]*([A-Za-z_]\w*)\s*\([^;=]*$"
    r"|^\s*(?:TEST|TEST_F|TEST_P|TYPED_TEST)\s*\(\s*\w+\s*,\s*(\w+)\s*\)"
    r"|^\s*(?:it|describe|context|test)\s+(['\"].+?['\"])")
#: Longer lines are not read as definition headers (they are code, and the regex's
#: work grows with a line's length).
_HEADER_CHARS = 400


def _dropped_defs(region: Sequence[str], seg: Sequence[str]) -> list[bool]:
    """Per original line: does it define a name (def, class, func, function, import, a
    top-level var/let/const/type; ``_DEF_OTHER`` in other languages) that the segment
    never mentions, or is it a heading whose text the segment lacks? Replacing or
    deleting it removes that definition or section.

    >>> _dropped_defs(["TEST_F(TApp, RangeDouble) {", "    run();", "}"],
    ...               ["TEST_F(TApp, typeCheck) {", "    run();", "}"])
    [True, False, False]
    """
    words: set[str] | None = None
    text: str | None = None
    out = []
    for line in region:
        m = _DEF.match(line)
        if m:
            if words is None:
                words = {w for s in seg for w in _WORD.findall(s)}
            out.append(m.group(1) not in words)
            continue
        m = _DEF_OTHER.match(line) if len(line) <= _HEADER_CHARS else None
        if m:
            if words is None:
                words = {w for s in seg for w in _WORD.findall(s)}
            if text is None:
                text = "\n".join(seg)
            name = next(g for g in m.groups() if g)
            out.append(name not in words and name not in text)
            continue
        h = _HEADING.match(line)
        if h:
            if text is None:
                text = "\n".join(seg)
            out.append(next(g for g in h.groups() if g).strip() not in text)
            continue
        out.append(False)
    return out


#: A method or function header that opens a body: ``name(args) {`` with optional
#: modifiers and return type (JavaScript/TypeScript class methods, Java, C#, Kotlin, ...).
_METHOD = re.compile(r"^\s*(?:(?:public|private|protected|internal|static|async|override|"
                     r"final|abstract|get|set|fun|fn|func)\s+)*([A-Za-z_]\w*)\s*\([^()]*\)"
                     r"\s*(?::\s*[^{}=;]+)?\{\s*$")
_NOT_NAMES = frozenset({"if", "for", "while", "switch", "catch", "with", "return", "function",
                        "else", "elif", "do", "try", "foreach", "using", "lock", "when"})


def removed_definitions(region: Sequence[str], kept: set[int], seg: Sequence[str]
                        ) -> list[str]:
    """Names defined by the lines of ``region`` a placement removes (those not in
    ``kept``) that the segment never mentions: ``def``/``class``/``function``/... lines
    (as DROP_DEF) and method headers (``name(args) {``).

    >>> removed_definitions(["  down() {", "    n -= 1;", "  }"], {2}, ["  reset() {"])
    ['down']
    >>> removed_definitions(["    public void oob() throws IOException {"], set(), ["}"])
    ['oob']
    """
    words = {w for s in seg for w in _WORD.findall(s)}
    lost = []
    for k, line in enumerate(region):
        if k in kept or len(line) > _HEADER_CHARS:
            continue
        m = _DEF.match(line) or _METHOD.match(line) or _DEF_OTHER.match(line)
        name = next((g for g in m.groups() if g), None) if m else None
        if name and name not in words and name not in _NOT_NAMES and \
                not name.startswith(("'", '"')):
            lost.append(name)
    return lost


#: How a line that opens a block ends (``{``, ``:``, ``(``, ``do``, ``=>``, ``->``).
_OPENS = re.compile(r"(?:[{:(\[]|\bdo|=>|->)\s*$")


def opens_block(lines: list[str]) -> bool:
    """Does the first of these (non-blank) lines open a block: a definition (not an
    import), a line ending like an opener, or one the next line is indented under?

    >>> opens_block(["    def greet(self):"]), opens_block(["    x = 1", "    y = 2"])
    (True, False)
    """
    first = lines[0]
    if _DEF.match(first) and not first.lstrip().startswith(("import", "from")):
        return True
    if (len(first) <= _HEADER_CHARS and (_DEF_OTHER.match(first) or _METHOD.match(first))) \
            or _OPENS.search(first):
        return True
    return len(lines) > 1 and _depth(lines[1]) > _depth(first)


def _depth(line: str) -> int:
    return len(line) - len(line.lstrip())


def defined_name(line: str) -> str | None:
    """The name a definition header line defines, with what comes before it (its
    indentation, keyword, modifiers, a Go receiver): ``"def f"``, ``"func (a *A) Render"``;
    None for other lines and imports or variables.

    >>> defined_name("    def read(self, size):"), defined_name("    public int size() {")
    ('    def read', '    public int size')
    >>> defined_name("import os") is None and defined_name("    if (x) {") is None
    True
    """
    if len(line) > _HEADER_CHARS or re.match(r"\s*(?:from\s+\S+\s+)?import\b", line):
        return None
    for rx in (_DEF, _DEF_OTHER, _METHOD):
        m = rx.match(line)
        if m is None:
            continue
        k = next((k for k, g in enumerate(m.groups(), 1) if g), None)
        if k is None or m.group(k) in _NOT_NAMES or m.group(k).startswith(("'", '"')) or \
                re.match(r"\s*(?:export\s+)?(?:var|let|const|type)\b", line):
            return None
        return line[:m.end(k)]
    return None


def second_definition(seg: Sequence[str], orig: Sequence[str], start: int, end: int,
                      have: Container[str] | None = None) -> tuple[int, str] | None:
    """A definition header of ``seg`` that is new (its line is not in the original) and
    names the one definition the original has of that name (same indentation, keyword
    and name) outside ``orig[start:end]`` and none inside: placed there, the segment adds
    a second copy beside the old one (a rewritten method whose parameters changed, shown
    after a marker, read as new code). A name defined several times (test-local helpers,
    overloads) and a helper inside a new definition are left alone. Returns (0-based
    original line of the old one, name). ``have``: the original's lines, stripped, where
    the caller holds them (the merger's line table: built once a merge, not once a
    segment).

    >>> orig = ["class A:", "    def f(self, a):", "        return a", "", "    def g(self):",
    ...         "        pass"]
    >>> second_definition(["    def f(self, b):", "        return b"], orig, 6, 6)
    (1, '    def f')
    >>> second_definition(["    def f(self, b):", "        return b"], orig, 1, 3) is None
    True
    """
    heads = [line for line in seg if defined_name(line)]
    if not heads:  # (the original's lines are read only where the segment defines a name)
        return None
    if have is None:
        have = {s.strip() for s in orig}
    outer = None  # indentation of the last new definition (its local helpers are new too)
    for line in heads:
        name = defined_name(line) if line.strip() not in have else None
        if name is None:
            continue
        depth = len(line) - len(line.lstrip())
        if outer is not None and depth > outer:
            continue
        outer = depth
        at = [j for j, s in enumerate(orig) if s.startswith(name) and defined_name(s) == name]
        if len(at) == 1 and not start <= at[0] < end:
            return at[0], name
    return None


#: A top-level declaration (at column 0), name in the first group that matched:
#: ``def``/``class``/``function``/``func`` (not a Go method: it has a receiver),
#: ``fn``/``struct``/``enum``/``trait``/``type``/``interface``/``const``/``let``/``var``/
#: ``static`` with ``export``/``pub``/``async``/``default`` before them.
_TOP_DECL = re.compile(r"^(?:export\s+)?(?:default\s+)?(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?"
                       r"(?:unsafe\s+)?(?:def|class|function|func|fn|struct|enum|trait|type|"
                       r"interface|const|let|var|static|mod)\s+(?:mut\s+)?([A-Za-z_]\w*)")
#: A name declared inside a Go ``var (``/``const (`` block: ``\tname Type``, ``\tname = ...``.
_GO_BLOCK_ITEM = re.compile(r"^\s+([A-Za-z_]\w*)(?:\s*,\s*[A-Za-z_]\w*)*(?:\s+[^=\s]|\s*=)")
_GO_BLOCK_OPEN = re.compile(r"^(?:var|const)\s*\($")
#: A package clause (Go, Java, Kotlin, Scala): a source file has one, so two in a merged
#: file are an old clause kept beside the snippet's new form of it. Its name is the
#: package's whole dotted name; a trailing comment (Go's ``// import "..."``) may follow.
_PACKAGE = re.compile(r"^package\s+([A-Za-z_][\w.]*)\s*;?\s*(?://.*)?$")


#: Words a C-like declaration has where the name would be (``static void f(``,
#: ``const char *s``): a type, not the name declared.
_C_TYPES = frozenset({"void", "int", "char", "long", "short", "unsigned", "signed", "float",
                      "double", "bool", "struct", "enum", "union", "inline", "const",
                      "volatile", "auto", "extern", "size_t", "uint8_t", "uint16_t",
                      "uint32_t", "uint64_t", "int8_t", "int16_t", "int32_t", "int64_t",
                      "final", "readonly", "function", "fn", "async"})


def declared_names(lines: Sequence[str]) -> dict[str, list[int]]:
    """Top-level declarations by name: the 0-based lines that declare it. A function
    declared without a body (``function f(a: string): void;``, an overload) or a
    declaration under an attribute line (``#[cfg(...)]``, ``@overload``: one of several
    variants) is left out, and so are examples in a Markdown file's fenced blocks.

    >>> declared_names(["var a int", "var (", "\tb = 1", "\ta = 2", ")", "func (r T) a() {}"])
    {'a': [0, 3], 'b': [2]}
    >>> declared_names(["package a.b;", 'package a // import "x/a"', "package managers"])
    {'a.b': [0], 'a': [1], 'managers': [2]}
    """
    out: dict[str, list[int]] = {}
    in_block = fenced = False
    for i, line in enumerate(lines):
        if line.startswith(("```", "~~~")):  # examples in a Markdown file: not its names
            fenced = not fenced
        if fenced or len(line) > _HEADER_CHARS:
            continue
        if in_block:
            if line.startswith(")"):
                in_block = False
                continue
            m = _GO_BLOCK_ITEM.match(line)
            if m and not line.lstrip().startswith("//"):
                out.setdefault(m.group(1), []).append(i)
            continue
        if _GO_BLOCK_OPEN.match(line.rstrip()):
            in_block = True
            continue
        package = _PACKAGE.match(line.rstrip())
        if package:
            out.setdefault(package.group(1), []).append(i)
            continue
        m = _TOP_DECL.match(line)
        if not m or m.group(1) in _C_TYPES or (
                line.rstrip().endswith(";") and "(" in line and "=" not in line):
            continue
        previous = lines[i - 1].strip() if i else ""
        if previous.startswith(("#[", "@")):
            continue
        out.setdefault(m.group(1), []).append(i)
    return out


def doubled_declarations(original: Sequence[str], merged: Sequence[str],
                         shown: Sequence[str]) -> list[tuple[str, list[int]]]:
    """Names the merged file declares at the top level more often than the original,
    and at least twice, where the snippet (``shown``) declares them fewer times than the
    merged file: a declaration the snippet rewrote that the merge kept beside its new
    form. Each with the merged file's 0-based lines that declare it.

    >>> doubled_declarations(["var a int", "var b int"],
    ...                      ["var a int", "var (", "\ta int", "\tb int", ")"],
    ...                      ["var (", "\ta int", "\tb int", ")"])
    [('a', [0, 2])]
    """
    after = declared_names(merged)
    if not any(len(where) > 1 for where in after.values()):
        return []
    before, snippet = declared_names(original), declared_names(shown)
    return [(name, where) for name, where in after.items()
            if len(where) > max(1, len(before.get(name, ())))
            and len(snippet.get(name, ())) < len(where)]
