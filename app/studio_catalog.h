// The studio's backend catalog (the composition root's part of the studio): it describes the
// backends of this build to the UI as data (ui::BackendCatalog: names and precisions; the options
// come from the run options table) and creates them through the same backends module as the CLI
// (app/backends.h). The UI itself never links gpu/. create() and probe_devices() run on the
// studio's engine thread, so the CUDA device, streams and handles are born on the thread that
// uses them. A library of its own, so the GPU tests drive the real window with the real catalog.
#pragma once

#include <memory>

#include "ui/backend_catalog.h"

namespace seedvae::app {

std::shared_ptr<ui::BackendCatalog> make_studio_catalog();

}  // namespace seedvae::app
