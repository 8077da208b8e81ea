"""The lazy pipeline's table (``fastapply.merge.doubts.PIPELINE``): every doubt is listed
once, shows itself in its own docstring example, names what it reports, and is retired
by removing its entry."""

from __future__ import annotations

import doctest

import pytest

from fastapply.merge import apply_snippet, doubts
from fastapply.merge.apply import doubts_raised
from fastapply.merge.segment import Uncertainty


def test_every_step_is_listed_once_with_a_docstring() -> None:
    names = [step.name for step in doubts.PIPELINE]
    assert len(names) == len(set(names))
    assert all((step.run.__doc__ or "").strip() for step in doubts.PIPELINE)
    assert all(step.doubt for step in doubts.PIPELINE if step.rival)


@pytest.mark.parametrize("step", doubts.DOUBTS, ids=lambda step: step.name)
def test_every_doubt_has_an_example_that_raises_it(step: doubts.Step) -> None:
    examples = doctest.DocTestParser().get_examples(step.run.__doc__ or "")
    merged = [e for e in examples if "doubts_raised(" in e.source]
    if merged:  # a whole merge: the doubt is among those the chosen reading raised
        assert any(repr(step.name) in e.want for e in merged)
    else:  # the step run on a placed segment: what it reports is shown
        assert any("uncertain" in e.source for e in examples), step.name


def test_a_doubts_findings_carry_its_name_and_compare_without_it() -> None:
    result = apply_snippet("x = 1\ny = 2\nx = 1\n",
                           "# ... existing code ...\nx = 1\nz = 3\n# ... existing code ...\n")
    (found,) = result.uncertain
    assert found.doubt == "tie"
    assert found == Uncertainty(found.line, found.message, found.local)
    assert "doubt" not in repr(found)


def test_a_doubt_is_retired_by_removing_its_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    original, snippet = "a\nb\nc\nd\n", "# ... existing code ...\nb\nc\n# ... existing code ...\n"
    assert doubts_raised(original, snippet) == ["idle"]
    monkeypatch.setattr(doubts, "PIPELINE",
                        tuple(step for step in doubts.PIPELINE if step.name != "idle"))
    assert doubts_raised(original, snippet) == []
    assert apply_snippet(original, snippet).text == original
