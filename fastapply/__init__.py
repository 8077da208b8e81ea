"""fastapply: fast apply with speculative edits.

The core modules (``edits``, ``merge``, ``prompts``, ``drafting``, ``speculate``,
``service``, ``metrics``) import nothing heavy at module top; torch, transformers,
tritonclient, modelopt and tensorrt_llm are imported inside the code that needs them.
"""

__version__ = "0.1.0"
