"""Non-tensor graph values that later nodes refer to (an autocast handle)."""
from __future__ import annotations

from typing import Any

import torch.fx

from dynamo.variables.base import Variable, variable


@variable
class OpaqueNodeVariable(Variable):
    node: torch.fx.Node
    value: Any

    def python_type(self) -> type:
        return type(self.value)
