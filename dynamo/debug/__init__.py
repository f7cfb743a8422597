"""The debug dump (`JIT_DEBUG_DIR`, `dynamo.config.debug_dir`): every compiled frame's
bytecode, graphs, guards, loop IR, kernels, timings and graph breaks as files, and one
index.html per run. `dump.py` writes the files, `rendering.py` renders them, `report.py`
writes the index. The driver calls `start_frame()` and `frame_compiled(record)`.
"""
from dynamo.debug.dump import frame_compiled, start_frame

__all__ = ["frame_compiled", "start_frame"]
