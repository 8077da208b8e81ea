"""Triton Python-backend model ``fast_apply``: tensors in, fastapply.service, tensors out.

All logic lives in the ``fastapply`` package (:mod:`fastapply.server.triton_model`): this
file cannot be imported outside the server, so it only hands the backend's module to the
library (see TritonPythonModel for the contract).
"""

from __future__ import annotations

from typing import Any

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """The fast_apply model (Python backend, decoupled).

    Tensor contract (all shape [1]):

    ======================  =====  =============================================================
    input ``initial_code``  BYTES  the original file (UTF-8)
    input ``edit_snippet``  BYTES  lazy / SEARCH-REPLACE / udiff / mixed edit (UTF-8)
    input ``instruction``   BYTES  optional: what the edit is for (Morph-style prompts)
    input ``stream``        BOOL   optional: send text deltas as they are produced
    input ``max_tokens``    INT64  optional: output token budget, 1 to the context limit
    output ``merged_code``  BYTES  the merged file; when streaming, one delta per response
    output ``stats``        BYTES  JSON of fastapply.metrics.Stats (last response only)
    ======================  =====  =============================================================

    Bad input gets an ``INVALID_ARG`` error naming the problem, and so does a file the
    model did not finish (max_tokens or the context ran out): never a fragment as
    success. Every request ends with a response flagged
    ``TRITONSERVER_RESPONSE_COMPLETE_FINAL``, also on failure.

    Parameters (config.pbtxt, rendered by fastapply.server.model_repo) map onto ServiceConfig.
    """

    def initialize(self, args: dict[str, Any]) -> None:
        from fastapply.server.triton_model import FastApplyModel

        self.model = FastApplyModel(pb_utils, args)

    def execute(self, requests: list[Any]) -> None:
        return self.model.execute(requests)

    def finalize(self) -> None:
        self.model.finalize()
