# Every dependency comes from the distribution (Debian packages) or the CUDA toolkit; nothing is
# downloaded at build time. Sets SEEDVAE_HAVE_{CUDA,MEDIA,UI}.
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
# oneDNN (CPU backend). Debian's dnnl-config.cmake insists on OpenCL development files although we
# use only the CPU engine, so locate the header and library directly.
find_path(SEEDVAE_DNNL_INCLUDE dnnl.hpp REQUIRED)
find_library(SEEDVAE_DNNL_LIBRARY NAMES dnnl REQUIRED)
if(NOT TARGET DNNL::dnnl)
  add_library(DNNL::dnnl UNKNOWN IMPORTED)
  set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION "${SEEDVAE_DNNL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${SEEDVAE_DNNL_INCLUDE}")
endif()

set(SEEDVAE_HAVE_MEDIA OFF)
if(SEEDVAE_WITH_MEDIA)
  find_package(OpenCV 4 REQUIRED COMPONENTS core imgproc imgcodecs videoio)
  set(SEEDVAE_HAVE_MEDIA ON)
endif()

set(SEEDVAE_HAVE_QT OFF)
if(SEEDVAE_WITH_UI OR SEEDVAE_BUILD_TESTS)
  find_package(Qt6 6.4 COMPONENTS Core Gui Widgets Test Charts)
  if(Qt6_FOUND)
    set(SEEDVAE_HAVE_QT ON)
  endif()
endif()
set(SEEDVAE_HAVE_UI OFF)
if(SEEDVAE_WITH_UI AND SEEDVAE_HAVE_QT AND SEEDVAE_HAVE_MEDIA)
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
