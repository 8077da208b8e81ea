"""The build pipeline: LoRA merge -> FP8 (nvidia-modelopt) -> TRT-LLM checkpoint/engine
-> rendered model repository -> parity check. Installed as ``fastapply.engine_build``;
run it as ``fastapply build`` or ``python -m fastapply.engine_build`` (see docs/build.md).
"""
