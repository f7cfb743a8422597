"""Stage "resume": frames with graph breaks (see docs/graph-breaks.md).

Input: a code object and the instruction where tracing had to stop. Output: a *skeleton*
replacement that runs only the stop instructions eagerly, in place, and everything between
them as compiled *regions*:

- `analysis`: loops, stops and the stack layout on every way out of a stop;
- `emit`: instruction sequences shared by the two generators;
- `regions`: continuation code objects (a copy of the code with a new prologue and exits);
- `skeleton`: the replacement code object that drives stops and regions;
- `frame_state.c` (`dynamo._frame_state`): moves locals between frames by slot.
"""
