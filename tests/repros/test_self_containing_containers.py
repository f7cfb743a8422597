"""A list or dict that contains itself, passed to a jitted function, raised RecursionError
while the builder wrapped its items (an internal error: the frame ran eagerly with a warning;
found by the guard-policy review of issue 22). It is now refused as a value framejit cannot
model (a graph break), and the program runs as in eager."""
import torch

import dynamo


def _read(x, box):
    return x * len(box), x + 1


def test_self_containing_list_and_dict(backend):
    lst = [torch.ones(2)]
    lst.append(lst)
    mapping = {"t": torch.ones(2)}
    mapping["self"] = mapping
    jitted = dynamo.jit(_read, backend=backend)
    for box in (lst, mapping, [lst]):
        x = torch.arange(2.0)
        for want, got in zip(_read(x, box), jitted(x, box)):
            torch.testing.assert_close(got, want)
