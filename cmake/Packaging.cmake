# Install layout and CPack: a .deb on Linux (dependencies from dpkg-shlibdeps), an NSIS installer
# on Windows (see packaging/README.md). Components: cli, studio, docs, cuda_runtime (Windows only:
# the CUDA/cuDNN runtime DLLs the CUDA backend loads, never a driver DLL).
include(GNUInstallDirs)

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/THIRD_PARTY_NOTICES.md
              ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT docs)

set(CPACK_PACKAGE_NAME "seedvae-studio")
set(CPACK_PACKAGE_VENDOR "SeedVAE Studio")
set(CPACK_PACKAGE_CONTACT "SeedVAE Studio maintainers <maintainers@seedvae.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "SeedVR2 video VAE engine, CLI and studio")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_INSTALL_DIRECTORY "SeedVAE Studio")
set(CPACK_STRIP_FILES ON)

# Debian package: one package with every component; shared-library dependencies are computed.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION "video")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://seedvae.invalid")

# NSIS (Windows): Start-menu entries and an uninstaller; extra commands in packaging/windows.
set(CPACK_NSIS_DISPLAY_NAME "SeedVAE Studio ${PROJECT_VERSION}")
set(CPACK_NSIS_PACKAGE_NAME "SeedVAE Studio")
set(CPACK_NSIS_ENABLE_UNINSTALL_BEFORE_INSTALL ON)
set(CPACK_NSIS_MODIFY_PATH OFF)
set(CPACK_NSIS_INSTALL_ROOT "$PROGRAMFILES64")
if(EXISTS ${PROJECT_SOURCE_DIR}/packaging/windows/installer_extra.nsh)
  file(READ ${PROJECT_SOURCE_DIR}/packaging/windows/installer_extra.nsh SEEDVAE_NSIS_EXTRA)
  set(CPACK_NSIS_EXTRA_INSTALL_COMMANDS "${SEEDVAE_NSIS_EXTRA}")
endif()
if(TARGET seedvae-studio)
  set(CPACK_PACKAGE_EXECUTABLES "seedvae-studio;SeedVAE Studio")
endif()

if(WIN32)
  set(CPACK_GENERATOR NSIS)
else()
  set(CPACK_GENERATOR DEB)
endif()
include(CPack)
