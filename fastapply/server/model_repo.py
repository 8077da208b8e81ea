"""Render the Triton model repository from its template, and read it back.

``render_repository(out_dir, runtime=..., model_dir=...)`` copies
``model_repository/fast_apply`` into ``out_dir`` and fills ``config.pbtxt.template``'s
``${placeholders}``. Unknown parameters and placeholders left unfilled are errors, never
silently rendered. ``config_from_parameters`` is the inverse the Triton model calls: the
string parameters of ``config.pbtxt`` back into a ServiceConfig.

>>> fill("name: ${a}", {"a": "x"})
'name: x'
>>> fill("name: ${a} ${b}", {"a": "x"})
Traceback (most recent call last):
...
fastapply.server.model_repo.RenderError: placeholder(s) left unfilled: ${b}
"""

from __future__ import annotations

import re
import shutil
from dataclasses import fields
from importlib import resources
from pathlib import Path
from typing import Any

from fastapply.decoding.runtimes import RUNTIMES
from fastapply.service import ServiceConfig

MODEL_NAME = "fast_apply"

#: Template parameters of the server around the service, with their defaults.
SERVER_DEFAULTS: dict[str, str] = {
    "model_name": MODEL_NAME,
    "instance_count": "1",
    "worker_threads": "8",
}

#: Every template parameter with its default ("" means unset): the server's, then every
#: ServiceConfig field with ServiceConfig's own default (the one place those are written).
DEFAULTS: dict[str, str] = {
    **SERVER_DEFAULTS,
    **{f.name: "" if f.default is None else str(f.default) for f in fields(ServiceConfig)},
}

_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


class RenderError(ValueError):
    """A template that cannot be rendered as asked."""


def fill(template: str, values: dict[str, str]) -> str:
    """Replace ``${name}``; refuse any placeholder left without a value."""
    out = _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)
    left = sorted(set(_PLACEHOLDER.findall(out)))
    if left:
        raise RenderError("placeholder(s) left unfilled: " + ", ".join(f"${{{n}}}" for n in left))
    return out


def template_dir() -> Path:
    """The packaged ``model_repository/fast_apply`` folder."""
    return Path(str(resources.files("fastapply.model_repository"))) / MODEL_NAME


def render_repository(out_dir: str | Path, **params: Any) -> Path:
    """Write a ready-to-serve model repository into ``out_dir``; return it.

    ``params`` are the keys of DEFAULTS (None leaves the default).
    """
    values = repository_values(**params)
    src = template_dir()
    out = Path(out_dir) / values["model_name"]
    if out.exists():
        shutil.rmtree(out)
    (out / "1").mkdir(parents=True)
    shutil.copy2(src / "1" / "model.py", out / "1" / "model.py")
    text = fill((src / "config.pbtxt.template").read_text(), values)
    (out / "config.pbtxt").write_text(text)
    return Path(out_dir)


def repository_values(**params: Any) -> dict[str, str]:
    """Every template parameter as :func:`render_repository` writes it into config.pbtxt:
    ``params`` (keys of DEFAULTS; None leaves the default) over DEFAULTS, directories made
    absolute. RenderError for what the model would refuse at load time.

    >>> values = repository_values(runtime="deterministic", policy=None)
    >>> values["runtime"], values["policy"], config_from_parameters(values)[0].runtime
    ('deterministic', 'auto', 'deterministic')
    """
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        raise RenderError(f"unknown parameter(s) {', '.join(unknown)}; known: "
                          f"{', '.join(sorted(DEFAULTS))}")
    values = dict(DEFAULTS)
    values.update({k: str(v) for k, v in params.items() if v is not None})
    if values["runtime"] not in RUNTIMES:
        raise RenderError(f"unknown runtime {values['runtime']!r}; use one of: "
                          f"{', '.join(RUNTIMES)}")
    for key in ("model_dir", "engine_dir", "tokenizer_dir"):
        if values[key]:
            values[key] = str(Path(values[key]).resolve())
    config_from_parameters(values)  # refuse what the model would refuse at load time
    return values


def _integer(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise RenderError(f"parameter {key} must be an integer, got {value!r}") from None


#: Optional integers whose 0 is a setting, not "unset" (max_draft_len 0: no speculation).
ZERO_IS_A_VALUE = ("max_draft_len",)


def config_from_parameters(params: dict[str, str]) -> tuple[ServiceConfig, int]:
    """ServiceConfig and worker-thread count from config.pbtxt's string parameters.

    An empty parameter leaves ServiceConfig's default; an optional integer of 0 (e.g.
    ``context_limit``) means unset too.

    >>> config, workers = config_from_parameters({"max_draft_len": "16", "context_limit": "0"})
    >>> config.max_draft_len, config.context_limit, config.prompt_format, workers
    (16, None, 'kortix', 8)
    """
    kwargs: dict[str, Any] = {}
    for f in fields(ServiceConfig):
        value = params.get(f.name, "").strip()
        if not value:
            continue
        if str(f.type).startswith("int"):
            number = _integer(f.name, value)
            if number == 0 and f.default is None and f.name not in ZERO_IS_A_VALUE:
                continue
            kwargs[f.name] = number
        elif str(f.type) == "float":
            try:
                kwargs[f.name] = float(value)
            except ValueError:
                raise RenderError(f"parameter {f.name} is {value!r}, not a number") from None
        else:
            kwargs[f.name] = value
    try:
        config = ServiceConfig(**kwargs)
    except ValueError as exc:
        raise RenderError(str(exc)) from None
    workers = params.get("worker_threads", "").strip() or SERVER_DEFAULTS["worker_threads"]
    return config, max(1, _integer("worker_threads", workers))
