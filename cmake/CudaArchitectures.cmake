# Default CUDA architectures (override with -DCMAKE_CUDA_ARCHITECTURES=...):
#   75-real  Turing      (RTX 20xx, T4)
#   80-real  Ampere      (A100, A30)
#   86-real  Ampere      (RTX 30xx, A10, A40)
#   89-real  Ada         (RTX 40xx, L4, L40S)
#   90       Hopper      (H100/H200) as SASS + PTX, so newer GPUs (Blackwell) JIT from PTX
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "75-real;80-real;86-real;89-real;90")
endif()
