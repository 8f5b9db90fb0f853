# seedvae-studio: the Qt 6 desktop studio (included by app/CMakeLists.txt when the UI is built).
# The composition root is studio_main.cpp: it hands the UI the BackendCatalog of
# seedvae_studio_catalog (studio_catalog.h), built on the same backends module as the CLI
# (seedvae_backends), so the studio gets the CUDA backend exactly when the CLI does. seedvae_ui
# itself never links gpu/.
add_library(seedvae_studio_catalog STATIC studio_catalog.cpp studio_catalog.h)
target_link_libraries(seedvae_studio_catalog PUBLIC seedvae_ui seedvae_backends)
seedvae_set_warnings(seedvae_studio_catalog)
add_executable(seedvae-studio WIN32 studio_main.cpp)
target_link_libraries(seedvae-studio PRIVATE seedvae_studio_catalog)
seedvae_set_warnings(seedvae-studio)
install(TARGETS seedvae-studio RUNTIME DESTINATION bin COMPONENT studio)
if(UNIX AND NOT APPLE)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/seedvae-studio.desktop
          DESTINATION share/applications COMPONENT studio)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/seedvae-studio.svg
          DESTINATION share/icons/hicolor/scalable/apps COMPONENT studio)
endif()
