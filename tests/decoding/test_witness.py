"""Two witnesses: what each policy serves, and a refusal that names where the readings part."""

from __future__ import annotations

import pytest

from fastapply.decoding.witness import POLICIES, Reading, decide, deterministic_reading

ORIGINAL = "def f():\n    a = 1\n    b = 2\n    return a + b\n"
TRUE = ORIGINAL.replace("b = 2", "b = 3")
SR = "<<<<<<< SEARCH\n    b = 2\n=======\n    b = 3\n>>>>>>> REPLACE\n"


def test_agreeing_readings_are_served_by_every_policy() -> None:
    det = deterministic_reading(ORIGINAL, SR)
    assert det == Reading(TRUE, certain=True, error="", exact_format=True)
    for policy in POLICIES:
        d = decide(policy, TRUE, 0.99, det, exact_format=True)
        assert d.serve and d.text == TRUE, policy


def test_a_disagreement_is_refused_with_both_versions_of_the_region() -> None:
    det = Reading(TRUE, certain=True)
    wrong = TRUE.replace("    return a + b\n", "    return a - b\n")
    d = decide("agree", wrong, 0.99, det, exact_format=False)
    assert not d.serve
    assert "line 4" in d.message and "return a - b" in d.message
    assert "return a + b" in d.message


def test_exact_formats_fall_back_to_a_certain_deterministic_merge() -> None:
    det = Reading(TRUE, certain=True)
    d = decide("agree_or_exact", "garbage\n", 0.2, det, exact_format=True)
    assert d.serve and d.text == TRUE and d.witness == "deterministic-exact"
    assert not decide("agree_or_exact", "garbage\n", 0.2, det, exact_format=False).serve


def test_confidence_policies_follow_the_threshold() -> None:
    unsure = Reading(None, False, "no line of it matches")
    assert decide("agree_or_confident", TRUE, 0.9, unsure, False, threshold=0.5).serve
    assert not decide("agree_or_confident", TRUE, 0.4, unsure, False, threshold=0.5).serve
    assert not decide("confident", TRUE, 0.4, unsure, False, threshold=0.5).serve
    refused = decide("agree", TRUE, 0.9, unsure, False)
    assert "deterministic merge refused" in refused.message


def test_an_unfinished_model_answer_is_never_served() -> None:
    det = Reading(TRUE, certain=True)
    for policy in POLICIES:
        d = decide(policy, None, 1.0, det, exact_format=False)
        assert not d.serve or (d.text == TRUE and d.witness.startswith("deterministic"))
    for policy in ("model", "agree", "agree_or_exact", "confident"):
        assert not decide(policy, None, 1.0, det, exact_format=False).serve
    # a certain SEARCH/REPLACE merge does not need the model's reading
    assert decide("agree_or_exact", None, 1.0, det, exact_format=True).text == TRUE
    with pytest.raises(ValueError, match="unknown policy"):
        decide("vibes", TRUE, 1.0, det, exact_format=False)
