"""The Triton model repository templates (rendered by fastapply.server.model_repo)."""
