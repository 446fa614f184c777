// The one table of CLI verbs. Order is the order `--help` lists them in.
#include <array>

#include "cli/command.hpp"
#include "cli/commands_list.hpp"
#include "egress_proxy/proxy_arguments.hpp"

#include <fmt/format.h>

#include "agentctl/error.hpp"

namespace agentctl::cli {
namespace {

constexpr std::array k_commands{
    CommandEntry{"create", &add_create},
    CommandEntry{"start", &add_start},
    CommandEntry{"stop", &add_stop},
    CommandEntry{"delete", &add_delete},
    CommandEntry{"list", &add_list},
    CommandEntry{"status", &add_status},
    CommandEntry{"gc", &add_gc},
    CommandEntry{"pool", &add_pool},
    CommandEntry{"shell", &add_shell},
    CommandEntry{"exec", &add_exec},
    CommandEntry{"cp", &add_cp},
    CommandEntry{"view", &add_view},
    CommandEntry{"logs", &add_logs},
    CommandEntry{"snapshot", &add_snapshot},
    CommandEntry{"image", &add_image},
    CommandEntry{"policy", &add_policy},
    CommandEntry{"profile", &add_profile},
    CommandEntry{"secret", &add_secret},
    CommandEntry{"config", &add_config},
    CommandEntry{"capabilities", &add_capabilities},
    CommandEntry{"completion", &add_completion},
    CommandEntry{"version", &add_version},
    CommandEntry{"help", &add_help},
    CommandEntry{egress_proxy::k_verb, &add_egress_proxy},  // hidden
    CommandEntry{"man", &add_man},                          // hidden
};

}  // namespace

std::span<const CommandEntry> commands() { return k_commands; }

void set_examples(CLI::App& command, std::initializer_list<std::string_view> lines) {
    std::string footer = "\nExamples:";
    for (auto line : lines) footer += fmt::format("\n  {}", line);
    command.footer(footer);
}

void validate_instance_name(const std::string& name) {
    bool ok = !name.empty() && name.size() <= 63 && std::isalpha(static_cast<unsigned char>(name.front())) &&
              name.back() != '-';
    for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-');
    if (!ok) {
        throw Error(fmt::format("invalid sandbox name '{}'", name),
                    "use a letter followed by letters, digits and '-' (at most 63 characters)");
    }
}

}  // namespace agentctl::cli
