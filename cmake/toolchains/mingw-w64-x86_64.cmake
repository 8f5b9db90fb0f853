# Cross-compiling for 64-bit Windows with Debian's mingw-w64 (g++-mingw-w64-x86-64-posix: POSIX
# threads, so std::thread and OpenMP work). Used by scripts/package-windows.sh:
#
#   cmake -S . -B build-mingw -G Ninja \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/mingw-w64-x86_64.cmake \
#     -DSEEDVAE_WITH_ONEDNN=OFF -DSEEDVAE_WITH_MEDIA=OFF -DSEEDVAE_WITH_UI=OFF \
#     -DSEEDVAE_WITH_CUDA=OFF -DSEEDVAE_BUILD_TESTS=OFF
#
# Debian has no mingw builds of oneDNN, OpenCV or Qt, so this builds the Qt-free CLI with the
# portable CPU kernels. The header-only libraries it needs (nlohmann-json, CLI11, Eigen) are the
# build machine's Debian packages, exposed through a staging prefix of symlinks and copied CMake
# package files (below) -- never /usr/include itself, whose glibc headers would shadow mingw's.
# Executables are linked statically (libstdc++, libgcc, libgomp, winpthreads), so the installer
# ships no MinGW runtime DLLs.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR AMD64)
set(SEEDVAE_MINGW_TRIPLET x86_64-w64-mingw32)

find_program(CMAKE_C_COMPILER NAMES ${SEEDVAE_MINGW_TRIPLET}-gcc-posix ${SEEDVAE_MINGW_TRIPLET}-gcc
             REQUIRED)
find_program(CMAKE_CXX_COMPILER NAMES ${SEEDVAE_MINGW_TRIPLET}-g++-posix ${SEEDVAE_MINGW_TRIPLET}-g++
             REQUIRED)
find_program(CMAKE_RC_COMPILER NAMES ${SEEDVAE_MINGW_TRIPLET}-windres)
set(CMAKE_CROSSCOMPILING_EMULATOR "" CACHE STRING "e.g. wine64, to run built programs")

# Staging prefix for the host's header-only packages (recreated on every configure; cheap).
set(_seedvae_stage "${CMAKE_BINARY_DIR}/host-header-deps")
file(MAKE_DIRECTORY "${_seedvae_stage}/include" "${_seedvae_stage}/share/cmake"
     "${_seedvae_stage}/share/eigen3")
foreach(_inc nlohmann CLI eigen3)
  if(EXISTS "/usr/include/${_inc}" AND NOT EXISTS "${_seedvae_stage}/include/${_inc}")
    file(CREATE_LINK "/usr/include/${_inc}" "${_seedvae_stage}/include/${_inc}" SYMBOLIC)
  endif()
endforeach()
foreach(_pkg nlohmann_json CLI11)
  if(EXISTS "/usr/share/cmake/${_pkg}")
    file(COPY "/usr/share/cmake/${_pkg}" DESTINATION "${_seedvae_stage}/share/cmake")
  endif()
endforeach()
if(EXISTS "/usr/share/eigen3/cmake")
  file(COPY "/usr/share/eigen3/cmake" DESTINATION "${_seedvae_stage}/share/eigen3")
endif()

set(CMAKE_FIND_ROOT_PATH "/usr/${SEEDVAE_MINGW_TRIPLET}" "${_seedvae_stage}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Self-contained executables: no libstdc++-6.dll, libgcc_s_seh-1.dll, libgomp-1.dll or
# libwinpthread-1.dll next to them. FindOpenMP would otherwise link the import library
# libgomp.dll.a by full path, which -static does not override.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
execute_process(COMMAND "${CMAKE_CXX_COMPILER}" -print-file-name=libgomp.a
                OUTPUT_VARIABLE _seedvae_gomp OUTPUT_STRIP_TRAILING_WHITESPACE)
if(IS_ABSOLUTE "${_seedvae_gomp}" AND EXISTS "${_seedvae_gomp}")
  set(OpenMP_gomp_LIBRARY "${_seedvae_gomp}" CACHE FILEPATH "static libgomp (mingw-w64 toolchain)")
endif()
