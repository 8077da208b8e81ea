"""Model work: the pretrained base as a checkpoint, its fine-tuning into an apply model,
and the tiny test model (:mod:`.tiny`) that tests, the demo and the CPU build profile run
when no real model is at hand."""
