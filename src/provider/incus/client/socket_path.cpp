// Finding the Incus socket, in the order the `incus` client itself uses.
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include <fmt/format.h>

#include "provider/incus/client/client.hpp"

namespace agentctl::provider::incus {
std::string env_value(const std::map<std::string, std::string>* env, const char* name) {
    if (env != nullptr) {
        auto it = env->find(name);
        return it == env->end() ? std::string() : it->second;
    }
    const char* value = std::getenv(name);
    return value == nullptr ? std::string() : std::string(value);
}

namespace {

bool exists(const std::string& path) {
    std::error_code ec;
    return std::filesystem::exists(path, ec);
}

bool writable(const std::string& path) { return ::access(path.c_str(), W_OK) == 0; }

}  // namespace

SocketLocation find_socket(const std::map<std::string, std::string>* env) {
    if (auto socket = env_value(env, "INCUS_SOCKET"); !socket.empty()) {
        return {socket, {}, "$INCUS_SOCKET"};
    }
    SocketLocation location;
    if (auto dir = env_value(env, "INCUS_DIR"); !dir.empty()) {
        location = {dir + "/unix.socket", {}, "$INCUS_DIR"};
    } else if (exists("/run/incus/unix.socket")) {
        location = {"/run/incus/unix.socket", {}, "/run/incus"};
    } else {
        location = {"/var/lib/incus/unix.socket", {}, "/var/lib/incus"};
    }
    // The incus-user daemon: a restricted socket beside the main one, limited
    // to the caller's own project.
    const std::string user_socket = location.path + ".user";
    if (!writable(location.path) && exists(user_socket) && writable(user_socket)) {
        location.path = user_socket;
        location.project = fmt::format("user-{}", ::getuid());
        location.source += " (incus-user)";
    }
    return location;
}

}  // namespace agentctl::provider::incus
