"""A segment whose generic edge fits a second copy inside its marker's gap (merge/edges.py).

Reduced from ``sindresorhus/ky@101c74ba1a:readme.md`` of the shared corpus (issue 26
item 6): the snippet rewrites the first of two error hooks and ends with ``}``, a blank
and ``return error;``; the commit also deleted the second hook, which the snippet never
shows. The nearest copy of that edge keeps the second hook (a wrong file, served as
certain before); the next copy deletes it. The text cannot tell them apart, so the merge
is refused. The same shape at a segment's head was seen on a validation repository
(``rack/rack@949129217e``: two deprecated methods deleted between ``end`` and a new
comment)."""

from __future__ import annotations

import pytest

from fastapply.merge import apply_snippet

# readme.md of sindresorhus/ky at 101c74ba1a, lines 465-492 (a code block; MIT licence)
HOOKS = """\
await ky('https://example.com', {
\thooks: {
\t\tbeforeError: [
\t\t\t({error}) => {
\t\t\t\tif (
\t\t\t\t\ttypeof error.data === 'object'
\t\t\t\t\t&& error.data !== null
\t\t\t\t\t&& 'message' in error.data
\t\t\t\t) {
\t\t\t\t\terror.name = 'GitHubError';
\t\t\t\t\terror.message = `${String(error.data.message)} (${error.response.status})`;
\t\t\t\t}

\t\t\t\treturn error;
\t\t\t},

\t\t\t// Or show different message based on retry count
\t\t\t({error, retryCount}) => {
\t\t\t\tif (retryCount === error.options.retry.limit) {
\t\t\t\t\terror.message = `${error.message} (failed after ${retryCount} retries)`;
\t\t\t\t}

\t\t\t\treturn error;
\t\t\t}
\t\t]
\t}
});
```
"""

# The first hook rewritten; the snippet ends with the hook's generic last lines.
REWRITE = """\
<!-- ... existing code ... -->
await ky('https://example.com', {
\thooks: {
\t\tbeforeError: [
\t\t\t({error}) => {
\t\t\t\tif (isHTTPError(error)) {
\t\t\t\t\tif (
\t\t\t\t\t\ttypeof error.data === 'object'
\t\t\t\t\t\t&& error.data !== null
\t\t\t\t\t\t&& 'message' in error.data
\t\t\t\t\t) {
\t\t\t\t\t\terror.name = 'GitHubError';
\t\t\t\t\t\terror.message = `${String(error.data.message)} (${error.response.status})`;
\t\t\t\t\t}
\t\t\t\t}

\t\t\t\tif (isTimeoutError(error)) {
\t\t\t\t\terror.message = `Request to ${error.request.url} timed out`;
\t\t\t\t}

\t\t\t\treturn error;
<!-- ... rest of code ... -->
"""


def test_an_edge_that_fits_the_next_copy_beside_lookalike_lines_is_refused() -> None:
    got = apply_snippet(HOOKS, REWRITE)
    assert got.uncertain, got.text
    message = got.uncertain[0].message
    assert "its last lines, found at several places, are found again" in message
    assert "show a unique line of unchanged context" in message
    with pytest.raises(ValueError, match="found again within lines"):
        got.check()


def test_the_same_edit_with_a_unique_line_after_it_is_merged() -> None:
    # One unique line of context after the change says which copy is meant.
    shown = REWRITE.replace("\t\t\t\treturn error;\n<!--",
                            "\t\t\t\treturn error;\n\t\t\t},\n\n"
                            "\t\t\t// Or show different message based on retry count\n<!--")
    got = apply_snippet(HOOKS, shown)
    assert not got.uncertain, got.uncertain
    assert "isTimeoutError" in got.check() and "retryCount ===" in got.text


def test_no_lookalike_lines_before_the_next_copy_no_doubt() -> None:
    # The next hook's last statement does not read like the segment's new one (another
    # first token): the nearest copy stands, as it did.
    other = HOOKS.replace("\t\t\t\t\terror.message = `${error.message}",
                          "\t\t\t\t\tconsole.log(`${error.message}")
    got = apply_snippet(other, REWRITE)
    assert not got.uncertain, got.uncertain
    assert "isTimeoutError" in got.check() and "retryCount ===" in got.text


def test_an_edit_in_place_at_the_nearest_copy_is_not_doubted() -> None:
    # The nearest placement already replaces a line like the new one (a version bump):
    # it explains the snippet as well as the next copy would, and nearest wins.
    config = ("repos:\n"
              "  - repo: https://github.com/asottile/pyupgrade\n"
              "    rev: v2.37.2\n    hooks:\n      - id: pyupgrade\n"
              "  - repo: https://github.com/psf/black\n"
              "    rev: 22.6.0\n    hooks:\n      - id: black\n")
    snippet = ("# ... existing code ...\n"
               "  - repo: https://github.com/asottile/pyupgrade\n"
               "    rev: v2.37.3\n    hooks:\n# ... existing code ...\n")
    got = apply_snippet(config, snippet)
    assert not got.uncertain, got.uncertain
    assert got.check() == config.replace("v2.37.2", "v2.37.3")


def test_an_edge_of_braces_alone_is_not_doubted() -> None:
    # Only ``}`` and blanks at the edge: too common to doubt (every function ends so).
    c = ("int f(void) {\n    a();\n    b();\n}\n\nint g(void) {\n    c();\n    d();\n}\n")
    snippet = "// ... existing code ...\n    a();\n    e();\n}\n// ... existing code ...\n"
    got = apply_snippet(c, snippet)
    assert not got.uncertain, got.uncertain
    assert got.check() == c.replace("    a();\n    b();\n}", "    a();\n    e();\n}", 1)


def test_the_head_of_a_segment_is_checked_the_same_way() -> None:
    ruby = ("class Request\n"
            "  def ip\n    @ip\n  end\n\n"
            "  # shortcut for params[key]\n"
            "  def [](key)\n    params[key.to_s]\n  end\n\n"
            "  def values_at(*keys)\n    keys.map { |key| params[key] }\n  end\n"
            "end\n")
    # The commit deleted ``[]`` and gave ``values_at`` a comment; the snippet starts at
    # the ``end`` of ``ip``... or of ``[]``, whose comment reads like the new one.
    snippet = ("# ... existing code ...\n"
               "  end\n\n"
               "  # like Hash#values_at\n"
               "  def values_at(*keys)\n"
               "# ... existing code ...\n")
    got = apply_snippet(ruby, snippet)
    assert got.uncertain and "its first lines, found at several places" in \
        got.uncertain[0].message, (got.uncertain, got.text)

