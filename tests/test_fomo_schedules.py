"""FoMo-in-Flux schedules and meta-schedules at known steps (hand-computed values)."""
import math

import pytest

from vlcp.config import TrainCfg, build
from vlcp.errors import ConfigError
from vlcp.train.schedules import SCHEDULES, Plan, lr_fn, plan_for, rsqrt_with_cooldown

# 5 equal tasks of 100 steps, 10% warmup and cooldown, peak 1, floor 0
PLAN = Plan.from_fractions([100] * 5, base_lr=1.0, min_lr=0.0, warmup_frac=0.1, cooldown_frac=0.1)


def test_plan_fractions_round_up_like_fomo():
    p = Plan.from_fractions([1420, 7], 1e-5, warmup_frac=0.1, cooldown_frac=0.1)
    assert p.warmup == (142, 1) and p.cooldown == (142, 1)
    assert Plan.from_fractions([5, 3], 1.0, warmup_steps=4).warmup == (4, 4)


def test_rsqrt_with_cooldown_known_steps():
    lr = lambda s: rsqrt_with_cooldown(s, 100, 1.0, warmup=10, cooldown=10)  # noqa: E731
    assert lr(0) == pytest.approx(0.1)
    assert lr(9) == pytest.approx(1.0) and lr(10) == pytest.approx(1.0)
    assert lr(40) == pytest.approx(0.5)                          # √(10/40)
    assert lr(89) == pytest.approx(math.sqrt(10 / 89))           # last step before cooldown
    assert lr(90) == pytest.approx(math.sqrt(10 / 90) * 9 / 10)
    assert lr(99) == 0.0
    # a floor lifts the decay, not the cooldown's end
    assert rsqrt_with_cooldown(40, 100, 1.0, 10, 10, min_lr=0.2) == pytest.approx(0.2 + 0.5 * 0.8)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_every_schedule_starts_as_its_base_and_stays_in_range(name):
    base = "rsqrt" if "rsqrt" in name else "cosine"
    first = [SCHEDULES[name](PLAN, 0, s) for s in range(100)]
    assert first == pytest.approx([SCHEDULES[base](PLAN, 0, s) for s in range(100)])
    for t in range(5):
        for s in range(100):
            assert 0.0 <= SCHEDULES[name](PLAN, t, s) <= 1.0 + 1e-12


def test_autoregressive_cosine_peaks_follow_the_hypothetical_cosine():
    # task t warms up to ½(1 + cos(π t/(t+1))): 1, 0.5, 0.25, 0.1464, 0.0955 (the original code's values)
    peaks = [SCHEDULES["autoregressive-cosine"](PLAN, t, 9) for t in range(5)]
    assert peaks == pytest.approx([0.5 * (1 + math.cos(math.pi * t / (t + 1))) for t in range(5)])
    assert peaks[1:4] == pytest.approx([0.5, 0.25, 0.1464466], abs=1e-6)
    # then a cosine from the peak to the floor inside the task
    assert SCHEDULES["autoregressive-cosine"](PLAN, 1, 55) == pytest.approx(0.5 * 0.5 * (1 + math.cos(math.pi * 0.5)))


def test_continued_cosine_follows_the_stretched_cosine_and_is_continuous():
    f = SCHEDULES["continued-cosine"]
    # task 2: hypothetical cosine over 300 steps with 30 warmup, at global step 200 + s
    for s in (10, 50, 99):
        g = 200 + s
        assert f(PLAN, 2, s) == pytest.approx(0.5 * (1 + math.cos(math.pi * (g - 30) / 270)))
    for t in range(1, 5):  # the warmup ends exactly where the continued curve starts
        assert f(PLAN, t, 9) == pytest.approx(f(PLAN, t, 10), rel=0.02)


def test_autoregressive_rsqrt_peaks():
    # peak of task t = √(W'/(tN + W)) with W' = 0.1·(t+1)·N: √(0.1(t+1)/(t+0.1)) — 0.426 at t = 1
    peaks = [SCHEDULES["autoregressive-rsqrt"](PLAN, t, 9) for t in range(5)]
    assert peaks == pytest.approx([math.sqrt(0.1 * (t + 1) / (t + 0.1)) for t in range(5)])
    assert peaks[1] == pytest.approx(0.4264, abs=1e-4)
    assert SCHEDULES["autoregressive-rsqrt"](PLAN, 1, 99) == 0.0        # cooldown to zero


def test_continued_rsqrt_continues_a_global_clock_without_a_jump():
    # the paper's (iv) "Continued Dynamic" (was `peaks-match-rsqrt` here; see vlcp.train.schedules)
    f = SCHEDULES["continued-rsqrt"]
    # earlier tasks add only their 80 decay steps to the clock
    assert f(PLAN, 1, 9) == pytest.approx(math.sqrt(10 / 90))
    assert f(PLAN, 1, 10) == pytest.approx(math.sqrt(10 / 90))           # no jump at the end of warmup
    assert f(PLAN, 3, 50) == pytest.approx(math.sqrt(10 / (50 + 240)))
    assert f(PLAN, 3, 99) == 0.0
    # the value after warmup continues from where the previous task's decay stopped
    assert f(PLAN, 1, 10) == pytest.approx(1.0 * math.sqrt(10 / (10 + 80)))


def test_peaks_match_rsqrt_restarts_a_standard_rsqrt_from_the_continued_value():
    # the paper's (v): peak = the continued dynamic's value after warmup, then √(W/s) from it
    f, g = SCHEDULES["peaks-match-rsqrt"], SCHEDULES["continued-rsqrt"]
    for t in range(1, 5):
        assert f(PLAN, t, 10) == pytest.approx(g(PLAN, t, 10))
    assert f(PLAN, 3, 50) == pytest.approx(math.sqrt(10 / 250) * math.sqrt(10 / 50))
    assert f(PLAN, 3, 99) == 0.0


# ---- the original code's rsqrt meta-schedule, ported verbatim (values / η, as its LambdaLR):
# ExplainableML/fomo_in_flux (release 3e123d9, read in the fork pseudope/fomo_in_flux)
# continual_lib/utils/base_continual_learner.py, `initialize_optimizer_and_scheduler.rsqrt_recovered`;
# `task` is its self.task (0-based), `step` the task's LambdaLR step, `steps` its scheduler_steps.

def fomo_rsqrt_recovered(step, task, steps, lr, cosine_lr_mul, warmup_perc, cooldown_perc, recovery_mode):
    import numpy as np
    scheduler_steps = steps
    norm_steps = step % scheduler_steps

    warmup_steps = warmup_perc
    if warmup_perc < 1:
        warmup_steps = int(np.ceil(warmup_perc * scheduler_steps))
    cooldown_steps = cooldown_perc
    if cooldown_perc < 1:
        cooldown_steps = int(np.ceil(cooldown_perc * scheduler_steps))
    cooldown_start = scheduler_steps - cooldown_steps
    warmup_init_lr = lr * cosine_lr_mul

    vmul = 1
    if task:
        if recovery_mode == 'continued':
            seen_steps = (task) * (scheduler_steps - cooldown_steps)
            seen_steps -= (task - 1) * warmup_steps
            vmul = warmup_steps ** 0.5 / (seen_steps) ** 0.5
        elif recovery_mode == 'autoregressive':
            seen_steps = (task) * (scheduler_steps) + warmup_steps
            vmul = ((task + 1) * warmup_steps) ** 0.5 / (seen_steps) ** 0.5
    base_lr = warmup_init_lr + vmul * (lr - warmup_init_lr)

    if recovery_mode != 'recovered':
        f_mul = lambda warmup_steps, norm_steps: warmup_steps ** 0.5 / norm_steps ** 0.5  # noqa: E731
    else:
        f_mul = lambda warmup_steps, norm_steps: warmup_steps ** 0.5 / (  # noqa: E731
            norm_steps + task * (scheduler_steps - cooldown_steps - warmup_steps)) ** 0.5

    if warmup_steps and norm_steps < warmup_steps:
        if recovery_mode == 'recovered' and task:
            vmul = f_mul(warmup_steps, task * (scheduler_steps - cooldown_steps - warmup_steps))
            base_lr = warmup_init_lr + vmul * (lr - warmup_init_lr)
        lrval = (base_lr * (norm_steps + 1) / warmup_steps)
    elif cooldown_steps and norm_steps >= cooldown_start:
        cool_epoch = (norm_steps - cooldown_start) % cooldown_steps
        vmul = f_mul(warmup_steps, norm_steps)
        ref_lr = warmup_init_lr + vmul * (base_lr - warmup_init_lr)
        lrval = (ref_lr * (cooldown_steps - cool_epoch - 1) / cooldown_steps)
    else:
        vmul = f_mul(warmup_steps, norm_steps)
        lrval = warmup_init_lr + vmul * (base_lr - warmup_init_lr)
    return lrval / lr


# ours -> the original code's label (the paper's text names ours; see vlcp.train.schedules)
CODE_MODE = {"autoregressive-rsqrt": "autoregressive", "peaks-match-rsqrt": "continued", "continued-rsqrt": "recovered"}


@pytest.mark.parametrize("steps,lr,mul", [(100, 1.0, 0.0), (1420, 1e-5, 1e-3), (37, 3e-4, 0.01)])
@pytest.mark.parametrize("name", sorted(CODE_MODE))
def test_rsqrt_meta_schedules_equal_the_original_code(name, steps, lr, mul):
    """W = C = ceil(0.1·N); tasks t = 0, 1, 5, 19; every step of the task (warmup, decay,
    cooldown). `continued-rsqrt` equals the code's `recovered` after the warmup; in the warmup
    it ramps to the clock's value, where the code ramps to a lower target (its offset counted
    twice: a deviation, see vlcp.train.schedules)."""
    plan = Plan.from_fractions([steps] * 20, base_lr=lr, min_lr=lr * mul, warmup_frac=0.1, cooldown_frac=0.1)
    w = plan.warmup[0]
    for t in (0, 1, 5, 19):
        for s in range(steps):
            ours = SCHEDULES[name](plan, t, s) / lr
            code = fomo_rsqrt_recovered(s, t, steps, lr, mul, 0.1, 0.1, CODE_MODE[name])
            if name == "continued-rsqrt" and t > 0 and s < w:
                after = fomo_rsqrt_recovered(w, t, steps, lr, mul, 0.1, 0.1, "recovered")
                assert ours == pytest.approx(after * (s + 1) / w, rel=1e-9, abs=1e-15)
                assert ours >= code                                          # the code's target sits lower
            else:
                assert ours == pytest.approx(code, rel=1e-9, abs=1e-15), (t, s)


def test_rsqrt_meta_schedules_mean_lr_per_task():
    # the mean LR of tasks 1, 5, 19 (W = C = 0.1 N, floor 0): the original code's `continued`
    # (= peaks-match here) is 0.16/0.073/0.038 η; the continued dynamic 0.25/0.13/0.07 η (the code: 0.249/0.132/0.071, its lower warmup)
    plan = Plan.from_fractions([1420] * 20, base_lr=1.0, warmup_frac=0.1, cooldown_frac=0.1)
    mean = lambda name, t: sum(SCHEDULES[name](plan, t, s) for s in range(1420)) / 1420  # noqa: E731
    assert [mean("peaks-match-rsqrt", t) for t in (1, 5, 19)] == pytest.approx([0.156, 0.073, 0.038], abs=2e-3)
    assert [mean("continued-rsqrt", t) for t in (1, 5, 19)] == pytest.approx([0.253, 0.134, 0.072], abs=2e-3)
    assert mean("rsqrt", 0) == pytest.approx(0.467, abs=2e-3)


def test_meta_schedules_retain_more_by_lowering_later_peaks():
    for name in ("autoregressive-cosine", "continued-cosine", "autoregressive-rsqrt", "continued-rsqrt",
                 "peaks-match-rsqrt"):
        peaks = [max(SCHEDULES[name](PLAN, t, s) for s in range(100)) for t in range(5)]
        assert all(a > b for a, b in zip(peaks, peaks[1:])), name
    per_task = [max(SCHEDULES["cosine"](PLAN, t, s) for s in range(100)) for t in range(5)]
    assert per_task == pytest.approx([1.0] * 5)


def test_the_config_names_every_schedule_in_order():
    """`train.schedule` is checked against `vlcp.config.SCHEDULES` (the config imports no training code)."""
    from vlcp import config

    assert config.SCHEDULES == tuple(SCHEDULES)


def test_train_cfg_schedule_fields_are_validated_and_planned():
    cfg = build(TrainCfg, {"schedule": "autoregressive-rsqrt", "warmup_frac": 0.1, "lr": 1e-3})
    plan = plan_for(cfg, [100, 200])
    assert plan.warmup == (10, 20) and plan.cooldown == (10, 20)
    assert lr_fn(cfg.schedule, plan, 0)(9) == pytest.approx(1e-3)
    # the fixed warmup is kept when warmup_frac is 0 (the default: the other studies' schedule)
    assert plan_for(build(TrainCfg, {"warmup_steps": 3}), [50]).warmup == (3,)
    with pytest.raises(ConfigError, match="train.schedule: unknown schedule 'wsd'; known: cosine, rsqrt, "):
        build(TrainCfg, {"schedule": "wsd"}, "train")
    with pytest.raises(ConfigError, match="train.warmup_frac"):
        build(TrainCfg, {"warmup_frac": 1.5}, "train")


def test_fomo_metrics_hand_computed():
    from vlcp.eval import continual

    # 3 classification sets and 1 retrieval set (its R@5): macro over datasets, not samples
    assert continual.dataset_macro({"a": 40.0, "b": 60.0, "c": 20.0, "coco": 80.0}) == pytest.approx(50.0)
    assert continual.geometric_mean(25.0, 64.0) == pytest.approx(40.0)
    # line from zero-shot (20, 60) to joint (60, 40): at A_KA 40 the line is at 50
    assert continual.above_trade_off_line((40, 55), (20, 60), (60, 40)) == pytest.approx(5.0)
    assert continual.above_trade_off_line((40, 45), (20, 60), (60, 40)) == pytest.approx(-5.0)
    with pytest.raises(ValueError):
        continual.dataset_macro({})


def test_mafs_reproduce_the_papers_table4_rows():
    from vlcp.train import budget

    full = budget.mafs(63394.76, 46.59, 46.59)
    # LoRA r=4, locked-image, SI (per-task GFLOPs and peak memory from the paper's Table 4)
    assert budget.steps_for_budget(1420, full, budget.mafs(54479.25, 40.54, 46.59)) == 1898
    # (the paper's rounded memory column leaves locked-image a few steps off its 12,982)
    assert budget.steps_for_budget(1420, full, budget.mafs(27176.67, 11.88, 46.59)) == pytest.approx(12982, abs=10)
    assert budget.steps_for_budget(1420, full, budget.mafs(63394.76, 46.65, 46.59)) == 1418
    assert budget.memory_multiplier(11.88, 46.59) == pytest.approx(0.2551, abs=5e-4)


def test_training_memory_accounting_sees_frozen_towers_and_optimizer_state():
    import torch

    from vlcp.train import budget

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)

    def measure(model):
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
        model(x).sum().backward()
        opt.step()
        return budget.training_memory_bytes(model, lambda: model(x).sum().backward(), opt)

    full = measure(net)
    assert full["parameters"] == (16 * 32 + 32 + 32 * 4 + 4) * 4
    assert full["gradients"] == full["parameters"] and full["optimizer"] >= 2 * full["parameters"]
    assert full["activations"] > 0
    net[0].requires_grad_(False)                         # a locked first layer
    locked = measure(net)
    assert locked["gradients"] == (32 * 4 + 4) * 4
    assert locked["total"] < full["total"] and locked["activations"] <= full["activations"]


def test_training_memory_counts_each_saved_storage_even_when_its_graph_is_dropped():
    """A save whose graph is dropped mid-step frees its storage; a later save may land at the same
    address. Each counts while its graph holds it (keyed by address alone, they hid each other, and
    the count depended on the allocator: DoRA's multiplier changed from run to run): the peak of
    the live saves, whatever the allocator does."""
    import torch

    from vlcp.train import budget

    w = torch.randn(10, 1, requires_grad=True)

    def step(keep):
        kept = []
        for i in range(4):   # saves the 4 kB operand (w's gradient needs it), then drops the graph (unless kept);
            kept.append((w * torch.full((1000,), float(i))).sum())   # the 40 kB product is freed too, so the next
            kept = kept if keep else []                               # operand reuses the address
        (w * 2.0).sum().backward()                           # a scalar operand: nothing saved

    mem = budget.training_memory_bytes(torch.nn.Module(), lambda: step(keep=False))
    assert mem["activations"] == 1000 * 4                    # one operand alive at a time
    mem = budget.training_memory_bytes(torch.nn.Module(), lambda: step(keep=True))
    assert mem["activations"] == 4 * 1000 * 4                # four distinct operands alive together
