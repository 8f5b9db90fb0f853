# Install layout and CPack (see packaging/README.md):
#   Linux:   one .deb (cpack -G DEB): /usr/bin/seedvae, /usr/bin/seedvae-studio, the desktop entry
#            and icon, licences under /usr/share/doc/seedvae-studio; dependencies from
#            dpkg-shlibdeps plus the Qt plugins the studio loads at run time.
#   Windows: an NSIS installer (cpack -G NSIS) for 64-bit Windows: Program Files\SeedVAE Studio,
#            Start-menu entries, an uninstaller; components cli, studio (+ the Qt runtime through
#            windeployqt), docs, cuda_runtime (cudart, cuBLAS/cuBLASLt, the cuDNN sub-libraries,
#            their licences; never a driver DLL); with MSVC a Visual C++ runtime check that runs
#            the embedded vc_redist.x64.exe when the runtime is missing.
#            Built natively with MSVC (packaging/windows/windows-build.yml) or, CLI only, cross-
#            compiled with mingw-w64 (scripts/package-windows.sh, tested under wine).
include(GNUInstallDirs)

# Documentation directory: /usr/share/doc/<package> on Linux (Debian policy), doc\ on Windows.
if(WIN32)
  set(SEEDVAE_INSTALL_DOCDIR doc)
else()
  set(SEEDVAE_INSTALL_DOCDIR ${CMAKE_INSTALL_DATAROOTDIR}/doc/seedvae-studio)
endif()

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/THIRD_PARTY_NOTICES.md
              ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${SEEDVAE_INSTALL_DOCDIR} COMPONENT docs)
if(UNIX AND NOT APPLE)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/linux/copyright
          DESTINATION ${SEEDVAE_INSTALL_DOCDIR} COMPONENT docs)
endif()

# ---- The trained demo model (docs/demo-model.md), when the source tree has it ------------------
# find_demo_weights() looks in <exe_dir>/../share/seedvae: copied there in the build tree too, so
# build/release/app/seedvae finds it exactly as an installed bin/seedvae does.
set(SEEDVAE_DEMO_WEIGHTS_FILE ${PROJECT_SOURCE_DIR}/resources/demo/demo_vae.safetensors)
if(EXISTS ${SEEDVAE_DEMO_WEIGHTS_FILE})
  configure_file(${SEEDVAE_DEMO_WEIGHTS_FILE} ${PROJECT_BINARY_DIR}/share/seedvae/demo_vae.safetensors
                 COPYONLY)
  install(FILES ${SEEDVAE_DEMO_WEIGHTS_FILE} DESTINATION ${CMAKE_INSTALL_DATADIR}/seedvae
          COMPONENT cli)
endif()
# The studio's default input (find_demo_clip): the held-out "ladybird" clip, 17 JPEG frames.
set(SEEDVAE_DEMO_CLIP_DIR ${PROJECT_SOURCE_DIR}/resources/demo/clips/ladybird)
file(GLOB _seedvae_demo_frames ${SEEDVAE_DEMO_CLIP_DIR}/*.jpg)
if(_seedvae_demo_frames)
  file(REMOVE_RECURSE ${PROJECT_BINARY_DIR}/share/seedvae/demo-clip)
  file(COPY ${_seedvae_demo_frames} DESTINATION ${PROJECT_BINARY_DIR}/share/seedvae/demo-clip)
  install(FILES ${_seedvae_demo_frames} DESTINATION ${CMAKE_INSTALL_DATADIR}/seedvae/demo-clip
          COMPONENT cli)
endif()

# ---- Windows runtime components -------------------------------------------------------------
if(WIN32)
  # The studio's Qt runtime (Qt DLLs, platform/style/image-format plugins) through Qt's own
  # deployment script, which runs windeployqt on the installed executable (Qt >= 6.3).
  if(TARGET seedvae-studio AND COMMAND qt_generate_deploy_app_script)
    if(Qt6_VERSION VERSION_GREATER_EQUAL 6.5)
      qt_generate_deploy_app_script(TARGET seedvae-studio OUTPUT_SCRIPT _seedvae_qt_deploy
                                    NO_UNSUPPORTED_PLATFORM_ERROR)
    else()
      qt_generate_deploy_app_script(TARGET seedvae-studio FILENAME_VARIABLE _seedvae_qt_deploy
                                    NO_UNSUPPORTED_PLATFORM_ERROR)
    endif()
    install(SCRIPT ${_seedvae_qt_deploy} COMPONENT studio)
  endif()

  # The CUDA backend's runtime DLLs: the CUDA runtime, cuBLAS/cuBLASLt and the cuDNN 9 libraries
  # (the dispatcher and its sub-libraries), with their licence texts. Driver DLLs (nvcuda.dll,
  # nvml.dll, ...) come with the user's NVIDIA driver and are never shipped.
  if(SEEDVAE_HAVE_CUDA)
    find_package(CUDAToolkit REQUIRED)
    get_filename_component(_cudnn_root "${SEEDVAE_CUDNN_INCLUDE}" DIRECTORY)
    set(SEEDVAE_CUDNN_BIN_DIR "" CACHE PATH
        "Folder of cudnn64_9.dll (default: found next to the cuDNN headers)")
    set(_cuda_dirs ${CUDAToolkit_BIN_DIR} ${CUDAToolkit_BIN_DIR}/x64)
    set(_cudnn_dirs ${SEEDVAE_CUDNN_BIN_DIR} ${_cudnn_root}/bin ${CUDAToolkit_BIN_DIR}
                    ${CUDAToolkit_BIN_DIR}/x64)
    file(GLOB _cudnn_versioned_bins LIST_DIRECTORIES true "${_cudnn_root}/bin/*")
    list(APPEND _cudnn_dirs ${_cudnn_versioned_bins})  # cuDNN 9: bin\<CUDA version>\[x64\]
    foreach(_d IN LISTS _cudnn_versioned_bins)
      list(APPEND _cudnn_dirs ${_d}/x64)
    endforeach()
    set(_runtime_dlls "")
    foreach(_pattern cudart64_*.dll cublas64_*.dll cublasLt64_*.dll)
      set(_found "")
      foreach(_d IN LISTS _cuda_dirs)
        file(GLOB _hits "${_d}/${_pattern}")
        list(APPEND _found ${_hits})
      endforeach()
      if(NOT _found)
        message(FATAL_ERROR "Packaging: ${_pattern} not found in ${_cuda_dirs}")
      endif()
      list(GET _found 0 _first)
      list(APPEND _runtime_dlls ${_first})
    endforeach()
    # cuDNN 9 loads its sub-libraries by name at run time. Measured (LD_DEBUG=files, Linux, H200,
    # verify fp32/bf16 + bench): the dispatcher, graph, ops, cnn, engines_precompiled,
    # engines_runtime_compiled and heuristic libraries; never cudnn_adv (RNN/attention APIs the
    # backend does not call), which is left out.
    set(_cudnn_dlls "")
    foreach(_d IN LISTS _cudnn_dirs)
      if(_d AND EXISTS "${_d}/cudnn64_9.dll")
        foreach(_sub "" _graph _ops _cnn _engines_precompiled _engines_runtime_compiled _heuristic)
          if(NOT EXISTS "${_d}/cudnn${_sub}64_9.dll")
            message(FATAL_ERROR "Packaging: ${_d}/cudnn${_sub}64_9.dll not found")
          endif()
          list(APPEND _cudnn_dlls "${_d}/cudnn${_sub}64_9.dll")
        endforeach()
        break()
      endif()
    endforeach()
    if(NOT _cudnn_dlls)
      message(FATAL_ERROR "Packaging: cudnn64_9.dll not found (set SEEDVAE_CUDNN_BIN_DIR)")
    endif()
    # The runtime-compiled engines need NVRTC when cuDNN picks one (not observed in the runs
    # above, but a heuristic choice on other GPUs/shapes), so it is shipped.
    foreach(_d IN LISTS _cuda_dirs)
      file(GLOB _nvrtc "${_d}/nvrtc64_*.dll" "${_d}/nvrtc-builtins64_*.dll")
      list(APPEND _runtime_dlls ${_nvrtc})
    endforeach()
    list(APPEND _runtime_dlls ${_cudnn_dlls})
    list(FILTER _runtime_dlls EXCLUDE REGEX "(nvcuda|nvml|nvapi|nvoptix|nvEncode|nvcuvid)[^/]*\\.dll$")
    list(REMOVE_DUPLICATES _runtime_dlls)
    install(FILES ${_runtime_dlls} DESTINATION bin COMPONENT cuda_runtime)
    # Licence texts: the CUDA Toolkit EULA (redistributable runtime libraries) and cuDNN's.
    get_filename_component(_cuda_root "${CUDAToolkit_BIN_DIR}" DIRECTORY)
    foreach(_lic "${_cuda_root}/EULA.txt" "${_cudnn_root}/LICENSE" "${_cudnn_root}/LICENSE.txt")
      if(EXISTS "${_lic}")
        get_filename_component(_name "${_lic}" NAME)
        if(_lic MATCHES "cudnn|CUDNN|${_cudnn_root}")
          set(_name "cuDNN-${_name}")
        else()
          set(_name "CUDA-${_name}")
        endif()
        install(FILES "${_lic}" DESTINATION ${SEEDVAE_INSTALL_DOCDIR}/licenses RENAME "${_name}"
                COMPONENT cuda_runtime)
      endif()
    endforeach()
  endif()

  # Third-party DLLs the executables load (OpenCV, oneDNN, FFmpeg, ... from vcpkg): resolved at
  # install time from the executables' import tables, searched in SEEDVAE_RUNTIME_DLL_DIRS
  # (default: vcpkg's bin folder). Qt (windeployqt above), the CUDA libraries (cuda_runtime),
  # the Visual C++ runtime (the installer's check) and Windows itself are left out. The mingw-w64
  # build links statically and needs none.
  if(MSVC)
    set(_dll_dirs_default "")
    if(DEFINED VCPKG_INSTALLED_DIR AND DEFINED VCPKG_TARGET_TRIPLET)
      set(_dll_dirs_default "${VCPKG_INSTALLED_DIR}/${VCPKG_TARGET_TRIPLET}/bin")
    endif()
    set(SEEDVAE_RUNTIME_DLL_DIRS "${_dll_dirs_default}" CACHE STRING
        "Folders searched for the third-party DLLs of seedvae.exe / seedvae-studio.exe")
    set(_exes "$<TARGET_FILE:seedvae>")
    if(TARGET seedvae-studio)
      string(APPEND _exes ";$<TARGET_FILE:seedvae-studio>")
    endif()
    install(CODE "set(SEEDVAE_EXES [[${_exes}]])
set(SEEDVAE_DLL_DIRS [[${SEEDVAE_RUNTIME_DLL_DIRS}]])
include([[${PROJECT_SOURCE_DIR}/cmake/InstallRuntimeDlls.cmake]])" COMPONENT runtime)
  endif()

  # MSVC builds need the Visual C++ 2015-2022 runtime: the installer checks for it and, when it is
  # missing, runs vc_redist.x64.exe if SEEDVAE_VCREDIST names one (embedded in the installer and
  # extracted to its temporary folder only; packaging/windows/seedvae.nsh).
  set(SEEDVAE_VCREDIST "" CACHE FILEPATH "vc_redist.x64.exe to embed in the installer (MSVC)")
endif()

# ---- CPack ------------------------------------------------------------------------------------
set(CPACK_PACKAGE_NAME "seedvae-studio")
set(CPACK_PACKAGE_VENDOR "SeedVAE Studio")
set(CPACK_PACKAGE_CONTACT "SeedVAE Studio maintainers <maintainers@seedvae.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "SeedVR2 video VAE engine, CLI and studio")
set(CPACK_PACKAGE_DESCRIPTION
    "SeedVAE Studio encodes and decodes video with the SeedVR2 video VAE (the 3D causal\n"
    "VideoAutoencoderKL of ema_vae_fp16.safetensors) exactly as the upstream PyTorch code does,\n"
    "streams long clips in bounded memory and measures time and memory per stage. It contains\n"
    "the command-line tool seedvae and the Qt 6 desktop studio seedvae-studio.")
string(REPLACE ";" "" CPACK_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_INSTALL_DIRECTORY "SeedVAE Studio")
set(CPACK_PACKAGE_INSTALL_REGISTRY_KEY "SeedVAE Studio")
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_CHECKSUM SHA256)

# Debian package: one package with every component; shared-library dependencies are computed by
# dpkg-shlibdeps. The studio also loads Qt plugins that no ELF dependency names: the platform
# plugins (xcb/offscreen are in libqt6gui6, which shlibdeps finds; wayland and others in
# qt6-qpa-plugins) and the SVG icon engine and image format (libqt6svg6) for its icons.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION "video")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://seedvae.invalid")
set(_recommends "")
if(TARGET seedvae-studio)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libqt6svg6")
  list(APPEND _recommends qt6-qpa-plugins)
endif()
# A CUDA build links the toolkit's libraries, which no Debian package provides (CPack runs
# dpkg-shlibdeps with --ignore-missing-info): recommend NVIDIA's repository packages instead.
if(UNIX AND NOT APPLE AND SEEDVAE_HAVE_CUDA)
  find_package(CUDAToolkit)
  if(CUDAToolkit_FOUND)
    set(_cv "${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR}")
    list(APPEND _recommends cuda-cudart-${_cv} libcublas-${_cv}
         libcudnn9-cuda-${CUDAToolkit_VERSION_MAJOR})
  endif()
endif()
list(JOIN _recommends ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS)

# NSIS (Windows): Start-menu entries and an uninstaller; the macros of packaging/windows/*.nsh add
# the command-prompt and documentation shortcuts and the Visual C++ runtime check.
set(CPACK_NSIS_DISPLAY_NAME "SeedVAE Studio ${PROJECT_VERSION}")
set(CPACK_NSIS_PACKAGE_NAME "SeedVAE Studio")
set(CPACK_NSIS_ENABLE_UNINSTALL_BEFORE_INSTALL ON)
set(CPACK_NSIS_MODIFY_PATH OFF)
set(CPACK_NSIS_INSTALL_ROOT "$PROGRAMFILES64")
set(CPACK_NSIS_UNINSTALL_NAME "Uninstall")
set(CPACK_NSIS_CONTACT "${CPACK_PACKAGE_CONTACT}")
set(CPACK_NSIS_URL_INFO_ABOUT "${CPACK_DEBIAN_PACKAGE_HOMEPAGE}")
# makensis target: amd64-unicode builds a 64-bit installer (needs NSIS's amd64 stubs, which
# Debian's nsis has and the upstream Windows distribution lacks); empty: makensis' default
# (x86-unicode), which installs the same 64-bit program into $PROGRAMFILES64.
if(CMAKE_HOST_WIN32)
  set(_nsis_target_default "")
else()
  set(_nsis_target_default "amd64-unicode")
endif()
set(SEEDVAE_NSIS_TARGET "${_nsis_target_default}" CACHE STRING
    "makensis target (amd64-unicode, x86-unicode or empty for the default)")
set(_nsis_defines "")
if(MSVC)
  string(APPEND _nsis_defines "!define SEEDVAE_NEEDS_VCRUNTIME\n")
  if(SEEDVAE_VCREDIST)
    file(TO_CMAKE_PATH "${SEEDVAE_VCREDIST}" _vcredist)
    string(APPEND _nsis_defines "!define SEEDVAE_VCREDIST_FILE \"${_vcredist}\"\n")
  endif()
endif()
if(TARGET seedvae-studio)
  string(APPEND _nsis_defines "!define SEEDVAE_HAS_STUDIO\n")
  set(CPACK_PACKAGE_EXECUTABLES "seedvae-studio;SeedVAE Studio")
  set(CPACK_NSIS_INSTALLED_ICON_NAME "bin\\\\seedvae-studio.exe")
else()
  set(CPACK_NSIS_INSTALLED_ICON_NAME "bin\\\\seedvae.exe")
endif()
# CPack fills CPACK_NSIS_DEFINES itself, so the top-level additions (makensis target, our
# !defines, the include of packaging/windows/seedvae.nsh) go into a copy of CMake's own
# NSIS.template.in, found first through CPACK_MODULE_PATH.
file(TO_CMAKE_PATH "${PROJECT_SOURCE_DIR}/packaging/windows" _nsh_dir)
set(_nsis_template "${CMAKE_ROOT}/Modules/Internal/CPack/NSIS.template.in")
if(EXISTS "${_nsis_template}")
  file(READ "${_nsis_template}" _template)
  if(SEEDVAE_NSIS_TARGET)  # before the first instruction (the template starts with a BOM)
    string(REPLACE "  !define VERSION " "  Target ${SEEDVAE_NSIS_TARGET}\n  !define VERSION "
           _template "${_template}")
  endif()
  string(REPLACE "@CPACK_NSIS_DEFINES@"
         "@CPACK_NSIS_DEFINES@\n${_nsis_defines}!addincludedir \"${_nsh_dir}\"\n!include \"seedvae.nsh\""
         _template "${_template}")
  file(WRITE "${PROJECT_BINARY_DIR}/cpack-templates/NSIS.template.in" "${_template}")
  set(CPACK_MODULE_PATH "${PROJECT_BINARY_DIR}/cpack-templates;${CMAKE_MODULE_PATH}")
else()
  message(WARNING "Packaging: ${_nsis_template} not found; the NSIS installer lacks its extras")
endif()
set(CPACK_NSIS_EXTRA_PREINSTALL_COMMANDS "!insertmacro SEEDVAE_CHECK_VCRUNTIME")
set(CPACK_NSIS_CREATE_ICONS_EXTRA "!insertmacro SEEDVAE_CREATE_SHORTCUTS")
set(CPACK_NSIS_DELETE_ICONS_EXTRA "!insertmacro SEEDVAE_DELETE_SHORTCUTS")

if(WIN32)
  set(CPACK_GENERATOR NSIS)
  # seedvae-studio-0.1.0-win64.exe; the CLI-only (mingw-w64) build: ...-win64-cli.exe
  if(TARGET seedvae-studio)
    set(CPACK_PACKAGE_FILE_NAME "seedvae-studio-${PROJECT_VERSION}-win64")
  else()
    set(CPACK_PACKAGE_FILE_NAME "seedvae-studio-${PROJECT_VERSION}-win64-cli")
  endif()
else()
  set(CPACK_GENERATOR DEB)
endif()
include(CPack)

# Components (the NSIS installer's component page; the .deb contains all of them).
cpack_add_component(cli DISPLAY_NAME "Command-line tool (seedvae)" REQUIRED
                    DESCRIPTION "seedvae.exe: encode, decode, round trip, verify, plan, bench")
if(TARGET seedvae-studio)
  cpack_add_component(studio DISPLAY_NAME "SeedVAE Studio"
                      DESCRIPTION "The Qt 6 desktop studio and its Qt runtime")
endif()
if(WIN32 AND MSVC)
  cpack_add_component(runtime DISPLAY_NAME "Runtime libraries" HIDDEN REQUIRED
                      DESCRIPTION "OpenCV, oneDNN and the other libraries both programs load")
endif()
cpack_add_component(docs DISPLAY_NAME "Documentation and licences"
                    DESCRIPTION "README, LICENSE and the third-party notices")
if(WIN32 AND SEEDVAE_HAVE_CUDA)
  cpack_add_component(cuda_runtime DISPLAY_NAME "NVIDIA CUDA runtime"
                      DESCRIPTION "CUDA runtime, cuBLAS and cuDNN libraries for the CUDA backend, with their licences (the NVIDIA driver is not included)")
endif()
