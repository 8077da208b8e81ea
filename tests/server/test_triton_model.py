"""The fast_apply model's library (fastapply.server.triton_model) without a server.

``triton_python_backend_utils`` exists only inside Triton's stub, so these tests hand the
model a stand-in module with the names it uses; tests/server/test_serving*.py run the
same code inside a real tritonserver.
"""

from __future__ import annotations

import json
import threading
import types
from typing import Any

import numpy as np
import pytest

from fastapply.merge import apply_snippet
from fastapply.server.triton_model import FastApplyModel, Responder

FINAL = 1
#: Hang guard only: every wait below ends on an event long before this.
HANG_S = 30.0


class _Error:
    INVALID_ARG, CANCELLED, UNAVAILABLE, INTERNAL = "INVALID_ARG", "CANCELLED", "UNAVAILABLE", ""

    def __init__(self, message: str, code: str = "") -> None:
        self.message, self.code = message, code


class _Metric:
    def __init__(self) -> None:
        self.value = 0.0

    def increment(self, value: float) -> None:
        self.value += value

    def set(self, value: float) -> None:
        self.value = value


class _Family:
    COUNTER, GAUGE = "counter", "gauge"
    made: dict[str, _Metric]  # every Metric made, by name and labels (one dict per stand-in)

    def __init__(self, name: str, description: str, kind: str) -> None:
        self.name = name

    def Metric(self, labels: dict[str, str]) -> _Metric:  # Triton's name for it
        metric = _Metric()
        key = self.name + "".join(f"{{{k}={v}}}" for k, v in labels.items())
        self.made[key] = metric
        return metric


def _standin() -> Any:
    """The parts of triton_python_backend_utils the model uses."""
    pb = types.SimpleNamespace()
    pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL = FINAL
    pb.TritonError = _Error
    pb.TritonModelException = type("TritonModelException", (Exception,), {})
    pb.MetricFamily = type("MetricFamily", (_Family,), {"made": {}})
    pb.Logger = types.SimpleNamespace(log_info=lambda msg: None, log_error=lambda msg: None)
    pb.Tensor = lambda name, array: (name, array)
    pb.InferenceResponse = lambda output_tensors=(), error=None: types.SimpleNamespace(
        outputs={name: array[0].decode() for name, array in output_tensors}, error=error)
    pb.get_input_tensor_by_name = lambda request, name: request.inputs.get(name)
    pb.using_decoupled_model_transaction_policy = (
        lambda config: config.get("model_transaction_policy", {}).get("decoupled", False))
    return pb


class _Sender:
    def __init__(self) -> None:
        self.responses: list[tuple[Any, int]] = []
        self.done = threading.Event()  # set by the final response
        self.cancelled = False

    def send(self, response: Any, flags: int = 0) -> None:
        self.responses.append((response, flags))
        if flags & FINAL:
            self.done.set()

    def is_cancelled(self) -> bool:
        return self.cancelled


class _Tensor:
    def __init__(self, value: Any) -> None:
        self.array = np.array([value], dtype=np.object_ if isinstance(value, bytes) else None)

    def as_numpy(self) -> Any:
        return self.array


class _Request:
    def __init__(self, **inputs: Any) -> None:
        self.inputs = {name: _Tensor(value) for name, value in inputs.items()}
        self.sender = _Sender()

    def get_response_sender(self) -> _Sender:
        return self.sender


def _args(decoupled: bool = True) -> dict[str, Any]:
    config = {"model_transaction_policy": {"decoupled": decoupled},
              "parameters": {"runtime": {"string_value": "deterministic"},
                             "worker_threads": {"string_value": "2"}}}
    return {"model_config": json.dumps(config)}


@pytest.fixture
def model() -> Any:
    pb = _standin()
    made = FastApplyModel(pb, _args())
    yield made, pb
    made.finalize()


ORIGINAL = "a = 1\nb = 2\nc = 3\n"
SNIPPET = "a = 1\nb = 20\n# ... existing code ...\n"


def _answer(request: _Request) -> list[tuple[Any, int]]:
    assert request.sender.done.wait(HANG_S), "no final response"
    return request.sender.responses


def test_a_merge_is_answered_once_with_the_file_and_its_stats(model: Any) -> None:
    made, pb = model
    request = _Request(initial_code=ORIGINAL.encode(), edit_snippet=SNIPPET.encode())
    made.execute([request])
    [(response, flags)] = _answer(request)
    assert flags == FINAL and response.error is None
    assert response.outputs["merged_code"] == apply_snippet(ORIGINAL, SNIPPET).text
    assert json.loads(response.outputs["stats"])["finish_reason"] == "merged"
    made.finalize()  # flushes the metrics
    assert pb.MetricFamily.made["fastapply_requests_total{outcome=success}"].value == 1


def test_a_streamed_merge_sends_deltas_then_a_final_empty_text(model: Any) -> None:
    made, _ = model
    request = _Request(initial_code=ORIGINAL.encode(), edit_snippet=SNIPPET.encode(),
                       stream=np.bool_(True))
    made.execute([request])
    responses = _answer(request)
    assert [flags for _, flags in responses][-1] == FINAL
    text = "".join(r.outputs["merged_code"] for r, _ in responses)
    assert text == apply_snippet(ORIGINAL, SNIPPET).text
    assert responses[-1][0].outputs["merged_code"] == ""


def test_bad_input_is_an_invalid_arg_error_naming_it(model: Any) -> None:
    made, pb = model
    request = _Request(edit_snippet=SNIPPET.encode())  # no initial_code
    made.execute([request])
    [(response, flags)] = _answer(request)
    assert flags == FINAL and response.error.code == pb.TritonError.INVALID_ARG
    assert "initial_code" in response.error.message


def test_a_request_after_the_drain_began_is_refused_unavailable(model: Any) -> None:
    made, pb = model
    made.draining.set()
    request = _Request(initial_code=ORIGINAL.encode(), edit_snippet=SNIPPET.encode())
    made.execute([request])
    [(response, flags)] = _answer(request)
    assert flags == FINAL and response.error.code == pb.TritonError.UNAVAILABLE


def test_a_model_that_is_not_decoupled_is_refused_at_load() -> None:
    pb = _standin()
    with pytest.raises(pb.TritonModelException, match="must be decoupled"):
        FastApplyModel(pb, _args(decoupled=False))


def test_the_responder_drops_what_comes_after_the_final_response() -> None:
    sender = _Sender()
    responder = Responder(sender, FINAL)
    assert not responder.is_cancelled()
    assert responder.send("last", flags=FINAL)
    assert responder.is_cancelled()  # a worker still generating stops early
    assert not responder.send("late")
    assert sender.responses == [("last", FINAL)]
