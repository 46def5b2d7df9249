"""Every size profile of the seed's experiment (seed40, seed180, seed315) runs: seed40 through notebooks 01-04, through
the runner, on a tiny stand-in of the offline dataset (the profile's own roots, split sizes, protocols, picture root
and thresholds, with graphs of 30 nodes instead of 2,000, one seed instead of three and one epoch instead of two). It
is the test that would have caught notebook 04 assuming the picture's graph is in a split, a zero-negative step with a
float tensor, and an A-AUC that is undefined on small graphs.

seed180 and seed315 differ from seed40 only in their split sizes (n_train_graphs, n_test_graphs), which this test
checks: every profile crawls the same roots file, so notebook 01 would crawl the same graphs and notebook 02 build the
same dataset for them, and their splits are made here from seed40's dataset by the function notebook 02 calls. (Their
own runs of 01-02 took about a minute of the suite, and of 03 on 315 stand-in graphs two more, and checked nothing
else.)"""

import json

import pytest

from lib.common.params import load_yaml
from lib.common.paths import PARAMS
from lib.embed.dataset import GraphDataset
from lib.run.runner import main

pytestmark = pytest.mark.slow  # about a minute: notebooks 01-04 through the runner

STAND_IN = [
    "-p",
    "max_nodes=30",
    "-p",
    "overlap_n_roots=4",
    "-p",
    "overlap_max_nodes=[30]",
    "-p",
    "n_seeds=1",
    "-p",
    "gat_epochs=1",
    # the training curves' A-AUC and eval pass on every 25th step, not on each (the logging is not what this test
    # checks, and every step is the default on graphs this small)
    "-p",
    "log_every=25",
    # GatModel only: training the two baselines under every protocol was two thirds of this test's time, and nothing
    # about them depends on the size profile (the demo's notebooks train and check them)
    "-p",
    "models=[gat_model]",
]


LARGER = ("seed180", "seed315")
SPLIT_SIZES = {"n_train_graphs", "n_test_graphs"}


def test_size_profiles_run_their_notebooks_on_a_tiny_stand_in(tmp_path):
    out = tmp_path / "runs"
    notebooks = ["01", "02", "03", "04"]
    code = main(
        [
            *("--size", "seed40", "--device", "cpu", *STAND_IN),
            *("--outputs", str(out), "--run-name", "seed40", "--notebooks", *notebooks),
            *("--summary", str(tmp_path / "summary")),
        ]
    )
    run = out / "seed40"
    status = json.loads((run / "status.json").read_text())
    assert code == 0, status["notebooks"]
    assert [v["status"] for v in status["notebooks"].values()] == ["ok"] * len(notebooks)

    seed40 = load_yaml(PARAMS / "seed40.yaml")
    split = json.loads((run / "dataset" / "split.json").read_text())
    check_split(split["seeds"]["0"], seed40)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["crawl"]["graphs"] >= seed40["n_train_graphs"] + seed40["n_test_graphs"]
    audit = {a["protocol"]: a for a in metrics["train_gat"]["audit"]}
    assert audit["leak_free"]["test_pos_seen"] == 0 and audit["new_nodes"]["test_pos_seen"] == 0
    assert metrics["aauc_analysis"]["picture"]["role"] in ("train", "val", "test", "not in split")
    ds = GraphDataset(run / "dataset")
    settings = {k: split["params"][k] for k in ("val_fraction", "hold_out_roots")}
    for size in LARGER:
        profile = load_yaml(PARAMS / f"{size}.yaml")
        differ = {k for k in seed40.keys() | profile.keys() if seed40.get(k) != profile.get(k)}
        assert differ == SPLIT_SIZES, f"{size} differs from seed40 in {differ - SPLIT_SIZES}: run its notebooks here"
        check_split(ds.split(profile["n_train_graphs"], profile["n_test_graphs"], seed=0, **settings), profile)


def check_split(split: dict, profile: dict) -> None:
    n_train = profile["n_train_graphs"]
    assert len(split["train"]) + len(split["val"]) == n_train  # validation graphs come out of the training graphs
    assert len(split["test"]) == profile["n_test_graphs"]
    assert not set(split["test"]) & (set(split["train"]) | set(split["val"]))
