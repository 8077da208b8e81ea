"""A marker whose words say its lines were removed (merge/syntax.py:says_removed).

Agents write ``// ... (QuoteAllFields and QuoteNoFields removed) ...`` where lines went, with
code on both sides: the lines beside it follow each other, a removal shown by adjacency, as
in any lazy snippet (issue 45; until then such a snippet was refused). The merge reads it so
and is unsure, naming the marker and the lines it removed; its rival reading removes only
the declarations the marker names. At the snippet's end nothing follows it (the rest of the
file goes), at its start nothing comes before it. Beside another marker it shows no place,
and is refused, naming the line. Words inside names (``removedItems``) and markers that keep
lines are read as before."""

from __future__ import annotations

import pytest
from conftest import TINY_SERVING

from fastapply.merge import EditError, apply_snippet

README = ("# Title\n\nIntro.\n\n## Install\n\npip install x\n\n## Legacy\n\n"
          + "".join(f"old line {i}\n" for i in range(30)) + "\n## Usage\n\nrun it\n")
SNIPPET = ("## Install\n\npip install x\n\n<!-- ... Legacy section removed ... -->\n\n"
           "## Usage\n\nrun it now\n")
CODE = ("def a():\n    return 1\n\n\ndef old():\n    return 0\n\n\ndef b():\n    return 2\n"
        + "".join(f"x{i} = {i}\n" for i in range(20)))


LEGACY = "".join(f"old line {i}\n" for i in range(30))


@pytest.mark.parametrize(("original", "snippet", "merged", "line"), [
    (README, SNIPPET, README.replace(f"## Legacy\n\n{LEGACY}\n", "").replace(
        "run it\n", "run it now\n"), 5),
    (CODE, "def a():\n    return 1\n\n\n# ... deleted old() ...\n\n\ndef b():\n"
     "    return 3\n# ... existing code ...\n",
     CODE.replace("def old():\n    return 0\n\n\n", "").replace("return 2", "return 3"), 5),
    (CODE, "def a():\n    return 1\n    # ... remove old() ...\ndef b():\n    return 3\n"
     "# ...\n", CODE.replace("\n\ndef old():\n    return 0\n\n\n", "").replace(
         "return 2", "return 3"), 3),
])
def test_a_removal_marker_between_code_reads_as_adjacency_and_is_unsure(
        original: str, snippet: str, merged: str, line: int) -> None:
    result = apply_snippet(original, snippet)
    assert result.text == merged
    assert any(f"the marker at snippet line {line} says lines were removed, so the lines "
               f"on its two sides were read as following each other" in u.message
               for u in result.uncertain)


def test_the_rival_removes_only_what_the_marker_names() -> None:
    original = ("def a():\n    return 1\n\n\ndef old():\n    return 0\n\n\ndef keep():\n"
                "    return 5\n\n\ndef b():\n    return 2\n" + LEGACY)
    snippet = ("def a():\n    return 1\n\n\n# ... (old() is removed) ...\ndef b():\n"
               "    return 3\n# ...\n")
    result = apply_snippet(original, snippet).with_readings()
    named = original.replace("def old():\n    return 0\n\n\n", "").replace("return 2",
                                                                           "return 3")
    assert result.text != named  # the chosen reading removes keep() too
    assert named in [c.text for c in result.candidates]


def test_a_removal_marker_at_the_snippets_end_removes_the_rest() -> None:
    original = "__all__ = [\n    'a',\n]\n\n_patch()\n"
    snippet = "__all__ = [\n    'a',\n    'b',\n]\n# ... (_patch() removed) ...\n"
    result = apply_snippet(original, snippet)
    assert result.text == "__all__ = [\n    'a',\n    'b',\n]\n"
    assert result.uncertain


def test_a_removal_marker_beside_another_marker_is_refused_naming_it() -> None:
    snippet = "def a():\n    return 1\n# ... existing code ...\n# ... old() removed ...\n"
    with pytest.raises(EditError, match=r"snippet line 4: the marker '# \.\.\. old\(\) "
                                        r"removed \.\.\.' says lines were removed, but no "
                                        r"line of code stands on one side of it"):
        apply_snippet(CODE, snippet)


@pytest.mark.parametrize("marker", [
    "# ... existing code ...", "# ... removedItems and the rest unchanged ...",
    "# ... remove_user() and friends ...", "# ...",
])
def test_markers_that_keep_lines_still_do(marker: str) -> None:
    snippet = f"def a():\n    return 1\n{marker}\ndef b():\n    return 3\n# ...\n"
    merged = apply_snippet(CODE, snippet)
    assert not merged.uncertain
    assert merged.text == CODE.replace("return 2", "return 3")


def test_such_a_comment_that_is_the_files_own_code_is_read_as_code() -> None:
    original = "a = 1\n# ... removed in 2.0 ...\nb = 2\n" + "".join(f"x{i} = {i}\n"
                                                               for i in range(10))
    snippet = "a = 1\n# ... removed in 2.0 ...\nb = 3\n# ...\n"
    assert apply_snippet(original, snippet).text == original.replace("b = 2", "b = 3")


BESIDE = "## Install\n\npip install x\n\n<!-- ... -->\n<!-- ... Legacy section removed ... -->\n"


def test_the_served_default_refuses_it_naming_the_marker() -> None:
    """The tiny random model in the place of the default's, under the default policy
    (certain_or_agree): a removal marker beside another marker is refused before any
    answer, with the merge's reason; the deterministic runtime refuses it as a bad
    request, with the same reason."""
    from fastapply.model.tiny import ensure_tiny_model
    from fastapply.service import FastApplyService, InvalidRequest, Refused, ServiceConfig

    served = FastApplyService(ServiceConfig(
        runtime="torch", model_dir=str(ensure_tiny_model()), device="cpu", dtype="float32",
        **{**TINY_SERVING, "policy": "certain_or_agree"}))
    with pytest.raises(Refused, match=r"the deterministic merge refused it \(snippet line 6: "
                                      r"the marker '<!-- \.\.\. Legacy section removed"):
        served.apply(README, BESIDE)
    plain = FastApplyService(ServiceConfig(runtime="deterministic"))
    with pytest.raises(InvalidRequest, match=r"cannot be merged: snippet line 6: the marker"):
        plain.apply(README, BESIDE)
