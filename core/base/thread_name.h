// Names the calling thread for debuggers, profilers, `top -H` and crash reports ("seedvae-read",
// "seedvae-preview", ...). Linux: pthread_setname_np (at most 15 characters are kept); Windows 10+:
// SetThreadDescription, looked up at run time; elsewhere a no-op.
#pragma once

namespace seedvae {

void set_current_thread_name(const char* name);

}  // namespace seedvae
