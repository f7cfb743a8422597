"""Property tests of dynamic shapes (issue 23): a program jitted once and called with a sweep
of sizes (hypothesis draws them: 0, 1, primes, powers of two, up to ~1000) returns eager's
answer on every call, on both backends, under `dynamic=None` (automatic), `dynamic=True`,
`dynamic=False` and with `dynamo.mark_dynamic`; and the number of compiles stays within what
the dynamic-shape API promises (docs/api.md): automatic dynamic at most two for the sizes
other than 0 and 1, `dynamic=True` and `mark_dynamic` one, plus one per size 0 or 1.

"""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynamic_programs import (BACKENDS, BY_NAME, GENERAL, NOTABLE_SIZES, PER_SIZE, PROGRAMS,
                              bounded_entries, run_sweep)

NOT_YET = "ignore:dynamo.jit\\(dynamic=True\\):UserWarning"  # today's warning for True
pytestmark = [pytest.mark.filterwarnings(NOT_YET),
              pytest.mark.filterwarnings("ignore:var\\(\\):UserWarning")]  # var of one row

# Each example compiles a few entries: fewer examples than the guard-only properties; the
# inductor backend builds kernels, fewer still (HYPOTHESIS_PROFILE=thorough: ten times more).
EAGER_RUNS = settings(max_examples=max(12, settings.default.max_examples // 8))
INDUCTOR_RUNS = settings(max_examples=max(5, settings.default.max_examples // 25))

SIZES = st.one_of(st.sampled_from(NOTABLE_SIZES), st.integers(0, 1024))


@st.composite
def sweeps(draw, programs=PROGRAMS, smallest=0):
    """(program, sizes, grads): a program, 1-5 sizes within its bounds, and whether each
    call's inputs require grad."""
    program = draw(st.sampled_from(programs))
    low = max(smallest, program.smallest)
    sizes = draw(st.lists(SIZES.filter(lambda n: low <= n <= program.max_size),
                          min_size=1, max_size=5))
    grads = draw(st.lists(st.booleans(), min_size=1, max_size=3))
    return program, sizes, grads


def results_equal_eager(backend, mode, program, sizes, grads):
    run_sweep(program, sizes, backend, mode, grads)


@pytest.mark.parametrize("mode", ["auto", "true", "false"])
@EAGER_RUNS
@given(sweeps())
def test_results_equal_eager_over_size_sweeps_eager_backend(mode, case):
    results_equal_eager("eager", mode, *case)


@PER_SIZE
@pytest.mark.parametrize("mode", ["auto", "true"])
@INDUCTOR_RUNS
@given(sweeps())
def test_results_equal_eager_over_size_sweeps_inductor(mode, case):
    results_equal_eager("inductor", mode, *case)


@pytest.mark.parametrize("backend", BACKENDS)
@INDUCTOR_RUNS
@given(sweeps(smallest=2))
def test_results_equal_eager_with_mark_dynamic(backend, case):
    results_equal_eager(backend, "mark", *case)


@PER_SIZE
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda program: program.name)
def test_every_program_on_notable_sizes_inductor(program):
    """Each program once over a fixed sweep (0, 1, a prime, a repeat), inductor: no program of
    the family is left to hypothesis' draw."""
    sizes = [n for n in (5, 0, 1, 13, 5, 97) if program.smallest <= n <= program.max_size]
    run_sweep(program, sizes, "inductor", "auto", [False, True])


# -- compile counts -----------------------------------------------------------------------------
SWEEPS = {
    "batch": [2, 3, 5, 7, 11, 13, 97, 1000],
    "with_0_1": [5, 1, 7, 0, 13, 1, 64],
    "repeats": [8, 8, 3, 8, 3, 31],
}


def assert_bounded(program, sizes, backend, mode):
    counting = run_sweep(program, sizes, backend, mode)
    allowed = bounded_entries(sizes, mode) * program.frames
    assert counting.frame_count <= allowed, \
        f"{program.name}: {counting.frame_count} compiles for sizes {sizes} under dynamic " \
        f"{mode}, the API allows {allowed}"


@pytest.mark.parametrize("sweep", sorted(SWEEPS))
@pytest.mark.parametrize("program", GENERAL, ids=lambda program: program.name)
def test_dynamic_false_compiles_once_per_size(program, sweep):
    assert_bounded(program, SWEEPS[sweep], "eager", "false")


@pytest.mark.parametrize("mode", ["auto", "true"])
@pytest.mark.parametrize("program", GENERAL, ids=lambda program: program.name)
def test_batch_sweep_compiles_within_the_api_bound_eager_backend(program, mode):
    assert_bounded(program, SWEEPS["batch"], "eager", mode)


@pytest.mark.parametrize("mode", ["auto", "true"])
@pytest.mark.parametrize("program", GENERAL, ids=lambda program: program.name)
def test_sweep_with_sizes_0_and_1_compiles_within_the_api_bound(program, mode):
    assert_bounded(program, SWEEPS["with_0_1"], "eager", mode)


@PER_SIZE
@pytest.mark.parametrize("program", ["pointwise", "reductions", "matmul", "softmax",
                                     "layer_norm", "mlp", "conv1d_length", "view_computed"])
def test_batch_sweep_compiles_within_the_api_bound_inductor(program):
    assert_bounded(BY_NAME[program], SWEEPS["batch"], "inductor", "auto")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", ["pointwise", "concatenate", "linear", "view_computed"])
def test_mark_dynamic_compiles_once_for_a_sweep(program, backend):
    assert_bounded(BY_NAME[program], SWEEPS["batch"], backend, "mark")


@EAGER_RUNS
@given(sweeps(programs=GENERAL))
def test_replaying_a_sweep_compiles_nothing_new(case):
    """Sizes seen before hit their entries (an unchanged input never recompiles), whatever
    the frontend made symbolic."""
    program, sizes, grads = case
    grads = grads[:1]  # the same on every call: only sizes change
    counting = run_sweep(program, sizes + sizes, "eager", "auto", grads)
    first = run_sweep(program, sizes, "eager", "auto", grads).frame_count
    assert counting.frame_count == first
