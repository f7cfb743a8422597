"""A kernel reading back a buffer it stored (a reader whose index the printer cannot match
to the stored value's, so the value is not forwarded from registers) synchronises the
program's threads first: on GPUs the lanes of the load may belong to other threads than the
lanes of the store (found on an H100 in BERT and GPT-2 training under bf16 autocast)."""
import logging
import re

import pytest
import torch



def _reloads_without_barrier(kernel: str) -> tuple[int, int]:
    """(reloads of stored buffers, those with no barrier since the store) in one kernel."""
    stored, reloads, unsafe = set(), 0, 0
    synchronised = set()
    for line in kernel.splitlines():
        line = line.strip()
        if line == "tl.debug_barrier()":
            synchronised |= stored
        for pointer in re.findall(r"tl\.load\((pointer\d+)", line):
            if pointer in stored:
                reloads += 1
                unsafe += pointer not in synchronised
        for pointer in re.findall(r"tl\.store\((pointer\d+)", line):
            stored.add(pointer)
            synchronised.discard(pointer)
    return reloads, unsafe


def _gpt2_training_kernels(caplog) -> list:
    transformers = pytest.importorskip("transformers")
    import dynamo
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=64, n_layer=1, n_head=2, vocab_size=128,
                                     n_positions=32)
    model = transformers.GPT2LMHeadModel(config).train()
    ids = torch.randint(0, 128, (2, 16))
    with caplog.at_level(logging.DEBUG, logger="framejit.output_code"), \
            torch.autocast("cpu", dtype=torch.bfloat16):
        dynamo.jit(model)(input_ids=ids, labels=ids).loss.backward()
    return [kernel for record in caplog.records
            for kernel in record.getMessage().split("@triton.jit")[1:]]


def test_gpt2_training_kernels_synchronise_before_reading_back(caplog, monkeypatch):
    """GPT-2's residual sums are stored, then read through a view for the bf16 cast of the
    next matrix product. The printer forwards such values from registers when the view's index
    simplifies to the store's; with forwarding of stored values turned off here, every one of
    them is read back, and each read must follow a barrier."""
    from inductor.codegen.triton.kernel import TritonKernel
    forwarded = TritonKernel.forwarded
    monkeypatch.setattr(TritonKernel, "forwarded", lambda self, name, index: None
                        if name in self.pointers else forwarded(self, name, index))
    counts = [_reloads_without_barrier(kernel) for kernel in _gpt2_training_kernels(caplog)]
    assert sum(reloads for reloads, _ in counts) > 0, "no kernel reads a stored buffer back"
    assert sum(unsafe for _, unsafe in counts) == 0


def test_gpt2_training_kernels_forward_stored_values(caplog):
    """By default the read through the view is recognised as the stored element (its index
    simplifies) and forwarded from registers: no read-back at all."""
    counts = [_reloads_without_barrier(kernel) for kernel in _gpt2_training_kernels(caplog)]
    assert sum(reloads for reloads, _ in counts) == 0
