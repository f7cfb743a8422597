"""Program fuzzer P29 (inductor seeds 957, 3606, 14478, 15287, 15603): a training graph was one
autograd node for all its outputs. A backward from one output ran that node's edges to every
input, into the history of inputs only another output depends on: a mutated input's new value
(`avg[1:2] = w.amax(...)` next to `return w * t`) linked the next call's node to this call's,
freed by its backward, and the second call's backward raised "Trying to backward through the
graph a second time" where eager's runs. Now each group of outputs whose gradients reach the
same inputs through shared history (a node saving tensors) gets a node of its own
(`joint.output_groups`), and a node's backward that reads no saved value unpacks none (eager's
`avg.add_(w)` saves nothing, and its node may run again)."""
import torch

import dynamo


def _twice(fn, make):
    """Two calls, each followed by a backward through the returned tensor(s); the gradients
    and the state `make` built, per call."""
    state = make()
    jitted = fn(state)
    facts = []
    for call in range(2):
        t = torch.arange(2.0) + call
        result = jitted(t)
        results = result if isinstance(result, tuple) else (result,)
        sum(value.sum() for value in results).backward()
        facts.append([None if tensor.grad is None else tensor.grad.tolist()
                      for tensor in state.values() if tensor.requires_grad and tensor.is_leaf])
        facts.append([tensor.detach().tolist() for tensor in state.values()])
    return facts


def _compare(program, make, backend):
    assert _twice(lambda state: dynamo.jit(program(state), backend=backend), make) == \
        _twice(program, make)


def _parameter_and_buffer():
    return {"w": torch.nn.Parameter(torch.tensor([1.0, 2.0])), "avg": torch.zeros(2)}


def test_mutated_input_new_value_has_a_node_of_its_own(code_generator):
    def program(state):
        w, avg = state["w"], state["avg"]

        def fn(t):
            avg[1:2] = w.amax(-1, keepdim=True)   # avg's new value requires grad
            return w * t
        return fn
    _compare(program, _parameter_and_buffer, code_generator)


def test_node_saving_nothing_runs_again(code_generator):
    """Seed 14478: the returned `avg` is backed through after each call; its history holds
    the first call's node, whose backward reads nothing saved (eager's AddBackward saves
    nothing either)."""
    def program(state):
        w, avg = state["w"], state["avg"]

        def fn(t):
            avg.add_(w, alpha=0.5)
            return avg * t.sum()
        return fn
    _compare(program, _parameter_and_buffer, code_generator)


def test_shared_history_reaching_other_inputs(code_generator):
    """The new value of `avg` and the returned product share `w * t`, but only the former's
    gradient reaches `avg`'s history (the first call's node, freed by its backward): two
    nodes, each with the edges of its own gradients."""
    def program(state):
        w, avg = state["w"], state["avg"]

        def fn(t):
            s = w * t
            avg.mul_(0.5).add_(s)
            return s * 3
        return fn
    _compare(program, _parameter_and_buffer, code_generator)


def test_hook_of_an_input_another_output_reaches_is_not_called(code_generator):
    def run(fn):
        w = torch.tensor([1.0, 2.0], requires_grad=True)
        v = torch.tensor([3.0, 4.0], requires_grad=True)
        seen = []
        v.register_hook(lambda grad: seen.append(grad))
        a, b = fn(w, v)
        a.sum().backward()
        return seen, w.grad.tolist(), v.grad

    def fn(w, v):
        return w * w, v * 2
    expected = run(fn)
    assert expected == ([], [2.0, 4.0], None)
    assert run(dynamo.jit(fn, backend=code_generator)) == expected


def test_unrelated_outputs_backed_through_one_after_the_other(code_generator):
    def run(fn):
        w = torch.tensor([1.0, 2.0], requires_grad=True)
        a, b = fn(w)
        a.sum().backward()
        b.sum().backward()
        return w.grad.tolist()

    def fn(w):
        return w * w, w * 3
    assert run(dynamo.jit(fn, backend=code_generator)) == run(fn) == [5.0, 7.0]


def test_outputs_sharing_only_nodes_that_save_nothing(code_generator):
    """`c = x + y` is shared, but its node saves nothing: eager's backward through `a` frees
    only `a`'s products, and one through `b` then runs."""
    def run(fn):
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        y = torch.tensor([0.5, 1.0], requires_grad=True)
        a, b = fn(x, y)
        a.sum().backward()
        b.sum().backward()
        return x.grad.tolist(), y.grad.tolist()

    def fn(x, y):
        c = x + y
        return c * c, (c * c) * 2
    assert run(dynamo.jit(fn, backend=code_generator)) == run(fn) == ([9.0, 18.0], [9.0, 18.0])
