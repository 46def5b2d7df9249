"""Stage 3 leak audit: how many held-out pairs of a protocol were seen in training, and how many negatives are links
anywhere — the numbers notebook 03 prints beside every protocol."""
from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------- tasks
from lib.linkpred.protocols import ProtocolSplit
from lib.linkpred.sampling import (
    _member,
)


def leak_audit(split: ProtocolSplit) -> dict:
    """What of a protocol's test pairs could have been learnt, counted on title pairs across every graph.

    test_pos_seen: test positive title pairs that are an edge of a training graph (as trained on) or of a validation
    graph (its message passing or its positives); test_neg_true_links / test_neg_dist2_true_links (dist2) /
    test_neg_heart_true_links / test_neg_matched_true_links: negative title pairs that are a link in some graph of the
    dataset (label noise); *_titles_seen_share: share of the test graphs' node
    titles, and of the test positives' endpoint titles, that occur in a training or validation graph."""
    tp = split.tp
    seen_keys = [tp.edge_keys(g) for g in split.train]
    seen_keys += [tp.edge_keys(t.data) for t in split.val] + [np.unique(tp.keys(tp.gids(t.data), t.pos)) for t in split.val]
    seen = np.unique(np.concatenate(seen_keys)) if seen_keys else np.empty(0, dtype=np.int64)
    seen_titles = {tp.index[t] for g in [*split.train, *[v.data for v in split.val]] for t in g.titles}

    def keys(attr):
        parts = [tp.keys(tp.gids(t.data), getattr(t, attr)) for t in split.test if getattr(t, attr).numel()]
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)

    pos, neg, dist2 = keys("pos"), keys("neg"), keys("neg_dist2")

    def per_positive_keys(name):
        parts = [tp.keys(tp.gids(t.data), t.negatives(name)) for t in split.test if t.negatives(name).numel()]
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)

    extra = {}
    for name in ("heart", "matched"):
        k = per_positive_keys(name)
        extra.update({f"test_neg_{name}_pairs": int(k.size),
                      f"test_neg_{name}_true_links": int(_member(k, split.global_links).sum()),
                      f"{name}_missing": int(sum(t.missing.get(name, 0) for t in split.test))})
    test_titles = {tp.index[title] for task in split.test for title in task.data.titles}
    pos_titles = set(np.unique(tp.titles_of(pos)).tolist()) if pos.size else set()
    return {
        "protocol": split.protocol, "seed": split.seed,
        "test_pos_pairs": int(pos.size), "test_pos_seen": int(_member(pos, seen).sum()),
        "test_neg_pairs": int(neg.size), "test_neg_true_links": int(_member(neg, split.global_links).sum()),
        "test_neg_dist2_pairs": int(dist2.size),
        "test_neg_dist2_true_links": int(_member(dist2, split.global_links).sum()),
        "test_titles_seen_share": round(len(test_titles & seen_titles) / max(1, len(test_titles)), 4),
        "test_pos_titles_seen_share": round(len(pos_titles & seen_titles) / max(1, len(pos_titles)), 4),
        "dist2_missing": int(sum(t.dist2_missing for t in split.test)),
        **extra, "train_graphs": len(split.train), "skipped": len(split.skipped), **split.removed,
    }
