"""Merge quality of the model, the deterministic runtime and every serving policy, on the
same records: exact and served rates per snippet style and per language, and Relace's
six error categories approximated by rules.

Each record of ``--data`` (corpus records: ``original``/``updated``/``language``/``path``)
is sent as its whole file (the served unit), or, with ``--windows``, cropped to a window
around some of its changes as the window training examples are; each style of ``--styles`` gives
one snippet of that window. With ``--unsure-windows`` the unit is what the windowed witness asks
the model about: the windows of every merge of a record that is unsure, with their part of the
snippet, answered by the true window (:mod:`fastapply.model.hard_windows`). The model merges
it once (policy ``model``: its raw output and lowest token probability); the deterministic
merge reads it once; every policy of :data:`fastapply.decoding.witness.POLICIES` is then
decided from those two readings offline.
``copied markers`` counts the model's answers that hold a marker line of the snippet
(``// ... existing code ...``) that the original lacks: never a right answer.
``--save FILE`` keeps the readings, ``--load FILE`` re-decides without the model.

    python -m fastapply.bench quality --data valid.jsonl --limit 60 --save readings.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from fastapply.bench.common import print_table
from fastapply.decoding.witness import POLICIES, Reading, decide

#: Styles measured by default: the generator's textbook lazy snippet, the agent styles,
#: and the two exact notations.
DEFAULT_STYLES = ("lazy", "signature", "named", "whole_block", "whole_file",
                  "search_replace", "udiff")
AGENT = ("signature", "named", "whole_block", "whole_file")
EXACT = ("search_replace", "udiff")
#: Relace's merge-error taxonomy, approximated by rules (see :func:`category`).
CATEGORIES = ("correct", "non_functional", "smoothing", "merge_error", "hallucination",
              "truncation")
_COMMENT = re.compile(r"^\s*(#|//|/\*|\*|<!--|--)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="JSONL of corpus records (validation split)")
    p.add_argument("--limit", type=int, default=40, help="records to use at most")
    p.add_argument("--styles", default=",".join(DEFAULT_STYLES))
    p.add_argument("--model", type=Path, default=None,
                   help="model directory (default: the embedded default model)")
    p.add_argument("--max-lines", type=int, default=300,
                   help="records whose file is longer are skipped")
    p.add_argument("--min-lines", type=int, default=0,
                   help="records whose file is shorter are skipped")
    p.add_argument("--windows", action="store_true",
                   help="crop every file to a window around its changes (default: whole files)")
    p.add_argument("--unsure-windows", action="store_true",
                   help="the windows the windowed witness asks about where a record's merge "
                        "is unsure (every style), answered by the true window")
    p.add_argument("--device", default=None, help="torch device (default: cuda if any)")
    p.add_argument("--dtype", default="float32", help="float32 (the contract) or bfloat16")
    p.add_argument("--no-model", action="store_true",
                   help="the deterministic merge only (every model reading refused): what "
                        "`deterministic` and `certain_or_agree` serve certain, on many more "
                        "readings than the model's time allows")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threshold", type=float, default=0.5,
                   help="lowest token probability the confidence policies accept")
    p.add_argument("--save", type=Path, help="write every reading here as it is made (JSONL)")
    p.add_argument("--load", type=Path, help="decide from readings saved by --save")
    p.add_argument("--rerun-deterministic", action="store_true",
                   help="with --load: read every snippet again with this checkout's "
                        "deterministic merge (the model's readings are kept)")


def category(output: str, truth: str, original: str, snippet: str) -> str:
    """One of :data:`CATEGORIES` for a served ``output`` against the ``truth``.

    >>> category("a\\n", "a\\nb\\n", "a\\n", "b\\n")
    'truncation'
    >>> category("a\\n  b\\n", "a\\nb\\n", "a\\n", "b\\n")
    'non_functional'
    """
    if output == truth:
        return "correct"
    out, want = output.splitlines(), truth.splitlines()
    if len(out) < len(want) and want[: max(0, len(out) - 1)] == out[: max(0, len(out) - 1)]:
        return "truncation"

    def norm(lines: list[str]) -> list[str]:
        return ["".join(s.split()) for s in lines if s.strip() and not _COMMENT.match(s)]

    if norm(out) == norm(want):
        return "non_functional"
    known = {s.strip() for s in original.splitlines() + snippet.splitlines()}
    if any(s.strip() and s.strip() not in known for s in out):
        return "hallucination"
    # the error lies where original and truth agree: an unrequested change (smoothing);
    # else inside the edited region: a merge error
    import difflib

    edited: set[int] = set()
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(
            None, original.splitlines(), want, autojunk=False).get_opcodes():
        if tag != "equal":
            edited.update(range(max(0, j1 - 2), j2 + 2))
    wrong: set[int] = set()
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(None, out, want,
                                                          autojunk=False).get_opcodes():
        if tag != "equal":
            wrong.update(range(j1, max(j2, j1 + 1)))
    return "smoothing" if wrong and not wrong & edited else "merge_error"


def readings(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the model and the deterministic merge on every (window, style)."""
    from fastapply.decoding.witness import deterministic_reading
    from fastapply.examples import load_edits
    from fastapply.service import FastApplyService, InvalidRequest, ServiceConfig

    service = None
    if not args.no_model:
        model = args.model
        if model is None:
            from fastapply.model.default import default_model_dir

            model = default_model_dir(quiet=False)
        service = FastApplyService(ServiceConfig(runtime="torch", model_dir=str(model),
                                                 policy="model", dtype=args.dtype,
                                                 device=args.device))
    rng = random.Random(args.seed)
    styles = args.styles.split(",")
    recs = [r for r in load_edits(args.data)
            if args.min_lines <= r["original"].count("\n") <= args.max_lines]
    rng.shuffle(recs)
    out: list[dict[str, Any]] = []
    for original, updated, style, snippet, rec, extra in _units(args, recs[: args.limit],
                                                                 styles, rng):
        det = deterministic_reading(original, snippet)
        t0 = time.perf_counter()
        # an answer longer than the true file by more than 64 tokens cannot be exact:
        # it is cut there (counted as refused) instead of running on
        model_text, prob, stats = None, 0.0, {"error": "--no-model"}
        try:
            if service is not None:
                budget = len(service.tokenizer.encode(updated)) + 64
                res = service.apply(original, snippet, max_tokens=budget)
                model_text, prob, stats = res.merged_code, res.stats.min_token_prob, \
                    res.stats.to_dict()
        except InvalidRequest as exc:
            model_text, prob, stats = None, 0.0, {"error": str(exc)}
        row = {"id": rec["id"], "language": rec["language"], "style": style,
               "lines": original.count("\n"),
               "original": original, "snippet": snippet, "updated": updated,
               "model": model_text, "min_token_prob": prob, "det": det.text,
               "det_certain": det.certain, "det_error": det.error, "stats": stats,
               "model_s": round(time.perf_counter() - t0, 3), **extra}
        out.append(row)
        if args.save:  # as it goes: a long run can be stopped and still decided
            with args.save.open("a") as f:
                f.write(json.dumps(row) + "\n")
        print(f"{len(out):4d} {rec['id'][:40]:40s} {style:15s} "
              f"model {'exact' if model_text == updated else 'WRONG'} "
              f"det {'exact' if det.text == updated else 'wrong'}"
              f"{'' if det.certain else '?'} p_min {prob:.2f} {row['model_s']:.1f} s",
              flush=True)
    return out


def _units(args: argparse.Namespace, recs: list[dict[str, Any]], styles: list[str],
           rng: random.Random) -> Any:
    """(original, updated, style, snippet, record, extra fields of its row) of every
    unit measured; an unsure window's row also names its readings and which is true."""
    from fastapply.corpus.crop import window
    from fastapply.model.hard_windows import hard_examples
    from fastapply.model.sft_data import SftConfig, snippet_of

    if args.unsure_windows:
        by_id = {r["id"]: r for r in recs}
        for ex in hard_examples(recs, args.seed, styles, readings=True):
            yield (ex["original"], ex["updated"], ex["style"], ex["snippet"], by_id[ex["id"]],
                   {"truth": ex["truth"], "readings": ex["readings"]})
        return
    cfg = SftConfig()
    for rec in recs:
        original, updated = rec["original"], rec["updated"]
        if args.windows:
            crop = window(original, updated, rng, cfg.max_lines, cfg.margin)
            if crop is None:
                continue
            original, updated = crop
        for style in styles:
            snippet = snippet_of(style, original, updated, rec["language"], rec["path"], rng)
            if snippet.strip():
                yield original, updated, style, snippet, rec, {}


def _group(style: str) -> str:
    return "agent" if style in AGENT else style


#: (name, most lines) of the file-length buckets whole files are reported in.
LENGTH_BUCKETS = (("<=80 lines", 80), ("81-200 lines", 200), ("201-300 lines", 300),
                  (">300 lines", 10**9))


def length_bucket(lines: int,
                  buckets: tuple[tuple[str, int], ...] = LENGTH_BUCKETS) -> str:
    """The length bucket of a file of ``lines`` lines: the first of ``buckets`` ((name,
    most lines), shortest first, the last open-ended) that holds it.

    >>> length_bucket(80), length_bucket(81), length_bucket(300)
    ('<=80 lines', '81-200 lines', '201-300 lines')
    >>> length_bucket(1001, (("<=1000 lines", 1000), (">1000 lines", 10**9)))
    '>1000 lines'
    """
    return next(name for name, most in buckets if lines <= most)


def summarise(rows: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    """Served-exact and wrong-served rates per policy and style group; categories."""
    table: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    cats: dict[str, Counter[str]] = defaultdict(Counter)
    by_lang: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for row in rows:
        det = Reading(row["det"], row["det_certain"], row["det_error"])
        exact_format = row["style"] in EXACT
        for policy in ("model", "deterministic", *[p for p in POLICIES
                                                    if p not in ("model", "deterministic")]):
            d = decide(policy, row["model"], row["min_token_prob"], det, exact_format,
                       threshold)
            lines = row.get("lines", row["original"].count("\n"))
            # a set: "lazy" is both a style and its own group, and counts once
            for group in {_group(row["style"]), row["style"], "all", length_bucket(lines)}:
                c = table[policy][group]
                c["n"] += 1
                if d.serve:
                    c["served"] += 1
                    c["exact" if d.text == row["updated"] else "wrong"] += 1
            if d.serve and policy in ("model", "deterministic", "agree_or_exact"):
                cats[policy][category(d.text, row["updated"], row["original"],
                                      row["snippet"])] += 1
            if policy in ("model", "deterministic", "agree_or_exact"):
                lc = by_lang[policy][row["language"]]
                lc["n"] += 1
                lc["exact"] += int(d.serve and d.text == row["updated"])
                lc["wrong"] += int(d.serve and d.text != row["updated"])
    from fastapply.merge.syntax import copied_markers

    copied = [len(copied_markers(r["model"] or "", r["original"], r["snippet"])) for r in rows]
    return {"unsure_windows": _window_witness(rows),
            "copied_markers": {"answers": sum(1 for c in copied if c), "lines": sum(copied),
                               "model_answers": sum(1 for r in rows if r["model"])},
            "policies": {p: {g: {"n": c["n"], "served_exact": c["exact"] / c["n"],
                                 "wrong_served": c["wrong"] / c["n"],
                                 "wrong_served_count": c["wrong"]}
                             for g, c in groups.items()} for p, groups in table.items()},
            "categories": {p: dict(c) for p, c in cats.items()},
            "by_language": {p: {lang: {"n": c["n"], "served_exact": c["exact"] / c["n"],
                                       "wrong_served_count": c["wrong"]}
                                for lang, c in langs.items()}
                            for p, langs in by_lang.items()}}


def _window_witness(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """With ``--unsure-windows``: the model alone exact per window, by which reading was
    true (``chosen``, ``rival``, ``none``: no reading), and what the windowed witness would
    serve window by window (a window equal to a reading's: served; else refused)."""
    windows = [r for r in rows if "truth" in r]
    out: dict[str, Any] = {"n": len(windows)}
    for kind, test in (("chosen", lambda t: t == 0), ("rival", lambda t: t > 0),
                       ("none", lambda t: t < 0)):
        some = [r for r in windows if test(r["truth"])]
        out[f"truth_{kind}"] = {"n": len(some),
                                "model_exact": sum(r["model"] == r["updated"] for r in some)}
    judged = [r for r in windows if r.get("readings") is not None]
    served = [r for r in judged if r["model"] is not None and r["model"] in r["readings"]]
    out["witness"] = {"n": len(judged),
                      "served_exact": sum(r["model"] == r["updated"] for r in served),
                      "served_wrong": sum(r["model"] != r["updated"] for r in served)}
    return out


def choose_policy(policies: dict[str, dict[str, dict[str, float]]],
                  max_wrong: float = 0.005) -> str | None:
    """The policy that serves the most exact files over all readings with wrong served
    at most ``max_wrong`` (0.5%), or None where none keeps it.

    >>> choose_policy({"a": {"all": {"served_exact": 0.9, "wrong_served": 0.02}},
    ...                "b": {"all": {"served_exact": 0.6, "wrong_served": 0.0}},
    ...                "c": {"all": {"served_exact": 0.5, "wrong_served": 0.0}}})
    'b'
    """
    ok = [(s["all"]["served_exact"], name) for name, s in policies.items()
          if s["all"]["wrong_served"] <= max_wrong]
    return max(ok)[1] if ok else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.load:
        rows = [json.loads(line) for line in args.load.open()]
        if args.rerun_deterministic:
            from fastapply.decoding.witness import deterministic_reading

            for row in rows:
                det = deterministic_reading(row["original"], row["snippet"])
                row.update(det=det.text, det_certain=det.certain, det_error=det.error)
    else:
        if args.data is None:
            raise SystemExit("quality: pass --data FILE (or --load FILE)")
        if args.save:
            args.save.write_text("")
        rows = readings(args)
    result = summarise(rows, args.threshold)
    for groups in (["lazy", "agent", "search_replace", "udiff", "all"],
                   [name for name, _ in LENGTH_BUCKETS]):
        print_table(["policy"] + [f"{g} exact/wrong" for g in groups],
                    [[p] + [f"{s[g]['served_exact']:.3f}/{s[g]['wrong_served']:.3f}"
                            if g in s else "-" for g in groups]
                     for p, s in result["policies"].items()])
    print_table(["policy"] + list(CATEGORIES),
                [[p] + [c.get(k, 0) for k in CATEGORIES]
                 for p, c in result["categories"].items()])
    uw = result["unsure_windows"]
    if uw["n"]:
        w = uw["witness"]
        print(f"unsure windows: {uw['n']}; model alone exact "
              f"{sum(uw[k]['model_exact'] for k in ('truth_chosen', 'truth_rival', 'truth_none'))}"
              f" (truth the chosen reading {uw['truth_chosen']['model_exact']}/"
              f"{uw['truth_chosen']['n']}, a rival {uw['truth_rival']['model_exact']}/"
              f"{uw['truth_rival']['n']}, none {uw['truth_none']['model_exact']}/"
              f"{uw['truth_none']['n']}); windowed witness, window by window: served exact "
              f"{w['served_exact']}, served wrong {w['served_wrong']} of {w['n']}")
    cm = result["copied_markers"]
    print(f"copied markers: {cm['answers']} of {cm['model_answers']} model answers hold a "
          f"marker line of the snippet that the original lacks ({cm['lines']} lines)")
    chosen = choose_policy(result["policies"])
    print(f"policy serving the most with wrong served <= 0.5%: {chosen or 'none'}")
    result.update({"bench": "quality", "records": len({r["id"] for r in rows}),
                   "chosen_policy": chosen,
                   "readings": len(rows), "threshold": args.threshold,
                   "model_s_total": round(sum(r["model_s"] for r in rows), 1)})
    return result
