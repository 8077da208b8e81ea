"""A marker whose words say its lines were removed (merge/syntax.py:says_removed).

Issue 38 saw a Markdown marker stand for a 37-line block the commit deleted: the merge read
the marker as markers are read (keep the lines it stands for), the model's window agreed,
and the file was served with the block still in it (that snippet is not here; what its
marker said is not known). One way a marker stands for deleted lines is in its words,
which coding agents write (``<!-- ... Legacy section removed ... -->``, ``// ... deleted the
old handler ...``): it says lines go, but not which ones, and keeping them is the one reading
it rules out. So such a snippet is refused at once, naming the line and what to send
instead, under every runtime and policy; words inside names (``removedItems``) and markers
that keep lines are read as before."""

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


@pytest.mark.parametrize(("original", "snippet", "line", "word"), [
    (README, SNIPPET, 5, "removed"),
    (CODE, "def a():\n    return 1\n\n\n# ... deleted old() ...\n\n\ndef b():\n"
     "    return 3\n# ... existing code ...\n", 5, "deleted"),
    (CODE, "def a():\n    return 1\n    # ... remove old() ...\ndef b():\n    return 3\n"
     "# ...\n", 3, "removed"),
    (CODE, "// ... DROPPED the legacy paths ...\ndef b():\n    return 3\n# ...\n", 1,
     "dropped"),
])
def test_a_marker_that_says_lines_were_removed_is_refused(original: str, snippet: str,
                                                          line: int, word: str) -> None:
    with pytest.raises(EditError, match=rf"snippet line {line}: the marker .* says lines "
                                        rf"were {word}, .* does not show which lines to "
                                        rf"remove; nothing was merged: .*SEARCH/REPLACE"):
        apply_snippet(original, snippet)


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


def test_the_served_default_refuses_it_naming_the_marker() -> None:
    """The tiny random model in the place of the default's, under the default policy
    (certain_or_agree): refused before any answer, with the merge's reason; and the
    deterministic runtime refuses it as a bad request, with the same reason."""
    from fastapply.model.tiny import ensure_tiny_model
    from fastapply.service import FastApplyService, InvalidRequest, Refused, ServiceConfig

    served = FastApplyService(ServiceConfig(
        runtime="torch", model_dir=str(ensure_tiny_model()), device="cpu", dtype="float32",
        **{**TINY_SERVING, "policy": "certain_or_agree"}))
    with pytest.raises(Refused, match=r"the deterministic merge refused it \(snippet line 5: "
                                      r"the marker '<!-- \.\.\. Legacy section removed"):
        served.apply(README, SNIPPET)
    plain = FastApplyService(ServiceConfig(runtime="deterministic"))
    with pytest.raises(InvalidRequest, match=r"cannot be merged: snippet line 5: the marker"):
        plain.apply(README, SNIPPET)
