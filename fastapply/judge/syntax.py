"""What a parser says of a reading: tree-sitter, with the tree-sitter project's own grammar
wheels (``tree-sitter-python``, ``-go``, ...: prebuilt, nothing downloaded).

A request names no file, so the language is the grammar that parses the original with the
fewest errors (:func:`guess_language`); a file no grammar here reads well (Markdown, YAML)
has no syntax signals, and the judge reads it by its lines alone. Per reading the signals
are how many more syntax errors it has than the original, and how many more definitions
it names twice (the grammar's own tags query: ``@definition.*`` with its ``@name``).

>>> parsed = Syntax.of("def f():\\n    return 1\\n")
>>> parsed.language
'python'
>>> parsed.signals("def f():\\n    return 1\\ndef f():\\n    return 2\\n")
{'syntax_errors_added': 0, 'definitions_doubled': 1}
>>> parsed.signals("def f(:\\n    return 1\\n")["syntax_errors_added"] > 0
True
"""

from __future__ import annotations

import importlib
from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any

#: language -> (grammar wheel module, its language function, the wheel whose tags query
#: names its definitions). TypeScript's wheel has no tags query; JavaScript's reads it.
#: Kotlin's grammar is left out: it reads Markdown and Ruby without an error, so it won
#: the guess for 85 of 718 agent-train files that are not Kotlin.
GRAMMARS: dict[str, tuple[str, str, str]] = {
    "python": ("tree_sitter_python", "language", "tree_sitter_python"),
    "go": ("tree_sitter_go", "language", "tree_sitter_go"),
    "java": ("tree_sitter_java", "language", "tree_sitter_java"),
    "rust": ("tree_sitter_rust", "language", "tree_sitter_rust"),
    "javascript": ("tree_sitter_javascript", "language", "tree_sitter_javascript"),
    "typescript": ("tree_sitter_typescript", "language_tsx", "tree_sitter_javascript"),
    "ruby": ("tree_sitter_ruby", "language", "tree_sitter_ruby"),
    "csharp": ("tree_sitter_c_sharp", "language", "tree_sitter_c_sharp"),
    "php": ("tree_sitter_php", "language_php", "tree_sitter_php"),
    "c": ("tree_sitter_c", "language", "tree_sitter_c"),
    "cpp": ("tree_sitter_cpp", "language", "tree_sitter_cpp"),
}
#: Bytes of the original each grammar reads to guess the language.
GUESS_BYTES = 8_000
#: A grammar counts as the file's only with at most this many errors per 100 lines of
#: what it read (real files parse with a few: macros, newer syntax).
MOST_ERRORS_PER_100_LINES = 1.0


@dataclass(frozen=True)
class _Grammar:
    parser: Any
    errors: Any  # Query: (ERROR) and (MISSING) nodes
    names: Any  # Query: the tags query's @name of each @definition, or None


@cache
def _grammar(language: str) -> _Grammar | None:
    """The parser and queries of ``language``, or None where its wheel is not installed."""
    import tree_sitter as ts

    module, function, tags_module = GRAMMARS[language]
    try:
        lang = ts.Language(getattr(importlib.import_module(module), function)())
    except ImportError:
        return None
    names = None
    if tags_module:
        tags = getattr(importlib.import_module(tags_module), "TAGS_QUERY", "")
        try:
            names = ts.Query(lang, tags) if tags else None
        except (ts.QueryError, ValueError):
            names = None
    return _Grammar(ts.Parser(lang), ts.Query(lang, "(ERROR) @e (MISSING) @m"), names)


def _errors(g: _Grammar, tree: Any) -> int:
    import tree_sitter as ts

    if not tree.root_node.has_error:
        return 0
    return sum(len(v) for v in ts.QueryCursor(g.errors).captures(tree.root_node).values())


def _definitions(g: _Grammar, tree: Any, source: bytes) -> Counter[str]:
    """How often each (kind, name) is defined: the tags query's definitions."""
    import tree_sitter as ts

    if g.names is None:
        return Counter()
    found: Counter[str] = Counter()
    for _pattern, caps in ts.QueryCursor(g.names).matches(tree.root_node):
        kinds = [k for k in caps if k.startswith("definition.")]
        if not kinds or "name" not in caps:
            continue
        node = caps["name"][0]
        found[f"{kinds[0]} {source[node.start_byte:node.end_byte].decode(errors='replace')}"] += 1
    return found


def guess_language(text: str) -> str | None:
    """The language whose grammar reads the start of ``text`` with the fewest errors, or
    None where none reads it well (see :data:`MOST_ERRORS_PER_100_LINES`).

    >>> guess_language("package main\\n\\nfunc main() {}\\n")
    'go'
    >>> guess_language("# Title\\n\\nSome *prose*.\\n") is None
    True
    """
    head = text.encode("utf-8")[:GUESS_BYTES]
    lines = max(1, head.count(b"\n"))
    best: tuple[float, str] | None = None
    for language in GRAMMARS:
        if language == "php" and b"<?php" not in head:
            continue  # PHP's grammar reads any text outside <?php as HTML, without an error
        g = _grammar(language)
        if g is None:
            continue
        rate = 100 * _errors(g, g.parser.parse(head)) / lines
        if best is None or rate < best[0]:
            best = (rate, language)
            if rate == 0:
                break
    if best is None or best[0] > MOST_ERRORS_PER_100_LINES:
        return None
    return best[1]


@dataclass(frozen=True)
class Syntax:
    """The original as a parser reads it; :meth:`signals` compares a reading with it."""

    language: str | None
    errors: int = 0
    definitions: Counter[str] | None = None

    @classmethod
    def of(cls, original: str) -> Syntax:
        """Parse ``original`` in the language guessed for it (:func:`guess_language`)."""
        language = guess_language(original)
        g = _grammar(language) if language else None
        if g is None:
            return cls(None)
        source = original.encode("utf-8")
        tree = g.parser.parse(source)
        return cls(language, _errors(g, tree), _definitions(g, tree, source))

    def signals(self, reading: str) -> dict[str, float]:
        """Syntax errors the reading adds to the original's, and definitions it names twice
        that the original named once (NaN each where no grammar reads the file)."""
        g = _grammar(self.language) if self.language else None
        if g is None or self.definitions is None:
            return {"syntax_errors_added": float("nan"), "definitions_doubled": float("nan")}
        source = reading.encode("utf-8")
        tree = g.parser.parse(source)
        defs = _definitions(g, tree, source)
        doubled = sum(1 for k, n in defs.items() if n > 1 and n > self.definitions.get(k, 0))
        return {"syntax_errors_added": _errors(g, tree) - self.errors,
                "definitions_doubled": doubled}
