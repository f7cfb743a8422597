"""Training steps: a small model and its optimizer (and LR scheduler) held by a global or by an
attribute of a global object, and a step inside `fn`.

Stage: generation (constructs). Input: a scope (the entry function's). Output: a model class
(a random mix of Linear, Conv1d, Embedding, LayerNorm/BatchNorm1d and an activation, its
parameters set from `_t`), the global model/optimizer/scheduler, the step's statements, and
knobs the runner turns between calls (lr, train/eval, `requires_grad_`, `zero_grad`, a
scheduler step, an option of the group).

The step mixes, in a random order where eager allows it: `opt.zero_grad(set_to_none=...)` at
the start, the end or not at all, the forward, a loss, a print (a graph break) around
`backward()`, `clip_grad_norm_`/`clip_grad_value_`, a `no_grad` write to the params, reads
and writes of `opt.param_groups[0]['lr']`, `opt.step()`, `sched.step()`; it leaves the loss's
`.item()` (and the forward's output) in scope for the rest of the program. Optimizers:
SGD (momentum, nesterov, dampening, weight_decay, maximize, foreach), Adam and AdamW (amsgrad,
weight_decay, maximize, foreach), which framejit compiles (docs/training.md), and RMSprop and
Adagrad, whose `step()` breaks the graph: still a test of the break.

Every program holding a model runs its three copies (two eager, one jitted) from the same
`_t` values: they are the twins the training tests build by `copy.deepcopy`. No bias feeds a
norm layer (its gradient is rounding noise, which Adam scales to +-lr), and the optimizers
that divide by a root of squared gradients get `eps=1e-3`: quarter-valued data at batch size 2
cancels exactly in eager's order and to 1e-10 in another, which eps=1e-8 turns into +-lr.
"""
from __future__ import annotations

import dataclasses

from tests.fuzz import slots
from tests.fuzz.constructs.objects import _def, _line
from tests.fuzz.grammar import statement
from tests.fuzz.scope import Var
from tests.fuzz.slots import FLOAT, Dim, TensorT
from tests.fuzz.tree import Clause, Stmt, compound, op, simple


@dataclasses.dataclass
class TrainerInfo:
    model: str  # the expression naming the model: `TNET1` or `TRAINER1.model`
    opt: str
    sched: str  # "" without a scheduler
    width: int
    params: list  # the model's parameter names (`l1.weight`, ...)


_OPTIMIZERS = ("SGD", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad")


def _optimizer_options(gen) -> tuple:
    """(class name, keyword source) of a random optimizer configuration."""
    kind = gen.choice(_OPTIMIZERS)
    rng = gen.rng
    options = []
    if kind == "SGD":
        options.append(f"lr={gen.choice(['0.1', '0.05', '0.01'])}")
        momentum = gen.choice(["0.0", "0.9", "0.5"])
        if momentum != "0.0":
            options.append(f"momentum={momentum}")
            if gen.chance(0.4):
                options.append("nesterov=True")
            elif gen.chance(0.3):
                options.append("dampening=0.1")
    elif kind in ("Adam", "AdamW"):
        options.append(f"lr={gen.choice(['0.01', '0.05'])}")
        if gen.chance(0.3):
            options.append("betas=(0.8, 0.95)")
        if gen.chance(0.3):
            options.append("amsgrad=True")
    elif kind == "RMSprop":
        options.append("lr=0.01")
        if gen.chance(0.5):
            options.append("momentum=0.5")
        if gen.chance(0.3):
            options.append("centered=True")
    else:
        options.append("lr=0.05")
    if kind != "SGD":  # a gradient of rounding noise (an exact cancellation: 1e-10 jitted,
        options.append("eps=1e-3")  # 0 eagerly) moves a param by +-lr at eps=1e-8 (seed 15)
    if gen.chance(0.4):
        options.append(f"weight_decay={gen.choice(['0.01', '0.1'])}")
    if kind in ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad") and gen.chance(0.25):
        options.append("maximize=True")
    if rng.random() < 0.6:
        options.append(f"foreach={gen.choice(['True', 'False'])}")
    return kind, ", ".join(options)


def _model_class(gen, cls: str, width: int) -> tuple:
    """(the class statement, parameter names) of a random small model mapping (N, width) to
    (N, width)."""
    hidden = gen.rng.randint(2, 5)
    norm = gen.choice(["", "", "layer", "batch"])
    emb, conv = gen.chance(0.3), gen.chance(0.3)
    bias = "False" if norm else "True"  # a bias before a norm has rounding-noise gradients
    act = gen.choice(["torch.relu", "torch.tanh", "torch.nn.functional.gelu",
                      "torch.sigmoid"])
    init = [_line("super().__init__()"),
            _line(f"self.l1 = torch.nn.Linear({width}, {hidden}, bias={bias})")]
    params = ["l1.weight"] + (["l1.bias"] if bias == "True" else [])
    forward = [_line("h = self.l1(x)")]
    if emb:
        init.append(_line(f"self.emb = torch.nn.Embedding(5, {hidden})"))
        params.append("emb.weight")
        forward.append(_line("h = h + self.emb(torch.arange(x.shape[0]) % 5)"))
    if conv:
        init.append(_line(f"self.conv = torch.nn.Conv1d(1, 2, 3, padding=1, bias={bias})"))
        params += ["conv.weight"] + (["conv.bias"] if bias == "True" else [])
        forward.append(_line("h = h + self.conv(h.unsqueeze(1)).mean(1)"))
    if norm:
        layer = f"LayerNorm({hidden})" if norm == "layer" else f"BatchNorm1d({hidden})"
        init.append(_line(f"self.norm = torch.nn.{layer}"))
        params += ["norm.weight", "norm.bias"]
        forward.append(_line("h = self.norm(h)"))
    forward.append(_line(f"h = {act}(h)"))
    init.append(_line(f"self.l2 = torch.nn.Linear({hidden}, {width})"))
    params += ["l2.weight", "l2.bias"]
    forward.append(_line("return self.l2(h)"))
    seed = gen.rng.randint(1, 999)
    init.append(compound([("with torch.no_grad():", [], [compound([(
        "for i, p in enumerate(self.parameters()):", [], [
            _line(f"p.copy_(_t({seed} + i, *p.shape) * 0.25)")])])])]))
    body = [_def("def __init__(self):", init), _def("def forward(self, x):", forward)]
    return _def(f"class {cls}(torch.nn.Module):", body, defs=[cls]), params


def make_trainer(gen) -> TrainerInfo:
    gen.dtype_fixed = True  # the model's parameters are float32
    width = gen.width
    cls = gen.fresh("TrainNet")
    stmt, params = _model_class(gen, cls, width)
    gen.add_top(stmt)
    kind, options = _optimizer_options(gen)
    sched = gen.choice(["", "", "StepLR({0}, step_size=2, gamma=0.5)",
                        "ExponentialLR({0}, gamma=0.9)",
                        "LambdaLR({0}, lambda epoch: 1.0 / (epoch + 1))"])
    if gen.chance(0.5):  # globals
        model, opt = gen.fresh("TNET"), gen.fresh("TOPT")
        lines = [f"{model} = {cls}()",
                 f"{opt} = torch.optim.{kind}({model}.parameters(), {options})"]
        names = [model, opt]
        sched_name = ""
        if sched:
            sched_name = gen.fresh("TSCHED")
            lines.append(f"{sched_name} = torch.optim.lr_scheduler." + sched.format(opt))
            names.append(sched_name)
        for line, defined in zip(lines, names):
            gen.add_top(Stmt([Clause(line.replace("{", "{{").replace("}", "}}"), [], None)],
                             frozenset([defined])))
    else:  # attributes of a global object
        holder_cls, holder = gen.fresh("Trainer"), gen.fresh("TRAINER")
        init = [_line(f"self.model = {cls}()"),
                _line(f"self.opt = torch.optim.{kind}(self.model.parameters(), {options})")]
        if sched:
            init.append(_line("self.sched = torch.optim.lr_scheduler." +
                              sched.format("self.opt")))
        gen.add_top(_def(f"class {holder_cls}:", [_def("def __init__(self):", init)],
                         defs=[holder_cls]))
        gen.add_top(Stmt([Clause(f"{holder} = {holder_cls}()", [], None)],
                         frozenset([holder])))
        model, opt = f"{holder}.model", f"{holder}.opt"
        sched_name = f"{holder}.sched" if sched else ""
    info = TrainerInfo(model, opt, sched_name, width, params)
    gen.trainers.append(info)
    _knobs(gen, info)
    gen.use("training")
    gen.use("optimizer:" + kind)
    return info


def _knobs(gen, info: TrainerInfo) -> None:
    names = frozenset([info.model.split(".")[0]])
    group = f"{info.opt}.param_groups[0]"
    knobs = [
        (f"{info.opt} lr changed", lambda rng: [
            (f"{group}['lr'] = {rng.choice(['0.02', '0.2', '0.005'])}", names)]),
        (f"{info.model}.train(False)", lambda rng: [
            (f"{info.model}.train({rng.choice(['False', 'True'])})", names)]),
        (f"{info.model} requires_grad_ toggled", lambda rng: [
            (f"{info.model}.{rng.choice(info.params)}.requires_grad_("
             f"{rng.choice(['False', 'True'])})", names)]),
        (f"{info.opt}.zero_grad()", lambda rng: [
            (f"{info.opt}.zero_grad(set_to_none={rng.choice(['True', 'False'])})", names)]),
        (f"{info.opt} weight_decay changed", lambda rng: [
            (f"{group}['weight_decay'] = {rng.choice(['0.0', '0.05'])}", names)]),
    ]
    if info.sched:
        knobs.append((f"{info.sched}.step()", lambda rng: [(f"{info.sched}.step()", names)]))
    gen.knobs.extend(knobs)
    gen.training_knobs.extend(knobs)


def _zero_grad(gen, info: TrainerInfo):
    return _line(f"{info.opt}.zero_grad(set_to_none={gen.choice(['True', 'False'])})")


@statement("training", 3.0)
def train_step(gen, scope):
    """A training step on a held model: zero_grad, forward, loss, backward, clip, step."""
    if scope.func.kind != "entry" or scope.loop_depth or len(gen.trainers) > 1:
        return None
    width = Dim(gen.width)
    x = gen.tensor(scope, (slots.BATCH, width), 1)
    if gen.trainers and gen.chance(0.7):
        info = gen.choice(gen.trainers)
    else:
        info = make_trainer(gen)
    out, loss = gen.fresh("out"), gen.fresh("loss")
    body = []
    zero = gen.choice(["start", "start", "end", "none"])
    if zero == "start":
        body.append(_zero_grad(gen, info))
    lr = ""
    if gen.chance(0.3):
        lr = gen.fresh("lr")
        body.append(_line(f"{lr} = {info.opt}.param_groups[0]['lr']"))
        scope.add(Var(lr, FLOAT))
    body += _forward_backward(gen, scope, info, x, out, loss)
    body += _update(gen, info, lr)
    if zero == "end":
        body.append(_zero_grad(gen, info))
    value = gen.fresh("f")
    body.append(_line(f"{value} = {loss}.item()"))
    scope.add(Var(value, FLOAT))
    if gen.chance(0.5):
        scope.add(Var(out, TensorT((slots.BATCH, width))))
    return body


def _forward_backward(gen, scope, info: TrainerInfo, x, out: str, loss: str) -> list:
    """The forward, the loss, maybe a print (a graph break), `backward()`."""
    slot = TensorT((slots.BATCH, Dim(info.width)))
    if gen.chance(0.5):
        x = op("{0}.detach()", slot, x)
    forward = [simple(f"{out} = {info.model}({{0}})", x, defs=[out])]
    if gen.chance(0.3):
        target = gen.tensor(scope, slot.shape, 1)
        forward.append(simple(f"{loss} = torch.nn.functional.mse_loss({out}, {{0}}.detach())",
                              target, defs=[loss]))
    else:
        forward.append(_line(f"{loss} = " + gen.choice([
            f"{out}.pow(2).mean()", f"({out} * 0.5).sum()",
            f"torch.nn.functional.cross_entropy({out}, torch.arange({out}.shape[0]) % "
            f"{info.width})"])))
    if gen.on("print") and gen.chance(0.3):
        forward.append(_line(f'print("{loss}", {loss}.item())'))
    forward.append(_line(f"{loss}.backward()"))
    if scope.in_with or gen.chance(0.2):  # grad mode may be off in a generated `with`
        forward = [compound([("with torch.enable_grad():", [], forward)])]
    return forward


def _update(gen, info: TrainerInfo, lr: str) -> list:
    """Clipping, a no_grad write, lr changes, `opt.step()`, `sched.step()`."""
    body = []
    if gen.chance(0.4):
        body.append(_line(gen.choice([
            f"torch.nn.utils.clip_grad_norm_({info.model}.parameters(), 0.5)",
            f"torch.nn.utils.clip_grad_norm_({info.model}.parameters(), 1.0, "
            f"foreach={gen.choice(['True', 'False'])})",
            f"torch.nn.utils.clip_grad_value_({info.model}.parameters(), 0.1)"])))
    if gen.on("print") and gen.chance(0.2):
        body.append(_line(f'print("grad", {info.model}.l2.weight.grad)'))
    if gen.chance(0.25):
        write = gen.choice([f"{info.model}.l2.weight.mul_(0.99)",
                            f"{info.model}.l2.bias.add_(0.01)"])
        body.append(compound([("with torch.no_grad():", [], [_line(write)])]))
    if lr and gen.chance(0.5):
        body.append(_line(f"{info.opt}.param_groups[0]['lr'] = {lr} * 0.5"))
    if gen.chance(0.9):
        body.append(_line(f"{info.opt}.step()"))
    if lr and gen.chance(0.3):
        body.append(_line(f"{info.opt}.param_groups[0]['lr'] = {lr}"))
    if info.sched and gen.chance(0.7):
        body.append(_line(f"{info.sched}.step()"))
    return body
