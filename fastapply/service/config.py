"""How the service is set up: :class:`ServiceConfig` (the Triton model's parameters and
``fastapply serve``'s options map onto it) and the runtime it names (:func:`make_runtime`)."""

from __future__ import annotations

from dataclasses import dataclass

from fastapply.decoding.runtimes import KV_CACHES, PROB_RUNTIMES, RUNTIMES, Runtime
from fastapply.decoding.runtimes.prompt_cache import (
    DEFAULT_PROMPT_CACHE_ENTRIES,
    DEFAULT_PROMPT_CACHE_MB,
)
from fastapply.decoding.witness import (
    DEFAULT_POLICY,
    DEFAULT_THRESHOLD,
    NEEDS_PROBS,
    POLICIES,
)

#: Largest accepted input (initial_code + edit_snippet + instruction), in bytes.
DEFAULT_MAX_INPUT_BYTES = 4 * 1024 * 1024
#: What the model may be asked about an unsure merge (ServiceConfig.witness). ``file``
#: by default: with the shipped model, windows agreed with a wrong reading on 9 of 107
#: unsure validation edits, the whole file on none (docs/benchmarks.md, "The windowed
#: witness"), and judged by the policy like a whole file (the chosen reading only, over
#: the threshold) still on 5 of 82 (issue 46); ``window`` reads only windows, for a model
#: whose agreement there is evidence.
WITNESSES = ("window", "file")
DEFAULT_WITNESS = "file"
#: Seconds a request may spend, from its start, while the model witnesses an unsure merge
#: (ServiceConfig.witness_budget_s). Whole files of 201-1,000 lines took up to 27 s on
#: the 2-core CPU, where the witness served none of them exactly (docs/benchmarks.md,
#: "The witness's time budget"); 8 s leaves room under 10 s for the merge and one pass.
DEFAULT_WITNESS_BUDGET_S = 8.0
#: K of the TensorRT-LLM runtimes when none is configured (the profiles' engines allow 64).
TRTLLM_DEFAULT_DRAFT_LEN = 64


def witness_policy(reports_probs: bool) -> str:
    """The best policy that asks the model to witness an unsure merge (the default until
    issue 55): ``certain_or_confident_agree`` where the runtime reports the probability of
    each token it writes, else ``certain_or_agree``.

    On the validation split and agent-written snippets the model's agreements with a wrong
    unsure merge had the lowest token probabilities (0.48-0.53, five of them in three
    measurements) and none of the 60 exact ones fell under 0.55, so the threshold (0.5)
    refuses wrong agreements and no right one seen (docs/benchmarks.md, issue 46); the
    TensorRT-LLM runtimes report no probabilities.

    >>> witness_policy(True), witness_policy(False)
    ('certain_or_confident_agree', 'certain_or_agree')
    """
    return "certain_or_confident_agree" if reports_probs else "certain_or_agree"


def resolve_policy(policy: str, reports_probs: bool) -> str:
    """The policy ``auto`` stands for: ``judge`` on every runtime (the merge's readings
    scored by the judge; the model is not run). On agent-dev it served 69 exact of 132
    (0.523) and 1 wrong (a certain merge), where the model's witness
    (:func:`witness_policy`) served 61 and the same 1 wrong, at a p95 of 0.3 s a request
    against 8.1 s (docs/benchmarks.md, issue 55).

    >>> resolve_policy("auto", True), resolve_policy("auto", False), resolve_policy("model", True)
    ('judge', 'judge', 'model')
    """
    del reports_probs  # the judge needs nothing of the runtime
    return "judge" if policy == "auto" else policy


@dataclass(frozen=True)
class ServiceConfig:
    """How the service is set up (the Triton model's parameters map onto these)."""

    #: deterministic | torch | trtllm-engine | trtllm-pytorch
    runtime: str = "deterministic"
    #: Hugging Face model directory (torch, trtllm-pytorch) or tokenizer source.
    model_dir: str | None = None
    #: TensorRT-LLM engine directory (trtllm-engine).
    engine_dir: str | None = None
    #: Tokenizer directory when it is not ``model_dir``.
    tokenizer_dir: str | None = None
    #: kortix | morph (see fastapply.decoding.prompts).
    prompt_format: str = "kortix"
    #: Largest draft per verification step (K); 0 disables speculation. None: the
    #: runtime's own (torch: chosen from the pass cost it measures at load, see
    #: :func:`fastapply.decoding.runtimes.torch.choose_draft_len`; TensorRT-LLM: 64, and
    #: never more than the engine was built for).
    max_draft_len: int | None = None
    #: Context limit in tokens (None: the model's own).
    context_limit: int | None = None
    #: cpu | cuda (None: cuda when present).
    device: str | None = None
    #: float32 | bfloat16 | float16 (None: float32 on CPU, bfloat16 on CUDA).
    dtype: str | None = None
    #: MiB of recent prompts' keys and values the torch runtime keeps for prompts that
    #: start the same way (the same file edited again); 0 turns prompt reuse off.
    prompt_cache_mb: int = DEFAULT_PROMPT_CACHE_MB
    #: Most prompts the torch runtime's prompt cache keeps.
    prompt_cache_entries: int = DEFAULT_PROMPT_CACHE_ENTRIES
    #: The torch runtime's KV cache: dynamic (a cache per request), static (one cache
    #: sized to the context, requests one at a time, passes replayed from CUDA graphs on
    #: CUDA) or auto: static on CUDA (its graph path ran on an H100, identical to greedy,
    #: docs/benchmarks.md "GPU"), dynamic on a CPU.
    kv_cache: str = "auto"
    #: Largest accepted input in bytes.
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
    #: What a model runtime serves, given the model's output and the deterministic
    #: merge (see fastapply.decoding.witness.POLICIES).
    policy: str = DEFAULT_POLICY
    #: The lowest token probability the confidence-based policies accept.
    threshold: float = DEFAULT_THRESHOLD
    #: What the model is asked where a policy serves an unsure merge only as the model
    #: reads it: ``window`` (only windows around the merge's unsure places, compared with
    #: the merge's rival readings there: fastapply.service.windows) or ``file`` (the whole
    #: file, for a strong model a user brings).
    witness: str = DEFAULT_WITNESS
    #: Seconds a request may spend, from its start, while the model witnesses an unsure
    #: merge (policies that serve only a reading the model agrees with); past it the edit
    #: is refused, naming the unsure place, instead of read to its end. 0: no budget. The
    #: policy that serves the model's own output (``model``) has none.
    witness_budget_s: float = DEFAULT_WITNESS_BUDGET_S
    #: The judge of policy ``judge``: a directory with ``judge.txt`` and ``card.json``
    #: (None: the one the package ships, fastapply/judge/weights).
    judge_dir: str | None = None

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ValueError(f"unknown runtime {self.runtime!r}; use one of: "
                             f"{', '.join(RUNTIMES)}")
        if self.runtime != "deterministic" and not (self.model_dir or self.engine_dir):
            raise ValueError(f"runtime {self.runtime!r} needs a model directory "
                             f"(model_dir / --model)")
        if self.max_draft_len is not None and self.max_draft_len < 0:
            raise ValueError("max_draft_len must be >= 0")
        if self.prompt_cache_mb < 0 or self.prompt_cache_entries < 0:
            raise ValueError("prompt_cache_mb and prompt_cache_entries must be >= 0 "
                             "(0 turns prompt reuse off)")
        if self.kv_cache not in KV_CACHES:
            raise ValueError(f"unknown kv_cache {self.kv_cache!r}; use one of: "
                             f"{', '.join(KV_CACHES)}")
        if self.witness not in WITNESSES:
            raise ValueError(f"unknown witness {self.witness!r}; use one of: "
                             f"{', '.join(WITNESSES)}")
        if not self.witness_budget_s >= 0:  # (NaN too)
            raise ValueError(f"witness_budget_s must be a number of seconds >= 0 (0: no "
                             f"budget), got {self.witness_budget_s!r}")
        if self.policy == "auto":  # frozen: set once, as the runtime's own default
            object.__setattr__(self, "policy", resolve_policy(
                self.policy, self.runtime in PROB_RUNTIMES))
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r}; use one of: auto, "
                             f"{', '.join(POLICIES)}")
        if self.policy in NEEDS_PROBS and self.runtime != "deterministic" and \
                self.runtime not in PROB_RUNTIMES:
            # without them every answer would count as sure (probability 1.0)
            raise ValueError(f"policy {self.policy!r} decides by the model's token "
                             f"probabilities, which runtime {self.runtime!r} does not "
                             f"report (it returns token ids only); use a policy that does "
                             f"not (certain_or_agree, the default there) or the torch "
                             f"runtime")



def make_runtime(config: ServiceConfig) -> Runtime:
    """Instantiate the configured model runtime."""
    if config.runtime == "torch":
        from fastapply.decoding.runtimes.torch import TorchRuntime

        assert config.model_dir is not None
        return TorchRuntime(config.model_dir, device=config.device, dtype=config.dtype,
                            context_limit=config.context_limit,
                            max_draft_len=config.max_draft_len,
                            prompt_cache_mb=config.prompt_cache_mb,
                            prompt_cache_entries=config.prompt_cache_entries,
                            kv_cache=config.kv_cache)
    trtllm_k = TRTLLM_DEFAULT_DRAFT_LEN if config.max_draft_len is None else config.max_draft_len
    if config.runtime == "trtllm-engine":
        from fastapply.decoding.runtimes.trtllm_engine import TrtllmEngineRuntime

        return TrtllmEngineRuntime(config.engine_dir or config.model_dir,
                                   max_draft_len=trtllm_k,
                                   context_limit=config.context_limit)
    if config.runtime == "trtllm-pytorch":
        from fastapply.decoding.runtimes.trtllm_pytorch import TrtllmPytorchRuntime

        return TrtllmPytorchRuntime(config.model_dir, max_draft_len=trtllm_k,
                                    context_limit=config.context_limit)
    raise ValueError(f"runtime {config.runtime!r} has no model")
