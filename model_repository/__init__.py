"""The Triton model repository templates (rendered by fastapply.model_repo)."""
