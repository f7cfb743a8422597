"""CPython 3.12 inlines comprehensions (PEP 709): `LOAD_FAST_AND_CLEAR` saves the loop
variable's outer value on the stack, NULL when it is unbound, and the comprehension restores
it at the end. In a region (the code after a graph break) an unbound local holds framejit's
unbound marker, which the trace pushed as the saved value instead of NULL: the stack was one
item off and the region called the marker ("TypeError: 'object' object is not callable";
program fuzzer on 3.12, eager seeds 469, 1423, 1577, 2929, 3281, 9323, 9843 of a 20,000-program
campaign). On 3.11 a comprehension is a frame of its own: the same programs pass there."""
import pytest
import torch

from tests.capture.differential import check

PER_SIZE = ("sizes change between calls: inductor compiles one static variant per size until "
            "its kernels take sizes as arguments (issue 23, docs/inductor.md 'Symbolic sizes')")


def comprehension_after_a_with_block(x, items, w):
    with torch.enable_grad():
        pass
    return [w * x.sum().item() for q in items]


def comprehension_variable_bound_before(x, items):
    q = x.cos()
    print("a break before the comprehension")
    values = [x.sum().item() + q for q in items]
    return values, q


def test_the_loop_variable_unbound_in_the_region(backend):
    check(comprehension_after_a_with_block, torch.randn(2, 4), [1, 2, 3], torch.randn(4, 4),
          graphs=None, breaks=None, calls=3, backend=backend)


@pytest.mark.expect_fallback("per_size", reason=PER_SIZE)
def test_the_loop_variable_bound_before_is_restored(backend):
    check(comprehension_variable_bound_before, torch.randn(3), [1, 2], graphs=None,
          breaks=None, calls=3, backend=backend)
