#include "cli/cp_args.hpp"

#include <optional>
#include <utility>

#include <fmt/format.h>

#include "agentctl/error.hpp"
#include "cli/command.hpp"

namespace agentctl::cli {
namespace {

constexpr std::string_view k_usage = "agentctl cp NAME:/path ./local, or agentctl cp ./local NAME:/path";

// NAME and PATH of a NAME:PATH argument; nullopt for a host path.
std::optional<std::pair<std::string, std::string>> sandbox_side(const std::string& arg) {
    if (arg.empty() || arg == "-" || arg.front() == '/' || arg.front() == '.') return std::nullopt;
    const auto colon = arg.find(':');
    if (colon == std::string::npos) return std::nullopt;
    // A ':' after a '/' is part of a relative host path (dir/a:b).
    if (arg.find('/') < colon) return std::nullopt;
    auto name = arg.substr(0, colon);
    auto path = arg.substr(colon + 1);
    try {
        validate_instance_name(name);
    } catch (const Error& e) {
        throw Error(fmt::format("{}: {}", arg, e.what()),
                    fmt::format("a sandbox path is NAME:PATH; write ./{} for a host file", arg));
    }
    if (path.empty()) {
        throw Error(fmt::format("{}: no path in the sandbox after \"{}:\"", arg, name),
                    fmt::format("name a file or directory: {}:/workspace", name));
    }
    return std::pair{std::move(name), std::move(path)};
}

}  // namespace

CopyRequest parse_copy_args(const std::string& source, const std::string& destination) {
    for (const auto* arg : {&source, &destination}) {
        if (arg->empty()) throw Error("cp: an empty path", std::string(k_usage));
    }
    auto from = sandbox_side(source);
    auto to = sandbox_side(destination);
    if (from && to) {
        throw Error(fmt::format("cp {} {}: both are sandbox paths; agentctl copies between a sandbox and this host",
                                source, destination),
                    "copy to the host first, then into the other sandbox");
    }
    if (!from && !to) {
        throw Error(fmt::format("cp {} {}: neither is a sandbox path (NAME:PATH)", source, destination),
                    std::string(k_usage));
    }
    CopyRequest request;
    request.to_sandbox = static_cast<bool>(to);
    auto& side = to ? *to : *from;
    request.sandbox = std::move(side.first);
    request.guest_path = std::move(side.second);
    request.host_path = to ? source : destination;
    return request;
}

}  // namespace agentctl::cli
