"""Program-fuzzer finding P9 (tests/fuzz/FINDINGS.md): a graph break resumed right before a
`raise` inside a `try` block (the raised exception's constructor broke the graph) failed to
assemble: `RuntimeError: Failed to compute stacksize, got negative size`. The `bytecode`
package sized the handler of a `try` block that the skeleton's dispatch jumps into from the
smallest depth of the dispatch's own path (0), ignoring the depth the exception table gives;
the rewriter now computes stack sizes itself, from each handler's recorded depth."""
import torch

from tests.capture.differential import check


class Coded(RuntimeError):
    def __init__(self, message, code):
        super().__init__(message)  # RuntimeError.__init__ on a user subclass: a graph break
        self.code = code


class Quiet:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        return None


def test_raise_in_a_try_in_a_loop(backend):  # seed 6626
    def f(x):
        caught = []
        for i in range(1, x.dim() + 2):
            try:
                raise Coded("bad value", i)
            except Coded as error:
                caught.append(error.code)
            finally:
                x = x + 1
        return x, caught
    check(f, torch.ones(2, 3), graphs=None, breaks=None, backend=backend)


def test_raise_in_a_with_block(backend):  # seed 7258
    def f(x):
        y = x * 2
        with torch.no_grad(), Quiet():
            raise Coded(f"stop {y.shape[0]}", 3)
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def made(t):
    print("made", t.shape)  # a graph break inside the raised expression's callee
    return ValueError(f"made {t.shape[0]}")


def test_raise_of_a_helper_result_caught(backend):
    def f(x):
        try:
            raise made(x)
        except ValueError as error:
            return x + len(str(error))
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_stack_sizes_agree_with_cpython():
    """`rewrite.stack_size` on code CPython compiled (generators, `with`, `try`, comprehensions
    included) gives CPython's own `co_stacksize`."""
    import inspect
    import json.decoder
    import textwrap
    import types

    from dynamo.instructions.decoding import decode_bytecode as decode
    from dynamo.rewrite import stack_size

    def nested(code):
        yield code
        for constant in code.co_consts:
            if isinstance(constant, types.CodeType):
                yield from nested(constant)
    checked = 0
    for module in (json.decoder, textwrap, inspect):
        source = inspect.getsource(module)
        for code in nested(compile(source, module.__file__, "exec")):
            assert stack_size(decode(code)) == code.co_stacksize, code
            checked += 1
    assert checked > 200
