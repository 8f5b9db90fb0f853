# Install-time script (cmake/Packaging.cmake, MSVC builds): copies the third-party DLLs that the
# executables SEEDVAE_EXES import, found in SEEDVAE_DLL_DIRS, into <prefix>/bin. Left out: Windows'
# own DLLs, the Visual C++ runtime (the installer checks for it), Qt (windeployqt deploys it) and
# the CUDA/cuDNN libraries (the cuda_runtime component; never a driver DLL).
file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES ${SEEDVAE_EXES}
  RESOLVED_DEPENDENCIES_VAR _deps
  UNRESOLVED_DEPENDENCIES_VAR _missing
  DIRECTORIES ${SEEDVAE_DLL_DIRS}
  PRE_EXCLUDE_REGEXES "^api-ms-" "^ext-ms-"
    "^([Qq][Tt]6|nvcuda|nvml|cudart|cublas|cudnn|nvrtc|vcruntime|msvcp|concrt|vcomp|ucrtbase)"
  POST_EXCLUDE_REGEXES "[/\\\\][Ss][Yy][Ss][Tt][Ee][Mm]32[/\\\\]")
foreach(_dll IN LISTS _deps)
  file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/bin" TYPE SHARED_LIBRARY FILES "${_dll}")
endforeach()
if(_missing)
  message(WARNING "Runtime DLLs not found for the package (add their folder to SEEDVAE_RUNTIME_DLL_DIRS): ${_missing}")
endif()
