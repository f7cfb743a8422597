"""`torch.compile(model, backend="framejit")`: framejit's code generator registered as a torch.compile
backend name through the `torch_dynamo_backends` entry-point group (pyproject.toml), issue 24
item 4. The anchor (torch.compile) is allowed in tests; the adapter itself,
`dynamo.backends.torch_compile`, only calls `inductor.compile_fx`.

Needs the package installed (`pip install -e .`): entry points come from its metadata.
"""
import importlib.metadata
import pathlib
import tomllib

import pytest
import torch

import inductor
from dynamo.backends import torch_compile

ROOT = pathlib.Path(__file__).resolve().parents[2]
TARGET = "dynamo.backends.torch_compile:framejit"

pytestmark = pytest.mark.torch_compile


@pytest.fixture
def compile_calls(monkeypatch):
    """Example inputs of each graph torch.compile hands to inductor.compile_fx."""
    calls = []
    real = inductor.compile_fx

    def spy(gm, example_inputs, **options):
        calls.append(list(example_inputs))
        return real(gm, example_inputs, **options)
    monkeypatch.setattr(inductor, "compile_fx", spy)
    torch._dynamo.reset()
    yield calls
    torch._dynamo.reset()


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))


def test_pyproject_declares_the_entry_point():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["torch_dynamo_backends"] == {"framejit": TARGET}


def test_the_installed_metadata_has_it():
    found = {entry.name: entry for entry in
             importlib.metadata.entry_points(group="torch_dynamo_backends")}
    assert "framejit" in found, "reinstall: pip install --no-deps --no-build-isolation -e ."
    assert found["framejit"].value == TARGET and found["framejit"].load() is torch_compile.framejit


def test_torch_compile_finds_framejit_by_name():
    assert "framejit" in torch._dynamo.list_backends(exclude_tags=())


def test_inference_matches_eager_and_runs_through_inductor(compile_calls):
    network = model()
    compiled = torch.compile(network, backend="framejit")
    x = torch.randn(5, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), network(x))
    assert len(compile_calls) == 1 and any(value is x for value in compile_calls[0])


def test_training_gradients_match_eager(compile_calls):
    network = model()
    compiled = torch.compile(network, backend="framejit")
    x = torch.randn(5, 8)
    loss = compiled(x).square().sum()
    loss.backward()
    got = [parameter.grad.clone() for parameter in network.parameters()]
    network.zero_grad()
    expected_loss = network(x).square().sum()
    expected_loss.backward()
    torch.testing.assert_close(loss, expected_loss)
    for mine, eager in zip(got, [parameter.grad for parameter in network.parameters()]):
        torch.testing.assert_close(mine, eager)
    assert compile_calls and loss.requires_grad


@pytest.mark.expect_fallback(
    "per_size", reason="torch.compile's automatic dynamic passes the batch size as a SymInt "
    "input; inductor compiles a static variant per size where it cannot compile it symbolically "
    "(issue 23)")
def test_changing_batch_sizes_match_eager(compile_calls):
    network = model()
    compiled = torch.compile(network, backend="framejit")
    with torch.no_grad():
        for rows in (5, 7, 1, 12):
            x = torch.randn(rows, 8)
            torch.testing.assert_close(compiled(x), network(x))
    # torch.compile recompiles once with a symbolic batch size (a SymInt example input)
    assert any(isinstance(value, torch.SymInt) for call in compile_calls for value in call)
