#include "core/base/thread_name.h"

#include <cstring>
#include <string>

#if defined(_WIN32)
#include "core/base/windows_lean.h"
#elif defined(__linux__)
#include <pthread.h>
#endif

namespace seedvae {

void set_current_thread_name(const char* name) {
  if (name == nullptr) return;
#if defined(_WIN32)
  // Looked up, not linked: kernel32 has it from Windows 10 1607 on.
  using SetDescription = HRESULT(WINAPI*)(HANDLE, PCWSTR);
  static const auto set = reinterpret_cast<SetDescription>(reinterpret_cast<void*>(
      GetProcAddress(GetModuleHandleW(L"kernel32.dll"), "SetThreadDescription")));
  if (set == nullptr) return;
  const std::wstring wide(name, name + std::strlen(name));  // the names are ASCII
  set(GetCurrentThread(), wide.c_str());
#elif defined(__linux__)
  char shortened[16] = {};
  std::strncpy(shortened, name, sizeof shortened - 1);  // the kernel keeps 15 characters
  pthread_setname_np(pthread_self(), shortened);
#endif
}

}  // namespace seedvae
