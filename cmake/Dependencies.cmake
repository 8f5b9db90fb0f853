# Every dependency comes from the distribution (Debian packages) or the CUDA toolkit; nothing is
# downloaded at build time. Sets SEEDVAE_HAVE_{CUDA,MEDIA,UI}.
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
# CPU backend kernels: oneDNN (AUTO: when found; ON: required) or, with OFF or AUTO without oneDNN,
# the portable implicit-GEMM kernels on Eigen (core/cpu/gemm_engine.h), e.g. the mingw-w64 build.
# Sets SEEDVAE_HAVE_ONEDNN. Debian's dnnl-config.cmake insists on OpenCL development files although
# we use only the CPU engine, so locate the header and library directly.
set(SEEDVAE_WITH_ONEDNN AUTO CACHE STRING "CPU convolutions/GEMMs through oneDNN: AUTO, ON or OFF (portable Eigen kernels)")
set_property(CACHE SEEDVAE_WITH_ONEDNN PROPERTY STRINGS AUTO ON OFF)
set(SEEDVAE_HAVE_ONEDNN OFF)
if(NOT SEEDVAE_WITH_ONEDNN STREQUAL "OFF")
  find_path(SEEDVAE_DNNL_INCLUDE dnnl.hpp)
  find_library(SEEDVAE_DNNL_LIBRARY NAMES dnnl)
  if(SEEDVAE_DNNL_INCLUDE AND SEEDVAE_DNNL_LIBRARY)
    set(SEEDVAE_HAVE_ONEDNN ON)
    if(NOT TARGET DNNL::dnnl)
      add_library(DNNL::dnnl UNKNOWN IMPORTED)
      set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION "${SEEDVAE_DNNL_LIBRARY}"
                            INTERFACE_INCLUDE_DIRECTORIES "${SEEDVAE_DNNL_INCLUDE}")
    endif()
  elseif(SEEDVAE_WITH_ONEDNN STREQUAL "ON")
    message(FATAL_ERROR "SEEDVAE_WITH_ONEDNN=ON but oneDNN (dnnl.hpp, libdnnl) was not found")
  endif()
endif()
if(NOT SEEDVAE_HAVE_ONEDNN)
  find_package(Eigen3 3.3 REQUIRED NO_MODULE)
endif()

set(SEEDVAE_HAVE_MEDIA OFF)
if(SEEDVAE_WITH_MEDIA)
  # OpenCV reads and writes image files; FFmpeg's libraries (5.1 in Debian 12) video files.
  find_package(OpenCV 4 REQUIRED COMPONENTS core imgproc imgcodecs)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(FFMPEG REQUIRED IMPORTED_TARGET
                    libavformat>=59 libavcodec>=59 libavutil>=57 libswscale>=6)
  set(SEEDVAE_HAVE_MEDIA ON)
endif()

set(SEEDVAE_HAVE_QT OFF)
if(SEEDVAE_WITH_UI OR SEEDVAE_BUILD_TESTS)
  find_package(Qt6 6.4 COMPONENTS Core Gui Widgets Test Charts)
  if(Qt6_FOUND)
    set(SEEDVAE_HAVE_QT ON)
  endif()
endif()
# The studio builds without OpenCV too (SEEDVAE_WITH_MEDIA=OFF): it then runs the built-in sample
# clip only (video_io_none.cpp refuses files), which is how it runs on the GPU test machine.
set(SEEDVAE_HAVE_UI OFF)
if(SEEDVAE_WITH_UI AND SEEDVAE_HAVE_QT)
  set(SEEDVAE_HAVE_UI ON)
endif()

# CUDA: AUTO builds the backend when a toolkit is found, ON requires it, OFF never looks.
set(SEEDVAE_HAVE_CUDA OFF)
if(NOT SEEDVAE_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(SEEDVAE_HAVE_CUDA ON)
  elseif(SEEDVAE_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SEEDVAE_WITH_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
