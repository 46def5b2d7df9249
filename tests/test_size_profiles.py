"""Every size profile of the seed's experiment (seed40, seed180, seed315) runs notebooks 01-04 end to end, through the
runner, on a tiny stand-in of the offline dataset: the profile's own roots, split sizes, protocols, picture root and
thresholds, with graphs of 30 nodes instead of 2,000, one seed instead of three and one epoch instead of two. It is
the test that would have caught notebook 04 assuming the picture's graph is in a split, a zero-negative step with a
float tensor, and an A-AUC that is undefined on small graphs.

seed180 and seed315 differ from seed40 only in their split sizes (n_train_graphs, n_test_graphs), which notebook 02
makes: they run 01-02 and their splits are checked; seed40 runs 01-04. (Notebook 03 on 315 stand-in graphs took
about two minutes of the suite and checked nothing seed40's run does not.)"""

import json

import pytest

from lib.common.params import load_yaml
from lib.common.paths import PARAMS
from lib.run.runner import main

pytestmark = pytest.mark.slow  # a minute or two: notebooks 01-04 through the runner

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


@pytest.mark.parametrize(
    ("size", "notebooks"),
    [
        pytest.param("seed40", ["01", "02", "03", "04"], id="seed40"),
        pytest.param("seed180", ["01", "02"], id="seed180"),
        pytest.param("seed315", ["01", "02"], id="seed315"),
    ],
)
def test_size_profile_runs_its_notebooks_on_a_tiny_stand_in(size, notebooks, tmp_path):
    out = tmp_path / "runs"
    code = main(
        [
            "--size",
            size,
            "--device",
            "cpu",
            *STAND_IN,
            "--outputs",
            str(out),
            "--run-name",
            size,
            "--notebooks",
            *notebooks,
            "--summary",
            str(tmp_path / "summary"),
        ]
    )
    run = out / size
    status = json.loads((run / "status.json").read_text())
    assert code == 0, status["notebooks"]
    assert [v["status"] for v in status["notebooks"].values()] == ["ok"] * len(notebooks)

    profile = load_yaml(PARAMS / f"{size}.yaml")
    split = json.loads((run / "dataset" / "split.json").read_text())["seeds"]["0"]
    n_train = profile["n_train_graphs"]
    assert len(split["train"]) + len(split["val"]) == n_train  # validation graphs come out of the training graphs
    assert len(split["test"]) == profile["n_test_graphs"]
    assert not set(split["test"]) & (set(split["train"]) | set(split["val"]))
    if "03" not in notebooks:
        return

    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["crawl"]["graphs"] >= n_train + profile["n_test_graphs"]
    audit = {a["protocol"]: a for a in metrics["train_gat"]["audit"]}
    assert audit["leak_free"]["test_pos_seen"] == 0 and audit["new_nodes"]["test_pos_seen"] == 0
    pic = metrics["aauc_analysis"]["picture"]
    assert pic["role"] in ("train", "val", "test", "not in split")
