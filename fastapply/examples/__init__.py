"""Real edits shipped with the package (see NOTICE for their licences).

``edits.jsonl``: 12 edits, the default for the demo, calibration and load tests.

``validation.jsonl``: 126 validation examples, what the engine build's FP8 check merges
(profile smollm2-135m, ``verify.data: validation``). They come from the validation split
of docs/model.md: 14 repositories (9 examples each) that share none with the repositories
the shipped adapter was trained on, nor with ``edits.jsonl``. Each is a window of a real
change with a snippet in one of the styles of training and a prompt format (``id``,
``repo``, ``language``, ``style``, ``format``, ``whole_file``, ``original``, ``snippet``,
``updated``, ``license``). Made with::

    fastapply data split corpus.jsonl --tune tune.jsonl --valid valid.jsonl \\
        --valid-fraction 0.4 --seed 0                      # as in docs/model.md
    fastapply model sft valid.jsonl --out sft-valid.jsonl --seed 0
    fastapply data sample sft-valid.jsonl --out fastapply/examples/validation.jsonl \\
        --per-repo 9 --seed 0

``load_edits`` also reads any JSONL with the fields of the development corpus (``id``,
``original``, ``updated``, ``lazy_snippet``, ``search_replace``, ``udiff``, ...).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEFAULT_EDITS = Path(__file__).with_name("edits.jsonl")
#: The validation sample the engine build's FP8 check merges (see the module docstring).
VALIDATION_EDITS = Path(__file__).with_name("validation.jsonl")

#: The fields every edit record must carry.
REQUIRED_FIELDS = ("id", "original", "updated")


class DataError(ValueError):
    """A data file that is not a JSONL of edit records; the message says where."""


def load_edits(path: str | Path | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Read edit records from a JSONL file (the shipped examples when ``path`` is None).

    Raises DataError naming the file and line when a line is not a JSON object with
    the required fields.
    """
    path = Path(path) if path is not None else DEFAULT_EDITS
    if not path.is_file():
        raise DataError(f"{path}: no such file; pass a JSONL of edits (one JSON object a line)")
    records: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno}: not JSON ({exc.msg}); "
                                "expected one JSON object per line") from None
            if not isinstance(rec, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object, got "
                                f"{type(rec).__name__}")
            missing = [f for f in REQUIRED_FIELDS if f not in rec]
            if missing:
                raise DataError(f"{path}:{lineno}: missing field(s) {', '.join(missing)}")
            records.append(rec)
            if limit is not None and len(records) >= limit:
                break
    return records
