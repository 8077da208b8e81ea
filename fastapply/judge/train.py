"""Train the judge: gradient-boosted trees (LightGBM) over the readings' features,
validated by repository, its thresholds calibrated on the out-of-fold scores.

Every repository is held out once (``GroupKFold`` over repositories): each reading's
validation score comes from a model that never saw its repository. On those scores the
policy (:func:`fastapply.judge.policy.verdict`) is replayed per merge for a grid of
thresholds (:func:`calibrate`): the veto that catches more certain-wrong merges than it
costs right ones, then the accept threshold that serves the most agent-written merges while
the unsure merges served wrong stay at most ``--max-wrong`` of every corpus group's merges.
The shipped model is then fit on all rows; its text file and a card (features,
thresholds, the figures they were chosen by) are written to ``--out`` (default: the
package's ``judge/weights/``).

    fastapply judge train /work/data/judge/*.jsonl --out fastapply/judge/weights
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

#: LightGBM's settings: small trees (7 leaves served the most at the bound of the 8-fold
#: validation, against 15 and 31), many rows per leaf: the labels are few per repository.
PARAMS: dict[str, Any] = {
    "n_estimators": 400, "learning_rate": 0.03, "num_leaves": 7, "min_child_samples": 20,
    "subsample": 0.8, "subsample_freq": 1, "colsample_bytree": 0.8, "reg_lambda": 1.0,
    "deterministic": True, "force_row_wise": True, "n_jobs": 2, "verbose": -1,
    "random_state": 0,
}
#: Features whose growth can only make a reading less likely right (LightGBM's monotone
#: constraints): what it removes that the snippet does not show, what it doubles, what it
#: breaks. They keep the trees from learning a repository's quirk the other way round.
DECREASING = ("removed_unshown", "removed_unshown_run", "removed_unshown_comments",
              "removed_unshown_definitions", "removed_declaration_comments",
              "added_not_in_snippet", "snippet_lines_missing", "doubled_adjacent",
              "near_copies_of_neighbours", "lines_in_excess", "syntax_errors_added",
              "definitions_doubled", "removed_unshown_over_least")
#: Thresholds tried: a reading is accepted at or above ``accept``; a certain merge whose
#: reading scores under ``veto`` is refused.
ACCEPTS = tuple(round(0.30 + 0.01 * k, 2) for k in range(70))
VETOES = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.15, 0.2)
#: Corpus name prefixes that are agent-written (the rest are generated snippets).
AGENT_PREFIX = "agent"


def params(extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """:data:`PARAMS` with the monotone constraints of :data:`DECREASING`; each ``extra``
    column (another judge's score) may only raise the score."""
    from fastapply.judge.features import FEATURES

    return {**PARAMS, "monotone_constraints":
            [-1 if f in DECREASING else 0 for f in FEATURES] + [1] * len(extra)}


def load_rows(paths: list[Path]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in paths:
        with path.open() as f:
            rows.extend(json.loads(line) for line in f if line.strip())
    return rows


def matrix(rows: list[dict[str, Any]], extra: tuple[str, ...] = ()) -> Any:
    """The rows' features as a float matrix, in :data:`FEATURES` order then ``extra``'s
    (NaN kept)."""
    import numpy as np

    from fastapply.judge.features import FEATURES

    return np.array([[float(r.get(f, np.nan)) for f in (*FEATURES, *extra)] for r in rows],
                    dtype=np.float64)


def join_lm_scores(rows: list[dict[str, Any]], path: Path) -> int:
    """Add ``lm_score`` (out-of-fold, from ``fastapply judge lm``'s ``lm_scores.jsonl``)
    to the rows it scores, by merge and reading; the others keep none (NaN). Returns how
    many rows were joined."""
    by = {(s["merge"], s["reading_index"]): s["lm_score"]
          for s in map(json.loads, path.read_text().splitlines())}
    joined = 0
    for r in rows:
        score = by.get((r["merge"], r["reading_index"]))
        if score is not None and not r["certain"]:
            r["lm_score"] = score
            joined += 1
    return joined


def merges(rows: list[dict[str, Any]], scores: Any) -> list[dict[str, Any]]:
    """Rows grouped by merge: corpus, certain, exact format, labels and scores in order."""
    by: dict[str, dict[str, Any]] = {}
    for r, s in zip(rows, scores, strict=True):
        m = by.setdefault(r["merge"], {"corpus": r["corpus"], "repo": r["repo"],
                                       "certain": bool(r["certain"]),
                                       "exact": not r["lazy"], "labels": [], "scores": []})
        m["labels"].append(r["label"])
        m["scores"].append(float(s))
    return list(by.values())


def replay(groups: list[dict[str, Any]], accept: float, veto: float) -> Counter[str]:
    """Served right / wrong / refused of the policy over merges, per corpus group
    (``agent_*``, ``generated_*``), and of those the unsure merges' (``*_unsure_*``)."""
    from fastapply.judge.policy import verdict

    out: Counter[str] = Counter()
    for m in groups:
        kind = "agent" if m["corpus"].startswith(AGENT_PREFIX) else "generated"
        k = verdict(m["scores"], m["certain"], m["exact"], accept, veto)
        outcome = "refused" if k is None else ("right" if m["labels"][k] else "wrong")
        out[f"{kind}_{outcome}"] += 1
        out[f"{kind}_merges"] += 1
        if not m["certain"]:
            out[f"{kind}_unsure_{outcome}"] += 1
    return out


def calibrate(groups: list[dict[str, Any]], max_wrong: float) -> dict[str, Any]:
    """The thresholds: ``veto``, the one that refuses the most more certain-wrong merges
    than certain-right ones (0 where none does); then ``accept``, the one that serves the
    most agent-written merges right while the unsure merges it serves wrong stay at most
    ``max_wrong`` of the merges of each corpus group (a certain merge the judge cannot
    veto is the merge's own wrong file, counted in the figures, not by this bound); None
    where no threshold keeps to it (then the figures are of the certain merges alone)."""
    base = replay(groups, 1.0, 0.0)

    def caught(veto: float) -> int:
        c = replay(groups, 1.0, veto)
        return sum(base[f"{k}_wrong"] - c[f"{k}_wrong"] - (base[f"{k}_right"] - c[f"{k}_right"])
                   for k in ("agent", "generated"))

    veto = max(VETOES, key=lambda v: (caught(v), -v))
    best: dict[str, Any] | None = None
    for accept in ACCEPTS:
        c = replay(groups, accept, veto)
        ok = all(c[f"{k}_unsure_wrong"] <= max_wrong * c[f"{k}_merges"]
                 for k in ("agent", "generated") if c[f"{k}_merges"])
        key = (c["agent_right"] + c["generated_right"] / 10, -accept)
        if ok and (best is None or key > best["key"]):
            best = {"key": key, "accept": accept, "veto": veto, "figures": dict(c)}
    if best is None:  # no accept threshold is safe: serve the certain merges only
        return {"accept": None, "veto": veto, "figures": dict(replay(groups, 1.01, veto))}
    best.pop("key")
    return best


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rows", type=Path, nargs="+", help="JSONL rows of `fastapply judge data`")
    p.add_argument("--out", type=Path, default=Path(__file__).with_name("weights"),
                   help="where the model and its card go (default: the package's)")
    p.add_argument("--folds", type=int, default=8, help="repository folds (default 8)")
    p.add_argument("--max-wrong", type=float, default=0.005,
                   help="wrong served, as a share of merges, per corpus group (default 0.005)")
    p.add_argument("--lm-scores", type=Path, default=None,
                   help="a language-model judge's out-of-fold scores (`fastapply judge lm`'s "
                        "lm_scores.jsonl) as one more feature of unsure readings: a "
                        "measurement; the served judge cannot compute it, so --out must "
                        "not be the package's")


def run(args: argparse.Namespace) -> int:
    import lightgbm
    import numpy as np
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GroupKFold

    from fastapply.judge.features import FEATURES

    start = time.perf_counter()
    rows = load_rows(args.rows)
    extra: tuple[str, ...] = ()
    if args.lm_scores:
        if args.out.resolve() == Path(__file__).with_name("weights").resolve():
            raise SystemExit("--lm-scores: the served judge has no language model to "
                             "compute lm_score; write this measurement elsewhere (--out)")
        print(f"lm_score joined on {join_lm_scores(rows, args.lm_scores)} readings",
              flush=True)
        extra = ("lm_score",)
    x, y = matrix(rows, extra), np.array([r["label"] for r in rows])
    repos = np.array([r["repo"] for r in rows])
    oof = np.zeros(len(rows))
    for fold, (fit, held) in enumerate(GroupKFold(n_splits=args.folds).split(x, y, repos)):
        model = lightgbm.LGBMClassifier(**params(extra)).fit(x[fit], y[fit])
        oof[held] = np.asarray(model.predict_proba(x[held]))[:, 1]
        auc = roc_auc_score(y[held], oof[held]) if len(set(y[held])) == 2 else float("nan")
        print(f"fold {fold}: {len(held)} readings of {len(set(repos[held]))} repositories "
              f"held out, AUC {auc:.3f}", flush=True)
    unsure = np.array([not r["certain"] for r in rows])
    groups = merges(rows, oof)
    chosen = calibrate(groups, args.max_wrong)
    if chosen["accept"] is None:
        raise SystemExit(f"no threshold keeps wrong under {args.max_wrong:.2%}: "
                         f"refuse everything")
    counts = Counter(r["corpus"] for r in rows)
    per_corpus = {c: dict(replay([m for m in groups if m["corpus"] == c],
                                 chosen["accept"], chosen["veto"])) for c in sorted(counts)}
    model = lightgbm.LGBMClassifier(**params(extra)).fit(x, y)
    args.out.mkdir(parents=True, exist_ok=True)
    model.booster_.save_model(str(args.out / "judge.txt"))
    importance = sorted(zip((*FEATURES, *extra), model.booster_.feature_importance("gain"),
                            strict=True),
                        key=lambda t: -t[1])
    card = {
        "model": "LightGBM gradient-boosted trees over the readings' features "
                 "(fastapply.judge.features.FEATURES), text format (judge.txt)",
        "features": [*FEATURES, *extra], "accept": chosen["accept"], "veto": chosen["veto"],
        "max_wrong": args.max_wrong, "params": params(extra), "lightgbm": lightgbm.__version__,
        "validation": {
            "folds_by_repository": args.folds, "repositories": len(set(repos)),
            "auc_all_readings": round(float(roc_auc_score(y, oof)), 4),
            "auc_unsure_readings": round(float(roc_auc_score(y[unsure], oof[unsure])), 4),
            "policy_out_of_fold": chosen["figures"], "per_corpus": per_corpus},
        "data": {"readings": len(rows), "right": int(y.sum()), "merges": len(groups),
                 "readings_per_corpus": dict(counts),
                 "merges_per_corpus": dict(Counter(m["corpus"] for m in groups)),
                 "files": [p.name for p in args.rows]},
        "feature_gain": {f: round(float(g), 1) for f, g in importance},
    }
    (args.out / "card.json").write_text(json.dumps(card, indent=1) + "\n")
    print(json.dumps({k: card[k] for k in ("accept", "veto", "validation")}, indent=1))
    print(f"{len(rows)} readings, {time.perf_counter() - start:.0f} s; wrote {args.out}")
    return 0

