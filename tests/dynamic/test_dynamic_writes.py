"""Writes into inputs and views over symbolic sizes through `dynamo.jit(dynamic=True)` end to
end (issue 23): one compiled entry for every size of 2 and more (sizes 0 and 1 take entries
of their own, the 0/1 rule), inductor compiles each graph once (no `per_size` variant, no
fallback of any kind), and every call matches eager: results, the arguments after the call
(the writes landed in the caller's tensors, same memory) and their version counters."""
import copy

import torch

import dynamo
from dynamic_programs import assert_same_value, counting_backend
from inductor.runtime import fallbacks

SIZES = (5, 2, 3, 7, 97, 1000)


def sweep(function, make_arguments, sizes=SIZES, entries=1):
    """Call eager and `dynamo.jit(function, dynamic=True)` over `sizes` and compare; assert
    `entries` compiles and no fallback."""
    dynamo.reset()
    counting = counting_backend("inductor")
    jitted = dynamo.jit(function, backend=counting, dynamic=True)
    before = fallbacks.fallbacks()
    for size in sizes:
        torch.manual_seed(size)
        arguments = make_arguments(size)
        ours, eager = copy.deepcopy(arguments), copy.deepcopy(arguments)
        pointers = [value.data_ptr() for value in ours if isinstance(value, torch.Tensor)]
        got, want = jitted(*ours), function(*eager)
        where = f"{function.__name__} at size {size}"
        assert_same_value(want, got, f"{where}: result")
        assert_same_value(tuple(eager), tuple(ours), f"{where}: arguments after")
        assert [value.data_ptr() for value in ours if isinstance(value, torch.Tensor)] == \
            pointers, where
        assert [value._version for value in ours if isinstance(value, torch.Tensor)] == \
            [value._version for value in eager if isinstance(value, torch.Tensor)], where
    assert fallbacks.since(before) == {}
    assert counting.frame_count == entries, counting.frame_count


def test_decode_step_writes_into_its_kv_cache():
    """`cache[:, :, -1] = k`, `copy_` into `cache[:, :, pos:pos + 1]` and `index_copy_` at
    a position read off a size."""
    def step(keys, values, key, value, query):
        position = keys.size(2) - 1
        keys[:, :, -1] = key
        keys[:, :, position - 1:position].copy_(key.unsqueeze(2) * 2)
        values.index_copy_(2, torch.arange(position, position + 1), value)
        scores = (query @ keys.transpose(-1, -2)).softmax(-1)
        return scores @ values
    sweep(step, lambda n: [torch.randn(1, 2, n, 4), torch.randn(1, 2, n, 4),
                           torch.randn(1, 2, 4), torch.randn(1, 2, 1, 4),
                           torch.randn(1, 2, 1, 4)])


def test_in_place_updates_of_inputs_and_a_slice_copy():
    def update(x, y, new):
        x.add_(1)
        y.mul_(x)
        x[:, :new.size(1)].copy_(new)
        x[:2].zero_()
        return x[-1] * 2, y
    sweep(update, lambda n: [torch.randn(n, n + 3), torch.randn(n, n + 3), torch.randn(n, n)])


def test_index_put_into_an_input():
    def scatter(x, rows, values):
        x.index_put_((rows,), values, accumulate=True)
        return x * 2
    sweep(scatter, lambda n: [torch.randn(n, 4), torch.tensor([0, 1, 1]), torch.randn(3, 4)])


def test_qkv_split_and_chunk():
    def attention_inputs(qkv):
        query, key, value = qkv.split(qkv.size(-1) // 3, dim=-1)
        first, second, third = qkv.chunk(3, -1)
        return query * key + value, first - third, second
    sweep(attention_inputs, lambda n: [torch.randn(2, 3 * n)])


def test_slices_ending_at_constants_and_starting_before_the_extent():
    def slices(x):
        return x[:3] * 2, x[1:4], x[-10:] + 1
    sweep(slices, lambda n: [torch.randn(n, 4)], sizes=(5, 4, 7, 9))  # guarded: 4 <= n < 10


def test_sizes_zero_and_one_take_entries_of_their_own():
    def write(x):
        x.mul_(2)
        return x[:, :3].sum(-1)
    sweep(write, lambda n: [torch.randn(n, 6)], sizes=(5, 0, 1, 2, 97), entries=3)
