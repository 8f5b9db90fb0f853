# seedvae-studio: the Qt 6 desktop studio (included by app/CMakeLists.txt when the UI is built).
# The composition root is studio_main.cpp: it hands the UI a BackendCatalog built on the same
# backends module as the CLI (backends.cpp), so the studio gets the CUDA backend exactly when the
# CLI does. seedvae_ui itself never links gpu/.
add_executable(seedvae-studio WIN32 studio_main.cpp backends.cpp)
target_link_libraries(seedvae-studio PRIVATE seedvae_ui seedvae_pipeline)
if(SEEDVAE_HAVE_CUDA)
  target_link_libraries(seedvae-studio PRIVATE seedvae_gpu)
  target_compile_definitions(seedvae-studio PRIVATE SEEDVAE_HAVE_CUDA=1)
endif()
seedvae_set_warnings(seedvae-studio)
install(TARGETS seedvae-studio RUNTIME DESTINATION bin COMPONENT studio)
if(UNIX AND NOT APPLE)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/seedvae-studio.desktop
          DESTINATION share/applications COMPONENT studio)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/seedvae-studio.svg
          DESTINATION share/icons/hicolor/scalable/apps COMPONENT studio)
endif()
