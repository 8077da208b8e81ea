"""The thin gRPC client of a fastapply server (Triton's gRPC stream, through the protobuf
stubs that tritonclient ships).

>>> client = FastApplyClient("127.0.0.1:8001")               # doctest: +SKIP
>>> result = client.apply(original, snippet)                  # doctest: +SKIP
>>> result.merged_code, result.stats.tokens_per_s             # doctest: +SKIP
>>> for delta in (stream := client.stream(original, snippet)):  # doctest: +SKIP
...     print(delta, end="")
>>> stream.stats                                              # doctest: +SKIP
"""

from fastapply.client.grpc import (
    ApplyResult,
    FastApplyClient,
    FastApplyError,
    FastApplyTimeout,
    Stream,
)

__all__ = ["ApplyResult", "FastApplyClient", "FastApplyError", "FastApplyTimeout", "Stream"]
