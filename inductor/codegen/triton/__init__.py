"""Stage "codegen" for GPUs: kernel plans become Triton source (see docs/triton.md)."""
