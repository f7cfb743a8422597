"""Stage "codegen": kernel plans -> kernel source (C++ or Triton) and a Python wrapper."""
