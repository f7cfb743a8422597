"""An operation that raises on its example inputs (`x.amax(0)` of an empty `x`) made torch's
fake tensor logger print "failed while attempting to run meta for aten.amax.default" and a
traceback on stderr while the trace ran it, then eager raised its own error: output eager
never prints. Those records are dropped while dynamo runs an operation on fakes; the
exception is eager's, in the user's frame."""
import logging

import pytest
import torch

import dynamo


def reduce_rows(x):
    return x.amax(0) + 1


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_failing_meta_kernel_prints_nothing(backend, dynamic, capfd, caplog):
    jitted = dynamo.jit(reduce_rows, backend=backend, dynamic=dynamic)
    torch.testing.assert_close(jitted(torch.ones(3, 4)), reduce_rows(torch.ones(3, 4)))
    capfd.readouterr()
    with caplog.at_level(logging.DEBUG, logger="torch._subclasses.fake_tensor"):
        with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
            jitted(torch.ones(0, 4))
    captured = capfd.readouterr()
    assert "failed while attempting to run meta" not in captured.err + captured.out
    assert not [record for record in caplog.records if "run meta" in record.getMessage()]
    # the logger itself still works outside dynamo's own fake runs
    logging.getLogger("torch._subclasses.fake_tensor").error("visible")
    assert "visible" in caplog.text
