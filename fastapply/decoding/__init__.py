"""Decoding with speculative edits: prompt formats (:mod:`.prompts`), the drafter that
proposes the next tokens from the deterministic merge, the original file and the snippet
(:mod:`.drafting`), the verification loop that accepts what the model agrees with
(:mod:`.speculate`), and the model runtimes behind one protocol (:mod:`.runtimes`: torch,
TensorRT-LLM engine, TensorRT-LLM PyTorch backend)."""
