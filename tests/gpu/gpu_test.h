// A tiny header-only test harness for the GPU tests (the GPU machines have no Qt): GPU_TEST(name)
// registers a case; CHECK / CHECK_MSG record failures and continue; REQUIRE_OK returns from the
// case on an error Status. main() calls gpu_test::run_all(argc, argv), which prints one line per
// case and a closing "N passed, N failed". Without a usable CUDA device a test program exits with
// 77, which CTest reports as skipped (SKIP_RETURN_CODE 77).
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace gpu_test {

struct Case {
  const char* name;
  void (*fn)();
};

inline std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}
inline int& case_failures() {
  static int n = 0;
  return n;
}
inline int& total_checks() {
  static int n = 0;
  return n;
}

struct Registrar {
  Registrar(const char* name, void (*fn)()) { registry().push_back({name, fn}); }
};

inline void fail(const char* file, int line, const char* expr, const std::string& msg) {
  ++case_failures();
  std::printf("    FAILED %s:%d: %s%s%s\n", file, line, expr, msg.empty() ? "" : " -- ",
              msg.c_str());
  std::fflush(stdout);
}

[[noreturn]] inline void skip_all(const char* why) {
  std::printf("SKIP: %s\n", why);
  std::fflush(stdout);
  std::exit(77);
}

// Runs every case whose name contains argv[1] (all without an argument).
inline int run_all(int argc, char** argv) {
  const char* filter = argc > 1 ? argv[1] : "";
  int passed = 0, failed = 0;
  for (const Case& c : registry()) {
    if (*filter && std::strstr(c.name, filter) == nullptr) continue;
    case_failures() = 0;
    const auto t0 = std::chrono::steady_clock::now();
    c.fn();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (case_failures() == 0) {
      ++passed;
      std::printf("PASS %-48s %9.1f ms\n", c.name, ms);
    } else {
      ++failed;
      std::printf("FAIL %-48s %9.1f ms (%d failed checks)\n", c.name, ms, case_failures());
    }
    std::fflush(stdout);
  }
  std::printf("%d passed, %d failed (%d checks)\n", passed, failed, total_checks());
  return failed == 0 ? 0 : 1;
}

}  // namespace gpu_test

#define GPU_TEST(name)                                               \
  static void name();                                                \
  static const ::gpu_test::Registrar name##_registrar(#name, &name); \
  static void name()

#define CHECK(cond)                                               \
  do {                                                            \
    ++::gpu_test::total_checks();                                 \
    if (!(cond)) ::gpu_test::fail(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define CHECK_MSG(cond, msg)                                         \
  do {                                                               \
    ++::gpu_test::total_checks();                                    \
    if (!(cond)) ::gpu_test::fail(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)

// expr: a seedvae::Status.
#define CHECK_OK(expr)                                                       \
  do {                                                                       \
    ++::gpu_test::total_checks();                                            \
    const ::seedvae::Status gpu_test_st_ = (expr);                           \
    if (!gpu_test_st_.is_ok())                                               \
      ::gpu_test::fail(__FILE__, __LINE__, #expr, gpu_test_st_.to_string()); \
  } while (0)

// decl = value of a seedvae::Result<T>, or record the failure and return from the case.
#define REQUIRE_OK_CAT_(a, b) a##b
#define REQUIRE_OK_CAT(a, b) REQUIRE_OK_CAT_(a, b)
#define REQUIRE_OK(decl, expr) REQUIRE_OK_IMPL_(REQUIRE_OK_CAT(gpu_test_r_, __LINE__), decl, expr)
#define REQUIRE_OK_IMPL_(tmp, decl, expr)                                  \
  auto tmp = (expr);                                                       \
  ++::gpu_test::total_checks();                                            \
  if (!tmp.is_ok()) {                                                      \
    ::gpu_test::fail(__FILE__, __LINE__, #expr, tmp.status().to_string()); \
    return;                                                                \
  }                                                                        \
  decl = std::move(tmp).value()
