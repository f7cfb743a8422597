"""C++/OpenMP code generation for CPU kernels."""
