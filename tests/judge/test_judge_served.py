"""The judge's policy in the Triton model: a real tritonserver, real gRPC traffic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fastapply.examples import load_edits
from fastapply.judge import Judge

pytestmark = pytest.mark.server

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def judge_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from conftest import start_server

    server = start_server(tmp_path_factory, runtime="deterministic", policy="judge")
    yield server
    server.stop()


def test_the_triton_model_serves_what_the_judge_accepts_and_refuses_the_rest(
        judge_server: Any) -> None:
    from fastapply.client import FastApplyClient, FastApplyError

    judge = Judge.load()
    served = refused = 0
    with FastApplyClient(judge_server.grpc_url) as client:
        for rec in load_edits(DATA / "multirepo-valid-sample.jsonl")[:20]:
            verdict = judge.judge(rec["original"], rec["lazy_snippet"])
            try:
                result = client.apply(rec["original"], rec["lazy_snippet"])
            except FastApplyError as exc:
                assert verdict.served is None, str(exc)
                refused += 1
                continue
            assert verdict.served is not None
            assert result.merged_code == verdict.readings.readings[verdict.served].text
            assert result.stats.witness in ("judge", "judge-certain")
            served += 1
        # an unsure tie: refused, naming the judge's scores and where the readings part
        with pytest.raises(FastApplyError, match="the judge accepts") as exc_info:
            client.apply("a\nb\nc\nb\nd\n", "# ...\nb\nX\n# ...\n")
        assert "differ at" in str(exc_info.value)
        # and the server keeps serving exact blocks
        rec = load_edits()[0]
        assert client.apply(rec["original"], rec["search_replace"]).merged_code == rec["updated"]
    assert served and refused
