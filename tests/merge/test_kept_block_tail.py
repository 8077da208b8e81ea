"""A segment that ends on new lines with no marker after it, where the original block goes
on past them (merge/edges.py:kept_block_tail).

Reduced from ``pallets/click@73a8f11c2b:click/_bashcomplete.py`` of the tune split: an
agent wrote a function from its signature to its end, with a marker inside only, and
turned its ``return choices`` into a generator loop. The merge kept ``return choices``
after the new loop and called itself certain; the commit had replaced it. Nothing in such a
snippet says whether the block's remaining lines stay, so the merge is unsure. Where a
marker after the segment says they stay, or the snippet shows them, it is certain."""

from __future__ import annotations

from fastapply.merge import apply_snippet

ORIGINAL = """\
import os


def get_choices(ctx, param, incomplete):
    choices = []
    if param.kind is not None:
        choices.extend(param.kind.choices)
    elif param.complete is not None:
        choices.extend(param.complete(ctx=ctx,
                                      incomplete=incomplete))
    return choices


def other():
    return os.sep
"""

SNIPPET = """\
def get_choices(ctx, param, incomplete):
    # ... existing code ...
    if param.kind is not None:
        choices = param.kind.choices
    elif param.complete is not None:
        choices = param.complete(ctx=ctx,
                                 incomplete=incomplete)
    for c in choices:
        yield c
"""


def test_new_lines_ending_a_block_without_a_marker_leave_its_last_lines_unsure() -> None:
    result = apply_snippet(ORIGINAL, SNIPPET)
    assert "    return choices\n" in result.text  # what the merge reads: kept
    found = [u for u in result.uncertain if "ends on new lines with no marker" in u.message]
    assert found and found[0].line == ORIGINAL.splitlines().index("    return choices") + 1
    assert "add a marker after it to keep them" in found[0].message


def test_a_marker_after_it_or_the_lines_shown_leave_no_doubt_there() -> None:
    def doubt(snippet: str) -> list[str]:
        return [u.message for u in apply_snippet(ORIGINAL, snippet).uncertain
                if "ends on new lines with no marker" in u.message]

    marked = SNIPPET + "    # ... existing code ...\n"
    assert not doubt(marked) and "    return choices\n" in apply_snippet(ORIGINAL, marked).text
    shown = SNIPPET + "    return choices\n"
    assert not doubt(shown)
    assert apply_snippet(ORIGINAL, shown).text.count("return choices") == 1


# Reduced from ``pallets/click@6359b85a4a:click/decorators.py`` (tune split): the snippet is
# a nested function from its signature to its end, with no marker; the merge replaced the
# outer function's ``return decorator`` along with the inner body, and called it certain.
DECORATORS = """\
def command(name=None, cls=None, **attrs):
    if cls is None:
        cls = Command
    def decorator(f):
        return _make_command(f, name, attrs, cls)
    return decorator


def group(name=None, **attrs):
    attrs.setdefault("cls", Group)
    return command(name, **attrs)
"""

INNER = """\
    def decorator(f):
        cmd = _make_command(f, name, attrs, cls)
        cmd.__doc__ = f.__doc__
        return cmd
"""


def test_new_lines_ending_a_block_that_replaced_a_line_after_it_are_unsure() -> None:
    result = apply_snippet(DECORATORS, INNER)
    found = [u for u in result.uncertain if "less indented than those lines" in u.message
             and "were replaced" in u.message]
    assert "    return decorator\n" not in result.text  # what the merge reads: replaced
    assert found and found[0].line == DECORATORS.splitlines().index("    return decorator") + 1
    shown = INNER + "    return decorator\n"
    result = apply_snippet(DECORATORS, shown)
    assert result.text == DECORATORS.replace("        return _make_command(f, name, attrs, cls)\n",
                                             INNER.split("\n", 1)[1])
