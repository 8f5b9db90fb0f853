# Default CUDA architectures (override with -DCMAKE_CUDA_ARCHITECTURES=...):
#   75-real   Turing      (RTX 20xx, T4)
#   80-real   Ampere      (A100, A30)
#   86-real   Ampere      (RTX 30xx, A10, A40)
#   89-real   Ada         (RTX 40xx, L4, L40S)
#   90        Hopper      (H100/H200) as SASS + PTX: a card newer than every SASS here compiles
#                         from this PTX at load time
#   100-real  Blackwell   (B200, GB200)
#   120-real  Blackwell   (RTX 50xx, RTX PRO 6000)
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "75-real;80-real;86-real;89-real;90;100-real;120-real")
endif()
