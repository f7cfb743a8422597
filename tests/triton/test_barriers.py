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


def test_gpt2_training_kernels_synchronise_before_reading_back(caplog):
    """GPT-2's residual sums are stored, then read back through a view for the bf16 cast of
    the next matrix product (the view's index does not simplify to the store's)."""
    transformers = pytest.importorskip("transformers")
    import dynamo
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=64, n_layer=1, n_head=2, vocab_size=128,
                                     n_positions=32)
    model = transformers.GPT2LMHeadModel(config).train()
    ids = torch.randint(0, 128, (2, 16))
    compiled = dynamo.jit(model)
    with caplog.at_level(logging.DEBUG, logger="framejit.output_code"), \
            torch.autocast("cpu", dtype=torch.bfloat16):
        compiled(input_ids=ids, labels=ids).loss.backward()
    kernels = [kernel for record in caplog.records
               for kernel in record.getMessage().split("@triton.jit")[1:]]
    counts = [_reloads_without_barrier(kernel) for kernel in kernels]
    assert sum(reloads for reloads, _ in counts) > 0, "no kernel reads a stored buffer back"
    assert sum(unsafe for _, unsafe in counts) == 0
