"""The request's fields, decoded and checked one by one; bad input is an
:class:`InvalidRequest` whose message names the field and what to send instead (the
server answers it with ``INVALID_ARG`` and keeps serving)."""

from __future__ import annotations


class InvalidRequest(ValueError):
    """Bad input: the message names the field and what to do about it."""


def as_text(name: str, value: str | bytes | None, *, required: bool = True) -> str | None:
    """Decode one input field, naming it in the error.

    >>> as_text("edit_snippet", b"x = 1")
    'x = 1'
    >>> as_text("edit_snippet", b"\\xff")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fastapply.service.inputs.InvalidRequest: edit_snippet is not valid UTF-8 (byte 0: 0xff); ...
    """
    if value is None:
        if required:
            raise InvalidRequest(f"{name} is missing; send it as a UTF-8 string")
        return None
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest(
                f"{name} is not valid UTF-8 (byte {exc.start}: 0x{value[exc.start]:02x}); "
                f"send UTF-8 text") from None
    return value


def as_flag(name: str, value: object) -> bool:
    """A boolean input (absent: False), refusing anything that is not a bool.

    >>> as_flag("stream", None)
    False
    >>> as_flag("stream", "yes")
    Traceback (most recent call last):
    ...
    fastapply.service.inputs.InvalidRequest: stream is 'yes' (str); send true or false
    """
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidRequest(f"{name} is {value!r} ({type(value).__name__}); send true or false")
    return value


def as_max_tokens(value: object, limit: int | None) -> int | None:
    """The output token budget: absent (None), or a whole number from 1 to ``limit``.

    >>> as_max_tokens(512, 4096)
    512
    >>> as_max_tokens(5000, 4096)
    Traceback (most recent call last):
    ...
    fastapply.service.inputs.InvalidRequest: max_tokens is 5000; send a number from 1 to 4096 (the \
context limit in tokens), or leave it out (the answer may then be as long as the prompt)
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"max_tokens is {value!r} ({type(value).__name__}); send a whole "
                             f"number of tokens, or leave it out")
    if value < 1 or (limit is not None and value > limit):
        allowed = (f"from 1 to {limit} (the context limit in tokens)" if limit is not None
                   else "of at least 1")
        raise InvalidRequest(f"max_tokens is {value}; send a number {allowed}, or leave it "
                             f"out (the answer may then be as long as the prompt)")
    return value
