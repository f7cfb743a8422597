"""Programs whose explain() output is kept as golden files (tests/breaks/golden/*.txt)."""
import torch


def helper(t):
    t = t + 1
    print("helper sees", t.shape)
    return t * 2


def step(x, n):
    y = x.sin()
    for i in range(n):
        y = y * 2
        print("iteration", i)
    if y.sum() > 0:
        y = y + 1
    return helper(y) - 1


def no_break(x):
    return (x * 2).relu().sum(-1)


def item_then_scale(x):
    scale = x.abs().max().item()
    return x / scale


def in_autocast(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x.T
        print("in autocast")
        return y.float()


def typed(x, mode):
    if mode == "double":
        return x * 2
    return x - 1


PROGRAMS = {
    "step": (step, lambda: (torch.linspace(-1, 1, 8), 2)),
    "no_break": (no_break, lambda: (torch.linspace(-1, 1, 8).reshape(2, 4),)),
    "item_then_scale": (item_then_scale, lambda: (torch.linspace(-1, 2, 8),)),
    "in_autocast": (in_autocast, lambda: (torch.linspace(-1, 1, 16).reshape(4, 4),)),
}
