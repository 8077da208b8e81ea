"""The worked examples in the core modules' docstrings are run as tests."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "fastapply.merge.edits", "fastapply.merge.syntax", "fastapply.merge.udiff", "fastapply.merge",
    "fastapply.merge.apply", "fastapply.merge.blocks", "fastapply.merge.windows",
    "fastapply.decoding.drafting", "fastapply.decoding.prompts", "fastapply.merge.formats",
    "fastapply.decoding.speculate", "fastapply.service.results", "fastapply.bench.common",
    "fastapply.bench.merge", "fastapply.bench.merge_shapes", "fastapply.merge.lazy",
    "fastapply.merge.costs", "fastapply.merge.lines", "fastapply.merge.locate",
    "fastapply.merge.align", "fastapply.merge.definitions", "fastapply.merge.text",
    "fastapply.merge.guess", "fastapply.merge.indent", "fastapply.merge.precision",
    "fastapply.merge.layout", "fastapply.merge.beside", "fastapply.merge.removal",
    "fastapply.merge.merger", "fastapply.merge.review", "fastapply.merge.segment",
    "fastapply.merge.inputs", "fastapply.merge.doubts", "fastapply.merge.doubts.placing",
    "fastapply.merge.doubts.unmarked", "fastapply.merge.doubts.region",
    "fastapply.merge.doubts.recorded",
    "fastapply.corpus.languages", "fastapply.corpus.snippets", "fastapply.corpus.split",
    "fastapply.corpus.verify", "fastapply.corpus.crop", "fastapply.bench.baselines",
    "fastapply.server.model_repo",
    "fastapply.server.http.guard", "fastapply.server.http.generate", "fastapply.server.http.checks",
    "fastapply.decoding.runtimes.prompt_cache", "fastapply.bench.ttft",
    "fastapply.model.schedule", "fastapply.model.sft_data", "fastapply.bench.quality",
    "fastapply.model.hard_windows", "fastapply.service.windows",
    "fastapply.decoding.witness", "fastapply.service.inputs",
    "fastapply.engine_build.reading", "fastapply.engine_build.verify",
    "fastapply.engine_build.verify_run", "fastapply.merge.edges", "fastapply.service.budget",
    "fastapply.bench.served", "fastapply.judge.syntax", "fastapply.judge.features",
    "fastapply.judge.readings", "fastapply.judge.policy", "fastapply.judge.model",
    "fastapply.service.config", "fastapply.judge.lm", "fastapply.server.openai.api",
    "fastapply.server.openai.errors", "fastapply.server.openai.responses",
    "fastapply.server.openai.tags", "fastapply.server.processes",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    if name in ("fastapply.decoding.drafting", "fastapply.merge", "fastapply.merge.edits"):
        assert result.attempted > 0, f"{name} should carry worked examples"
