"""Blank lines where a lazy segment meets a marker (``merger._blank_edges``): the run keeps
as many blank lines as the longer of the snippet's and the original's. Reduced from two
whole-file readings of encode/httpx (validation split) that were served wrong and certain:
a blank line shown before a marker was merged as a deletion of one of the file's two, and
two shown were merged as three."""

from __future__ import annotations

import pytest

from fastapply.merge import apply_snippet

TESTS = ("import pytest\n\n\n@pytest.mark.asyncio\nasync def test_get(server):\n"
         "    response = await request(\"GET\")\n    assert response.status_code == 200\n\n\n"
         "@pytest.mark.asyncio\nasync def test_post(server):\n"
         "    response = await request(\"POST\")\n    assert response.status_code == 200\n")


@pytest.mark.parametrize("blanks", [1, 2])
def test_a_blank_line_before_a_marker_keeps_the_files_blank_lines(blanks: int) -> None:
    # One blank line shown before the marker is layout; two are the file's two.
    snippet = ("# ... existing code ...\nasync def test_get(server):\n"
               "    response = await request(\"GET\", timeout=1)\n"
               "    assert response.status_code == 200\n" + "\n" * blanks +
               "# ... existing code ...\n")
    got = apply_snippet(TESTS, snippet)
    assert got.check() == TESTS.replace('"GET")', '"GET", timeout=1)')


def test_a_blank_line_after_a_marker_keeps_the_files_blank_lines() -> None:
    snippet = ("# ... existing code ...\n\n@pytest.mark.asyncio\nasync def test_post(server):\n"
               "    response = await request(\"POST\", timeout=1)\n# ... existing code ...\n")
    got = apply_snippet(TESTS, snippet)
    assert got.check() == TESTS.replace('"POST")', '"POST", timeout=1)')
