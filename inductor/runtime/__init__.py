"""Stage "build" and the run time: compiling sources, the on-disk cache, loading kernels, and
the `CompiledGraph` callable returned to the caller."""
