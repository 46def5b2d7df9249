"""Reading runs published in an older format: every translation of an older record into the current names and shape.

The readers of run folders (the reference runs under outputs/reference/, a grid's checkpoint folder, a run folder
re-run in part) pass what they read through these functions, so the rest of the code knows only the current names.
Each translation has a test that reads an older record and checks the current one (tests/test_published.py;
stage 3's checkpoints: tests/test_stack_features.py).

- `metrics(record)`: a metrics.json whose stage-3 distance-2 negative set is spelt `hard`, its name before it was
  called `dist2`, in keys ("shortcut_hard_auc", "test_neg_hard_pairs") and values ("negatives": "hard") -> `dist2`.
  Only the sections of stages 3 and 3b ("train_gat", "beyond") name negative sets.
- `negative_set(name)`: one negative-set name of a published table (train_gat_rows.csv) -> its current name.
- `link_rows(rows)`: stage 3's result rows made before notebook 03 had two supervisions, without a `supervision`
  key -> the heuristics among them (the four of that time) with supervision 'none', as a scorer trained on nothing
  is written now (lib.run.facts.is_heuristic reads that).
- `distill_params(record)`: a params_05.json record that names the `distill_` parameters of notebook 05 without
  their prefix (`seeds`, `steps`, `batch_size`, ...) -> the field names; a field name present wins over its
  unprefixed twin. A record without `embedding_methods` ran none of those runs (they did not exist yet): [].
- `grid_settings(saved, current)`: a distillation grid's settings.json kept before the L_EMB parameters existed ->
  those parameters at the current values (they only add runs, so no finished row depends on them), with the
  names of `distill_params`.
- `rows_match_digest(rows, digest)`: a grid folder kept before settings.json existed names its settings by a digest
  in each row of rows.jsonl (`_digest`) -> whether they are the current ones.
- `parse_student_folder(name)`: a saved stage-5 student folder named without its init (`student_{L}x{H}_s{seed}`) ->
  (kind, shape, init ""), the parts of `{kind}_{L}x{H}_{init}_s{seed}`.
- `run_params(record)`: a run folder's params.json (or a notebook's params_*.json) made while notebooks 05 and 05b
  named their GatModel epochs `lp_epochs` and `embedder_lp_epochs` -> `gat_epochs`, the one name of notebooks 03,
  03b, 05 and 05b (lib.linkpred.config.GatTrainingParams); made while notebooks 02, 03, 03b and 04 named their first
  random seed `seed` -> `first_seed`; made while notebook 05 named L_OUT's settings with notebook 06's prefix
  (`kd_temperature`, `kd_alpha`) -> `out_temperature`, `out_soft_share`; a record whose names hold different values
  keeps them.
- `params_with_defaults(recorded, defaults)`: a run folder's params.json made before a notebook gained a parameter
  -> that parameter at its notebook default (the value the notebook ran with).
- `train_settings(record)`: a stage-3 checkpoint's training settings that name the shares of its training negatives
  one field per set (`dist2_negative_share`, `matched_negative_share`) -> the one mix {set: share} of those with a
  share (`negative_mix`).
- `linkpred_config(config)`: a stage-3 checkpoint's whole stored config (its `model` and `train` settings) -> the
  current names: its training settings through `train_settings`, and a model config made before the heuristic
  stack's features were a setting -> `stack_features` the four it was trained on (STACK_FEATURES), so published
  checkpoints load and a run folder checkpointed under those names resumes (lib.common.training's read_config).

Not a translation: stage 3's published runs without validation scores (seed180, seed315) are read as they are, since
lib.metrics.selection.choose_on_validation chooses on the test metric wherever no candidate has a validation score.
"""

from __future__ import annotations

import re

DIST2 = "dist2"
_HARD = re.compile(r"(?<![a-z0-9])hard(?![a-z0-9])")
NEGATIVE_SET_SECTIONS = ("train_gat", "beyond")
"""The metrics.json sections that name negative sets (stages 3 and 3b)."""

HEURISTICS_WITHOUT_SUPERVISION = ("cosine", "pref_attach", "common_neighbours", "adamic_adar")
"""Notebook 03's heuristics when its rows had no `supervision`."""

DISTILL_PREFIXED = ("seeds", "steps", "batch_size", "max_seq_len", "lr", "warmup_frac", "weight_decay")
"""Notebook 05's parameters that params_05.json records spell without their `distill_` prefix."""
RUN_ADDING = ("embedding_methods", "embedding_target", "embedding_loss", "w_emb")
"""Notebook 05's L_EMB parameters: they only add runs to a grid, so a settings.json without them holds no row that
depends on them."""
STACK_FEATURES = ["cosine", "common_neighbours", "adamic_adar", "pref_attach"]
"""The heuristic stack's features of every stage-3 checkpoint made before they were a setting."""
TRAINING_SHARES = {"dist2_negative_share": "dist2", "matched_negative_share": "matched"}
"""The training settings that once named the share of one negative set each -> that set's name."""
OLDER_PARAMETER_NAMES = {
    "lp_epochs": "gat_epochs",
    "embedder_lp_epochs": "gat_epochs",
    "seed": "first_seed",
    "kd_temperature": "out_temperature",
    "kd_alpha": "out_soft_share",
    "beyond_hard_share": "beyond_dist2_share",
}
"""A parameter a run folder records under an older name -> its current name."""
ROW_DIGEST = "_digest"
"""The key of a rows.jsonl row that names its grid's settings by their digest (lib.common.hashing.config_digest)."""


def negative_set(name):
    """A negative-set name as the current code spells it (`hard` -> `dist2`); any other value unchanged."""
    return DIST2 if name == "hard" else name


def metrics(record: dict) -> dict:
    """A metrics.json record with stage 3's distance-2 negative set named `dist2` in the keys and values of its
    negative-set sections; the other sections unchanged."""

    def fix(obj):
        if isinstance(obj, dict):
            return {_HARD.sub(DIST2, k) if isinstance(k, str) else k: fix(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [fix(v) for v in obj]
        return negative_set(obj)

    return {k: fix(v) if k in NEGATIVE_SET_SECTIONS else v for k, v in record.items()}


def link_rows(rows: list[dict]) -> list[dict]:
    """Stage 3's result rows with supervision 'none' on a heuristic's row that has no `supervision`;
    others unchanged."""
    return [
        {**r, "supervision": "none"}
        if "supervision" not in r and r.get("model") in HEURISTICS_WITHOUT_SUPERVISION
        else r
        for r in rows
    ]


def _distill_names(values: dict) -> dict:
    unprefixed = {n: f"distill_{n}" for n in DISTILL_PREFIXED}
    return {unprefixed.get(k, k): v for k, v in values.items() if k not in unprefixed or unprefixed[k] not in values}


def run_params(record: dict) -> dict:
    """A run's recorded parameters with each older name (OLDER_PARAMETER_NAMES) under its current one, where the
    record holds the current one with the same value or not at all (different values name no run the current
    notebooks make, so they stay to be told apart)."""
    out = dict(record)
    for old, new in OLDER_PARAMETER_NAMES.items():
        if old in out and out.get(new, out[old]) == out[old]:
            out[new] = out.pop(old)
    return out


def distill_params(record: dict) -> dict:
    """A params_05.json record's values under notebook 05's field names (lib.distill.config.DistillParams; older
    names through `run_params`), with `embedding_methods` [] where the record has none."""
    return {"embedding_methods": [], **_distill_names(run_params(record))}


def grid_settings(saved: dict, current: dict) -> tuple[dict, bool]:
    """(a grid's settings.json `saved` under the field names (older ones through `run_params`) with the L_EMB
    parameters it lacks at their `current` values, whether it lacked any): the settings to compare with `current` and,
    when it lacked some, to write back."""
    settings = _distill_names(run_params(saved))
    missing = {k: current[k] for k in RUN_ADDING if k not in settings and k in current}
    return {**settings, **missing}, bool(missing)


def rows_match_digest(rows: list[dict], digest: str) -> bool:
    """Whether every row of a grid folder without settings.json was made with the settings whose digest is
    `digest` (true for no rows)."""
    return all(r.get(ROW_DIGEST) == digest for r in rows)


STUDENT_FOLDER = re.compile(r"(?P<kind>.+?)_(?P<shape>\d+x\d+)(?:_(?P<init>[^_]+))?_s\d+")


def parse_student_folder(name: str) -> tuple[str, str, str]:
    """(kind, shape "3x384", init) of a saved stage-5 student folder name `{kind}_{L}x{H}_{init}_s{seed}`: kind
    "student", "control" or an embedding method's ("at_vr_emb" for 'AT+VR+EMB', lib.distill.stage.student_folder);
    init "" for a name without it (`{kind}_{L}x{H}_s{seed}`). ValueError naming the folder for any other name."""
    m = STUDENT_FOLDER.fullmatch(name)
    if m is None:
        raise ValueError(f"{name!r} is not a stage-5 student folder name ({{kind}}_{{L}}x{{H}}_{{init}}_s{{seed}})")
    return m["kind"], m["shape"], m["init"] or ""


def params_with_defaults(recorded: dict, defaults: dict) -> dict:
    """For every parameter of `defaults` ({name: notebook default}): its value in a run folder's params.json
    `recorded`, or its notebook default where the record has none."""
    return {k: recorded.get(k, v) for k, v in defaults.items()}


def train_settings(record: dict) -> dict:
    """A checkpoint's training settings with the shares of TRAINING_SHARES as `negative_mix` {set: share} (zero shares
    left out; a mix the record holds wins); a record without them unchanged."""
    if not any(k in record for k in TRAINING_SHARES):
        return record
    mix = {TRAINING_SHARES[k]: v for k, v in record.items() if k in TRAINING_SHARES and v}
    rest = {k: v for k, v in record.items() if k not in TRAINING_SHARES}
    return {**rest, "negative_mix": {**mix, **rest.get("negative_mix", {})}}


def linkpred_config(config: dict) -> dict:
    """A stage-3 checkpoint's stored config with its `train` settings through train_settings and STACK_FEATURES in a
    `model` config without `stack_features`; the other keys unchanged."""
    out = dict(config)
    if isinstance(out.get("train"), dict):
        out["train"] = train_settings(out["train"])
    if isinstance(out.get("model"), dict) and "stack_features" not in out["model"]:
        out["model"] = {**out["model"], "stack_features": list(STACK_FEATURES)}
    return out
