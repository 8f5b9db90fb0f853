# Sourced by the scripts the GPU machine runs (gpu-run.sh, studio-gpu.sh): puts the CUDA, cuDNN
# and cuBLAS libraries of Python's NVIDIA wheels on LD_LIBRARY_PATH (that machine has them there,
# not in a system path). Sets CUDA_WHEEL_LIBS to the directories found.
SITE=$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null || true)
CUDA_WHEEL_LIBS=""
for d in "$SITE"/nvidia/cu13/lib "$SITE"/nvidia/cudnn/lib "$SITE"/nvidia/cublas/lib \
         "$SITE"/nvidia/cuda_runtime/lib "$SITE"/nvidia/cuda_nvrtc/lib "$SITE"/nvidia/nvjitlink/lib; do
  if [ -d "$d" ]; then CUDA_WHEEL_LIBS="$CUDA_WHEEL_LIBS:$d"; fi
done
