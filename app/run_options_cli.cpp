#include "app/run_options_cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

namespace seedvae::app {

namespace {

std::string choice_help(const OptionSpec& s) {
  if (s.choices.empty()) return std::string(s.help);
  std::string c;
  for (std::string_view v : s.choices) c += (c.empty() ? "" : "|") + std::string(v);
  return std::string(s.help) + " [" + c + "]";
}

// A validator that checks a value as presets are checked (kind, range, choices).
CLI::Validator option_check(const OptionSpec& spec) {
  return CLI::Validator(
      [&spec](std::string& text) -> std::string {
        if (spec.kind == OptionKind::kBool) return {};
        const auto v = parse_option_value(spec, text);
        return v.is_ok() ? std::string() : v.status().message();
      },
      "", std::string(spec.key));
}

}  // namespace

void add_run_options(CLI::App* cmd, RunOptions& options,
                     std::initializer_list<OptionGroup> groups) {
  for (const OptionSpec& spec : run_option_table()) {
    if (std::find(groups.begin(), groups.end(), spec.group) == groups.end()) continue;
    const std::string group(option_group_name(spec.group));
    const std::string help = choice_help(spec);
    const std::string flag(spec.flag);
    std::visit(
        [&](auto member) {
          auto& field = options.*member;
          using F = std::decay_t<decltype(field)>;
          if constexpr (std::is_same_v<F, bool>) {
            const std::string names =
                spec.negative_flag.empty() ? flag : flag + ",!" + std::string(spec.negative_flag);
            cmd->add_flag(names, field, help)->group(group);
          } else if constexpr (std::is_same_v<F, PixelSize>) {
            cmd->add_option_function<std::string>(
                   flag,
                   [&field](const std::string& text) {
                     auto p = PixelSize::parse(text);
                     if (p.is_ok()) field = *p;
                   },
                   help + " (WxH, default " + field.to_string() + ")")
                ->check(option_check(spec))
                ->group(group);
          } else {
            cmd->add_option(flag, field, help)
                ->check(option_check(spec))
                ->group(group)
                ->capture_default_str();
          }
        },
        spec.member);
  }
  // Frame prefetch's old spelling.
  if (std::find(groups.begin(), groups.end(), OptionGroup::kInput) != groups.end()) {
    cmd->add_flag_callback(
           "--no-prefetch", [&options] { options.prefetch = "off"; },
           "same as --prefetch off: read the whole clip first")
        ->group(std::string(option_group_name(OptionGroup::kInput)));
  }
}

}  // namespace seedvae::app
