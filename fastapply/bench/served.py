"""What the default server serves on a records file: served exact, refused (and why), and
served wrong (a file that is not the truth: the figure that must be zero), by file length.

Every record of ``--data`` (JSONL: ``id``, ``original``, ``updated`` the truth, and the
snippet field ``--field``: ``lazy_snippet``, ``search_replace`` or ``udiff``) is one request
to the service the server runs (:class:`~fastapply.service.FastApplyService`), set up as
``fastapply serve`` with no options sets it up (:func:`served_config`): the torch runtime with
the embedded default model (or ``--model``), its policy, witness and witness budget;
``--runtime deterministic`` runs no model (the default policy, ``judge``, then serves what the
judge accepts; ``--policy deterministic`` the merge alone). No request sends max_tokens, as
the server's clients send none by default. A served file is ``certain`` where the
deterministic merge was, else the judge or the model witnessed it. A refusal's kind comes
from the exception the service raised and its message
(:func:`refusal_kind`):

- ``merge_error``: the deterministic merge cannot read the snippet (an EditError); no model
  is asked
- ``unsure``: the merge is unsure and no model witnessed it: the deterministic runtime, or
  an unsure merge that leaves the file unchanged (a model copying the file would agree)
- ``disagreed``: the merge is unsure and the model wrote another file (or window)
- ``judge_veto``: the merge is certain and the judge (policy ``judge``) vetoed its reading
- ``judge_unsettled``: the merge is unsure and the judge accepts none of its readings, or
  more than one
- ``witness_budget``: the merge is unsure and the witness budget ran out
- ``context_limit``: the prompt and the file do not fit the model's context
- ``incomplete``: the model stopped before it finished the file (max_tokens, repetition)
- ``invalid_input``: the request itself is refused (no snippet, too large, a stop text)
- ``other``: any other refusal (the model wrote a marker of the snippet as code)
- ``error``: an exception the service should never raise (a bug): its type and message

``--save FILE`` writes one row per record as it goes (id, lines, outcome, kind, seconds,
certain, witness, message); run again with the same FILE, it resumes after the records
already there. ``--load FILE`` prints the tables from saved rows without serving anything.

    python -m fastapply.bench served --data agent-dev.jsonl --runtime deterministic
    python -m fastapply.bench served --data agent-dev.jsonl --save served.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapply.bench.common import percentile, print_table
from fastapply.bench.quality import length_bucket

if TYPE_CHECKING:
    from fastapply.service import FastApplyService, ServiceConfig

#: Why a request was refused (see the module docstring), in the order tables show them.
KINDS = ("merge_error", "unsure", "disagreed", "unsure_agreement", "judge_veto",
         "judge_unsettled", "witness_budget",
         "context_limit", "incomplete", "invalid_input", "other", "error")
#: (name, most lines) of the original files' length buckets.
LENGTH_BUCKETS = (("<=200 lines", 200), ("201-1000 lines", 1000), (">1000 lines", 10**9))
#: Snippet fields a records file holds.
FIELDS = ("lazy_snippet", "search_replace", "udiff")
#: Characters of a refusal's message a row keeps.
MESSAGE_CHARS = 300


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="JSONL records: id, original, updated, snippets")
    p.add_argument("--limit", type=int, default=None, help="the first N records only")
    p.add_argument("--field", choices=FIELDS, default="lazy_snippet",
                   help="the snippet field sent (default lazy_snippet)")
    p.add_argument("--runtime", choices=("torch", "deterministic"), default="torch",
                   help="torch (default: what `fastapply serve` serves) or the merge alone")
    p.add_argument("--model", type=Path, default=None,
                   help="model directory (default: the embedded default model)")
    p.add_argument("--policy", default=None,
                   help="a serve --policy other than the default (auto)")
    p.add_argument("--witness", choices=("window", "file"), default=None,
                   help="a serve --witness other than the default")
    p.add_argument("--save", type=Path,
                   help="write a row per record here as it goes; resume after its rows")
    p.add_argument("--load", type=Path, help="the tables of rows saved by --save; no serving")


def served_config(runtime: str, model: Path | None = None, policy: str | None = None,
                  witness: str | None = None) -> ServiceConfig:
    """The ServiceConfig of ``fastapply serve --runtime RUNTIME [--model DIR]``: its
    arguments, rendered into the repository's parameters, read back as the Triton model
    reads them (without ``--model``, torch builds the embedded default model on first use)."""
    from fastapply.server.cli import add_arguments as serve_arguments
    from fastapply.server.cli import repository_parameters
    from fastapply.server.model_repo import config_from_parameters, repository_values

    parser = argparse.ArgumentParser()
    serve_arguments(parser)
    args = parser.parse_args(["--runtime", runtime] + (["--model", str(model)] if model else [])
                             + (["--policy", policy] if policy else [])
                             + (["--witness", witness] if witness else []))
    config, _workers = config_from_parameters(repository_values(**repository_parameters(args)))
    return config


def refusal_kind(exc: BaseException) -> str:
    """The kind (:data:`KINDS`) of the exception ``exc`` a request to the service raised.

    >>> from fastapply.service import InvalidRequest, Refused
    >>> refusal_kind(Refused("the model and the deterministic merge read the snippet "
    ...                      "differently; nothing was merged: line 3: ..."))
    'disagreed'
    >>> refusal_kind(InvalidRequest("the snippet cannot be merged: SEARCH block 1 has no "
    ...                             "======= line; nothing was merged: ..."))
    'merge_error'
    >>> refusal_kind(InvalidRequest("edit_snippet is empty; send the edit to merge"))
    'invalid_input'
    >>> refusal_kind(Refused("the model wrote the deterministic merge's file but was unsure "
    ...                      "(lowest token probability 0.48 < 0.5); nothing was merged: ..."))
    'unsure_agreement'
    >>> refusal_kind(KeyError("original"))
    'error'
    """
    from fastapply.decoding.witness import READ_DIFFERENTLY
    from fastapply.service import IncompleteOutput, InvalidRequest, Refused
    from fastapply.service.judged import WITNESS_AFTER_JUDGE

    text = str(exc)
    if not isinstance(exc, InvalidRequest):
        return "error"
    if WITNESS_AFTER_JUDGE in text:  # the judge left it to the model: the model's refusal
        return refusal_kind(Refused(text.split(WITNESS_AFTER_JUDGE, 1)[1]))
    if isinstance(exc, IncompleteOutput):
        return "context_limit" if "context limit" in text else "incomplete"
    if "leaves the file unchanged and is unsure" in text:
        return "unsure"
    if "the snippet cannot be merged" in text or "the deterministic merge refused it" in text:
        return "merge_error"
    if "under its veto" in text:
        return "judge_veto"
    if "and the judge accepts" in text:
        return "judge_unsettled"
    if "witness budget" in text:
        return "witness_budget"
    if "the model wrote the deterministic merge's file but was unsure" in text:
        return "unsure_agreement"  # certain_or_confident_agree under its threshold
    if "context limit" in text:
        return "context_limit"
    if isinstance(exc, Refused):
        windows = "its window" in text or "windows agree" in text
        return "disagreed" if READ_DIFFERENTLY in text or windows else "other"
    return "invalid_input"


def _merge_is_unsure(original: str, snippet: str) -> bool:
    """Whether the deterministic merge reads ``snippet`` but is unsure: the deterministic
    runtime refuses that with the message it gives an EditError."""
    from fastapply.merge import EditError, apply_snippet

    try:
        return bool(apply_snippet(original, snippet).uncertain)
    except EditError:
        return False


def serve_one(service: FastApplyService, record: dict[str, Any], field: str) -> dict[str, Any]:
    """One record as one request: its row (outcome exact, wrong or refused; never raises
    for what the service raises: an unexpected exception is refused with kind error)."""
    original, updated, snippet = record["original"], record["updated"], record.get(field)
    row: dict[str, Any] = {
        "id": record["id"], "lines": original.count("\n") if isinstance(original, str) else 0,
        "runtime": service.config.runtime, "outcome": "refused", "kind": None,
        "seconds": 0.0, "certain": None, "witness": None, "message": ""}
    start = time.perf_counter()
    try:
        result = service.apply(original, snippet)  # no max_tokens, as clients send none
    except Exception as exc:  # every failure is this record's row, never the run's end
        row["seconds"] = round(time.perf_counter() - start, 4)
        kind = refusal_kind(exc)
        if kind == "merge_error" and service.runtime is None and \
                _merge_is_unsure(original, snippet or ""):
            kind = "unsure"
        message = f"{type(exc).__name__}: {exc}" if kind == "error" else str(exc)
        return {**row, "kind": kind, "message": message[:MESSAGE_CHARS]}
    row["seconds"] = round(time.perf_counter() - start, 4)
    witness = result.stats.witness or "deterministic"
    row = {**row, "outcome": "exact" if result.merged_code == updated else "wrong",
           "certain": witness.startswith("deterministic") or witness == "judge-certain",
           "witness": witness, "min_token_prob": result.stats.min_token_prob}
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per length bucket (and ``all``): the counts, rates and seconds per request; the
    refusal kinds; the wrong ids and how many of the served were certain.

    >>> rows = [{"id": "a", "lines": 10, "outcome": "exact", "kind": None, "seconds": 1.0,
    ...          "certain": True},
    ...         {"id": "b", "lines": 500, "outcome": "wrong", "kind": None, "seconds": 3.0,
    ...          "certain": True}]
    >>> s = summarise(rows)
    >>> s["buckets"]["all"]["wrong_rate"], s["buckets"]["201-1000 lines"]["s_p50"], s["wrong_ids"]
    (0.5, 3.0, ['b'])
    """
    groups: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in LENGTH_BUCKETS}
    for row in rows:
        groups[length_bucket(row["lines"], LENGTH_BUCKETS)].append(row)
    groups["all"] = list(rows)
    buckets, kinds = {}, {}
    for name, some in groups.items():
        n = len(some)
        count = Counter(r["outcome"] for r in some)
        seconds = [float(r["seconds"]) for r in some]
        buckets[name] = {"records": n, "served_exact": count["exact"],
                         "refused": count["refused"], "wrong": count["wrong"],
                         "wrong_rate": round(count["wrong"] / n, 4) if n else 0.0,
                         "served_exact_rate": round(count["exact"] / n, 4) if n else 0.0,
                         "s_p50": round(percentile(seconds, 50), 4),
                         "s_p95": round(percentile(seconds, 95), 4)}
        refused = Counter(r["kind"] for r in some if r["outcome"] == "refused")
        kinds[name] = {kind: refused[kind] for kind in KINDS}
    served = [r for r in rows if r["outcome"] != "refused"]
    wrong = [r for r in served if r["outcome"] == "wrong"]
    return {"buckets": buckets, "refusal_kinds": kinds,
            "wrong_ids": [r["id"] for r in wrong],
            "wrong_certain": sum(1 for r in wrong if r["certain"]),
            "served_certain": sum(1 for r in served if r["certain"]),
            "served_witnessed": sum(1 for r in served if not r["certain"])}


def _read_rows(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def serve_records(args: argparse.Namespace
                  ) -> tuple[list[dict[str, Any]], ServiceConfig]:
    """Serve the records of ``args.data`` (after those already saved in ``args.save``);
    every row, and the ServiceConfig served with."""
    from fastapply.examples import load_edits
    from fastapply.service import FastApplyService

    records = load_edits(args.data)[: args.limit]
    rows = _read_rows(args.save) if args.save and args.save.is_file() else []
    runtimes = {r.get("runtime") for r in rows} - {args.runtime}
    if runtimes:
        raise SystemExit(f"served: {args.save} holds rows of runtime {runtimes.pop()}, not "
                         f"{args.runtime}; pass another --save file, or delete it")
    done = {r["id"] for r in rows}
    if rows:
        print(f"resuming: {len(rows)} rows already in {args.save}", flush=True)
    config = served_config(args.runtime, args.model, getattr(args, "policy", None),
                           getattr(args, "witness", None))
    print(f"serving as `fastapply serve --runtime {args.runtime}`: model {config.model_dir}, "
          f"policy {config.policy}, witness {config.witness}, witness_budget_s "
          f"{config.witness_budget_s:g}", flush=True)
    service = FastApplyService(config)
    for i, record in enumerate(records, 1):
        if record["id"] in done:
            continue
        row = serve_one(service, record, args.field)
        rows.append(row)
        if args.save:  # as it goes: a long run can be read, or resumed, midway
            with args.save.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
        print(f"{i:4d}/{len(records)} {row['id'][:56]:56s} {row['outcome']:7s} "
              f"{row['kind'] or row['witness']:21s} {row['seconds']:.2f} s", flush=True)
    return rows, config


def run(args: argparse.Namespace) -> dict[str, Any]:
    config = None
    if args.load:
        rows = _read_rows(args.load)
    elif args.data is None:
        raise SystemExit("served: pass --data FILE (or --load FILE)")
    else:
        rows, config = serve_records(args)
    result = summarise(rows)
    names = [name for name, _ in LENGTH_BUCKETS] + ["all"]
    print_table(["bucket", "records", "served exact", "refused", "wrong", "wrong rate",
                 "served exact rate", "s_p50", "s_p95"],
                [[name, *result["buckets"][name].values()] for name in names])
    seen = [kind for kind in KINDS if result["refusal_kinds"]["all"][kind]]
    print_table(["refused: bucket", *seen],
                [[name, *(result["refusal_kinds"][name][kind] for kind in seen)]
                 for name in names])
    wrong = [r for r in rows if r["outcome"] == "wrong"]
    print(f"served wrong: {len(wrong)} ({result['wrong_certain']} certain merges)")
    for r in wrong:
        print(f"  {r['id']}  ({r['lines']} lines, "
              f"{'certain' if r['certain'] else 'witnessed: ' + str(r['witness'])})")
    result.update({"bench": "served", "records": len(rows),
                   "runtime": sorted({str(r.get("runtime")) for r in rows}),
                   "field": None if args.load else args.field,
                   "config": None if config is None else {
                       "runtime": config.runtime, "model_dir": config.model_dir,
                       "policy": config.policy, "witness": config.witness,
                       "witness_budget_s": config.witness_budget_s}})
    return result
