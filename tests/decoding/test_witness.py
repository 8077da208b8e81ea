"""Two witnesses: what each policy serves, and a refusal that names where the readings part."""

from __future__ import annotations

import pytest

from fastapply.decoding.witness import (
    DEFAULT_THRESHOLD,
    POLICIES,
    SKIP,
    UNTIL_PARTING,
    Agreement,
    Reading,
    decide,
    deterministic_reading,
    plan,
    readings_of,
)

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
    d = decide("agree_or_exact", wrong, 0.99, det, exact_format=False)
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
    # an unsure merge the model wrote too: served only where the model was sure
    tie = Reading(TRUE, False, "its anchors match equally well at lines 2 and 9")
    assert decide("certain_or_confident_agree", TRUE, 0.9, tie, False, threshold=0.5).serve
    doubt = decide("certain_or_confident_agree", TRUE, 0.4, tie, False, threshold=0.5)
    assert not doubt.serve and "lowest token probability 0.40 < 0.5" in doubt.message
    assert "match equally well at lines 2 and 9" in doubt.message
    assert decide("certain_or_agree", TRUE, 0.4, tie, False, threshold=0.5).serve
    refused = decide("certain_or_confident_agree", TRUE, 0.9, unsure, False)
    assert "deterministic merge refused" in refused.message


def test_an_unfinished_model_answer_is_never_served() -> None:
    det = Reading(TRUE, certain=True)
    for policy in POLICIES:
        d = decide(policy, None, 1.0, det, exact_format=False)
        assert not d.serve or (d.text == TRUE and d.witness.startswith("deterministic"))
    for policy in ("model", "agree_or_exact"):
        assert not decide(policy, None, 1.0, det, exact_format=False).serve
    # a certain SEARCH/REPLACE merge does not need the model's reading
    assert decide("agree_or_exact", None, 1.0, det, exact_format=True).text == TRUE
    with pytest.raises(ValueError, match="unknown policy"):
        decide("vibes", TRUE, 1.0, det, exact_format=False)


# -- what each policy needs of the model, known before it runs -------------------------

#: The deterministic reading's states: refused, unsure, certain (lazy), certain (exact).
READINGS = {
    "refused": Reading(None, False, "no line of it matches"),
    "unsure": Reading(TRUE, False, "two places match"),
    "certain": Reading(TRUE, True),
    "certain_exact": Reading(TRUE, True, exact_format=True),
}
#: policy -> what it needs of the model in each state, in READINGS' order ("serve" and
#: "refuse" are decided without it).
PLANS = {
    "model": ("to_end", "to_end", "to_end", "to_end"),
    "deterministic": ("refuse", "refuse", "serve", "serve"),
    "agree_or_exact": ("refuse", "until_parting", "until_parting", "serve"),
    "certain_or_agree": ("refuse", "until_parting", "serve", "serve"),
    "certain_or_confident_agree": ("refuse", "until_parting", "serve", "serve"),
}


def test_every_policy_has_a_plan_for_every_reading() -> None:
    assert set(PLANS) == set(POLICIES) - {"judge"}
    with pytest.raises(ValueError, match="no witness plan"):  # the judge decides without it
        plan("judge", READINGS["certain"])
    for policy, wanted in PLANS.items():
        for (state, det), want in zip(READINGS.items(), wanted, strict=True):
            p = plan(policy, det)
            got = p.model if p.decided is None else ("serve" if p.decided.serve else "refuse")
            assert got == want, (policy, state)
            assert (p.model == SKIP) == (p.decided is not None)


@pytest.mark.parametrize("policy", [p for p in POLICIES if p != "judge"])  # judge: no plan
def test_a_plan_agrees_with_decide_on_whatever_the_model_writes(policy: str) -> None:
    # What the model could write: nothing complete, the deterministic text, another
    # file; unsure or confident.
    other = TRUE.replace("a + b", "a * b")
    for state, det in READINGS.items():
        p = plan(policy, det)
        outcomes = {(m, prob): decide(policy, m, prob, det, det.exact_format)
                    for m in (None, TRUE, other) for prob in (0.0, 1.0)}
        if p.model == SKIP:  # decided: the model cannot change the answer
            assert p.decided is not None
            for (m, _), d in outcomes.items():
                if m is not None:
                    assert (d.serve, d.text) == (p.decided.serve, p.decided.text), state
            if not p.decided.serve:
                assert "nothing was merged" in p.decided.message
        elif p.model == UNTIL_PARTING:  # served only when the model writes det.text
            for (m, prob), d in outcomes.items():
                sure = policy != "certain_or_confident_agree" or prob >= DEFAULT_THRESHOLD
                assert d.serve == (m is not None and m == det.text and sure), (state, m)
        else:  # the model's output or its probability changes the answer
            assert len({(d.serve, d.text) for (m, _), d in outcomes.items()
                        if m is not None}) > 1, state


def test_agreement_stops_at_the_first_character_no_later_text_can_undo() -> None:
    watch = Agreement("ab\ncd\n")
    assert watch.feed("a") and watch.feed("b\nc")  # a piece may end mid-line
    assert not watch.feed("x\n") and not watch.feed("d\n")  # once parted, parted
    refusal = watch.refusal()
    assert not refusal.serve
    assert "line 2: the model wrote\n  cx\nthe deterministic merge wrote\n  cd" \
        in refusal.message
    longer = Agreement("ab\n")
    assert longer.feed("ab\n") and not longer.feed("more")  # a file that goes on
    assert "line 2: the model wrote\n  more ...\nthe deterministic merge wrote\n  " \
           "(nothing)" in longer.refusal().message


def test_a_rival_reading_the_model_wrote_is_refused_showing_the_readings() -> None:
    from fastapply.decoding.witness import readings_there

    original = "a\nb\nc\nb\nd\n"
    det = deterministic_reading(original, "# ...\nb\nX\n# ...\n")  # a tie: two readings
    assert not det.certain and det.text == "a\nb\nX\nc\nb\nd\n"
    rival = "a\nb\nc\nb\nX\nd\n"
    built = readings_of(det)
    assert built.merge is not None
    assert [c.text for c in built.merge.candidates if c.text != det.text] == [rival]
    chosen = decide("certain_or_agree", det.text, 0.1, built, False)
    assert (chosen.serve, chosen.witness) == (True, "agree")
    other = decide("certain_or_agree", "a\nX\n", 1.0, built, False)
    assert not other.serve and "nothing was merged" in other.message
    # no policy serves the rival (certain_or_agree_any did; it lost, issue 56)
    for policy in POLICIES:
        if policy != "model":
            assert not decide(policy, rival, 1.0, built, False).serve, policy
    # a refusal shows the readings where they differ, the one the model followed first
    shown = readings_there(built, "a\nb\nc\nb\nX")
    assert shown.index("rival (") < shown.index("chosen:")
    assert readings_there(deterministic_reading(original, "# ...\nd\nY\n")) == ""


def test_only_the_policies_a_measurement_shows_winning_are_offered() -> None:
    # docs/model.md, "What gets served", names each with its figure; the six that lost
    # everywhere (agree, confident, agree_or_confident, model_unless_certain_disagree,
    # certain_or_agree_any, certain_unless_confident_disagree) went in issue 56
    from fastapply.decoding.witness import POLICY_CHOICES

    assert POLICY_CHOICES == ("auto", "model", "deterministic", "agree_or_exact",
                              "certain_or_agree", "certain_or_confident_agree", "judge")
    with pytest.raises(ValueError, match="unknown policy 'confident'; use one of model, "):
        decide("confident", TRUE, 1.0, READINGS["unsure"], exact_format=False)
