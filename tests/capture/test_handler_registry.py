"""The opcode-handler registry checks names and duplicates at import (dynamo/trace/handlers/
registry.py): a typo or a second handler for one opcode fails loudly instead of leaving an
opcode untraced or silently replaced."""
import dis
import sys

import pytest

from dynamo.instructions import NORMALISED_NAMES
from dynamo.trace.handlers import HANDLERS
from dynamo.trace.handlers.registry import HandlerRegistrationError, handler


def test_every_registered_name_is_an_opcode_of_this_python():
    unknown = [name for name in HANDLERS if name not in dis.opmap and name not in NORMALISED_NAMES]
    assert unknown == []


def test_a_name_that_is_no_opcode_raises():
    with pytest.raises(HandlerRegistrationError, match="LOAD_FASST"):
        @handler(table={})
        def LOAD_FASST(tx, instruction):
            pass


def test_a_second_handler_for_one_opcode_raises():
    table = {}

    @handler(table=table)
    def NOP(tx, instruction):
        pass

    with pytest.raises(HandlerRegistrationError, match="has a handler already"):
        @handler(table=table, name="NOP")
        def another_nop(tx, instruction):
            pass


def test_out_of_bounds_handlers_are_not_registered_nor_checked():
    table = {}
    version = sys.version_info[:2]

    @handler(until=version, table=table)
    def NOT_AN_OPCODE(tx, instruction):
        pass

    assert table == {}


def test_normalised_names_are_accepted():
    table = {}

    @handler(table=table)
    def POP_JUMP_IF_NONE(tx, instruction):
        pass

    assert table == {"POP_JUMP_IF_NONE": POP_JUMP_IF_NONE}
