"""An attribute of a user's module object (`cfg.S`, `cfg` an imported module) was read without a
guard when the module had no `__file__` (made with `types.ModuleType`, or by `exec`): modules
without a file counted as builtins, whose attributes are trusted. Such a module is the user's
now; a module imported inside the function is reached through a source of its own."""
import sys
import types

import pytest
import torch

from tests.repros.after_change import check_after_changes


@pytest.fixture
def cfg():
    module = types.ModuleType("framejit_test_cfg")
    module.S = 2.0
    module.FLAG = True
    sys.modules[module.__name__] = module
    globals()["framejit_test_cfg"] = module
    yield module
    del sys.modules[module.__name__]
    del globals()["framejit_test_cfg"]


def read_global_module(x):
    y = x * framejit_test_cfg.S  # noqa: F821  (set by the fixture)
    return y + 1 if framejit_test_cfg.FLAG else y - 1  # noqa: F821


def read_imported_module(x):
    import framejit_test_cfg as settings
    return x * settings.S


@pytest.mark.parametrize("fn", [read_global_module, read_imported_module])
def test_module_attribute_rebound_after_capture(backend, cfg, fn):
    x = torch.arange(4.0)

    def set_s(value):
        return lambda: setattr(cfg, "S", value)
    steps = [(None, lambda: (x,)), (set_s(3.0), lambda: (x,)), (None, lambda: (x,)),
             (lambda: setattr(cfg, "FLAG", False), lambda: (x,)), (set_s(2.0), lambda: (x,))]
    check_after_changes(fn, backend, steps)


def test_library_module_attributes_stay_unguarded():
    from dynamo import skips
    assert skips.is_library_module(torch) and skips.is_library_module(sys)
    assert skips.is_library_module(types)
    assert not skips.is_library_module(types.ModuleType("made_by_the_user"))
