"""Stage 3 leak audit: how many held-out pairs of a protocol were seen in training, and how many negatives are links
anywhere — the numbers notebook 03 prints beside every protocol."""

from __future__ import annotations

import numpy as np

from lib.linkpred.negative_sets.registry import REGISTRY, held_sets
from lib.linkpred.protocols import ProtocolSplit
from lib.linkpred.sampling import is_member


def audit_columns(what: str, sets=None) -> list[str]:
    """The audit's column of each negative set (registry order): what = "pairs" (<key>_pairs) or "true_links"
    (<key>_true_links), key = NegativeSet.audit_key; sets: registry names, None: the default sets."""
    return [f"{REGISTRY[n].audit_key}_{what}" for n in (held_sets([]) if sets is None else sets)]


def leak_audit(split: ProtocolSplit) -> dict:
    """What of a protocol's test pairs could have been learnt, counted on title pairs across every graph.

    test_pos_seen: test positive title pairs that are an edge of a training graph (as trained on) or of a validation
    graph (its message passing or its positives); per negative set (the default sets and any other the test tasks
    hold, lib.linkpred.negative_sets): <key>_pairs, its distinct test title pairs, and <key>_true_links, those that are
    a link in some graph of the dataset (label noise), key = NegativeSet.audit_key ("test_neg" for uniform,
    "test_neg_<set>" otherwise), and <set>_missing, the test positives it found no negative for (sets that can miss
    one); *_titles_seen_share: share of the test graphs' node titles, and of the test positives' endpoint titles,
    that occur in a training or validation graph."""
    tp = split.tp
    seen_keys = [tp.edge_keys(g) for g in split.train]
    seen_keys += [tp.edge_keys(t.data) for t in split.val] + [
        np.unique(tp.keys(tp.gids(t.data), t.pos)) for t in split.val
    ]
    seen = np.unique(np.concatenate(seen_keys)) if seen_keys else np.empty(0, dtype=np.int64)
    seen_titles = {tp.index[t] for g in [*split.train, *[v.data for v in split.val]] for t in g.titles}

    def keys(pairs_of):
        parts = [tp.keys(tp.gids(t.data), pairs_of(t)) for t in split.test if pairs_of(t).numel()]
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)

    pos = keys(lambda t: t.pos)
    negatives, missing = {}, {}
    for name in held_sets(split.test):
        k, key = keys(lambda t: t.negatives(name)), REGISTRY[name].audit_key
        negatives.update(
            {f"{key}_pairs": int(k.size), f"{key}_true_links": int(is_member(k, split.global_links).sum())}
        )
        if REGISTRY[name].can_miss:
            missing[f"{name}_missing"] = int(sum(t.missing(name) for t in split.test))
    test_titles = {tp.index[title] for task in split.test for title in task.data.titles}
    pos_titles = set(np.unique(tp.titles_of(pos)).tolist()) if pos.size else set()
    return {
        "protocol": split.protocol,
        "seed": split.seed,
        "test_pos_pairs": int(pos.size),
        "test_pos_seen": int(is_member(pos, seen).sum()),
        **negatives,
        "test_titles_seen_share": round(len(test_titles & seen_titles) / max(1, len(test_titles)), 4),
        "test_pos_titles_seen_share": round(len(pos_titles & seen_titles) / max(1, len(pos_titles)), 4),
        **missing,
        "train_graphs": len(split.train),
        "skipped": len(split.skipped),
        **split.removed,
    }
