"""Symbolic sizes through graph breaks (issue 23): the region after a break (a resume function)
traces symbolically, from its first compile, the dimensions its locals and stack values had
symbolic in the trace before the break (`dynamo.resume.inheritance`), whatever `dynamic` says,
with the 0/1 rule and `mark_static` kept; views (a stack value that is `x.view(...)`) get
symbolic sizes as any tensor does.

Every call runs eagerly and jitted on equal arguments (`dynamic_programs.outcome`); the counts
are the backend's compiles (one per graph: the frame before the break, each region after).
"""
import pytest
import torch

import dynamo
from dynamic_programs import BACKENDS, assert_same_outcome, counting_backend, outcome

pytestmark = pytest.mark.filterwarnings("ignore:dynamo.jit\\(dynamic=True\\):UserWarning")

SIZES = (3, 4, 5, 6, 7)


def breaking(value=None):
    """A call the JIT cannot capture (printing): every caller breaks its graph here."""
    print(end="")
    return value


# -- the programs: one or two breaks, a loop, locals and stack values ---------------------------
def local_across(x):
    y = x * 2
    breaking()
    return y + x


def stack_across(x):
    return (x.sin() * 2, print(end=""))[0] + x  # x.sin() * 2 waits on the stack


def inlined_across(x):
    return x.sin() + breaking(x.cos())  # the break inside the call: its argument and result


def two_breaks(x):
    y = x * 2
    breaking()
    z = (y + 1)[1:]
    breaking()
    return z * x[1:]


def loop_across(x):
    total = x * 0
    for _ in range(3):  # the counter only travels: one body region for every iteration
        total = total + x
        breaking()
    return total


def int_across(x):
    y, n = x + 1, x.size(0)
    breaking()
    return y * n, n  # n: an int of the region, a symbol before the break


def view_across(x):
    return x.view(x.size(0), -1) * 2, x.reshape(-1, x.shape[-1]).sum(0)


# graphs per call: the frame, then each region with tensor work (a loop body is one region;
# the code after the loop only returns)
FRAMES = {local_across: 2, stack_across: 2, inlined_across: 2, two_breaks: 3, loop_across: 2,
          int_across: 2}
PROGRAMS = pytest.mark.parametrize("function", list(FRAMES), ids=lambda f: f.__name__)


def sweep(function, backend="eager", dynamic=None, sizes=SIZES, prepare=None):
    """Call `function` eagerly and jitted on an `n x 3` tensor per size; the counting backend."""
    dynamo.reset()
    counting = counting_backend(backend)
    jitted = dynamo.jit(function, backend=counting, dynamic=dynamic)
    for index, n in enumerate(sizes):
        arguments = [(torch.randn(n, 3, generator=torch.Generator().manual_seed(index)),)
                     for _ in range(2)]
        if prepare is not None:
            prepare(arguments[1][0])
        expected = outcome(function, arguments[0])
        actual = outcome(jitted, arguments[1])
        assert_same_outcome(expected, actual, f"{function.__name__}, n={n}, dynamic={dynamic}")
    return counting


def mark_rows(tensor):
    dynamo.mark_dynamic(tensor, 0)


# -- inheritance ---------------------------------------------------------------------------------
@PROGRAMS
@pytest.mark.parametrize("dynamic", [None, False])
def test_a_marked_dimension_stays_symbolic_through_breaks(function, dynamic):
    """mark_dynamic on the argument: the frame is symbolic from its first compile, and so is
    every region after it (`y = x * 2`, unmarked, inherits the frame's symbol): one compile
    per graph for the whole sweep, under automatic dynamic and under dynamic=False."""
    counting = sweep(function, dynamic=dynamic, prepare=mark_rows)
    assert counting.frame_count == FRAMES[function], counting.frame_count


@PROGRAMS
def test_dynamic_true_compiles_each_graph_once(function):
    counting = sweep(function, dynamic=True)
    assert counting.frame_count == FRAMES[function], counting.frame_count


@PROGRAMS
def test_automatic_dynamic_compiles_each_graph_twice(function):
    """The first size specialises every graph; the second makes each symbolic; no more."""
    counting = sweep(function, dynamic=None)
    assert counting.frame_count == 2 * FRAMES[function], counting.frame_count


@PROGRAMS
def test_dynamic_false_compiles_per_size(function):
    counting = sweep(function, dynamic=False, sizes=SIZES[:3])
    assert counting.frame_count == 3 * FRAMES[function], counting.frame_count


def break_when(x, flag):
    y = x * 2
    if flag:
        breaking()
    return y + 1


def test_a_region_first_reached_by_a_symbolic_frame_starts_symbolic():
    """Automatic dynamic: the frame became symbolic before its break was first taken; the
    region's first compile traces `y` symbolically (it did once per size before: 5 then 6)."""
    dynamo.reset()
    counting = counting_backend("eager")
    jitted = dynamo.jit(break_when, backend=counting)
    for index, (n, flag) in enumerate([(3, False), (4, False), (5, True), (6, True), (7, True)]):
        arguments = [(torch.randn(n, 2, generator=torch.Generator().manual_seed(index)), flag)
                     for _ in range(2)]
        assert_same_outcome(outcome(break_when, arguments[0]), outcome(jitted, arguments[1]),
                            f"n={n}, flag={flag}")
    # static (3), symbolic (4), symbolic with the break (5) and its region: no more
    assert counting.frame_count == 4, counting.frame_count


def test_a_static_mark_stays_static_in_the_region():
    """mark_static on x: the frame and the region keep x's rows static even with
    dynamic=True (one compile of each graph per size)."""
    def unmark_and_pin(tensor):
        dynamo.mark_static(tensor, 0)
    counting = sweep(local_across, dynamic=True, sizes=SIZES[:3], prepare=unmark_and_pin)
    assert counting.frame_count == 2 * 3, counting.frame_count


def test_sizes_zero_and_one_stay_static_in_the_region():
    """The 0/1 rule holds in a region as in the frame: a size of 1 is its own entry, and
    the symbolic entries (frame and region) serve every size from 2 up."""
    counting = sweep(local_across, dynamic=None, sizes=(1, 3, 4, 1, 5, 0, 6),
                     prepare=mark_rows)
    # 1: static frame + region; 3: symbolic frame + region; 0: static frame + region
    assert counting.frame_count == 6, counting.frame_count


@pytest.mark.parametrize("backend", BACKENDS)
def test_loop_and_int_across_breaks_on_both_backends(backend):
    counting = sweep(loop_across, backend, dynamic=None, prepare=mark_rows)
    assert counting.frame_count == FRAMES[loop_across]
    counting = sweep(int_across, backend, dynamic=None, prepare=mark_rows)
    assert counting.frame_count == FRAMES[int_across]


# -- views ---------------------------------------------------------------------------------------
def view_argument(v, x):
    return v * 2 + 1, x.sum()


def write_view(v):
    v.add_(1)
    return v.sum(0)


VIEWS = {
    "transpose": lambda n: torch.randn(3, n).t(),
    "rows_from_5": lambda n: torch.randn(n + 5, 3)[5:],
    "columns": lambda n: torch.randn(n, 7)[:, 2:5],
    "reshaped": lambda n: torch.randn(n, 6).view(n, 2, 3),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("view", list(VIEWS))
def test_view_arguments_are_symbolic(view, backend):
    """A view argument (its base another tensor) gets symbolic sizes like any tensor: one
    compile under dynamic=True, read, written in place, with its base passed too."""
    make = VIEWS[view]
    dynamo.reset()
    reading = counting_backend(backend)
    writing = counting_backend(backend)
    jitted_read = dynamo.jit(view_argument, backend=reading, dynamic=True)
    jitted_write = dynamo.jit(write_view, backend=writing, dynamic=True)
    for n in SIZES:
        arguments = []
        for _ in range(2):
            torch.manual_seed(n)
            v = make(n)
            arguments.append((v, v._base))
        assert_same_outcome(outcome(view_argument, arguments[0]),
                            outcome(jitted_read, arguments[1]), f"{view}, n={n}, read")
        assert_same_outcome(outcome(write_view, arguments[0][:1]),
                            outcome(jitted_write, arguments[1][:1]), f"{view}, n={n}, write")
        assert torch.equal(arguments[0][1], arguments[1][1]), "the bases after the write"
    assert reading.frame_count == 1 and writing.frame_count == 1, \
        (reading.frame_count, writing.frame_count)


def test_a_view_on_the_stack_of_a_region_becomes_symbolic():
    """`x.view(0, -1)` raises at size 0, so the frame breaks there; the region after the
    symbolic frame gets the view on its stack and `x` among its locals: symbolic at the
    second size (x inherited, the view's own sizes seen to change), no compile per size."""
    counting = sweep(view_across, dynamic=None, sizes=(200, 0, 555, 207, 300, 301, 302))
    assert counting.frame_count == 4, counting.frame_count  # 200; 555 frame + region; 207
