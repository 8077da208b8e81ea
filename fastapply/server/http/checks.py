"""The checks :mod:`fastapply.server.http.guard` runs on a generate request's body, as pure
functions: :func:`parse_body` (JSON object, once, in linear time) and
:func:`check_request` (each input's JSON type and range, from the model's metadata).
Every client error is a :class:`BadRequest` whose message names the field, what was sent
and what to send; Triton 2.51's own parsing answers these with 500.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Inclusive value range of each integer tensor type.
INT_RANGES = {f"{kind}INT{bits}": (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if kind == ""
              else (0, 2 ** bits - 1) for kind in ("", "U") for bits in (8, 16, 32, 64)}
FLOAT_TYPES = ("FP16", "FP32", "FP64", "BF16")


class BadRequest(ValueError):
    """A client error in a generate request; the message says what to send instead."""


# -- the checks (pure functions) ----------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen = dict(pairs)
    if len(seen) != len(pairs):
        names = [name for name, _ in pairs]
        twice = next(name for name in names if names.count(name) > 1)
        raise BadRequest(f"the key {json.dumps(twice)} appears more than once in a JSON "
                         f"object of the request body; send each key once")
    return seen


def parse_body(body: bytes) -> dict[str, Any]:
    """The body of a generate request as a JSON object, or BadRequest saying what is wrong.

    >>> parse_body(b'{"initial_code": "x = 1\\\\n", "stream": true}')
    {'initial_code': 'x = 1\\n', 'stream': True}
    >>> parse_body(b'')
    Traceback (most recent call last):
    ...
    fastapply.server.http.checks.BadRequest: the request body is empty; send a JSON object ...
    >>> parse_body(b'{"stream": tru}')
    Traceback (most recent call last):
    ...
    fastapply.server.http.checks.BadRequest: the request body is not valid JSON (Expecting ...
    >>> parse_body(b'["x"]')
    Traceback (most recent call last):
    ...
    fastapply.server.http.checks.BadRequest: the request body is a JSON array; send a JSON ...
    >>> parse_body(b'--x7\\r\\nContent-Disposition: form-data; name="a"\\r\\n\\r\\n1\\r\\n')
    Traceback (most recent call last):
    ...
    fastapply.server.http.checks.BadRequest: the request body is multipart/form-data ...

    Work is linear in the body's size: a body that does not start with ``{`` is refused
    before it is parsed, and a parse stops at the first error. Bytes that are not UTF-8
    are left to the model, which names the input they are in.
    """
    text = body.decode("utf-8", "surrogateescape")
    start = text.lstrip(" \t\r\n")[:1]
    send = ("send a JSON object whose keys are the model's inputs, e.g. "
            '{"initial_code": "...", "edit_snippet": "..."}')
    if not start:
        raise BadRequest(f"the request body is empty; {send}")
    if _MULTIPART.match(text.lstrip(" \t\r\n")):
        raise BadRequest("the request body is multipart/form-data (a form upload, such as "
                         "curl -F sends), which the generate endpoint does not read; send the "
                         "inputs as one JSON object with Content-Type: application/json "
                         "(curl --json '...' or -d '...'), e.g. "
                         '{"initial_code": "...", "edit_snippet": "..."}')
    if start != "{":
        kind = {"[": "a JSON array", '"': "a JSON string", "n": "null", "t": "true",
                "f": "false"}.get(start, "a JSON number" if start in "-0123456789" else "")
        what = f"is {kind}" if kind else "is not a JSON object"
        raise BadRequest(f"the request body {what}; {send}")
    try:
        request = json.loads(text, object_pairs_hook=_no_duplicates,
                             parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise BadRequest(f"the request body is not valid JSON ({exc.msg} at line {exc.lineno} "
                         f"column {exc.colno}); {send}") from None
    except BadRequest:
        raise
    except RecursionError:
        raise BadRequest(f"the request body nests JSON too deeply; {send}") from None
    except ValueError as exc:  # an integer of more than sys.get_int_max_str_digits()
        raise BadRequest(f"the request body holds a number of more digits than any input "
                         f"takes ({str(exc).split(':')[0]}); send smaller numbers") from None
    assert isinstance(request, dict)  # it starts with "{"
    where = lone_surrogate(request, body)
    if where is not None:
        raise BadRequest(f"the request body holds a lone UTF-16 surrogate {where}, which is "
                         f"no character (Triton's parser answers 500); escape a character "
                         f"outside the BMP as a pair (\\ud83d\\ude00) or send it as UTF-8")
    return request


#: The first line of a multipart body: ``--`` and its boundary (RFC 2046: at most 70
#: characters), which no JSON value starts with.
_MULTIPART = re.compile(r"--[^\r\n]{1,70}\r?\n")
_SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(data: Any, body: bytes) -> str | None:
    """Where ``data``, parsed from the JSON ``body``, holds a lone UTF-16 surrogate (from
    an escape such as ``"\\ud800"``: Python's parser takes it, but it is no character and
    cannot be UTF-8 encoded), as ``"(\\ud800) in a string"``; None if none. Walks
    ``data`` (without recursion) only when ``body`` holds such an escape.

    >>> lone_surrogate({"a": ["x", {"b": "\\ud800"}]}, b'... \\\\uD800 ...')
    '(\\\\ud800) in a string'
    >>> lone_surrogate({"a": "\\U0001f600"}, b'"\\\\ud83d\\\\ude00"') is None
    True
    """
    if not _SURROGATE_ESCAPE.search(body):
        return None
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            found = _SURROGATE.search(item)
            if found is not None:
                return f"(\\u{ord(found.group()):04x}) in a string"
    return None


def _refuse_constant(name: str) -> Any:
    raise BadRequest(f"the request body holds {name}, which JSON does not have; send numbers "
                     f"as digits")


def _describe(value: Any) -> str:
    """What a JSON value is, for a message: ``the string "yes"``, ``the number 5.5``."""
    if isinstance(value, str):
        shown = json.dumps(value[:40], ensure_ascii=False)
        return f"the string {shown}{'...' if len(value) > 40 else ''}"
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        shown = str(value) if isinstance(value, float) or abs(value) < 10 ** 40 else \
            f"{str(value)[:40]}... ({len(str(abs(value)))} digits)"
        return f"the number {shown}"
    return {list: "an array", dict: "an object", type(None): "null"}.get(type(value), "?")


def _expected(dtype: str) -> str:
    if dtype in INT_RANGES:
        low, high = INT_RANGES[dtype]
        return f"a whole number from {low} to {high}"
    return {"BYTES": "a JSON string", "BOOL": "true or false"}.get(dtype, "a number")


def _fits(dtype: str, value: Any) -> bool:
    if dtype == "BYTES":
        return isinstance(value, str)
    if dtype == "BOOL":
        return isinstance(value, bool)
    if dtype in INT_RANGES:
        low, high = INT_RANGES[dtype]
        return type(value) is int and low <= value <= high
    if dtype in FLOAT_TYPES:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True  # a type Triton parses on its own terms


def check_request(request: dict[str, Any], inputs: dict[str, str], model: str) -> None:
    """Refuse (BadRequest) the values Triton's generate parsing would answer with a 500:
    an input of the wrong JSON type or out of its type's range (arrays of such values
    are tensors: each element is checked), a non-string ``id``, a non-object
    ``parameters``. Other keys are request parameters: Triton checks those itself.

    >>> inputs = {"initial_code": "BYTES", "stream": "BOOL", "max_tokens": "INT64"}
    >>> check_request({"initial_code": "x", "stream": True, "max_tokens": 5}, inputs, "m")
    >>> check_request({"stream": "yes"}, inputs, "m")
    Traceback (most recent call last):
    ...
    fastapply.server.http.checks.BadRequest: stream is the string "yes": send true or false ...
    >>> check_request({"max_tokens": [2 ** 63]}, inputs, "m")
    Traceback (most recent call last):
    ...
    fastapply.server.http.checks.BadRequest: max_tokens[0] is the number 9223372036854775808: ...
    """
    for name, value in request.items():
        if name == "id" and not isinstance(value, str):
            raise BadRequest(f"id is {_describe(value)}: send the request id as a JSON "
                             f"string, or leave it out")
        if name == "parameters" and not isinstance(value, dict):
            raise BadRequest(f"parameters is {_describe(value)}: send a JSON object of "
                             f"parameters, e.g. {{\"name\": 1}}, or leave it out")
        dtype = inputs.get(name)
        if dtype is not None and name not in ("id", "parameters"):
            _check_value(name, value, dtype, model, name)


def _check_value(name: str, value: Any, dtype: str, model: str, where: str) -> None:
    if isinstance(value, list):  # a tensor's elements (Triton checks the shape)
        for i, item in enumerate(value):
            _check_value(name, item, dtype, model, f"{where}[{i}]")
    elif not _fits(dtype, value):
        raise BadRequest(f"{where} is {_describe(value)}: send {_expected(dtype)} (input "
                         f"{name} of model {model} is {dtype})")
