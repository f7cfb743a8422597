"""inductor: compiles an FX graph into fused C++/OpenMP or Triton kernels (a leaf package: never imports dynamo or guards)."""
