"""fastapply.service: the function the Triton model and the CLI both call."""

from __future__ import annotations

import pytest

from fastapply.examples import load_edits
from fastapply.service import FastApplyService, InvalidRequest, ServiceConfig

ORIGINAL = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"


@pytest.fixture(scope="module")
def deterministic() -> FastApplyService:
    return FastApplyService(ServiceConfig())


def test_deterministic_merges_the_shipped_examples(deterministic):  # type: ignore[no-untyped-def]
    for rec in load_edits():
        result = deterministic.apply(rec["original"], rec["search_replace"])
        assert result.merged_code == rec["updated"], rec["id"]
        assert result.stats.finish_reason == "merged"
        assert result.stats.chars_per_s > 0


def test_deterministic_streams_the_whole_file_once(deterministic):  # type: ignore[no-untyped-def]
    rec = load_edits()[0]
    deltas: list[str] = []
    result = deterministic.apply(rec["original"], rec["udiff"], on_delta=deltas.append)
    assert "".join(deltas) == result.merged_code == rec["updated"]


@pytest.mark.parametrize("kwargs, message", [
    ({"initial_code": ORIGINAL, "edit_snippet": "   \n"}, "edit_snippet is empty"),
    ({"initial_code": None, "edit_snippet": "x"}, "initial_code is missing"),
    ({"initial_code": b"\xc3\x28", "edit_snippet": "x"}, "initial_code is not valid UTF-8"),
    ({"initial_code": ORIGINAL, "edit_snippet": "x", "max_tokens": 0}, "max_tokens is 0"),
    ({"initial_code": ORIGINAL,
      "edit_snippet": "<<<<<<< SEARCH\ndef c():\n=======\ndef d():\n>>>>>>> REPLACE\n"},
     "cannot be merged"),
])
def test_bad_input_is_refused_with_a_useful_message(deterministic, kwargs, message):  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidRequest, match=message):
        deterministic.apply(**kwargs)


def test_input_over_the_size_limit_is_refused():
    service = FastApplyService(ServiceConfig(max_input_bytes=100))
    with pytest.raises(InvalidRequest, match=r"over the limit of 100 bytes"):
        service.apply("x" * 200, "y")


def test_config_errors_say_what_to_do():
    with pytest.raises(ValueError, match="unknown runtime 'vllm'"):
        ServiceConfig(runtime="vllm")
    with pytest.raises(ValueError, match="needs a model directory"):
        ServiceConfig(runtime="torch")


# -- torch runtime with the tiny model ------------------------------------------------


@pytest.fixture(scope="module")
def tiny_services():  # type: ignore[no-untyped-def]
    pytest.importorskip("transformers")
    from fastapply.tinymodel import ensure_tiny_model

    path = str(ensure_tiny_model())
    make = lambda k, **kw: FastApplyService(  # noqa: E731
        ServiceConfig(runtime="torch", model_dir=path, max_draft_len=k, device="cpu",
                      dtype="float32", **kw))
    return make(0), make(64), make


def test_speculative_service_equals_plain_greedy(tiny_services):  # type: ignore[no-untyped-def]
    plain, spec, _ = tiny_services
    for rec in load_edits()[:3]:
        want = plain.apply(rec["original"], rec["lazy_snippet"], max_tokens=96)
        deltas: list[str] = []
        got = spec.apply(rec["original"], rec["lazy_snippet"], max_tokens=96,
                         on_delta=deltas.append)
        assert got.merged_code == want.merged_code
        assert "".join(deltas) == got.merged_code
        assert got.stats.completion_tokens == want.stats.completion_tokens
        assert want.stats.forward_passes == want.stats.completion_tokens
        assert got.stats.prompt_tokens == want.stats.prompt_tokens > 0


def test_context_limit_is_refused_not_truncated(tiny_services):  # type: ignore[no-untyped-def]
    _, _, make = tiny_services
    small = make(8, context_limit=64)
    rec = load_edits()[0]
    with pytest.raises(InvalidRequest, match="context limit is 64 tokens"):
        small.apply(rec["original"], rec["lazy_snippet"])


def test_the_client_shares_the_result_type_and_imports_no_torch() -> None:
    import subprocess
    import sys

    code = ("import sys; import fastapply.client.grpc as c; import fastapply.service as s; "
            "assert c.ApplyResult is s.ApplyResult; "
            "heavy = {'torch', 'transformers', 'modelopt'} & set(sys.modules); "
            "assert not heavy, heavy")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
