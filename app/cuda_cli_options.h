// Command-line options that choose and configure a backend (shared by verify, encode, decode,
// roundtrip and bench): --device, --precision and one flag per CUDA engine toggle.
#pragma once

#include "app/backends.h"

namespace CLI {
class App;
}

namespace seedvae::app {

// Registers the options on `cmd`, writing into `r` when parsed. Does not register --backend or
// --threads (the subcommands already have them).
void add_backend_options(CLI::App* cmd, BackendRequest& r);

}  // namespace seedvae::app
