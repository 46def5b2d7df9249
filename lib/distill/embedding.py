"""Stage 5, embedding objective: a small student whose mean-pooled sentence embedding is trained to match a target
sentence encoder's (all-MiniLM-L6-v2, stage 2's node embedder), so it can replace that encoder as stage 3's node
embedder at a fraction of its cost.

- Data: `transfer_sources` (vital-article titles, Wikispeedia titles, vital lead sentences and RT plot lines, with a
  seeded validation set of titles that never enters training) and `mixture_plan` (index batches drawing each source
  at a chosen share).
- Targets: `target_embeddings` (stage 2's own encoder, cached on disk by the target's identity and the texts).
- Students: `assistant_student` (chosen layers of all-MiniLM-L6-v2, its tokenizer and embeddings) and
  `random_student` (the same architecture from a seed).
- Objective and loop: `embedding_loss` (cosine, MSE, in-batch similarity relations) and `train_embedding_student`
  (AdamW, linear schedule, resumable checkpoints).
- Validation: `embed`, `mean_cosine`, `validation_links` and `cosine_link_auc` (the feature-cosine heuristic on the
  vital-article title-mention links among validation titles), `titles_per_second` (stage 2's batching).
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm.auto import tqdm

from lib.distill.losses import DistillError
from lib.distill.models import Encoder

LOSSES = ("cosine", "mse", "cosine+mse")
SOURCES = ("vital_titles", "wikispeedia_titles", "sentences")


# ------------------------------------------------------------------------------------------------------------ data
def transfer_sources(seed: int = 0, val_fraction: float = 0.1, max_sentences: int = 20000,
                     max_chars: int = 200) -> dict:
    """Texts for the embedding objective, by source: {source: {"train": [str], "val": [str]}}.

    Titles: the 10,033 vital-article titles (the stage 1 `embedded` source) and the 4,604 Wikispeedia titles
    (data/wikispeedia/articles.tsv, cleaned as stage 1 reads them). A seeded `val_fraction` of the *union* of titles is
    held out, so a title shared by both sources is never in one's training set and the other's validation set.
    Sentences: lead sentences of the vital articles whose title is a training title, plus Rotten Tomatoes plot lines
    (lib.distill.data), of at most `max_chars` characters (so a student cut at 64 wordpieces sees what the target
    saw), at most `max_sentences` (seeded sample); they have no validation part.
    """
    from lib.crawl.wikispeedia import wikispeedia_snapshot
    from lib.distill.data import load_rotten_tomatoes, load_vital_articles, split_sentences

    if not 0 < val_fraction < 1:
        raise DistillError(f"val_fraction={val_fraction} must lie in (0, 1), e.g. 0.1")
    arts = load_vital_articles()
    vital = sorted(set(arts.title))
    speedia = sorted(wikispeedia_snapshot().links)
    union = sorted(set(vital) | set(speedia))
    rng = np.random.default_rng(seed)
    val = set(np.asarray(union, dtype=object)[rng.permutation(len(union))[:round(val_fraction * len(union))]])
    out = {name: {"train": [t for t in titles if t not in val], "val": [t for t in titles if t in val]}
           for name, titles in (("vital_titles", vital), ("wikispeedia_titles", speedia))}
    rt = load_rotten_tomatoes()
    pool = [s for t, e in zip(arts.title, arts.extract) if t not in val for s in split_sentences(e)]
    pool += [s for t in rt[rt.category == "plot"].text for s in split_sentences(t)]
    pool = sorted({p for p in pool if len(p) <= max_chars})
    keep = np.sort(rng.permutation(len(pool))[:max_sentences])
    out["sentences"] = {"train": [pool[i] for i in keep], "val": []}
    return out


def source_counts(sources: dict) -> pd.DataFrame:
    """Rows [source, train, val]: how many texts each source gives."""
    return pd.DataFrame([{"source": k, "train": len(v["train"]), "val": len(v["val"])} for k, v in sources.items()])


def mixture_plan(sizes: dict[str, int], weights: dict[str, float], steps: int, batch_size: int,
                 seed: int) -> list[np.ndarray]:
    """Index batches steps x [batch_size] into the concatenation of the sources (in `sizes`' order).

    Each slot of a batch draws a source with probability weight / sum(weights); within a source, indices follow epochs
    of seeded permutations, so every text of a source is seen once before any is seen twice. Sources of weight 0 are
    never drawn.
    """
    names = list(sizes)
    w = np.array([float(weights.get(n, 0.0)) for n in names])
    if (w < 0).any() or w.sum() <= 0 or any(sizes[n] < 1 for n, x in zip(names, w) if x > 0):
        raise DistillError(f"source weights {weights} over sizes {sizes} draw nothing; give a positive weight to a "
                           "non-empty source")
    rng = np.random.default_rng(seed)
    which = rng.choice(len(names), size=steps * batch_size, p=w / w.sum())
    offsets = np.concatenate([[0], np.cumsum([sizes[n] for n in names])[:-1]])
    flat = np.empty(steps * batch_size, dtype=np.int64)
    for k, n in enumerate(names):
        slots = np.flatnonzero(which == k)
        if not len(slots):
            continue
        reps = -(-len(slots) // sizes[n])
        order = np.concatenate([rng.permutation(sizes[n]) for _ in range(reps)])[:len(slots)]
        flat[slots] = offsets[k] + order
    return [flat[i * batch_size:(i + 1) * batch_size] for i in range(steps)]


# --------------------------------------------------------------------------------------------------------- targets
def target_embeddings(texts: list[str], model_dir: str | os.PathLike | None = None,
                      cache_dir: str | os.PathLike | None = None, progress: bool = True) -> np.ndarray:
    """The target encoder's embeddings [N, D] float32 of `texts`, computed by stage 2's encoder (lib.embed.encoder:
    its pooling and normalisation); model_dir None = all-MiniLM-L6-v2. Cached in `cache_dir` under the model's
    content identity and a digest of the texts."""
    from lib.common.paths import atomic_write_bytes
    from lib.embed.encoder import encode, load_model, model_id_of

    model = load_model(model_dir)
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"{model_id_of(model)}-{digest}.npy" if cache_dir else None
    if path is not None and path.is_file():
        x = np.load(path)
        if x.shape[0] == len(texts):
            return x
    x, _ = encode(model, texts, progress=progress)
    if path is not None:
        import io

        buf = io.BytesIO()
        np.save(buf, x)
        atomic_write_bytes(path, buf.getvalue())
    return x


# -------------------------------------------------------------------------------------------------------- students
def assistant_student(layers: list[int], model_dir: str | os.PathLike | None = None, dropout: float | None = None,
                      device: str | torch.device = "cpu") -> Encoder:
    """all-MiniLM-L6-v2 (or the BERT model in `model_dir`) keeping only the transformer layers `layers` (0-based, in
    that order), with its own tokenizer and embeddings: a len(layers) x 384 student before any training.
    dropout: replace the hidden and attention dropout (None keeps the model's)."""
    from transformers import AutoModel, AutoTokenizer

    from lib.distill.models import assistant_path

    src = Path(model_dir) if model_dir else assistant_path()
    model = AutoModel.from_pretrained(src)
    n = model.config.num_hidden_layers
    if model.config.model_type != "bert" or not layers or any(not 0 <= i < n for i in layers):
        raise DistillError(f"layers={layers} cannot be taken from {src.name} ({model.config.model_type}, {n} layers); "
                           f"give indices in 0..{n - 1} of a BERT model")
    model.encoder.layer = nn.ModuleList([copy.deepcopy(model.encoder.layer[i]) for i in layers])
    model.config.num_hidden_layers = len(layers)
    if dropout is not None:
        _set_dropout(model, dropout)
    model.to(device).eval()
    tag = "".join(str(i) for i in layers)
    return Encoder(model, AutoTokenizer.from_pretrained(src), "bert", f"assistant_L{tag}")


def random_student(layers: int, seed: int, model_dir: str | os.PathLike | None = None, dropout: float = 0.1,
                   device: str | torch.device = "cpu") -> Encoder:
    """The architecture of `assistant_student` (the assistant's tokenizer, widths and feed-forward size) with every
    weight drawn from a seed (BERT's initialisation)."""
    from transformers import AutoConfig, AutoTokenizer

    from lib.distill.models import assistant_path, make_student

    src = Path(model_dir) if model_dir else assistant_path()
    c = AutoConfig.from_pretrained(src)
    enc = make_student(AutoTokenizer.from_pretrained(src), layers, c.hidden_size, c.num_attention_heads, seed,
                       max_positions=c.max_position_embeddings, dropout=dropout, device=device,
                       intermediate=c.intermediate_size)
    enc.name = f"random_L{layers}"
    return enc


def _set_dropout(model: nn.Module, p: float) -> None:
    model.config.hidden_dropout_prob = model.config.attention_probs_dropout_prob = p
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = p


# ------------------------------------------------------------------------------------------------------- objective
def embedding_loss(student: torch.Tensor, target: torch.Tensor, loss: str = "cosine", w_rel: float = 0.0,
                   proj: nn.Module | None = None, normalise: bool = True) -> dict[str, torch.Tensor]:
    """Loss terms of a batch: student pooled embeddings [B, D_s] against target embeddings [B, D_t].

    proj: a map D_s -> D_t (a learned nn.Linear where the widths differ). normalise: compare unit vectors (the target
    encoder normalises, as all-MiniLM-L6-v2 does). loss: "cosine" (mean 1 - cos), "mse" (mean squared error per
    dimension), or both summed. w_rel: weight of the relation term, the MSE between the in-batch cosine matrices
    [B, B] of student and target (the pair geometry link prediction reads). Returns {"L_cos", "L_mse", "L_rel",
    "loss"}, each a scalar; terms not asked for are 0. Every term is 0 when student equals target.
    """
    if loss not in LOSSES:
        raise DistillError(f"loss={loss!r} is unknown; use one of {LOSSES}")
    s = proj(student) if proj is not None else student
    if s.shape != target.shape:
        raise DistillError(f"student embeddings {tuple(s.shape)} and targets {tuple(target.shape)} differ in shape; "
                           "give a projection to the target's width")
    t = target.to(s.dtype)
    if normalise:
        s, t = F.normalize(s, dim=-1), F.normalize(t, dim=-1)
    zero = s.new_zeros(())
    terms = {"L_cos": zero, "L_mse": zero, "L_rel": zero}
    if "cosine" in loss:
        terms["L_cos"] = (1 - F.cosine_similarity(s, t, dim=-1)).mean()
    if "mse" in loss:
        terms["L_mse"] = F.mse_loss(s, t)
    if w_rel > 0:
        sn, tn = F.normalize(s, dim=-1), F.normalize(t, dim=-1)
        terms["L_rel"] = F.mse_loss(sn @ sn.T, tn @ tn.T)
    terms["loss"] = terms["L_cos"] + terms["L_mse"] + w_rel * terms["L_rel"]
    return terms


@dataclass
class EmbedDistillConfig:
    """Hyper-parameters of one embedding-distillation run (the student's architecture and init are chosen outside)."""
    steps: int = 2000
    batch_size: int = 64
    max_seq_len: int = 64          # titles are < 20 wordpieces; lead sentences are cut here
    lr: float = 1e-4               # a fine-tuning rate: the assistant's layers start close to the target
    warmup_frac: float = 0.05
    weight_decay: float = 0.01
    loss: str = "cosine"
    w_rel: float = 0.0
    normalise: bool = True         # all-MiniLM-L6-v2 normalises its embeddings
    train_word_embeddings: bool = False  # the assistant's embeddings already are the target's; freezing them saves
    # the AdamW update of 30,522 x 384 rows per step
    seed: int = 0
    fused: bool = True

    def check(self) -> None:
        if self.loss not in LOSSES:
            raise DistillError(f"loss={self.loss!r} is unknown; use one of {LOSSES}")
        if self.steps < 1 or self.batch_size < 2 or self.max_seq_len < 4 or self.w_rel < 0:
            raise DistillError(f"steps={self.steps}, batch_size={self.batch_size}, max_seq_len={self.max_seq_len}, "
                               f"w_rel={self.w_rel} must be >= 1, >= 2, >= 4, >= 0")


def train_embedding_student(student: Encoder, texts: list[str], targets: np.ndarray, plan: list[np.ndarray],
                            cfg: EmbedDistillConfig, checkpoint: str | os.PathLike | None = None,
                            checkpoint_every: int = 0, max_steps: int | None = None, progress: bool = True) -> dict:
    """Train `student` so its mean-pooled embedding of texts[i] matches targets[i] [N, D_t].

    plan: index batches steps x [B] into `texts` (`mixture_plan`); len(plan) must equal cfg.steps. A projection
    nn.Linear(D_s, D_t) (seeded) is trained beside the student when the widths differ and is returned, not saved with
    the student. checkpoint: a file written atomically every `checkpoint_every` steps and after the last; a call with
    the same settings resumes from it and reproduces the uninterrupted run (the RNG state is in it, for dropout);
    other settings are refused naming the keys. max_steps: stop after that many steps of this call, as a kill would.
    Returns {"losses": DataFrame [step, L_cos, L_mse, L_rel, loss], "proj", "steps" (this call), "seconds" (over every
    call), "complete"}.
    """
    from lib.common.runinfo import load_state, save_state
    from lib.distill.train import _optimizer, optimiser_step

    cfg.check()
    if len(plan) != cfg.steps:
        raise DistillError(f"the batch plan has {len(plan)} steps, the config {cfg.steps}; build it with steps={cfg.steps}")
    if len(texts) != len(targets):
        raise DistillError(f"{len(texts)} texts but {len(targets)} target rows; give one target row per text")
    dev = student.model.device
    torch.manual_seed(cfg.seed)
    d_t = targets.shape[1]
    proj = nn.Linear(student.hidden, d_t).to(dev) if d_t != student.hidden else None
    word = student.model.embeddings.word_embeddings.weight
    word.requires_grad_(cfg.train_word_embeddings)
    params = [p for p in student.model.parameters() if p.requires_grad]
    params += list(proj.parameters()) if proj is not None else []
    opt, sched = _optimizer(params, cfg, cfg.steps)
    plan_digest = hashlib.sha256(np.concatenate(plan).tobytes()).hexdigest()[:16]
    config = {"student": student.name, "cfg": dataclasses.asdict(cfg), "texts": len(texts), "plan": plan_digest,
              "target_width": d_t}
    step0, rows, seconds = 0, [], 0.0
    ck = load_state(checkpoint, config, dev) if checkpoint else None
    if ck is not None:
        student.model.load_state_dict(ck["model"])
        if proj is not None:
            proj.load_state_dict(ck["proj"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        torch.set_rng_state(ck["rng"])
        step0, rows, seconds = ck["step"], ck["rows"], ck["seconds"]

    def save(step: int) -> None:
        if checkpoint:
            save_state(checkpoint, {"model": student.model.state_dict(), "proj": proj.state_dict() if proj else None,
                                    "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                                    "rng": torch.get_rng_state(), "config": config, "step": step, "rows": rows,
                                    "seconds": seconds})

    tgt = torch.as_tensor(targets, dtype=torch.float32)
    done = 0
    student.model.train()
    try:
        bar = tqdm(range(step0, cfg.steps), desc=f"{student.name} {cfg.loss}", disable=not progress, leave=False,
                   initial=step0, total=cfg.steps)
        for step in bar:
            if max_steps is not None and done >= max_steps:
                break
            t0 = time.perf_counter()
            idx = plan[step]
            pooled, _ = student.pooled(student.tokenize([texts[i] for i in idx], cfg.max_seq_len))
            terms = embedding_loss(pooled, tgt[idx].to(dev), cfg.loss, cfg.w_rel, proj, cfg.normalise)
            rows.append({"step": step, **optimiser_step(terms, opt, sched, params)})
            seconds += time.perf_counter() - t0
            done += 1
            if (checkpoint_every and (step + 1) % checkpoint_every == 0) or step == cfg.steps - 1:
                save(step + 1)
    finally:
        student.model.eval()
        word.requires_grad_(True)
    return {"losses": pd.DataFrame(rows), "proj": proj, "steps": done, "seconds": seconds,
            "complete": len(rows) == cfg.steps}


# ------------------------------------------------------------------------------------------------------ validation
@torch.no_grad()
def embed(enc: Encoder, texts: list[str], max_seq_len: int = 64, batch_size: int = 128) -> np.ndarray:
    """Unit-length mean-pooled embeddings [N, D] float32 of an in-memory encoder (eval mode)."""
    from lib.distill.eval import encode

    enc.model.eval()
    x = encode(enc, texts, max_seq_len, batch_size)
    return x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)


def mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Mean row-wise cosine between a [N, D] and b [N, D]."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True).clip(1e-12)
    b = b / np.linalg.norm(b, axis=1, keepdims=True).clip(1e-12)
    return float((a * b).sum(1).mean())


def validation_links(titles: list[str], seed: int = 0, negatives_per_positive: int = 5) -> dict:
    """Link pairs among `titles` for a feature-cosine AUC that never reads a test graph: the stage 1 `embedded`
    source's title-mention links (vital articles) with both ends in `titles`, undirected, against seeded uniform
    non-linked pairs of `titles`. Returns {"titles": [str], "pos": [P, 2], "neg": [P * k, 2]} (indices into titles)."""
    from lib.crawl.sources import embedded_snapshot

    links = embedded_snapshot().links
    index = {t: i for i, t in enumerate(titles)}
    pos = {(min(index[a], index[b]), max(index[a], index[b])) for a, outs in links.items() if a in index
           for b in outs if b in index and b != a}
    if not pos:
        raise DistillError(f"none of the {len(titles)} validation titles link to each other in the embedded source; "
                           "hold out more vital-article titles")
    rng = np.random.default_rng(seed)
    neg: set[tuple[int, int]] = set()
    want = negatives_per_positive * len(pos)
    while len(neg) < want:
        u, v = rng.integers(0, len(titles), size=2)
        p = (min(u, v), max(u, v))
        if u != v and p not in pos:
            neg.add((int(p[0]), int(p[1])))
    return {"titles": list(titles), "pos": np.array(sorted(pos)), "neg": np.array(sorted(neg))}


def cosine_link_auc(x: np.ndarray, links: dict) -> float:
    """ROC AUC of the feature-cosine heuristic on `validation_links`' pairs, features x [N, D] in links' title order."""
    from sklearn.metrics import roc_auc_score

    xn = x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)
    pairs = np.concatenate([links["pos"], links["neg"]])
    score = (xn[pairs[:, 0]] * xn[pairs[:, 1]]).sum(1)
    return float(roc_auc_score(np.r_[np.ones(len(links["pos"])), np.zeros(len(links["neg"]))], score))


def titles_per_second(model_dir: str | os.PathLike | None, titles: list[str], threads: int, batch_size: int = 256,
                      repeats: int = 3) -> float:
    """Best-of-`repeats` titles per second of stage 2's encoder (lib.embed.encoder.encode: tokenising included,
    equal-length batches) for the sentence-transformers folder `model_dir` (None = all-MiniLM-L6-v2) on `threads`
    CPU threads; the thread count is restored afterwards."""
    from lib.embed.encoder import encode, load_model

    model = load_model(model_dir)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        encode(model, titles[:batch_size], batch_size)
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            encode(model, titles, batch_size)
            best = min(best, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(before)
    return len(titles) / best


# --------------------------------------------------------------------------------------------------------- results
FRONTIER_COLUMNS = ("encoder", "kind", "layers", "titles_per_s_1thread", "titles_per_s_all", "protocol", "seed",
                    "gat_auc", "gat_mrr", "cosine_auc")


def frontier_rows(lp: pd.DataFrame, speed: pd.DataFrame | None, arms: pd.DataFrame, reference: str) -> pd.DataFrame:
    """One row per (encoder, protocol, seed) in FRONTIER_COLUMNS from lib.distill.lp.link_prediction_eval's rows
    [embedder, seed, protocol, model, auc, mrr]; speed: indexed by encoder with titles_per_s_<t>thread columns (the
    largest thread count is `titles_per_s_all`); arms: validation rows indexed by arm (init, layers)."""
    gat = lp[lp.model == "gat_model"].set_index(["embedder", "protocol", "seed"])
    cos = lp[lp.model == "cosine"].set_index(["embedder", "protocol", "seed"])
    threads = sorted(int(c.split("_")[-1][:-6]) for c in speed.columns if c.startswith("titles_per_s_")) \
        if speed is not None else []
    rows = []
    for (name, protocol, seed), g in gat.iterrows():
        ref = name == reference
        sp = speed.loc[name] if speed is not None and name in speed.index else None
        rows.append({"encoder": name, "kind": "sentence-transformer" if ref else f"student-{arms.loc[name, 'init']}",
                     "layers": 6 if ref else int(arms.loc[name, "layers"]),
                     "titles_per_s_1thread": float(sp["titles_per_s_1thread"]) if sp is not None and 1 in threads
                     else np.nan,
                     "titles_per_s_all": float(sp[f"titles_per_s_{threads[-1]}thread"]) if sp is not None and threads
                     else np.nan,
                     "protocol": protocol, "seed": int(seed), "gat_auc": float(g["auc"]), "gat_mrr": float(g["mrr"]),
                     "cosine_auc": float(cos.loc[(name, protocol, seed), "auc"])})
    return pd.DataFrame(rows, columns=list(FRONTIER_COLUMNS))


def paired_to_reference(front: pd.DataFrame, reference: str, metrics=("gat_auc", "gat_mrr", "cosine_auc"),
                        margin: float = 0.01) -> pd.DataFrame:
    """Per (encoder, protocol, metric): mean of encoder minus `reference` paired by seed, std, 95% t-interval and
    `within_margin` (the whole interval lies above -margin: no loss larger than `margin` is supported by the seeds)."""
    from scipy.stats import t as student_t

    ref = front[front.encoder == reference].set_index(["protocol", "seed"])
    rows = []
    for (enc, protocol), g in front[front.encoder != reference].groupby(["encoder", "protocol"], sort=False):
        g = g.set_index("seed")
        seeds = [s for s in g.index if (protocol, s) in ref.index]
        for m in metrics:
            d = np.array([g.loc[s, m] - ref.loc[(protocol, s), m] for s in seeds], dtype=float)
            n = len(d)
            mean = float(d.mean()) if n else float("nan")
            half = float(student_t.ppf(0.975, n - 1) * d.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
            rows.append({"encoder": enc, "protocol": protocol, "metric": m, "seeds": n,
                         "encoder_mean": float(g.loc[seeds, m].mean()), "reference_mean": float(ref.loc[
                             [(protocol, s) for s in seeds], m].mean()), "diff": mean,
                         "std": float(d.std(ddof=1)) if n > 1 else float("nan"), "ci_low": mean - half,
                         "ci_high": mean + half, "within_margin": bool(n > 1 and mean - half > -margin)})
    return pd.DataFrame(rows)


def goal_sentences(paired: pd.DataFrame, speed: pd.DataFrame | None, layers: dict[str, int], max_layers: int = 3,
                   margin: float = 0.01, min_ratio: float = 2.0) -> list[str]:
    """One sentence per student on the goal (at most `max_layers` layers; GatModel AUC and feature-cosine AUC within
    `margin` of the reference, paired by seed; at least `min_ratio` x the reference's titles/s at every thread count),
    printed from `paired_to_reference`'s rows and the speed table (indexed by encoder, ratio_<t>thread columns).

    "within" is read twice: the mean paired difference is above -margin (the point estimate), and the whole 95%
    interval is (what the seeds support)."""
    out = []
    for enc, g in paired[paired.metric.isin(["gat_auc", "cosine_auc"])].groupby("encoder", sort=False):
        parts = [f"{r.metric} {r.protocol} {r['diff']:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]"
                 for _, r in g.iterrows()]
        point = bool((g["diff"] > -margin).all())
        supported = bool(g.within_margin.all())
        ratios = ({c.split("_")[1]: float(speed.loc[enc, c]) for c in speed.columns if c.startswith("ratio_")}
                  if speed is not None and enc in speed.index else {})
        fast = bool(ratios) and all(v >= min_ratio for v in ratios.values())
        n_layers = layers.get(enc)
        small = n_layers is not None and n_layers <= max_layers
        speed_txt = ", ".join(f"{v:.2f}x at {k}" for k, v in ratios.items()) or "speed not measured"
        verdict = ("met" if point and supported and fast and small else
                   "met by the point estimates but not supported by the seeds' intervals" if point and fast and small
                   else "not met")
        out.append(f"{enc} ({n_layers} layers; {speed_txt}): paired differences to the reference (95% interval) "
                   f"{'; '.join(parts)}; goal {verdict}.")
    return out
