"""A snippet without markers, from the file's first line, as long as half the file, that
ends on a line found mid-file (merge/whole.py:top_fragment).

Reduced from ``go-chi/chi@84049128eb:chi.go`` of the validation split: an agent wrote the
whole new file, which ends where the commit removed the old file's last functions. The
merge read it as the file's first part and kept those functions, and called itself
certain. Its text fits both readings, so the merge is unsure, and the file with the rest
removed is among its readings for a witness. A short fragment from the top, or one that
ends on a line found several times, is read as before."""

from __future__ import annotations

from fastapply.merge import apply_snippet

ORIGINAL = """\
package chi

import "net/http"

type Router interface {
	Use(m Middleware)
	Route(pattern string) Router
	Mount(pattern string, h http.Handler)
}

type Middlewares []Middleware

// Use returns a Middlewares slice.
func Use(ms ...Middleware) Middlewares {
	return Middlewares(ms)
}

// Handler builds a handler.
func (ms Middlewares) Handler(h http.Handler) http.Handler {
	return chain(ms, h)
}
"""

WHOLE_NEW = """\
package chi

import "net/http"

type Router interface {
	Use(m Middleware)
	Chain(ms ...Middleware) Router
	Route(pattern string) Router
	Mount(pattern string, h http.Handler)
}

type Middlewares []Middleware
"""

UPDATED = WHOLE_NEW


def test_a_file_from_its_top_that_ends_mid_file_is_unsure_and_the_cut_file_is_a_reading() -> None:
    result = apply_snippet(ORIGINAL, WHOLE_NEW)
    assert "func Use(" in result.text  # what the merge reads: the file's first part
    found = [u for u in result.uncertain if "starts with the file's first line" in u.message]
    assert len(found) == 1
    kept = ORIGINAL.splitlines().index("type Middlewares []Middleware") + 2
    assert found[0].line == kept
    assert f"so lines {kept}-{len(ORIGINAL.splitlines())} were kept" in found[0].message
    assert "send all of it, else add a marker after it" in found[0].message
    texts = [c.text for c in result.with_readings().candidates]
    assert UPDATED in texts[1:]


def test_a_short_fragment_from_the_top_keeps_the_rest_and_is_certain() -> None:
    fragment = ("package chi\n\nimport \"net/http\"\n\ntype Router interface {\n"
                "\tUse(m Middleware, n int)\n\tRoute(pattern string) Router\n")
    result = apply_snippet(ORIGINAL, fragment)
    assert not result.uncertain
    assert result.text == ORIGINAL.replace("Use(m Middleware)", "Use(m Middleware, n int)")


def test_a_fragment_that_ends_on_a_line_found_several_times_is_not_this_doubt() -> None:
    original = "a = 1\nb = 2\nif x:\n    pass\nc = 3\nif y:\n    pass\nd = 4\ne = 5\n" \
        "f = 6\ng = 7\nh = 8\n"
    snippet = "a = 1\nb = 20\nif x:\n    pass\nc = 3\nif y:\n    pass\n"
    result = apply_snippet(original, snippet)
    assert result.text == original.replace("b = 2\n", "b = 20\n")
    assert not [u for u in result.uncertain if "starts with the file's first line" in u.message]
    # the same snippet ending on a line found once is the doubt
    unique = apply_snippet(original, snippet + "d = 4\n")
    assert [u for u in unique.uncertain if "starts with the file's first line" in u.message]
