"""The build pipeline on CPU: tiny-cpu end to end, a tiny Llama's TRT-LLM checkpoint,
the missing trtllm-build, and bad input refused before any heavy work."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("peft")
pytest.importorskip("modelopt")

from fastapply.engine_build import cli, layout
from fastapply.engine_build.errors import BuildError
from fastapply.engine_build.profile import load_profile, profile_names
from fastapply.engine_build.verify import compare_edit, parity
from fastapply.metrics import Stats
from fastapply.model.tiny import ensure_tiny_model


def build(*args: str) -> int:
    return cli.main(list(args))


@pytest.fixture(scope="module")
def tiny() -> Path:
    return ensure_tiny_model()


@pytest.fixture(scope="module")
def adapter(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fastapply.engine_build.lora import make_random_adapter

    return make_random_adapter(tiny, tmp_path_factory.mktemp("adapter"), rank=4, seed=1)


@pytest.fixture(scope="module")
def tiny_build(adapter: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`fastapply build all --config tiny-cpu` with the test's own adapter."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("build")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = build("all", "--config", "tiny-cpu", "--out", str(root),
                       "--adapter", str(adapter))
    out = root / layout.CURRENT  # the published build
    report = json.loads((out / layout.REPORT).read_text())
    return {"status": status, "root": root, "out": out, "report": report,
            "stdout": stdout.getvalue()}


# -- profiles -------------------------------------------------------------------------------


def test_shipped_profiles_load() -> None:
    assert set(profile_names()) >= {"qwen2.5-coder-1.5b", "qwen2.5-coder-7b", "llama-3.1-8b",
                                    "tiny-cpu"}
    for name in profile_names():
        p = load_profile(name)
        assert p.max_input_len < p.max_seq_len and p.max_draft_len > 0
    assert load_profile("llama-3.1-8b").runtime == "trtllm-engine"
    assert load_profile("qwen2.5-coder-7b").runtime == "trtllm-pytorch"


def test_the_default_profile_is_the_embedded_default_models_whichever_base_it_has() -> None:
    """``build all --config default`` builds the profile named after the default's base, with
    the shipped adapter; a base's name as ``model_dir`` is built from its wheels."""
    from fastapply.model.bases import BASES, DEFAULT_BASE

    profile = load_profile("default")
    assert profile.name == DEFAULT_BASE and profile.adapter_dir == "default"
    assert profile.model_dir in BASES


def test_profile_errors(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match=r"unknown profile 'nope'.*tiny-cpu"):
        load_profile("nope")
    bad = tmp_path / "p.yaml"
    bad.write_text("name: x\nmax_draft: 3\n")
    with pytest.raises(BuildError, match=r"max_draft: unknown field"):
        load_profile(str(bad))


def test_profile_type_errors_name_the_file_and_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text('name: x\nmax_batch_size: "two"\nverify:\n  bogus: 1\n')
    with pytest.raises(BuildError) as err:
        load_profile(str(bad))
    message = str(err.value)
    assert message.startswith(f"{bad}: ")
    assert "max_batch_size: " in message and "'two'" in message
    assert "verify.bogus: unknown field" in message
    # a number written as a string is the number (the old code compared "2" < 1 and crashed)
    quoted = tmp_path / "q.yaml"
    quoted.write_text('name: x\nmax_batch_size: "2"\ncalibration:\n  num_samples: "3"\n')
    profile = load_profile(str(quoted))
    assert (profile.max_batch_size, profile.calibration.num_samples) == (2, 3)


# -- tiny-cpu end to end ----------------------------------------------------------------------


@pytest.mark.slow
def test_all_runs_every_stage_with_progress(tiny_build: dict[str, Any]) -> None:
    assert tiny_build["status"] == 0, tiny_build["stdout"]
    lines = tiny_build["stdout"].splitlines()
    stages = tiny_build["report"]["stages"]
    expected = {"merge-lora": "done", "quantize": "done", "engine": "skipped",
                "render": "done", "verify": "done"}
    assert list(stages) == list(expected)
    at = -1
    for i, (stage, status) in enumerate(expected.items(), 1):
        assert stages[stage]["status"] == status, stages[stage]
        # a start line, then a finish line carrying the report's own time and status
        start = lines.index(f"[{i}/5] {stage} ...")
        done = f"[{i}/5] {stage} {stages[stage]['seconds']:.1f} s: {status}"
        finish = next(n for n, line in enumerate(lines) if line.startswith(done))
        assert at < start < finish
        at = finish
    out = tiny_build["out"]
    for artefact in ("merged/config.json", "quantized/hf/hf_quant_config.json",
                     "model_repository/fast_apply/config.pbtxt", "logs/quantize.log"):
        assert (out / artefact).is_file(), artefact


@pytest.mark.slow
def test_merge_applies_the_adapter(tiny_build: dict[str, Any], tiny: Path,
                                   adapter: Path) -> None:
    import torch
    from safetensors.torch import load_file

    merged_dir = tiny_build["out"] / "merged"
    assert (merged_dir / "tokenizer.json").is_file()
    merged = load_file(merged_dir / "model.safetensors")
    base = load_file(tiny / "model.safetensors")
    lora = load_file(adapter / "adapter_model.safetensors")
    name = "model.layers.0.self_attn.q_proj"
    a = lora[f"base_model.model.{name}.lora_A.weight"]
    b = lora[f"base_model.model.{name}.lora_B.weight"]
    expected = base[f"{name}.weight"] + 2.0 * (b @ a)  # lora_alpha / r = 2
    got = merged[f"{name}.weight"]
    assert got.dtype == torch.bfloat16
    assert not torch.allclose(got.float(), base[f"{name}.weight"], atol=1e-3)
    assert torch.allclose(got.float(), expected, atol=2e-2, rtol=1e-2)


@pytest.mark.slow
def test_quantize_exports_fp8_weights_and_kv(tiny_build: dict[str, Any]) -> None:
    import torch
    from safetensors.torch import load_file

    hf = tiny_build["out"] / "quantized" / "hf"
    quant = json.loads((hf / "hf_quant_config.json").read_text())["quantization"]
    assert quant["quant_algo"] == "FP8" and quant["kv_cache_quant_algo"] == "FP8"
    tensors = load_file(hf / "model.safetensors")
    attn = "model.layers.0.self_attn"
    assert tensors[f"{attn}.q_proj.weight"].dtype == torch.float8_e4m3fn
    assert f"{attn}.q_proj.weight_scale" in tensors
    assert float(tensors[f"{attn}.q_proj.input_scale"]) > 0  # calibrated activation scale
    assert f"{attn}.k_proj.k_scale" in tensors and f"{attn}.v_proj.v_scale" in tensors
    entry = tiny_build["report"]["stages"]["quantize"]
    assert entry["calibration_prompts"] == 4 and "trtllm_checkpoint_dir" not in entry
    assert "trtllm-pytorch" in entry["message"]  # Qwen2: pointed to the PyTorch backend


@pytest.mark.slow
def test_engine_stage_reports_the_command(tiny_build: dict[str, Any]) -> None:
    entry = tiny_build["report"]["stages"]["engine"]
    assert entry["status"] == "skipped"
    assert "--speculative_decoding_mode draft_tokens_external" in entry["command"]
    assert "--max_draft_len 16" in entry["command"] and "--max_seq_len 8192" in entry["command"]
    assert "-trtllm-python-py3" in entry["trtllm_build"]


@pytest.mark.slow
def test_render_fills_every_placeholder(tiny_build: dict[str, Any]) -> None:
    config = (tiny_build["out"] / "model_repository" / "fast_apply" / "config.pbtxt").read_text()
    assert "${" not in config
    assert 'string_value: "torch"' in config
    assert str((tiny_build["out"] / "merged").resolve()) in config


@pytest.mark.slow
def test_verify_writes_parity_figures(tiny_build: dict[str, Any]) -> None:
    report = tiny_build["report"]
    figures = report["parity"]
    assert figures["edits"] == 4 and figures["candidate"] == "fakequant"
    assert figures["identical"] + len(figures["diverged"]) == 4
    assert figures["held_out_disjoint"]
    profile = load_profile("tiny-cpu")
    assert profile.verify.min_logits_cosine >= 0.8  # a check that can fail (see below)
    logits = figures["logits"]
    assert logits["positions"] > 0 and 0.0 < logits["top1_agreement"] <= 1.0
    assert logits["logits_cosine_mean"] >= profile.verify.min_logits_cosine
    assert report["stages"]["verify"]["status"] == "done"
    for row in report["stages"]["verify"]["parity"]["per_edit"]:
        if "first_divergence" in row:
            assert not row["identical"]
            div = row["first_divergence"]
            assert div["token_index"] >= 0 and div["reference_text"] != div["quantized_text"]


@pytest.mark.slow
def test_parity_check_fails_when_fp8_scales_are_broken(tiny: Path) -> None:
    from modelopt.torch.quantization.nn import TensorQuantizer
    from transformers import AutoTokenizer

    from fastapply.engine_build.quantize import merge_sequences
    from fastapply.engine_build.verify import fakequant_pair, logits_agreement
    from fastapply.engine_build.verify_run import judge
    from fastapply.examples import load_edits

    verify = load_profile("tiny-cpu").verify
    tok = AutoTokenizer.from_pretrained(tiny)
    recs = load_edits()
    calib = merge_sequences(tok, "kortix", recs[:4], 2048)
    held = merge_sequences(tok, "kortix", recs[4:8], 2048)
    reference, candidate = fakequant_pair(tiny, calib, 8192, fold_weights=False)

    def problems() -> list[str]:
        logits = logits_agreement(reference.model, candidate.model, held)
        return judge({**agreeing_figures(4), "logits": logits}, verify)

    assert problems() == []
    # what verify runs: the weights fake-quantized once, the same logits bit for bit
    import torch

    _, folded = fakequant_pair(tiny, calib, 8192)
    with torch.inference_mode():
        x = torch.tensor([held[0]])  # [1, S]
        assert torch.equal(folded.model(input_ids=x).logits, candidate.model(input_ids=x).logits)
    broken = 0
    for name, module in candidate.model.named_modules():
        if (isinstance(module, TensorQuantizer) and name.endswith("weight_quantizer")
                and module.amax is not None):
            module.amax = module.amax / 100  # scales 100x too small: weights saturate
            broken += 1
    assert broken > 0
    found = problems()
    assert len(found) == 1 and "logits cosine" in found[0]


def test_verify_stage_compares_the_profile_candidate(tmp_path: Path, tiny: Path) -> None:
    import importlib.util

    from fastapply.engine_build import stages

    if importlib.util.find_spec("tensorrt_llm"):
        pytest.skip("TensorRT-LLM is installed here")
    profile = dataclasses.replace(load_profile("tiny-cpu"), model_dir=str(tiny),
                                  adapter_dir=None)
    profile.verify = dataclasses.replace(profile.verify, candidate="trtllm-engine")
    build_ = stages.preflight(profile, tmp_path)
    with pytest.raises(BuildError, match="verify candidate trtllm-engine: TensorRT-LLM is not"):
        stages.run_stage(build_, "verify")
    entry = json.loads(build_.report_path.read_text())["stages"]["verify"]
    assert entry["status"] == "failed" and "tritonserver" in entry["error"]


@pytest.mark.slow
def test_verify_fails_under_the_profile_threshold_and_names_the_edits(
        tiny_build: dict[str, Any], adapter: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The tiny model's FP8 outputs diverge from its float32 ones (chaotic logits), so a
    profile asking for half of them identical fails the build, naming each edit."""
    import yaml

    from fastapply.examples import VALIDATION_EDITS, load_edits

    text = (Path(layout.__file__).parent / "profiles" / "tiny-cpu.yaml").read_text()
    profile = yaml.safe_load(text)  # same name and inputs: the same build folder
    profile["verify"].update(data="validation", num_edits=3, max_tokens=8, min_identical=0.5,
                             logits_edits=1)
    path = tmp_path / "tiny-cpu.yaml"
    path.write_text(yaml.safe_dump(profile))
    capsys.readouterr()
    status = build("verify", "--config", str(path), "--out", str(tiny_build["root"]),
                   "--adapter", str(adapter))
    err = capsys.readouterr().err
    assert status == 1
    entry = json.loads((tiny_build["out"] / layout.REPORT).read_text())["stages"]["verify"]
    assert entry["status"] == "failed" and entry["parity"]["min_identical"] == 0.5
    assert entry["parity"]["edits"] == 3 and entry["parity"]["identical"] < 2
    assert "under verify.min_identical 0.5" in entry["error"] and entry["error"] in err
    for rec in load_edits(VALIDATION_EDITS, limit=3):
        row = next(r for r in entry["parity"]["per_edit"] if r["id"] == rec["id"])
        if not row["identical"]:  # named, with where it diverged (or that it was cut)
            assert f"{rec['id']} at line " in err or f"{rec['id']}: identical for" in err


def test_parity_figures_from_mergers(tiny: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    replace = "<<<<<<< SEARCH\nb = 2\n=======\nb = 3\n>>>>>>> REPLACE\n"
    recs = [{"id": "kortix-edit", "original": "a = 1\nb = 2\n", "snippet": replace,
             "updated": "a = 1\nb = 3\n"},
            {"id": "morph-edit", "format": "morph", "original": "b = 2\n", "snippet": replace,
             "updated": "b = 3\n"}]

    class WritesTheMerge:
        """A runtime that answers with its request's first source (the deterministic
        merge, in the record's format) and a stop token; optionally one token off at 3."""

        context_limit = 4096
        eos_token_id: int | list[int] | None = end

        def __init__(self, off_at_3: bool = False) -> None:
            self.off_at_3 = off_at_3

        def generate(self, request: Any, on_tokens: Any = None) -> Any:
            from fastapply.decoding.speculate import Generation

            out = request.sources[0] + [end]
            if self.off_at_3:
                out = out[:3] + [out[3] + 1] + out[4:]
            budget = request.max_new_tokens
            return Generation(out[:budget], Stats(finish_reason="stop" if len(out) <= budget
                                                  else "length"))

    same, off_at_3 = WritesTheMerge(), WritesTheMerge(off_at_3=True)
    figures = parity(recs, tok, "kortix", same, same, 64, 16)
    assert (figures["identical_share"], figures["exact_rate_reference"]) == (1.0, 1.0)
    assert [r["format"] for r in figures["per_edit"]] == ["kortix", "morph"]  # the record's
    figures = parity(recs, tok, "kortix", same, off_at_3, 64, 16)
    assert figures["identical"] == 0 and figures["exact_drop"] == 1.0
    assert [r["first_divergence"]["token_index"] for r in figures["per_edit"]] == [3, 3]
    cut = parity(recs, tok, "kortix", same, same, 4, 16)  # same tokens, but neither ended
    assert cut["identical"] == cut["exact_reference"] == 0 and cut["cut"] == 2
    assert cut["per_edit"][0]["cut"] == ["reference", "quantized"]
    # a budget of the true answer + a margin: the budget ends where the answer should
    answer = len(tok.encode("<updated-code>a = 1\nb = 3\n</updated-code>"))
    fits = parity(recs, tok, "kortix", same, same, 64, 16, answer_margin_tokens=1)
    assert fits["per_edit"][0]["budget_tokens"] == answer + 2 and fits["identical"] == 2
    assert fits["exact_reference"] == 2
    assert compare_edit(tok, [1, 2], [1, 2, 3])["first_divergence"]["token_index"] == 2


def agreeing_figures(n: int) -> dict[str, Any]:
    """Figures of ``n`` edits on which both models wrote the same, exact file."""
    rows = [{"id": f"edit-{k}", "identical": True, "cut": [], "reference_exact": True,
             "quantized_exact": True, "reference_tokens": 50, "quantized_tokens": 50}
            for k in range(n)]
    return {"edits": n, "identical": n, "identical_share": 1.0, "exact_reference": n,
            "exact_quantized": n, "exact_rate_reference": 1.0, "exact_rate_quantized": 1.0,
            "per_edit": rows}


def diverge(figures: dict[str, Any], k: int, lose_exact: bool = False) -> None:
    """Make edit ``k`` of ``figures`` diverge at token 7 (and lose its exact file)."""
    row = figures["per_edit"][k]
    row.update(identical=False, first_divergence={
        "token_index": 7, "reference_text": "x = 1\n", "quantized_text": "x = 2\n"})
    figures["identical"] -= 1
    figures["identical_share"] = figures["identical"] / figures["edits"]
    if lose_exact:
        row["quantized_exact"] = False
        figures["exact_quantized"] -= 1
        figures["exact_rate_quantized"] = figures["exact_quantized"] / figures["edits"]


def test_judge_counts_edits_and_names_those_that_diverged() -> None:
    from fastapply.engine_build.profile import Verify
    from fastapply.engine_build.verify_run import NAMED_IN_MESSAGE, judge

    verify = Verify(min_identical=0.95, max_exact_drop=0.01, min_exact_kept=0.97)
    figures = agreeing_figures(120)
    for k in range(6):  # 114 of 120 identical: 0.95 exactly, which passes
        diverge(figures, k, lose_exact=k == 0)  # one edit of 120 lost: under a point
    assert judge(figures, verify) == []
    diverge(figures, 6, lose_exact=True)  # 113 identical, two exact files lost
    exact, identical = judge(figures, verify)  # what a user sees first
    assert identical.startswith("identical outputs 113/120 (0.942) are under "
                                "verify.min_identical 0.95; the 7 edits that diverged: "
                                "edit-0 at token 7: reference 'x = 1\\n' / quantized "
                                "'x = 2\\n'; edit-1 at token 7")
    assert "edit-6 at token 7" in identical  # 7 named in the message
    assert "exact rate 0.983 quantized against 1.000 reference: 1.7 points lost" in exact
    assert "exact on the reference only: edit-0 at token 7" in exact and "edit-6" in exact
    assert "edit-1 " not in exact
    for k in range(7, 20):
        diverge(figures, k)
    many = judge(figures, verify)[-1]  # the identical outputs' sentence comes last
    assert f"edit-{NAMED_IN_MESSAGE - 1} at" in many and f"edit-{NAMED_IN_MESSAGE} at" not in many
    assert many.endswith(f"and {20 - NAMED_IN_MESSAGE} more (all in build-report.json)")
    # an edit cut at the budget is not identical even where the tokens so far agree
    cut = agreeing_figures(2)
    cut["per_edit"][1].update(identical=False, cut=["reference", "quantized"])
    cut["identical"], cut["identical_share"] = 1, 0.5
    assert judge(cut, Verify(min_identical=0.95))[0].endswith(
        "edit-1: identical for 50 tokens, then both were cut at the budget")


def test_the_fp8_check_of_the_default_model_reads_its_thresholds_and_data() -> None:
    from fastapply.engine_build.stages import resolve_verify_data, split_records
    from fastapply.examples import VALIDATION_EDITS, load_edits

    profile = load_profile("smollm2-135m")
    verify = profile.verify
    # what a user sees decides; identical outputs are reported, not gated
    assert (verify.max_exact_drop, verify.min_exact_kept, verify.min_identical) == (
        0.01, 0.97, 0.0)
    assert verify.min_logits_cosine > 0 and verify.num_edits >= 100
    assert resolve_verify_data(verify.data) == VALIDATION_EDITS
    calib, held, disjoint = split_records(profile)
    assert len(held) == verify.num_edits and disjoint
    # held-out edits of repositories neither trained on nor calibrated with, licence named
    assert len({r["repo"] for r in held}) == 14
    assert not {r["repo"] for r in held} & {r["repo"] for r in calib}
    assert all(r["license"] and r["snippet"] and r["format"] for r in load_edits(VALIDATION_EDITS))


def test_a_renamed_threshold_is_named_with_its_new_name(tmp_path: Path) -> None:
    old = tmp_path / "old.yaml"
    old.write_text("name: x\nverify:\n  min_exact_match: 0.9\n")
    with pytest.raises(BuildError, match=r"verify.min_exact_match: renamed; write "
                                         r"verify.min_identical"):
        load_profile(str(old))


# -- keyed builds and the published pointer ----------------------------------------------------


@pytest.mark.slow
def test_a_rebuild_never_overwrites_the_published_build(
        tiny_build: dict[str, Any], adapter: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fastapply.engine_build import stages

    root, published = tiny_build["root"], tiny_build["out"].resolve()
    assert published.parent == root / layout.BUILDS and (root / layout.CURRENT).is_symlink()
    assert not Path(str((root / layout.CURRENT).readlink())).is_absolute()  # survives a move
    weights = published / layout.QUANTIZED_HF / "model.safetensors"
    before = weights.stat().st_mtime_ns
    args = ["--config", "tiny-cpu", "--out", str(root), "--adapter", str(adapter)]
    capsys.readouterr()
    assert build("all", *args) == 0  # same inputs: already built, nothing rewritten
    assert "nothing to do" in capsys.readouterr().out
    assert build("render", *args) == 1  # a stage that writes refuses the published build
    assert "is the published build" in capsys.readouterr().err
    assert weights.stat().st_mtime_ns == before
    # other inputs get another folder; verify thresholds are not inputs of the artefacts
    profile = dataclasses.replace(load_profile("tiny-cpu"), adapter_dir=str(adapter))
    assert stages.preflight(profile, root).out == published
    other = stages.preflight(dataclasses.replace(profile, max_seq_len=4097 * 2), root)
    assert other.out != published and other.out.parent == published.parent
    profile.verify = dataclasses.replace(profile.verify, min_identical=0.5)
    assert stages.preflight(profile, root).out == published
    # publishing switches the pointer in one rename and leaves the old build as it was
    layout.publish(root, other.out)
    assert layout.published(root) == other.out.resolve()
    assert weights.stat().st_mtime_ns == before
    layout.publish(root, published)
    assert layout.published(root) == published


def test_the_chart_uses_the_layout_and_runtime_names_the_code_defines() -> None:
    import re

    import yaml

    chart = Path(__file__).resolve().parents[2] / "helm" / "fastapply"
    helpers = (chart / "templates" / "_helpers.tpl").read_text()
    match = re.search(r'define "fastapply.layout" -}}\n(\{.*\})\n', helpers)
    assert match, "the chart's fastapply.layout definition is missing"
    assert json.loads(match.group(1)) == {
        "current": layout.CURRENT, "merged": layout.MERGED, "quantizedHf": layout.QUANTIZED_HF,
        "engine": layout.ENGINE, "modelRepository": layout.MODEL_REPOSITORY}
    serve = yaml.safe_load((chart / "values.yaml").read_text())["serve"]
    assert (serve["enginePath"], serve["tokenizerPath"]) == (layout.ENGINE, layout.QUANTIZED_HF)
    # and the runtime names are fastapply.decoding.runtimes' own
    from fastapply.decoding.runtimes import RUNTIMES

    schema = json.loads((chart / "values.schema.json").read_text())
    assert sorted(schema["properties"]["serve"]["properties"]["runtime"]["enum"]) == sorted(
        RUNTIMES)


# -- Llama: TRT-LLM checkpoint, then the engine stage without trtllm-build ---------------------


@pytest.mark.slow
def test_llama_gets_a_trtllm_checkpoint_and_the_engine_command(
        tiny_llama: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("trtllm-build"):
        pytest.skip("trtllm-build is installed here")
    common = ["--config", "tiny-cpu", "--out", str(tmp_path), "--model", str(tiny_llama),
              "--no-adapter"]
    assert build("quantize", *common) == 0
    (keyed,) = (tmp_path / layout.BUILDS).iterdir()
    ckpt = keyed / layout.TRTLLM_CHECKPOINT
    config = json.loads((ckpt / "config.json").read_text())
    assert config["quantization"]["quant_algo"] == "FP8"
    assert config["quantization"]["kv_cache_quant_algo"] == "FP8"
    assert config["mapping"]["tp_size"] == 1 and (ckpt / "rank0.safetensors").is_file()
    assert (keyed / layout.QUANTIZED_HF / "hf_quant_config.json").is_file()
    capsys.readouterr()
    assert build("engine", *common) == 3
    err = capsys.readouterr().err
    assert "trtllm-build is not installed" in err
    assert "nvcr.io/nvidia/tritonserver:" in err and "-trtllm-python-py3" in err
    assert f"trtllm-build --checkpoint_dir {ckpt} --output_dir {keyed / layout.ENGINE}" in err
    assert not (tmp_path / layout.CURRENT).exists()  # an unfinished build is not published
    assert "--use_fp8_context_fmha enable" in err


@pytest.mark.slow
def test_without_trtllm_build_all_still_runs_the_fp8_check(
        tiny_llama: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A profile served by trtllm-engine, built where trtllm-build is missing: the engine
    stage stops, what needs the engine is not run, the FP8 check is, nothing is published."""
    import yaml

    if shutil.which("trtllm-build"):
        pytest.skip("trtllm-build is installed here")
    text = (Path(layout.__file__).parent / "profiles" / "tiny-cpu.yaml").read_text()
    profile = {**yaml.safe_load(text), "runtime": "trtllm-engine"}
    profile["calibration"]["num_samples"] = 2
    profile["verify"].update(num_edits=2, max_tokens=4, logits_edits=1)
    path = tmp_path / "engine.yaml"
    path.write_text(yaml.safe_dump(profile))
    status = build("all", "--config", str(path), "--out", str(tmp_path / "out"),
                   "--model", str(tiny_llama), "--no-adapter")
    out = capsys.readouterr().out
    assert status == 3, out
    assert "[4/5] render not run: it needs the engine" in out
    assert "[5/5] verify ..." in out and "identical 0/2 (0.000, reported)" in out
    (keyed,) = (tmp_path / "out" / layout.BUILDS).iterdir()
    stages = json.loads((keyed / layout.REPORT).read_text())["stages"]
    assert {k: v["status"] for k, v in stages.items()} == {
        "merge-lora": "skipped", "quantize": "done", "engine": "failed", "verify": "done"}
    assert "trtllm-build --checkpoint_dir" in stages["engine"]["command"]
    assert not (tmp_path / "out" / layout.CURRENT).exists()


# -- bad input: refused before any heavy work ----------------------------------------------------


@pytest.fixture
def refused(capsys: pytest.CaptureFixture[str],
            monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """`build all` with bad input: exit status 2, and no stage (no model load) started."""
    from fastapply.engine_build import stages

    started: list[str] = []
    real_run_stage = stages.run_stage

    def run_stage(build_: Any, stage: str, func: Any = None) -> dict[str, Any]:
        started.append(stage)
        return real_run_stage(build_, stage, func)

    monkeypatch.setattr(stages, "run_stage", run_stage)

    def run(out: Path, *args: str) -> str:
        status = build("all", "--config", "tiny-cpu", "--out", str(out), *args)
        err = capsys.readouterr().err
        assert status == 2, err
        assert started == [], f"stages {started} started before the input was refused"
        assert not (out / layout.BUILDS).exists() and not (out / layout.CURRENT).exists()
        return err

    return run


def test_missing_model_dir(tmp_path: Path, refused: Callable[..., str]) -> None:
    err = refused(tmp_path / "out", "--model", str(tmp_path / "no-such-model"))
    assert "no-such-model does not exist" in err and "--model" in err


def test_adapter_for_another_base_model(tmp_path: Path, tiny: Path,
                                        refused: Callable[..., str]) -> None:
    import torch
    from safetensors.torch import save_file

    other = tmp_path / "other-adapter"
    other.mkdir()
    (other / "adapter_config.json").write_text(json.dumps(
        {"base_model_name_or_path": "Qwen/Qwen2.5-Coder-7B", "peft_type": "LORA", "r": 4}))
    prefix = "base_model.model.model.layers.0.self_attn.q_proj"
    save_file({f"{prefix}.lora_A.weight": torch.zeros(4, 3584),
               f"{prefix}.lora_B.weight": torch.zeros(3584, 4)},
              str(other / "adapter_model.safetensors"))
    err = refused(tmp_path / "out", "--model", str(tiny), "--adapter", str(other))
    assert "does not fit the model" in err and "Qwen/Qwen2.5-Coder-7B" in err
    assert "in_features 3584, the model's q_proj has 64" in err


def test_calibration_file_not_jsonl(tmp_path: Path, tiny: Path,
                                    refused: Callable[..., str]) -> None:
    calib = tmp_path / "calib.jsonl"
    calib.write_text("original,updated\nx,y\n")
    err = refused(tmp_path / "out", "--model", str(tiny), "--calibration", str(calib))
    assert f"{calib}:1: not JSON" in err and "one JSON object per line" in err


def test_the_default_model_profile_reads_the_base_and_the_shipped_adapter() -> None:
    from fastapply.engine_build.profile import load_profile
    from fastapply.engine_build.stages import resolve_adapter_dir
    from fastapply.model.default import ADAPTER_DIR

    profile = load_profile("smollm2-135m")
    assert profile.model_dir == "smollm2-135m" and profile.runtime == "trtllm-engine"
    assert profile.max_seq_len == 8192  # the model's context
    assert resolve_adapter_dir(profile.adapter_dir) == str(ADAPTER_DIR)
    assert resolve_adapter_dir("/x/adapter") == "/x/adapter"


def test_the_1_5b_profile_ships_an_adapter_shaped_for_its_base() -> None:
    """``qwen2.5-coder-1.5b`` names the adapter shipped for it (the one that passed its FP8
    check, with that check's recipe and data); the build's own adapter check passes it against
    Qwen2.5-Coder-1.5B's published config, and it has a LoRA pair for each of the 7
    projections of all 28 blocks. A shipped name without weights is refused, saying what to do."""
    from fastapply.engine_build.checks import check_adapter, safetensors_shapes
    from fastapply.engine_build.stages import resolve_adapter_dir

    profile = load_profile("qwen2.5-coder-1.5b")
    assert profile.quantization == "fp8-weights" and profile.verify.data == "validation"
    shipped = resolve_adapter_dir(profile.adapter_dir)
    assert shipped is not None
    path = Path(shipped)
    assert path.parent.name == "candidates" and (path / "README.md").is_file()
    qwen_1_5b = {"hidden_size": 1536, "num_attention_heads": 12, "num_key_value_heads": 2,
                 "intermediate_size": 8960, "num_hidden_layers": 28}
    config = check_adapter(path, qwen_1_5b, "qwen2.5-coder-1.5b")
    assert config["peft_type"] == "LORA" and config["r"] == 16
    assert len(safetensors_shapes(path / "adapter_model.safetensors")) == 28 * 7 * 2
    with pytest.raises(BuildError, match="does not fit the model"):  # the check can fail
        check_adapter(path, {**qwen_1_5b, "hidden_size": 896}, "qwen2.5-coder-0.5b")
    with pytest.raises(BuildError, match=r"holds no adapter_model\.safetensors.*--adapter DIR"):
        resolve_adapter_dir("shipped:qwen2.5-coder-7b")
