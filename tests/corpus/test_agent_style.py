"""Agent-style snippets and training windows: each is a true edit, read the way agents write."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fastapply.corpus.agent_style import AGENT_STYLES, agent_snippet, enclosing_block
from fastapply.corpus.crop import window
from fastapply.merge import apply_snippet, is_marker
from fastapply.model.sft_data import examples

DATA = Path(__file__).resolve().parents[1] / "data" / "multirepo-valid-sample.jsonl"
OLD = ("import os\n\n\nclass Greeter:\n    def __init__(self, name):\n        self.name = name\n"
       "\n    def greet(self):\n" + "".join(f"        v{i} = {i}\n" for i in range(12))
       + "        d = 4\n        h = 8\n        return self.name\n"
       "\n\ndef main():\n    Greeter('x').greet()\n")


def test_signature_snippet_starts_at_the_enclosing_signature_with_no_marker_around() -> None:
    new = OLD.replace("        h = 8\n", "        h = 9\n")
    snippet = agent_snippet(OLD, new, "python", "signature", random.Random(0))
    lines = snippet.splitlines()
    assert lines[0] == "    def greet(self):"
    assert lines[-1] == "        return self.name"
    assert "        h = 9" in lines
    assert any(is_marker(s) for s in lines[1:-1])  # the long unchanged run is elided
    # read as meant (each marker stands for the block's lines it replaces), it is the edit
    shown = [s for s in lines if not is_marker(s)]
    assert all(s in new.splitlines() for s in shown)


def test_no_signature_snippet_where_a_marker_would_stand_for_a_deleted_sibling() -> None:
    # A method deleted right after the changed one lies outside that method's block: the
    # marker joining the blocks would stand for it, so the snippet would keep it.
    old = OLD.replace("\n    def greet(self):",
                      "\n    def wave(self):\n        return 1\n\n    def greet(self):")
    new = old.replace("        self.name = name\n", "        self.name = name.strip()\n") \
        .replace("    def wave(self):\n        return 1\n\n", "") \
        .replace("        h = 8\n", "        h = 9\n")
    assert agent_snippet(old, new, "python", "signature", random.Random(0)) == ""
    # a statement deleted inside the block is the block's own change
    inner = OLD.replace("        d = 4\n", "")
    snippet = agent_snippet(OLD, inner, "python", "signature", random.Random(0))
    assert snippet.startswith("    def greet(self):")
    assert apply_snippet(OLD, snippet).check() == inner


def test_named_markers_say_what_they_stand_for() -> None:
    new = OLD.replace("        d = 4\n", "        d = 40\n")
    snippet = agent_snippet(OLD, new, "python", "named", random.Random(3))
    markers = [s for s in snippet.splitlines() if is_marker(s)]
    assert markers and all("existing code" not in m for m in markers)
    assert apply_snippet(OLD, snippet).text == new


def test_whole_block_and_whole_file_show_no_marker() -> None:
    new = OLD.replace("        return self.name\n", "        return self.name.upper()\n")
    block = agent_snippet(OLD, new, "python", "whole_block", random.Random(0))
    assert block.startswith("    def greet(self):") and not any(
        is_marker(s) for s in block.splitlines())
    assert agent_snippet(OLD, new, "python", "whole_file", random.Random(0)) == new


def test_a_top_level_change_has_no_enclosing_block() -> None:
    assert enclosing_block(["a = 1", "b = 2"], 1, 1) is None
    assert agent_snippet("a = 1\nb = 2\n", "a = 1\nb = 3\n", "python", "signature",
                         random.Random(0)) == ""
    with pytest.raises(ValueError, match="unknown agent style"):
        agent_snippet("a\n", "b\n", "python", "haiku", random.Random(0))


def test_a_window_is_a_true_edit_of_its_crop() -> None:
    recs = [json.loads(line) for line in DATA.open()]
    rng = random.Random(0)
    checked = 0
    for rec in recs:
        crop = window(rec["original"], rec["updated"], rng, max_lines=50)
        if crop is None:
            continue
        old, new = crop
        assert old != new
        # every line of the crop comes from the record, in order
        assert old in rec["original"] or rec["original"].startswith(old) or set(
            old.splitlines()) <= set(rec["original"].splitlines())
        assert set(new.splitlines()) <= set(rec["updated"].splitlines()) | set(
            rec["original"].splitlines())
        checked += 1
    assert checked >= len(recs) // 2


def test_training_examples_are_deterministic_for_a_seed_and_cover_every_style() -> None:
    recs = [json.loads(line) for line in DATA.open()] * 4
    first = list(examples(recs, seed=7))
    again = list(examples(recs, seed=7))
    other = list(examples(recs, seed=8))
    assert first == again and first != other
    styles = {ex["style"] for ex in first}
    assert {"lazy", "search_replace", "udiff"} <= styles
    assert len(styles & set(AGENT_STYLES)) >= 3
    assert {ex["format"] for ex in first} == {"kortix", "morph"}


# -- the styles of agent-written snippets (issue 46) ----------------------------------------

BLOCKS = ("import os\n\n\ndef load(path):\n    \"\"\"Read the file.\"\"\"\n"
          "    with open(path) as f:\n        data = f.read()\n    return data\n\n\n"
          "def parse_args(argv):\n"
          "    return argv[1:]\n\n\ndef main():\n    args = parse_args([])\n"
          "    print(load(args[0]))\n")


@pytest.mark.parametrize(("style", "new", "shape"), [
    # a marker that says what was removed, with code on both sides
    ("removed", BLOCKS.replace("def parse_args(argv):\n    return argv[1:]\n\n\n", ""),
     "parse_args ..."),
    # a marker, a blank line, then the block from its signature
    ("blank_after_marker", BLOCKS.replace("argv[1:]", "argv[2:]"), "\n\ndef parse_args"),
    # the function whole, its doc comment left out
    ("no_doc", BLOCKS.replace("    return data\n", "    return data.strip()\n"),
     "def load(path):\n    with open"),
    # one changed line shown in place under one anchor, between markers
    ("in_place", BLOCKS.replace("data = f.read()", "data = f.read(4096)"),
     "    with open(path) as f:\n        data = f.read(4096)\n"),
    # a one-line change with one anchor and one marker
    ("one_anchor", BLOCKS.replace("data = f.read()", "data = f.read(4096)"), "f.read(4096)"),
])
def test_agent_styles_read_as_meant_give_the_edit(style: str, new: str, shape: str) -> None:
    old = BLOCKS
    if style == "no_doc":  # the comment right above the function, as agents leave it
        old = old.replace('def load(path):\n    """Read the file."""\n',
                          '# Read the file.\ndef load(path):\n')
        new = new.replace('def load(path):\n    """Read the file."""\n',
                          '# Read the file.\ndef load(path):\n')
    snippet = agent_snippet(old, new, "python", style, random.Random(0))
    assert shape in snippet, snippet
    if style == "no_doc":
        assert "# Read the file." not in snippet and not any(
            is_marker(s) for s in snippet.splitlines())
    assert apply_snippet(old, snippet).text == new  # the merge reads it as meant


def test_agent_styles_apply_only_where_they_read_one_way() -> None:
    # a changed line unlike the one it replaces reads as an insertion as well
    unlike = BLOCKS.replace("        data = f.read()\n", "        raise SystemExit(2)\n")
    assert agent_snippet(BLOCKS, unlike, "python", "in_place", random.Random(0)) == ""
    # nothing removed: no removal marker
    assert agent_snippet(BLOCKS, BLOCKS.replace("[1:]", "[2:]"), "python", "removed",
                         random.Random(0)) == ""
    # two changed lines: not a one-line change
    two = BLOCKS.replace("[1:]", "[2:]").replace("f.read()", "f.read(1)")
    assert agent_snippet(BLOCKS, two, "python", "one_anchor", random.Random(0)) == ""


def test_agent_written_snippets_join_the_mix_as_they_are() -> None:
    from fastapply.model.sft_data import SftConfig, agent_examples

    recs = [json.loads(line) for line in DATA.open()]
    for r in recs:
        r["lazy_snippet"] = "# ... existing code ...\n" + r["updated"][-200:]
    got = list(agent_examples(recs, seed=0, config=SftConfig(whole_file_lines=40)))
    assert got and all(ex["style"] == "agent" and ex["whole_file"] for ex in got)
    by_id = {r["id"]: r for r in recs}
    assert all(ex["snippet"] == by_id[ex["id"]]["lazy_snippet"] for ex in got)
    assert all(ex["original"].count("\n") <= 40 for ex in got)
    assert len(got) < len(recs)  # the longer files are left out, not cropped


def test_retries_find_crops_where_the_drawn_agent_style_applies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapply.model import sft_data

    # two one-line changes far apart: no one-line change in the whole file, one in a crop
    old = "".join(f"value_{i} = compute({i})\n" for i in range(120))
    new = old.replace("compute(10)", "compute(10, fast=True)").replace(
        "compute(100)", "compute(100, fast=True)")
    rec = {"id": "r", "repo": "r", "path": "a.py", "language": "python", "original": old,
           "updated": new}
    monkeypatch.setattr(sft_data, "STYLES", {"one_anchor": 1.0})
    whole = sft_data.SftConfig(whole_file_chance=1.0)
    assert [ex["style"] for ex in examples([rec], seed=0, config=whole)] == ["lazy"]
    tried = list(examples([rec], seed=0, config=sft_data.SftConfig(whole_file_chance=1.0,
                                                                   retries=6)))
    assert [ex["style"] for ex in tried] == ["one_anchor"] and not tried[0]["whole_file"]
    assert apply_snippet(tried[0]["original"], tried[0]["snippet"]).text == tried[0]["updated"]
