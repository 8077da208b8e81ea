"""Model work: the pretrained base as a checkpoint (:mod:`.base`), the embedded default
model (:mod:`.default`: base + the shipped LoRA adapter), its fine-tuning (:mod:`.sft_data`,
:mod:`.train`), and the tiny test model (:mod:`.tiny`) that tests and the CPU build
profile run when no real model is needed."""
