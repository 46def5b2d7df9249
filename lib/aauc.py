"""Agnostic AUC (A-AUC, seed §5.4): does the embedding space rank semantically similar node pairs above others?

For a seeded sample of round(R_cos · N) nodes: scores = sigmoid(z_i · z_j), labels = [cos(x_i, x_j) > T_cos],
A-AUC = ROC-AUC of scores against labels over the sampled pairs.

Pairs: by default every unordered pair i < j of distinct sampled nodes.  `include_self=True` is the seed code's
variant: the whole sampled S×S matrix, i.e. each off-diagonal pair twice and every node with itself once (a
self-pair always has cosine 1 > T_cos, so it adds positives that a norm-growing encoder ranks first).
Ranking uses the logit z_i · z_j in float64, which orders pairs exactly as the exact sigmoid does (float32 sigmoid
saturates to 1.0 above ~17 and would invent ties).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch import Tensor

DEFAULT_R_COS = 0.1
DEFAULT_T_COS = 0.7


@dataclass(frozen=True)
class AAUCResult:
    """value is NaN exactly when the A-AUC is undefined; `reason` then says why."""

    value: float
    n_nodes: int  # sampled nodes
    n_pos: int  # pairs with cosine > T_cos (counting as the AUC counts them)
    n_neg: int
    include_self: bool
    reason: str = ""

    @property
    def defined(self) -> bool:
        return not math.isnan(self.value)

    @property
    def share_pos(self) -> float:
        """Share of the sampled pairs that count as positives; NaN when no pair was sampled (S < 2)."""
        n = self.n_pos + self.n_neg
        return self.n_pos / n if n else float("nan")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["value"] = None if math.isnan(self.value) else self.value
        return d


def sample_nodes(num_nodes: int, r_cos: float, seed: int) -> Tensor:
    """round(r_cos · num_nodes) distinct node ids [S] (sorted), drawn with a seeded generator."""
    if not (isinstance(r_cos, (int, float)) and 0.0 < r_cos <= 1.0):
        raise ValueError(f"r_cos={r_cos!r} must be in (0, 1]; it is the fraction of nodes sampled")
    k = int(round(r_cos * num_nodes))
    g = torch.Generator().manual_seed(int(seed))
    return torch.randperm(num_nodes, generator=g)[:k].sort().values


def aauc(z: Tensor, x: Tensor, r_cos: float = DEFAULT_R_COS, t_cos: float = DEFAULT_T_COS, seed: int = 0,
         include_self: bool = False, chunk_size: int = 256, exact_limit: int = 4_000_000) -> AAUCResult:
    """A-AUC of embeddings z [N, F_out] against input features x [N, F_in].

    chunk_size: rows of the S×S pair matrix built at a time (memory O(chunk_size · S)).
    exact_limit: up to this many pairs the scores are collected and sklearn's roc_auc_score is used; above it a
    chunked Mann–Whitney count gives the same value with memory O(#minority-class pairs + chunk).
    """
    if not (isinstance(t_cos, (int, float)) and -1.0 <= t_cos <= 1.0):
        raise ValueError(f"t_cos={t_cos!r} must be in [-1, 1]; it is a cosine-similarity threshold")
    if z.dim() != 2 or x.dim() != 2 or z.size(0) != x.size(0):
        raise ValueError(f"embeddings z {tuple(z.shape)} and features x {tuple(x.shape)} must be [N, F] with the "
                         f"same N; pass the embeddings of the same graph's nodes")
    idx = sample_nodes(x.size(0), r_cos, seed)
    s = idx.numel()
    if s < 2:
        return AAUCResult(float("nan"), s, 0, 0, include_self,
                          f"only {s} node(s) sampled (N={x.size(0)}, r_cos={r_cos}); need at least 2")
    zs = z.detach().index_select(0, idx).double()
    xs = torch.nn.functional.normalize(x.detach().index_select(0, idx).double(), dim=1)
    if not (torch.isfinite(zs).all() and torch.isfinite(xs).all()):
        return AAUCResult(float("nan"), s, 0, 0, include_self, "embeddings or features contain NaN/inf")

    n_pairs = s * s if include_self else s * (s - 1) // 2
    if n_pairs <= exact_limit:
        parts = list(_row_blocks(zs, xs, t_cos, include_self, chunk_size))
        scores = torch.cat([p[0] for p in parts]).numpy()
        labels = torch.cat([p[1] for p in parts]).numpy()
        n_pos = int(labels.sum())
        n_neg = labels.size - n_pos
        if n_pos == 0 or n_neg == 0:
            return _undefined(s, n_pos, n_neg, include_self, t_cos)
        value = float(roc_auc_score(labels, scores))
        return AAUCResult(value, s, n_pos, n_neg, include_self)
    return _chunked_mann_whitney(zs, xs, t_cos, include_self, chunk_size, s)


def _undefined(s, n_pos, n_neg, include_self, t_cos) -> AAUCResult:
    which = "positive (cosine > T_cos)" if n_pos == 0 else "negative (cosine <= T_cos)"
    return AAUCResult(float("nan"), s, n_pos, n_neg, include_self,
                      f"no {which} pair among {s} sampled nodes at t_cos={t_cos}; AUC is undefined")


def _row_blocks(zs: Tensor, xs: Tensor, t_cos: float, include_self: bool, chunk_size: int):
    """Yield (logits [m], labels [m] bool) for the pairs, one block of rows at a time."""
    s = zs.size(0)
    for start in range(0, s, chunk_size):
        stop = min(start + chunk_size, s)
        logit = zs[start:stop] @ zs.T  # [m, S]
        label = (xs[start:stop] @ xs.T) > t_cos
        if include_self:  # the seed's full matrix: every cell once
            yield logit.reshape(-1), label.reshape(-1)
        else:
            keep = torch.arange(s).unsqueeze(0) > torch.arange(start, stop).unsqueeze(1)
            yield logit[keep], label[keep]


def _chunked_mann_whitney(zs, xs, t_cos, include_self, chunk_size, s) -> AAUCResult:
    """AUC = P(score_pos > score_neg) + ½ P(tie), counted exactly: keep the sorted scores of the rarer class and
    count the other class against them block by block (no S×S matrix in memory)."""
    n_pos = n_neg = 0
    for _, lab in _row_blocks(zs, xs, t_cos, include_self, chunk_size):
        p = int(lab.sum())
        n_pos, n_neg = n_pos + p, n_neg + lab.numel() - p
    if n_pos == 0 or n_neg == 0:
        return _undefined(s, n_pos, n_neg, include_self, t_cos)
    minority_is_pos = n_pos <= n_neg
    kept = np.sort(np.concatenate([
        logit[lab == minority_is_pos].numpy() for logit, lab in _row_blocks(zs, xs, t_cos, include_self, chunk_size)
    ]))
    greater = 0.0  # sum over majority scores of (#minority below) + ½ (#minority equal)
    for logit, lab in _row_blocks(zs, xs, t_cos, include_self, chunk_size):
        other = logit[lab != minority_is_pos].numpy()
        lo = np.searchsorted(kept, other, side="left")
        hi = np.searchsorted(kept, other, side="right")
        greater += float(lo.sum()) + 0.5 * float((hi - lo).sum())
    frac = greater / (float(n_pos) * float(n_neg))  # P(majority score > minority score)
    value = frac if not minority_is_pos else 1.0 - frac
    return AAUCResult(value, s, n_pos, n_neg, include_self)


def aauc_scored(score_pairs, x: Tensor, r_cos: float = DEFAULT_R_COS, t_cos: float = DEFAULT_T_COS, seed: int = 0,
                include_self: bool = False, chunk_size: int = 65536) -> AAUCResult:
    """A-AUC of a model that scores pairs with a decoder of its own rather than z_i · z_j (lib.decoders): the same
    seeded node sample and labels as `aauc`, scores from score_pairs(pairs [2, P]) -> [P] (called chunk_size pairs at
    a time). With include_self, off-diagonal pairs weigh 2 and self-pairs 1: exactly the seed's S × S matrix."""
    _check_t_cos(t_cos)
    idx = sample_nodes(x.size(0), r_cos, seed)
    s = idx.numel()
    if s < 2:
        return AAUCResult(float("nan"), s, 0, 0, include_self,
                          f"only {s} node(s) sampled (N={x.size(0)}, r_cos={r_cos}); need at least 2")
    pairs = idx[torch.triu_indices(s, s, offset=0 if include_self else 1)]
    xn = torch.nn.functional.normalize(x.detach().double(), dim=1)
    labels = ((xn[pairs[0]] * xn[pairs[1]]).sum(1) > t_cos).numpy()
    with torch.no_grad():
        scores = np.concatenate([np.asarray(score_pairs(pairs[:, a:a + chunk_size]).detach().double().cpu())
                                 for a in range(0, pairs.size(1), chunk_size)])
    weight = np.where(pairs[0].numpy() == pairs[1].numpy(), 1.0, 2.0) if include_self else np.ones(labels.size)
    n_pos, n_neg = int(weight[labels].sum()), int(weight[~labels].sum())
    if n_pos == 0 or n_neg == 0:
        return _undefined(s, n_pos, n_neg, include_self, t_cos)
    return AAUCResult(float(roc_auc_score(labels, scores, sample_weight=weight)), s, n_pos, n_neg, include_self)


# ---------------------------------------------------------------- stage 4: analysis helpers (notebook 04)


def _check_t_cos(t_cos) -> None:
    if not (isinstance(t_cos, (int, float)) and -1.0 <= t_cos <= 1.0):
        raise ValueError(f"t_cos={t_cos!r} must be in [-1, 1]; it is a cosine-similarity threshold")


def aauc_on_pairs(z: Tensor, x: Tensor, pairs: Tensor, t_cos: float = DEFAULT_T_COS,
                  chunk_size: int = 65536) -> AAUCResult:
    """A-AUC restricted to given node pairs (e.g. pairs inside one topic, or across BFS branches).

    z: [N, F_out] embeddings, x: [N, F_in] input features, pairs: [2, P] node ids.  Scores are the logits z_i·z_j
    (ranked as sigmoid(z_i·z_j)), labels cos(x_i, x_j) > t_cos, both in float64 as `aauc`.  Pairs are scored
    chunk_size at a time so memory stays O(chunk_size · F).  NaN with a reason when a class or the group is empty.
    """
    _check_t_cos(t_cos)
    if z.dim() != 2 or x.dim() != 2 or z.size(0) != x.size(0):
        raise ValueError(f"embeddings z {tuple(z.shape)} and features x {tuple(x.shape)} must be [N, F] with the "
                         f"same N; pass the embeddings of the same graph's nodes")
    if pairs.dim() != 2 or pairs.size(0) != 2:
        raise ValueError(f"pairs has shape {tuple(pairs.shape)}; it must be [2, P] node ids")
    if pairs.numel() == 0:
        return AAUCResult(float("nan"), 0, 0, 0, False, "no pairs in this group; A-AUC is undefined")
    zd = z.detach().double()
    xn = torch.nn.functional.normalize(x.detach().double(), dim=1)
    scores, labels = [], []
    for start in range(0, pairs.size(1), chunk_size):
        u, v = pairs[0, start:start + chunk_size], pairs[1, start:start + chunk_size]
        scores.append((zd[u] * zd[v]).sum(1))
        labels.append((xn[u] * xn[v]).sum(1) > t_cos)
    scores, labels = torch.cat(scores).numpy(), torch.cat(labels).numpy()
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    n_nodes = int(torch.unique(pairs).numel())
    if n_pos == 0 or n_neg == 0:
        return _undefined(n_nodes, n_pos, n_neg, False, t_cos)
    return AAUCResult(float(roc_auc_score(labels, scores)), n_nodes, n_pos, n_neg, False)


def sampled_pairs(num_nodes: int, r_cos: float, seed: int) -> Tensor:
    """All unordered pairs i < j [2, S(S-1)/2] of the S nodes `sample_nodes` draws (the pairs `aauc` scores)."""
    idx = sample_nodes(num_nodes, r_cos, seed)
    iu = torch.triu_indices(idx.numel(), idx.numel(), offset=1)
    return idx[iu]


def aauc_by_group(z: Tensor, x: Tensor, groups: list, r_cos: float = DEFAULT_R_COS, t_cos: float = DEFAULT_T_COS,
                  seed: int = 0) -> dict:
    """A-AUC per group label over the sampled pairs whose two nodes share that label (e.g. a topic).

    groups: [N] label per node (None = unknown, left out).  Returns {label: AAUCResult}, labels sorted."""
    if len(groups) != x.size(0):
        raise ValueError(f"groups has {len(groups)} labels but x has {x.size(0)} nodes; pass one label per node")
    pairs = sampled_pairs(x.size(0), r_cos, seed)
    lab = np.array([g if g is not None else "" for g in groups], dtype=object)
    a, b = lab[pairs[0].numpy()], lab[pairs[1].numpy()]
    out = {}
    for g in sorted({v for v in lab if v != ""}):
        keep = torch.from_numpy((a == g) & (b == g))
        out[g] = aauc_on_pairs(z, x, pairs[:, keep], t_cos)
    return out


def aauc_inside_across(z: Tensor, x: Tensor, branch, r_cos: float = DEFAULT_R_COS,
                       t_cos: float = DEFAULT_T_COS, seed: int = 0) -> dict:
    """A-AUC over the sampled pairs inside one BFS branch vs across two branches.

    branch: [N] branch id per node (see lib.crawl.bfs_branches: root 0, unreached -1); pairs with the root or an
    unreached node are left out of both.  Returns {"inside": AAUCResult, "across": AAUCResult}."""
    branch = torch.as_tensor(branch, dtype=torch.long)
    if branch.numel() != x.size(0):
        raise ValueError(f"branch has {branch.numel()} ids but x has {x.size(0)} nodes; pass one id per node")
    pairs = sampled_pairs(x.size(0), r_cos, seed)
    bu, bv = branch[pairs[0]], branch[pairs[1]]
    known = (bu > 0) & (bv > 0)
    return {"inside": aauc_on_pairs(z, x, pairs[:, known & (bu == bv)], t_cos),
            "across": aauc_on_pairs(z, x, pairs[:, known & (bu != bv)], t_cos)}


def top_new_links(z: Tensor, edge_index: Tensor, k: int, chunk_size: int = 1024) -> tuple[Tensor, Tensor]:
    """The k node pairs [2, ≤k] (i < j, never an edge of `edge_index` in either direction, never i = j) with the
    highest logits z_i·z_j, best first, and those logits [≤k] (fewer only when fewer non-edges exist).

    Hand-written rather than a dense N×N topk: chunked over rows, memory O(chunk_size · N) at 20,000 nodes."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k={k!r} must be an integer >= 1")
    n = z.size(0)
    zd = z.detach().double()
    ei = torch.cat([edge_index, edge_index.flip(0)], dim=1)  # mask both directions whatever the input holds
    src, dst = ei
    best_s = torch.empty(0, dtype=torch.float64)
    best_p = torch.empty((2, 0), dtype=torch.long)
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        s = zd[start:stop] @ zd.T  # [m, N]
        s[torch.arange(n).unsqueeze(0) <= torch.arange(start, stop).unsqueeze(1)] = -math.inf  # i < j only
        here = (src >= start) & (src < stop)
        s[src[here] - start, dst[here]] = -math.inf  # existing links are not "new"
        vals, flat = torch.topk(s.reshape(-1), min(k, s.numel()))
        ok = vals > -math.inf
        pairs = torch.stack([flat[ok] // n + start, flat[ok] % n])
        best_s, best_p = torch.cat([best_s, vals[ok]]), torch.cat([best_p, pairs], dim=1)
        order = torch.argsort(best_s, descending=True, stable=True)[:k]
        best_s, best_p = best_s[order], best_p[:, order]
    return best_p, best_s


def load_run_models(run_dir, device: str = "cpu") -> dict:
    """The stage-3 results of `run_dir` (notebook 03): {"seeds": [S...], "splits": {S: {train, val, test}},
    "checkpoints": {S: {kind: Path}}, "models": {S: {kind: model in eval mode}}, "configs": {S: {kind: the
    checkpoint's config dict (kind, model, train)}}}.

    Raises FileNotFoundError naming what is missing (metrics.json, its train_gat section, a checkpoint file) and
    telling to run notebook 03 on that run folder."""
    from pathlib import Path
    import json

    from lib.train import load_checkpoint

    run = Path(run_dir)
    fix = f"run notebook 03 (train_gat) with run_dir={str(run_dir)!r} first"
    metrics = run / "metrics.json"
    if not metrics.is_file():
        raise FileNotFoundError(f"run folder {run} has no metrics.json; {fix}")
    tg = json.loads(metrics.read_text(encoding="utf-8")).get("train_gat")
    if not tg or not tg.get("checkpoints"):
        raise FileNotFoundError(f"{metrics} has no train_gat checkpoints; {fix}")
    out = {"seeds": [], "splits": {}, "checkpoints": {}, "models": {}, "configs": {}}
    for s, kinds in sorted(tg["checkpoints"].items(), key=lambda kv: int(kv[0])):
        seed = int(s)
        out["seeds"].append(seed)
        out["splits"][seed] = tg["splits"][s]
        out["checkpoints"][seed], out["models"][seed], out["configs"][seed] = {}, {}, {}
        for kind, rec in kinds.items():
            # the recorded path may be absolute from another clone: fall back to the same file inside run_dir
            path = Path(rec["checkpoint"]) if rec.get("checkpoint") else None
            path = run / path if path is not None and not path.is_absolute() else path  # recorded relative to run_dir
            sub = rec.get("folder", f"checkpoints/seed{seed}/{kind}")
            local = run / sub / (path.name if path else f"epoch_{rec.get('best_epoch')}.pt")
            path = path if path is not None and path.is_file() else local
            if not path.is_file():
                raise FileNotFoundError(f"checkpoint {path} of seed {seed} / {kind} is missing in run folder {run}; "
                                        f"{fix}")
            model, ck = load_checkpoint(path, device)
            out["checkpoints"][seed][kind] = path
            out["configs"][seed][kind] = ck["config"]
            out["models"][seed][kind] = model.eval()
    return out


def trend_slopes(df) -> dict[str, dict[str, float]]:
    """Least-squares slope of the mean AUC and A-AUC over seeds against ln(training graphs), per protocol:
    df columns protocol, train_graphs, auc, aauc (one row per seed and size). NaN where fewer than two sizes have a
    defined value (one size in the grid, or A-AUC None because no test pair passed its cosine thresholds)."""
    import pandas as pd

    out = {}
    for protocol, g in df.groupby("protocol"):
        out[protocol] = {}
        for k in ("auc", "aauc"):
            m = pd.to_numeric(g[k], errors="coerce").groupby(g["train_graphs"]).mean().dropna()
            out[protocol][k] = float(np.polyfit(np.log(m.index.to_numpy(float)), m.to_numpy(float), 1)[0]) \
                if len(m) > 1 else float("nan")
    return out


def plot_trend(df, path=None, seed_reported=None):
    """AUC and A-AUC against the number of training graphs: df columns train_graphs, seed, protocol, auc, aauc.
    Mean with min–max band over seeds, one line per (metric, protocol); the seed report's points on a second panel."""
    import matplotlib.pyplot as plt
    import pandas as pd

    fig, axes = plt.subplots(1, 2 if seed_reported else 1, figsize=(11 if seed_reported else 6, 4), squeeze=False)
    ax = axes[0, 0]
    for (metric, ls), colour in zip([("auc", "-"), ("aauc", "--")], ["C0", "C1"]):
        for protocol, marker in (("seed", "o"), ("leak_free", "s")):
            # A-AUC is None where no test pair passes its cosine thresholds (tiny graphs): such points are not drawn
            h = df[df["protocol"] == protocol].assign(**{metric: lambda d: pd.to_numeric(d[metric], errors="coerce")})
            g = h.dropna(subset=[metric]).groupby("train_graphs")[metric]
            m, lo, hi = g.mean(), g.min(), g.max()
            if m.empty:
                continue
            ax.plot(m.index, m.values, ls=ls, marker=marker, color=colour, label=f"{metric.upper()} · {protocol}")
            ax.fill_between(m.index, lo.values, hi.values, color=colour, alpha=0.12)
    ax.set(xlabel="training graphs (this run)", ylabel="score on the test graphs", title="this run: mean, min–max over seeds")
    ax.legend(fontsize=7)
    if seed_reported:
        b = axes[0, 1]
        n = [r["train_graphs"] for r in seed_reported]
        b.plot(n, [r["auc"] for r in seed_reported], "-o", color="C0", label="AUC (seed report)")
        b.plot(n, [r["aauc"] for r in seed_reported], "--o", color="C1", label="A-AUC (seed report)")
        b.set(xlabel="training graphs (seed report, 20,000-node graphs)", ylabel="score", title="seed report, one run each")
        b.legend(fontsize=7)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig


def plot_tradeoff(df, path=None, seed_reported=None):
    """Scatter of test AUC against test A-AUC, one point per run (df columns label, protocol, auc, aauc); runs whose
    A-AUC is undefined are not drawn."""
    import matplotlib.pyplot as plt
    import pandas as pd

    fig, ax = plt.subplots(figsize=(6.6, 4.8))
    for i, (label, g) in enumerate(df.groupby("label", sort=False)):
        for protocol, marker in (("seed", "o"), ("leak_free", "s")):
            h = g.loc[g["protocol"] == protocol, ["auc", "aauc"]].apply(pd.to_numeric, errors="coerce").dropna()
            ax.scatter(h["aauc"], h["auc"], marker=marker, color=f"C{i % 10}", alpha=0.8, label=f"{label} · {protocol}")
    for r in seed_reported or []:
        ax.scatter(r["aauc"], r["auc"], marker="*", s=160, color="k")
        ax.annotate(f"seed report, {r['train_graphs']}", (r["aauc"], r["auc"]), textcoords="offset points",
                    xytext=(5, -3), fontsize=7)
    ax.set(xlabel="A-AUC (self-pairs excluded)", ylabel="AUC", title="AUC / A-AUC trade-off across runs")
    ax.legend(fontsize=6, loc="best")
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig


# ---------------------------------------------------------------- stage 4: experiments behind notebook 04


@torch.no_grad()
def embed_graph(model, data, device="cpu") -> Tensor:
    """Eval-mode embeddings z [N, F_out] (float32, CPU) of one graph, message passing over all its edges (the seed
    code's setting for A-AUC)."""
    model.eval()
    return model(data.x.to(device), data.edge_index.to(device)).float().cpu()


def reference_embeddings(kind: str, data, out_channels: int, seed: int, model_cfg: dict | None = None) -> Tensor:
    """Embeddings [N, ·] of a reference scorer that needs no training.

    "features": the input features themselves, L2-normalised in float64, so z_i·z_j is exactly the cosine the labels
    threshold (A-AUC 1.0 by construction); "random": seeded N(0, 1) vectors [N, out_channels];
    "untrained": a GatModel with the initial weights `lib.train.train_model` draws for this seed (eval mode)."""
    from lib.train import build_model, derive_seed

    if kind == "features":
        return torch.nn.functional.normalize(data.x.double(), dim=1)
    if kind == "random":
        g = torch.Generator().manual_seed(derive_seed(seed, "random-scorer", str(data.graph_id)))
        return torch.randn(data.num_nodes, out_channels, generator=g)
    if kind == "untrained":
        torch.manual_seed(derive_seed(seed, "init", "gat_model"))
        return embed_graph(build_model("gat_model", model_cfg), data)
    raise ValueError(f"reference scorer {kind!r} is unknown; use 'features', 'random' or 'untrained'")


def nested_subsets(train_ids: list, sizes: list, seed: int) -> dict:
    """{size: the first `size` graphs of one seeded permutation of train_ids}: each subset contains the smaller ones."""
    if not sizes or min(sizes) < 1 or max(sizes) > len(train_ids):
        raise ValueError(f"size_grid={sizes!r} must hold sizes between 1 and the {len(train_ids)} training graphs of "
                         f"the stage-3 split; lower it or train stage 3 on more graphs")
    perm = torch.randperm(len(train_ids), generator=torch.Generator().manual_seed(int(seed))).tolist()
    return {n: [train_ids[i] for i in perm[:n]] for n in sorted(sizes)}


def size_trend(graphs: dict, splits: dict, seeds: list, sizes: list, model_cfg: dict, train_cfg: dict,
               epochs: int = 2, device: str = "cpu", progress: bool = True,
               protocols: tuple = ("seed", "leak_free")) -> list[dict]:
    """Train a fresh GatModel per (seed, size, training set) on nested subsets of that seed's stage-3 training graphs
    (no validation, the last epoch is kept as the seed code did) and evaluate it on that seed's test graphs under
    each protocol (uniform negatives). A protocol that cleans the training graphs ("leak_free", "new_nodes") trains on
    its cleaned copies of the same subset. graphs: graph_id -> Data. Returns rows {seed, train_graphs, protocol, auc,
    ap, ..., aauc, aauc_self}."""
    from tqdm.auto import tqdm

    from lib.protocols import TRAIN_SET, TitlePairs, make_protocol
    from lib.train import TrainConfig, evaluate_model, train_model

    rows = []
    tp = TitlePairs(graphs.values())
    jobs = [(s, n, ids) for s in seeds for n, ids in nested_subsets(splits[s]["train"], sizes, s).items()]
    built = {}
    for s, n, ids in tqdm(jobs, desc="size trend", disable=not progress):
        cfg = TrainConfig(**{**train_cfg, "epochs": epochs, "seed": s, "device": device, "amp": False,
                             "log_aauc": False, "log_eval": False})
        models = {}
        for protocol in protocols:
            if (s, protocol) not in built:
                sp = splits[s]
                built[s, protocol] = make_protocol(graphs, sp["train"], sp.get("val", []), sp["test"], protocol, s,
                                                   cfg.holdout_fraction, cfg.neg_rate, cfg.new_node_fraction, tp=tp,
                                                   per_positive=0)  # uniform negatives only: skip the others' cost
            ps = built[s, protocol]
            if TRAIN_SET[protocol] not in models:
                subset = [g for g in ps.train if g.graph_id in set(ids)]
                models[TRAIN_SET[protocol]], _ = train_model("gat_model", model_cfg, subset, [], cfg, progress=False)
            m = evaluate_model(models[TRAIN_SET[protocol]], ps.test, cfg, progress=False,
                               negative_sets=("uniform",))["mean"]["uniform"]
            rows.append({"seed": s, "train_graphs": n, "protocol": protocol, **m})
    return rows


def topic_table(rows: list[dict]) -> "pd.DataFrame":
    """Per-topic A-AUC rows ({topic, value, n_pos, n_neg} per graph and seed, from aauc_by_group) -> one row per topic:
    mean and std of the defined values, how many were defined out of how many graphs, pair counts; most positive
    pairs first. No rows (a source without topic labels) give an empty table with the same columns."""
    import pandas as pd

    cols = ["aauc", "aauc_std", "defined", "graphs", "n_pos", "n_neg"]
    if not rows:
        return pd.DataFrame(columns=cols, index=pd.Index([], name="topic"))
    return (pd.DataFrame(rows).groupby("topic")
            .agg(aauc=("value", "mean"), aauc_std=("value", "std"), defined=("value", "count"),
                 graphs=("value", "size"), n_pos=("n_pos", "sum"), n_neg=("n_neg", "sum"))
            .sort_values("n_pos", ascending=False))
