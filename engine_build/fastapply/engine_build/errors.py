"""The build pipeline's error types."""

from __future__ import annotations


class BuildError(RuntimeError):
    """A stage cannot run as asked; the message says what was wrong and what to do."""


class ToolMissing(BuildError):
    """A stage needs a tool that is not installed here (``trtllm-build``)."""

    def __init__(self, message: str, command: list[str]) -> None:
        super().__init__(message)
        #: The exact command to run where the tool is installed.
        self.command = command
