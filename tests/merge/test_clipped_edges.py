"""A segment whose edge next to a marker is read where the change it shows does not
happen: the merge is unsure rather than serving a file that keeps what the writer
removed (issue 26 item 2: flask, requests on edits-dev)."""

from __future__ import annotations

from fastapply.merge import apply_snippet

HANDLERS = '''import os


def helper(x):
    return x + 1


class Handlers(dict):
    def get(self, key):
        return key

    @staticmethod
    def pick(code):
        if isinstance(code, int):
            return code
        return None
'''


def test_a_segment_whose_only_change_is_a_blank_line_is_unsure() -> None:
    # The writer dropped helper() between the imports and the class; read where each
    # line is found, segment 1 only removes a blank line and helper() is kept.
    snippet = '''# ... existing code ...

class Handlers(dict):
    # ... existing code ...

    @staticmethod
    def pick(code):
        if isinstance(code, str):
            return code
        # ... existing code ...
'''
    got = apply_snippet(HANDLERS, snippet)
    assert "def helper" in got.text
    assert any("blank lines beside the markers aside" in u.message for u in got.uncertain)



def test_a_blank_line_removed_inside_a_segment_is_an_edit() -> None:
    # Spacing between two definitions is what this segment changes: certain. (Only the
    # blank lines beside its markers are the snippet's layout.)
    snippet = '''# ... existing code ...
def helper(x):
    return x + 1

class Handlers(dict):
    # ... existing code ...
'''
    got = apply_snippet(HANDLERS, snippet)
    assert "    return x + 1\n\nclass Handlers" in got.text
    assert not got.uncertain

BODY = '''import io


class Body:
    def read(self):
        if self.done:
            raise RuntimeError("done")
        try:
            if self.empty:
                self.content = None
            else:
                self.content = b"".join(self.chunks())

        except AttributeError:
            self.content = None

        self.done = True
        return self.content

    def close(self):
        self.done = True
'''


def test_a_segment_that_takes_a_try_away_from_its_except_is_unsure() -> None:
    # The try's body is shown dedented and the segment ends on a blank line: read at
    # the first blank line, the try: goes and its except stays.
    snippet = '''    def read(self):
        # ... existing code ...
            raise RuntimeError("done")
        if self.empty:
            self.content = None
        else:
            self.content = b"".join(self.chunks())

        # ... existing code ...
'''
    got = apply_snippet(BODY, snippet)
    assert "try:" not in got.text and "except AttributeError:" in got.text
    assert any("without the statement it continues" in u.message for u in got.uncertain)


def test_a_rewritten_try_body_that_keeps_its_header_keeps_its_except() -> None:
    snippet = '''    def read(self):
        # ... existing code ...
        try:
            if self.empty:
                self.content = b""
        # ... existing code ...
'''
    got = apply_snippet(BODY, snippet)
    assert 'self.content = b""' in got.text and "try:" in got.text
    assert not any("without the statement" in u.message for u in got.uncertain)
