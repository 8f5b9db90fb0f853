// seedvae-studio: the composition root of the Qt studio. It knows every module: it hands the UI
// the catalog of this build's backends (app/studio_catalog.h).
#include <QString>
#include <QtGlobal>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "app/backends.h"
#include "app/studio_catalog.h"
#include "ui/studio_app.h"
#ifdef _WIN32
#include "core/base/windows_lean.h"  // AttachConsole (--version)
#endif

int main(int argc, char** argv) {
  // --version: the build report with the Qt versions (compiled against, loaded), before any
  // QApplication exists, so it works without a display.
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--version") {
#ifdef _WIN32  // a GUI-subsystem program: print into the console it was started from, if any
      if (AttachConsole(ATTACH_PARENT_PROCESS)) std::freopen("CONOUT$", "w", stdout);
#endif
      const std::string qt = std::string(qVersion()) + " (built with " QT_VERSION_STR ")";
      std::fputs(seedvae::app::version_report("seedvae-studio", {{"qt", qt}}).c_str(), stdout);
      return 0;
    }
  }
  return seedvae::ui::run_studio(argc, argv, seedvae::app::make_studio_catalog());
}
