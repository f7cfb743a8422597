"""Version counters and autograd's saved-tensor check in compiled training graphs (program
fuzzer P19, seeds 30065, 30099, 30302; peer suite I2).

Eager's autograd saves tensors for the backward and raises in `backward()` when one was
changed in place since ("... modified by an inplace operation: [torch.FloatTensor [3]], which
is output 0 of Mul, is at version 2; expected version 1 instead"). Under inductor, the joint
trace ran eager's check on its own backward, so a graph whose backward eager would refuse
(`y.mul_(x); y.mul_(y)`) raised at the call instead; the compiled backward saved other values
than eager, so a caller's write between the call and `backward()` raised where eager did not
(an input of a ReLU) or did not raise where eager did (an output eager saved); and `_version`
of inputs moved 2 extra on a first call (the analysis traced on fakes sharing the caller's
counter) and once per call where eager moves it once per write (or not at all: BatchNorm's
running statistics). Each case runs eagerly and jitted: values, `_version` of inputs and
outputs, and backward()'s gradients or exact error must agree. Backends: `eager` (control),
inductor with the C++ and the Triton (interpreted on the CPU) code generators.
"""
import pytest
import torch

import dynamo


def _describe(tensor):
    return (tuple(tensor.shape), tensor.requires_grad, tensor._version, tensor.detach().clone())


def _assert_same(actual, expected, path):
    if isinstance(expected, torch.Tensor):   # generated sums may round in another order
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), path
        for index, (a, b) in enumerate(zip(actual, expected)):
            _assert_same(a, b, f"{path}[{index}]")
    elif isinstance(expected, dict):
        assert actual.keys() == expected.keys(), f"{path}: {actual} != {expected}"
        for key in expected:
            _assert_same(actual[key], expected[key], f"{path}.{key}")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _run(fn, make, after, backend):
    torch.manual_seed(0)
    arguments = make()
    function = fn if backend is None else dynamo.jit(fn, backend=backend)
    results = function(*arguments)
    results = results if isinstance(results, tuple) else (results,)
    record = {"results": [_describe(r) for r in results],
              "arguments": [_describe(a) for a in arguments]}
    leaves = [a for a in arguments if a.is_leaf and a.requires_grad]
    try:
        after(arguments, results).backward()
        # (not their versions: eager's engine may sum two contributions in place)
        record["grads"] = [None if leaf.grad is None else leaf.grad.clone() for leaf in leaves]
    except RuntimeError as error:
        record["error"] = str(error)
    return record


def same_as_eager(fn, make, after=None, backend="inductor", raises=None):
    """Eager and jitted agree; `raises`: whether eager's backward raises (so that each case
    checks what it means to)."""
    after = after or (lambda arguments, results: sum(r.sum() for r in results
                                                     if r.requires_grad))
    expected = _run(fn, make, after, None)
    assert ("error" in expected) == raises, expected
    for call in range(2):   # compile, then the cached graph
        _assert_same(_run(fn, make, after, backend), expected, f"call {call}")


def _no_grad_add(index):
    def after(arguments, results):
        with torch.no_grad():
            arguments[index].add_(1)
        return sum(r.sum() for r in results)
    return after


def test_graph_writes_a_tensor_it_saved_fuzz_seed_30065(code_generator):
    """Eager saves `y` for `y.mul_(y)` and the same op writes it: backward raises, the call
    does not (the fuzzer's seed 30065, minimized)."""
    def f(x, y):
        y.mul_(x.mean(-2))
        y.mul_(y)
        return y
    same_as_eager(f, lambda: (torch.randn(4, 3, requires_grad=True), torch.randn(3)),
                  backend=code_generator, raises=True)


def test_graph_writes_an_input_a_view_of_which_was_saved_fuzz_seed_30302(code_generator):
    """`maximum` saves a view of `x`; writing `x` after it makes eager's backward raise,
    naming the view's regenerated `AsStrided` node (seed 30302, minimized)."""
    def f(x, y):
        a = torch.maximum(y + x, x.t().t())
        x[1:2] = y[None]
        return a
    same_as_eager(f, lambda: (torch.randn(2, 4), torch.randn(4, requires_grad=True)),
                  backend=code_generator, raises=True)


def test_graph_writes_a_saved_input_under_no_grad(code_generator):
    def f(x, w):
        y = x * w
        with torch.no_grad():
            x.add_(1)
        return y
    same_as_eager(f, lambda: (torch.randn(3), torch.randn(3, requires_grad=True)),
                  backend=code_generator, raises=True)


def test_leaf_saved_then_written_under_no_grad_fuzz_seed_60112(code_generator):
    """A leaf requiring grad is traced through a stand-in (a clone, so that the graph may
    write it): eager's message names the leaf itself, which has no node (seed 60112)."""
    def f(w):
        t = w.mul(w) @ w.T
        with torch.no_grad():
            w.mul_(0.5)
        return t
    same_as_eager(f, lambda: (torch.randn(2, 2, requires_grad=True),), backend=code_generator,
                  raises=True)


@pytest.mark.parametrize("writer", ["graph", "caller"])
def test_non_leaf_input_named_by_its_own_node(code_generator, writer):
    """The saved input's node is the caller's (`Mul`), or the caller's later write's (`Add`)."""
    def f(x):
        y = x.sin()
        if writer == "graph":
            with torch.no_grad():
                x.mul_(2)
        return y

    def after(arguments, results):
        if writer == "caller":
            arguments[0].add_(1)
        return results[0].sum()
    same_as_eager(f, lambda: (torch.randn(3, requires_grad=True) * 2,), after,
                  backend=code_generator, raises=True)


def test_saved_non_leaf_input_written_after_saving(code_generator):
    def f(x, w):
        y = x.sin() * w
        x.mul_(2)
        return y
    same_as_eager(f, lambda: (torch.randn(3, requires_grad=True) * 1,
                              torch.randn(3, requires_grad=True)),
                  backend=code_generator, raises=True)


def test_non_leaf_input_written_before_saving(code_generator):
    def f(x, w):
        x.mul_(2)
        return x.sin() * w
    same_as_eager(f, lambda: (torch.randn(3, requires_grad=True) * 1,
                              torch.randn(3, requires_grad=True)),
                  backend=code_generator, raises=False)


def test_caller_writes_a_saved_input_before_backward(code_generator):
    same_as_eager(lambda x: x.sin(), lambda: (torch.randn(3, requires_grad=True),),
                  _no_grad_add(0),
                  backend=code_generator, raises=True)


def test_caller_writes_an_input_eager_did_not_save(code_generator):
    """A ReLU saves its result, not its input: an optimizer-style update of the input before
    backward() is allowed, and the gradient is the one of the values the call saw."""
    same_as_eager(lambda x: x.relu() * 2, lambda: (torch.randn(3, requires_grad=True),),
                  _no_grad_add(0),
                  backend=code_generator, raises=False)


def test_caller_writes_an_output_eager_saved(code_generator):
    def after(arguments, results):
        results[0].add_(1)
        return results[0].sum()
    same_as_eager(lambda x: x.exp(), lambda: (torch.randn(3, requires_grad=True),), after,
                  backend=code_generator, raises=True)


def test_caller_writes_an_output_saved_by_another_outputs_node(code_generator):
    def f(x, w):
        y = x.exp()
        return y, y * w

    def after(arguments, results):
        results[0].add_(1)
        return results[1].sum()
    same_as_eager(f, lambda: (torch.randn(3, requires_grad=True),
                              torch.randn(3, requires_grad=True)), after,
                  backend=code_generator, raises=True)


@pytest.mark.parametrize("through", ["stale", "other"])
def test_stale_node_reached_or_not_by_the_backward(code_generator, through):
    """Only the nodes a backward runs check their saved tensors: through `b` alone, the node
    that saved `x` (then written) does not run."""
    def f(x, w):
        a = x * w
        b = w * 2
        x.add_(1)
        return a, b

    def after(arguments, results):
        return results[0 if through == "stale" else 1].sum()
    same_as_eager(f, lambda: (torch.randn(3), torch.randn(3, requires_grad=True)), after,
                  backend=code_generator, raises=through == "stale")


def test_versions_after_two_writes(code_generator):
    def f(x, w):
        x.add_(1)
        x.mul_(2)
        v = x[0]
        v.mul_(w)
        y = w * 2
        y.add_(1)
        return (x * w).sum(), y
    same_as_eager(f, lambda: (torch.randn(2, 3), torch.randn(3, requires_grad=True)),
                  backend=code_generator, raises=False)


def test_batch_norm_running_statistics_versions(code_generator):
    """Eager's batch norm updates its running statistics without moving their counters and
    saves them for the backward."""
    torch.manual_seed(0)
    norm = torch.nn.BatchNorm1d(4)
    expected = torch.nn.BatchNorm1d(4)
    jitted = dynamo.jit(norm, backend=code_generator)
    for call in range(2):
        x = torch.randn(8, 4, requires_grad=True)
        jitted(x).sum().backward()
        expected(x).sum().backward()
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            assert getattr(norm, name)._version == getattr(expected, name)._version, name
        torch.testing.assert_close(norm.running_mean, expected.running_mean)


def test_caller_saves_through_hooks(code_generator):
    """Under saved-tensor hooks eager checks no versions: the backward reads what the hook
    gives back (for CPU tensors `save_on_cpu` keeps the tensor itself, written since)."""
    def g(x):
        return x.sin()
    grads = []
    for function in (g, dynamo.jit(g, backend=code_generator)):
        x = torch.linspace(-1, 1, 3).requires_grad_()
        with torch.autograd.graph.save_on_cpu():
            y = function(x)
        with torch.no_grad():
            x.add_(1)
        y.sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[1], grads[0])


def test_saved_in_one_graph_written_through_a_view_in_the_next(code_generator):
    """The second graph's write `x[0, 1] = ...` leaves eager's node `CopySlices` on `x`, which
    the first graph's check names (program fuzzer seed 60451)."""
    def f(x, g):
        t = torch.minimum(x, g) / (g.abs() + 1)
        print("break")
        x[0, 1] = torch.sum(g)
        return t
    same_as_eager(f, lambda: (torch.ones(2, 2, requires_grad=True) * 2,
                              torch.ones(2, 2, requires_grad=True)),
                  backend=code_generator, raises=True)


class _BufferAdd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.buf = torch.nn.Buffer(torch.zeros(1))
        self.w = torch.nn.Parameter(torch.ones(1))

    def forward(self, x):
        self.buf.add_(1)
        return x * self.w + self.buf


def test_buffer_written_once_per_call_peer_i2(code_generator):
    """Peer suite I2 (training path): one `add_` per call moves `buf._version` once."""
    expected, module = _BufferAdd(), _BufferAdd()
    jitted = dynamo.jit(module, backend=code_generator)
    for call in range(3):
        jitted(torch.ones(1)).sum().backward()
        expected(torch.ones(1)).sum().backward()
        assert module.buf._version == expected.buf._version, call
        torch.testing.assert_close(module.buf, expected.buf)


def test_saved_in_one_graph_written_in_place_in_the_next(code_generator):
    """The second graph's `x -= v` is written back with a copy; the first graph's check still
    names eager's node, `Sub` (program fuzzer seed 60643, an input's variant)."""
    def f(x):
        u = x.sin()
        print("break")
        x -= u.amax(0)
        return u

    same_as_eager(f, lambda: (torch.linspace(-1, 1, 4).reshape(2, 2).requires_grad_() * 1,),
                  backend=code_generator, raises=True)
