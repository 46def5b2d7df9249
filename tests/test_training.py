"""The one training loop: a killed run resumes to the uninterrupted one's weights and records, bad checkpoints are
moved aside, other settings are refused, an epoch-based run with early stopping stays stopped; the optimiser builder.

A toy regression with dropout, so the RNG state matters and nothing here needs a model package.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup

from lib.common.training import LAYOUT, TrainingLoop, build_optimizer, optimizer_step

X = torch.linspace(-1, 1, 32).unsqueeze(1).repeat(1, 4)  # [32, 4]
Y = X.sum(1, keepdim=True) * 0.5  # [32, 1]


def toy(seed: int = 0, width: int = 4) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(width, 8), nn.Dropout(0.3), nn.ReLU(), nn.Linear(8, 1))


def run(
    tmp_path, steps=12, max_steps=None, seed=0, checkpoint="ck.pt", step_seed=None, lr=1e-2, every=4, model=None, **kw
):
    """A toy run; returns (model, loop, steps of this call)."""
    model = model or toy(seed)
    params = list(model.parameters())
    opt, sched = build_optimizer(params, lr=lr, steps=steps, warmup_steps=2, weight_decay=0.01)
    loop = TrainingLoop(
        {"model": model, "optimizer": opt, "schedule": sched},
        {"lr": lr, "steps": steps},
        steps,
        checkpoint=tmp_path / checkpoint if checkpoint else None,
        checkpoint_every=every,
        step_seed=step_seed,
    )

    def step(i: int) -> dict:
        idx = torch.arange(i % 4 * 8, i % 4 * 8 + 8)
        terms = {"loss": nn.functional.mse_loss(model(X[idx]), Y[idx])}
        return {"step": i, **optimizer_step(terms, opt, sched, params), "lr": sched.get_last_lr()[0]}

    done = loop.run(step, max_steps=max_steps, progress=False, **kw)
    return model, loop, done


def same_weights(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.mark.parametrize("step_seed", [None, lambda step: 1000 + step])
def test_a_killed_run_resumes_to_the_uninterrupted_one(tmp_path, step_seed):
    whole, ref, n = run(tmp_path, checkpoint=None, step_seed=step_seed)
    assert n == 12 and ref.complete and [r["step"] for r in ref.rows] == list(range(12)) and not whole.training
    _, part, n = run(tmp_path, max_steps=6, step_seed=step_seed)  # "killed" after step 6: the file holds step 4
    assert n == 6 and not part.complete
    torch.manual_seed(123)  # the RNG of a new process
    resumed, res, n = run(tmp_path, seed=7, step_seed=step_seed)  # other initial weights: all come from the file
    assert res.resumed_from == 4 and n == 8 and res.complete
    assert res.rows == ref.rows and same_weights(whole, resumed)
    _, again, n = run(tmp_path, seed=7, step_seed=step_seed)
    assert n == 0 and again.complete and again.rows == ref.rows


def test_the_loop_does_not_touch_the_rng_of_an_uninterrupted_run(tmp_path):
    a, loop_a, _ = run(tmp_path, checkpoint=None)
    b, loop_b, _ = run(tmp_path, every=1)  # checkpoints after every step
    assert loop_a.rows == loop_b.rows and same_weights(a, b)


def test_other_settings_are_refused_naming_the_key(tmp_path):
    run(tmp_path, max_steps=4)
    with pytest.raises(ValueError, match=r"checkpoint .*ck\.pt was made with other settings \(lr\); use another"):
        run(tmp_path, lr=2e-2)


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"not a checkpoint", "could not be read"),
        ({"model": {}, "step": 3}, "not a training-loop/1 checkpoint"),
    ],
)
def test_an_unreadable_or_foreign_checkpoint_is_moved_aside_and_training_starts_over(tmp_path, content, reason):
    path = tmp_path / "ck.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)
    with pytest.warns(UserWarning, match=reason) as caught:
        model, loop, n = run(tmp_path)
    assert len(caught) == 1 and "moved aside to ck.pt.corrupt" in str(caught[0].message)
    assert n == 12 and loop.resumed_from == 0 and (tmp_path / "ck.pt.corrupt").is_file()
    whole, ref, _ = run(tmp_path, checkpoint=None)
    assert loop.rows == ref.rows and same_weights(model, whole)


def test_a_checkpoint_whose_parts_do_not_fit_is_moved_aside_and_leaves_the_parts_as_they_were(tmp_path):
    run(tmp_path, max_steps=4)
    ck = torch.load(tmp_path / "ck.pt", weights_only=True)
    assert ck["layout"] == LAYOUT and ck["step"] == 4 and set(ck["parts"]) == {"model", "optimizer", "schedule"}
    ck["parts"]["optimizer"]["param_groups"].pop()  # loads after the model did: the model must be put back
    torch.save(ck, tmp_path / "ck.pt")
    with pytest.warns(UserWarning, match="its optimizer does not fit this run"):
        model, loop, n = run(tmp_path)
    whole, ref, _ = run(tmp_path, checkpoint=None)
    assert n == 12 and loop.rows == ref.rows and same_weights(model, whole)
    run(tmp_path, checkpoint="wide.pt", max_steps=4, model=toy(width=4))
    (tmp_path / "wide.pt").rename(tmp_path / "ck.pt")
    with pytest.warns(UserWarning, match="its model does not fit this run"):
        run(tmp_path, model=nn.Sequential(nn.Linear(4, 3), nn.Dropout(0.3), nn.ReLU(), nn.Linear(3, 1)))


def test_only_the_writer_writes(tmp_path):
    model = toy()
    loop = TrainingLoop({"model": model}, {}, 3, checkpoint=tmp_path / "ck.pt", writer=False)
    loop.run(lambda i: None, progress=False)
    assert loop.complete and loop.rows == [] and not (tmp_path / "ck.pt").exists()


def epochs_run(tmp_path, max_steps=None, patience=2, per_epoch=4, epochs=10):
    """Epoch-based: validation after each epoch, the best epoch kept in `extra`, early stopping on patience.
    The 'validation score' peaks at epoch 3, so the run stops after epoch 5."""
    model = toy(1)
    opt, sched = build_optimizer(list(model.parameters()), 1e-2, epochs * per_epoch)
    loop = TrainingLoop(
        {"model": model, "optimizer": opt, "schedule": sched},
        {"patience": patience},
        epochs * per_epoch,
        checkpoint=tmp_path / "ep.pt",
        checkpoint_every=3,
        extra={"val": [], "best": None},
    )

    def step(i):
        terms = {"loss": nn.functional.mse_loss(model(X[:8]), Y[:8])}
        return {"epoch": i // per_epoch + 1, **optimizer_step(terms, opt, sched)}

    def end_of_epoch(loop) -> bool:
        epoch = loop.step // per_epoch
        loop.extra["val"].append({"epoch": epoch, "score": -abs(epoch - 3)})
        best = max(loop.extra["val"], key=lambda r: (r["score"], r["epoch"]))["epoch"]
        if best == epoch:
            loop.extra["best"] = (epoch, {k: v.detach().clone() for k, v in model.state_dict().items()})
        return epoch - best >= patience

    loop.run(
        step,
        max_steps=max_steps,
        period=per_epoch,
        end_of_period=end_of_epoch,
        checkpoint_period_ends=True,
        progress=False,
    )
    return model, loop


def test_an_epoch_based_run_stops_early_keeps_its_best_epoch_and_stays_stopped(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    model, ref = epochs_run(tmp_path / "a")
    assert ref.stopped and ref.complete and ref.step == 20 and [v["epoch"] for v in ref.extra["val"]] == [1, 2, 3, 4, 5]
    assert ref.extra["best"][0] == 3
    _, part = epochs_run(tmp_path / "b", max_steps=14)  # killed in epoch 4, after its checkpoint at step 12
    assert not part.complete and [v["epoch"] for v in part.extra["val"]] == [1, 2, 3]
    resumed_model, res = epochs_run(tmp_path / "b")
    assert res.resumed_from == 12 and res.stopped and res.rows == ref.rows and res.extra["val"] == ref.extra["val"]
    assert res.extra["best"][0] == 3 and same_weights(model, resumed_model)
    assert all(torch.equal(a, b) for a, b in zip(ref.extra["best"][1].values(), res.extra["best"][1].values()))
    _, again = epochs_run(tmp_path / "b")
    assert again.done == 0 and again.stopped and again.extra["val"] == ref.extra["val"]


@pytest.mark.parametrize(
    "schedule, theirs", [("linear", get_linear_schedule_with_warmup), ("constant", get_constant_schedule_with_warmup)]
)
@pytest.mark.parametrize("warmup", [0, 1, 3])
def test_the_schedules_give_transformers_learning_rates_exactly(schedule, theirs, warmup):
    p = [nn.Parameter(torch.zeros(2, 2))]
    opt, sched = build_optimizer(p, 3e-4, 10, warmup, schedule=schedule)
    ref_opt = torch.optim.AdamW(p, lr=3e-4)
    ref = theirs(ref_opt, warmup, 10) if schedule == "linear" else theirs(ref_opt, warmup)
    for _ in range(12):
        assert sched.get_last_lr() == ref.get_last_lr()
        opt.step(), sched.step(), ref_opt.step(), ref.step()


def test_weight_decay_spares_vectors_and_fused_needs_float_parameters_on_cpu_or_cuda():
    m = nn.Linear(3, 2)
    opt, _ = build_optimizer(list(m.parameters()), 1e-3, 10, weight_decay=0.01)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.0] and opt.defaults["fused"] is True
    assert [len(g["params"]) for g in opt.param_groups] == [1, 1]
    opt, _ = build_optimizer(list(m.parameters()), 1e-3, 10, weight_decay=0.01, decay_vectors=True, fused=False)
    assert len(opt.param_groups) == 1 and not opt.defaults["fused"]
    with pytest.raises(ValueError, match="schedule='cosine' is unknown"):
        build_optimizer(list(m.parameters()), 1e-3, 10, schedule="cosine")


def test_adamw_without_weight_decay_steps_exactly_as_adam():
    a, b = toy(3), toy(3)
    opt_a, _ = build_optimizer(list(a.parameters()), 1e-2, 10)
    opt_b = torch.optim.Adam(list(b.parameters()), lr=1e-2, fused=True)
    for m, o in ((a, opt_a), (b, opt_b)):
        torch.manual_seed(0)
        for i in range(5):
            o.zero_grad()
            nn.functional.mse_loss(m(X), Y).backward()
            o.step()
    assert same_weights(a, b)
