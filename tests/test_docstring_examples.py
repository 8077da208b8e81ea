"""The worked examples in the core modules' docstrings are run as tests."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "fastapply.edits", "fastapply.merge", "fastapply.drafting", "fastapply.prompts",
    "fastapply._merge_formats",
    "fastapply.speculate", "fastapply.service", "fastapply.bench.common", "fastapply.bench.merge",
    "fastapply.bench.merge_shapes", "fastapply._merge_lazy", "fastapply._merge_costs",
    "fastapply._merge_lines", "fastapply._merge_locate", "fastapply._merge_align",
    "fastapply._merge_defs", "fastapply._merge_text", "fastapply._merge_guess",
    "fastapply._merge_indent", "fastapply.precision", "fastapply.corpus.languages",
    "fastapply.corpus.snippets", "fastapply.corpus.split", "fastapply.corpus.verify",
    "fastapply.bench.baselines", "fastapply.model_repo", "fastapply.http_guard",
    "fastapply.http_generate", "fastapply.http_checks",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    if name in ("fastapply.drafting", "fastapply.merge", "fastapply.edits"):
        assert result.attempted > 0, f"{name} should carry worked examples"
