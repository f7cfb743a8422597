"""Program fuzzer, inductor seed 37198: a backward that raised eager's version error ("one of
the variables needed for gradient computation has been modified by an inplace operation")
freed the node's saved tensors in eager, so a second backward through it raises "Trying to
backward through the graph a second time"; the compiled node kept them and raised the version
error again. With `retain_graph=True` both raise the version error twice."""
import pytest
import torch

import dynamo


def _saved_then_written(w):
    a = w * 1
    b = a.relu()
    b.mul_(2)
    return b


def _errors(fn, retain: bool) -> list:
    w = torch.ones(2, requires_grad=True)
    result = fn(w)
    errors = []
    for _ in range(2):
        with pytest.raises(RuntimeError) as caught:
            result.sum().backward(retain_graph=retain)
        errors.append(str(caught.value).split(":")[0])
    return errors


@pytest.mark.parametrize("retain", [False, True])
def test_second_backward_after_a_version_error(code_generator, retain):
    expected = _errors(_saved_then_written, retain)
    assert expected[0].startswith("one of the variables")
    assert expected[1].startswith("Trying to backward" if not retain else "one of the variables")
    assert _errors(dynamo.jit(_saved_then_written, backend=code_generator), retain) == expected
