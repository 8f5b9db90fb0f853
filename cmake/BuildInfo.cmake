# Build description for --version (core/base/build_info.{h,cpp}), included by core/CMakeLists.txt:
#   - build_info_config.h: configure-time facts (version, compiler, target, modules, OpenCV);
#   - build_info_git.h: the git commit (+ "-dirty"), refreshed on every build by a custom target
#     that rewrites the header only when the commit changes (so nothing recompiles otherwise);
#   - SEEDVAE_BUILD_CONFIG: the build type, per configuration (multi-config generators too).
set(_gen "${PROJECT_BINARY_DIR}/generated")
foreach(_flag CUDA MEDIA UI ONEDNN)
  if(SEEDVAE_HAVE_${_flag})
    set(SEEDVAE_BUILD_HAVE_${_flag} 1)
  else()
    set(SEEDVAE_BUILD_HAVE_${_flag} 0)
  endif()
endforeach()
set(SEEDVAE_BUILD_OPENCV_VERSION "")
if(SEEDVAE_HAVE_MEDIA)
  set(SEEDVAE_BUILD_OPENCV_VERSION "${OpenCV_VERSION}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/core/base/build_info_config.h.in
               ${_gen}/core/base/build_info_config.h @ONLY)

set(_git_cmd ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
             -DOUTPUT=${_gen}/core/base/build_info_git.h -P ${PROJECT_SOURCE_DIR}/cmake/GitCommit.cmake)
execute_process(COMMAND ${_git_cmd})  # so the header exists before the first build
add_custom_target(seedvae_build_info_git COMMAND ${_git_cmd}
                  BYPRODUCTS ${_gen}/core/base/build_info_git.h
                  COMMENT "Checking the git commit for --version" VERBATIM)

target_sources(seedvae_core PRIVATE ${PROJECT_SOURCE_DIR}/core/base/build_info.cpp)
target_include_directories(seedvae_core PRIVATE ${_gen})
add_dependencies(seedvae_core seedvae_build_info_git)
set_property(SOURCE ${PROJECT_SOURCE_DIR}/core/base/build_info.cpp
             TARGET_DIRECTORY seedvae_core APPEND PROPERTY
             COMPILE_DEFINITIONS "SEEDVAE_BUILD_CONFIG=\"$<CONFIG>\"")
