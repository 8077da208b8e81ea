"""API keys: who may ask for an edit (``fastapply serve --api-key``, ``$FASTAPPLY_API_KEYS``).

With keys set, no port serves an edit without one: the OpenAI-compatible front answers 401
in OpenAI's error shape, the HTTP port (:mod:`fastapply.server.http.guard`) answers 401, and
Triton's own inference on gRPC and HTTP is closed by Triton's restricted-protocol option
(the way the admin APIs are, :mod:`fastapply.server.triton`). Health and readiness stay open.

Several keys may be live at once, so a key can be rotated: add the new one, move the
clients, drop the old one. Triton's restricted protocol holds one value per API group (a
second is refused at start-up: "can not be specified in multiple config groups",
measured on 2.51), so with several keys Triton forwards the gRPC key header to the model,
which checks it against every key (:mod:`fastapply.server.triton_model`); the front and
the HTTP port take every key too. A key is compared in constant time and never written to
a log, a message or a stats field; it reaches the HTTP guard, the front and the model
through their environment (one key alone reaches tritonserver on its command line, the
only way Triton takes it).

>>> keys = api_keys(["k" * 16, " " + "k" * 16, "n" * 20], None)
>>> len(keys), KeyCheck(keys).accepts("n" * 20), KeyCheck(keys).accepts("x" * 20)
(2, True, False)
>>> api_keys(None, "")
()
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable, Mapping

from fastapply.client.grpc import API_KEY_ENV, API_KEY_HEADER, GRPC_KEY_HEADER, NO_KEY

__all__ = ["API_KEYS_ENV", "API_KEY_ENV", "API_KEY_HEADER", "GRPC_KEY_HEADER", "NO_KEY",
           "REFUSAL", "ApiKeyError", "KeyCheck", "api_keys", "keys_env", "presented"]

#: Environment variable `fastapply serve` reads its keys from (comma-separated), when no
#: --api-key is given; its child processes (the HTTP guard, the front) get them the same way.
API_KEYS_ENV = "FASTAPPLY_API_KEYS"
#: The variable tritonserver's Python-backend model reads the keys from, where several are
#: live and the model checks them itself (set by fastapply.server.triton only then).
MODEL_KEYS_ENV = "FASTAPPLY_MODEL_API_KEYS"
#: What a key may be: at least 16 characters that Triton's option syntax (split at , : =)
#: and an HTTP header carry as they are.
_KEY = re.compile(r"[A-Za-z0-9._~+/-]{16,}")


class ApiKeyError(ValueError):
    """A key that cannot be used; the message says why, without the key."""


def api_keys(options: Iterable[str] | None, env: str | None) -> tuple[str, ...]:
    """The keys to serve with: each ``--api-key`` given, else ``env`` (the value of
    FASTAPPLY_API_KEYS, comma-separated); each stripped, a key given twice kept once, in
    order (the first is the one the HTTP guard relays with). () where neither sets any: the
    ports are open. Raises ApiKeyError for an empty or malformed key, naming where it came
    from and its position, never the key."""
    given = list(options) if options else None
    where = "--api-key" if given is not None else API_KEYS_ENV
    if given is None:
        if env is None or not env.strip():
            return ()
        given = env.split(",")
    keys: list[str] = []
    for n, raw in enumerate(given, 1):
        key = raw.strip()
        if not key:
            raise ApiKeyError(f"{where}: key {n} is empty; give each key as at least 16 "
                              f"characters of A-Z a-z 0-9 . _ ~ + / -")
        if not _KEY.fullmatch(key):
            raise ApiKeyError(f"{where}: key {n} ({len(key)} characters) is not a usable key: "
                              f"use at least 16 characters of A-Z a-z 0-9 . _ ~ + / - "
                              f"(Triton's options and HTTP headers carry no others)")
        if key not in keys:
            keys.append(key)
    return tuple(keys)


def presented(headers: Mapping[str, str]) -> str | None:
    """The key a request carries (``headers`` by lower-case name): ``Authorization: Bearer
    KEY`` as OpenAI's, Morph's and Relace's SDKs send it, else the ``fastapply-api-key``
    header; None when it carries neither."""
    auth = headers.get("authorization", "")
    scheme, _, value = auth.strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = headers.get(API_KEY_HEADER, "").strip()
    return key or None


class KeyCheck:
    """Does a request's key match one of ``keys``? Every key is compared, each in constant
    time (:func:`hmac.compare_digest`), so the answer's timing says nothing about which
    key, or how much of one, was right. No keys: everything passes."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = tuple(k.encode() for k in keys)

    def __len__(self) -> int:
        return len(self.keys)

    def accepts(self, key: str | None) -> bool:
        if not self.keys:
            return True
        given = (key or "").encode()
        found = False
        for k in self.keys:
            found |= hmac.compare_digest(given, k)
        return found

    @property
    def first(self) -> str | None:
        """The key the HTTP guard and the front relay with (any listed key would do)."""
        return self.keys[0].decode() if self.keys else None


def keys_env(keys: Iterable[str]) -> dict[str, str]:
    """The environment of a child process that checks ``keys``: this one's, with
    FASTAPPLY_API_KEYS set to them (or taken out: an inherited value must not close a
    server started without keys)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != API_KEYS_ENV}
    joined = ",".join(keys)
    if joined:
        env[API_KEYS_ENV] = joined
    return env


#: The refusal every front gives a request without a key it knows (no key in it).
REFUSAL = f"missing or unknown API key: {NO_KEY}; send it as 'Authorization: Bearer KEY'"
