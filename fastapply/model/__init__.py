"""The model: the pretrained base as a checkpoint, fine-tuning, the tiny test model."""
