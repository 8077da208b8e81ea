"""A rewritten definition whose header changed (a renamed parameter, a dropped base
class), shown after a marker, must not be read as new code beside the old one with the
merge certain (issue 26 item 6: click's repo.py, _termui_impl.py on the pallets/click
records)."""

from __future__ import annotations

from fastapply.merge import apply_snippet

REPO = '''import sys

import click


class Repo(object):
    def __init__(self, home):
        self.home = home
        self.config = {}

    def set_config(self, key, value):
        self.config[key] = value
        click.echo("  config[{}] = {}".format(key, value), file=sys.stderr)

    def __repr__(self):
        return "<Repo {}>".format(self.home)


pass_repo = click.make_pass_decorator(Repo)
'''


def test_a_changed_header_after_a_marker_is_not_a_second_definition() -> None:
    snippet = '''# ... existing code ...
class Repo:
    def __init__(self, home):
        self.home = home
        self.config = {}

    def set_config(self, key, value):
        self.config[key] = value
        click.echo(f"  config[{key}] = {value}", file=sys.stderr)

    def __repr__(self):
        return f"<Repo {self.home}>"


# ... existing code ...
'''
    got = apply_snippet(REPO, snippet)
    if got.text.count("class Repo") == 2:  # read as new code beside the old class
        assert any("it adds 'class Repo'" in u.message for u in got.uncertain)
    else:
        assert "class Repo(object)" not in got.text


def test_a_new_method_beside_others_stays_certain() -> None:
    snippet = '''# ... existing code ...
    def __repr__(self):
        return "<Repo {}>".format(self.home)

    def reset(self):
        self.config = {}


# ... existing code ...
'''
    got = apply_snippet(REPO, snippet)
    assert "def reset(self):" in got.text and not got.uncertain
