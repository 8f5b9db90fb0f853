// The run options table (core/pipeline/run_options.h) as CLI11 flags: one flag per option, with
// its help text, checked against its kind, range and choices, grouped like the studio's panel.
#pragma once

#include <initializer_list>

#include "core/pipeline/run_options.h"

namespace CLI {
class App;
}

namespace seedvae::app {

// Registers the options of `groups` on `cmd`, writing into `options` when parsed (a default-true
// switch takes --X and --no-X). Values are checked as set_option() checks them.
void add_run_options(CLI::App* cmd, RunOptions& options, std::initializer_list<OptionGroup> groups);

// Every group: what the round trip takes (and the studio shows).
inline constexpr std::initializer_list<OptionGroup> kAllOptionGroups = {
    OptionGroup::kEngine, OptionGroup::kCuda,  OptionGroup::kStreaming, OptionGroup::kTiling,
    OptionGroup::kMemory, OptionGroup::kInput, OptionGroup::kOutput};
// Every group but the video output's: what encode takes (it writes a latent).
inline constexpr std::initializer_list<OptionGroup> kEncodeOptionGroups = {
    OptionGroup::kEngine, OptionGroup::kCuda,   OptionGroup::kStreaming,
    OptionGroup::kTiling, OptionGroup::kMemory, OptionGroup::kInput};

}  // namespace seedvae::app
