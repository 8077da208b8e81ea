"""``python -m fastapply.bench decoders``: the three decoders side by side, on a real
(tiny) model; the JSON line has the shape the issue asks for and speculation is lossless."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fastapply.bench.__main__ import main
from fastapply.bench.decoders import PASS_LENGTHS

FIGURES = ("tokens_per_s_after_first", "ttft_ms", "total_ms", "chars_per_s", "forward_passes",
           "tokens_per_step", "fraction_of_bound", "identical_to_greedy")


@pytest.mark.parametrize("kv_cache", ["dynamic", "static"])
def test_decoders_json_shape_and_lossless(tmp_path: Path, tiny_model_dir: Path, kv_cache: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Both caches (static: the GPU command's smoke check on the CPU, no graphs)."""
    original = "".join(f"value_{i} = {i}\n" for i in range(12))
    updated = original.replace("value_5 = 5\n", "value_5 = 50\n")
    snippet = "# ... existing code ...\nvalue_5 = 50\n# ... existing code ...\n"
    data = tmp_path / "edits.jsonl"
    data.write_text(json.dumps({"id": "x", "original": original, "updated": updated,
                                "lazy_snippet": snippet}) + "\n")
    assert main(["decoders", "--data", str(data), "--model", str(tiny_model_dir),
                 "--prompt-lookup-tokens", "4,8", "--margin", "4", "--kv-cache", kv_cache,
                 "--context-limit", "1024"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    assert set(result["decoders"]) == {"greedy", "prompt_lookup", "speculative_edits"}
    for name, figures in result["decoders"].items():
        assert set(FIGURES) <= set(figures), name
        assert figures["identical_to_greedy"] is True, name  # float32: lossless
        assert figures["forward_passes"] >= 1
        assert 0 < figures["fraction_of_bound"] <= 1.0
    assert result["decoders"]["greedy"]["tokens_per_step"] == 1.0
    # every prompt lookup setting is reported; the headline is the fastest after the first
    settings = result["prompt_lookup_settings"]
    assert len(settings) == 2
    best = max(settings.values(), key=lambda f: f["tokens_per_s_after_first"])
    assert result["decoders"]["prompt_lookup"]["tokens_per_s_after_first"] == \
        best["tokens_per_s_after_first"]
    assert set(result["pass_cost_ms"]) == {str(n) for n in PASS_LENGTHS}  # 1 + K
    assert (result["kv_cache"], result["device_name"], result["cuda_graphs"]) == \
        (kv_cache, "cpu", [])
