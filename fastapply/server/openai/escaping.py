"""XML-escaped files and snippets, as some apply clients send them.

Clients of the Kortix FastApply prompt (MCP servers and editor plugins that fill its
``<code>{original_code}</code>`` template) XML-escape the file and the snippet first, so
that a file holding ``</code>`` cannot end the tag early, and unescape the answer. The
front merges the real text (the model was trained on code, not on ``&lt;``) and answers
with the same escaping, so the client's own unescape gives the merged file.

The escaping is recognised, never guessed: a text is taken as escaped by one of
:data:`ESCAPERS` only where unescaping it and escaping it again gives it back byte for byte,
for the file and the snippet alike, and one of them holds an entity. Escaping works
character by character, so a merge of the unescaped texts, escaped, is a merge of the
texts as sent: the answer is right whichever way the client meant them.

>>> esc = detect('if a &lt; b and s == &quot;x&quot;:\\n', 'x = &apos;&amp;&apos;\\n')
>>> esc.name, unescape('a &lt; b'), esc.escape('a < b & "c"')
('xml', 'a < b', 'a &lt; b &amp; &quot;c&quot;')
>>> detect('a < b\\n', 'a &lt; b\\n') is None  # the file is not escaped: both as sent
True
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_ENTITY = re.compile(r"&(lt|gt|amp|quot|apos|#39|#x27|#34|#x22);")
_CHAR = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'", "#39": "'",
         "#x27": "'", "#34": '"', "#x22": '"'}


def unescape(text: str) -> str:
    """The five XML entities (and the numeric quotes) back to characters, in one pass, so
    ``&amp;lt;`` is ``&lt;``."""
    return _ENTITY.sub(lambda m: _CHAR[m.group(1)], text)


def _table(quote: str | None, apos: str | None) -> Callable[[str], str]:
    table = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;"}
    if quote:
        table[ord('"')] = quote
    if apos:
        table[ord("'")] = apos
    return lambda text: text.translate(table)


@dataclass(frozen=True)
class Escaper:
    """One way of escaping: its name and the function."""

    name: str
    escape: Callable[[str], str]


#: The escapings in use, tried in this order: XML's five entities (the Kortix clients'
#: ``escape_xml_tags``), Python's ``html.escape`` (``&#x27;``), ``&#39;``, quotes only,
#: and ``& < >`` only (``xml.sax.saxutils.escape``).
ESCAPERS = (Escaper("xml", _table("&quot;", "&apos;")),
            Escaper("html", _table("&quot;", "&#x27;")),
            Escaper("html39", _table("&quot;", "&#39;")),
            Escaper("quot", _table("&quot;", None)),
            Escaper("lt-gt-amp", _table(None, None)))


def detect(*texts: str) -> Escaper | None:
    """The escaping every one of ``texts`` is written in, or None where none holds an
    entity or no one escaping gives each of them back (then they are merged as sent)."""
    if not any(_ENTITY.search(t) for t in texts):
        return None
    plain = [unescape(t) for t in texts]
    for escaper in ESCAPERS:
        if all(escaper.escape(p) == t for p, t in zip(plain, texts, strict=True)):
            return escaper
    return None
