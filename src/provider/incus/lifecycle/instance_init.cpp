#include "provider/incus/lifecycle/instance_init.hpp"

#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "provider/common/process_identity.hpp"

namespace agentctl::provider::incus {

std::string container_cgroup(std::string_view project, std::string_view instance) {
    if (project.empty() || project == "default") return fmt::format("lxc.payload.{}", instance);
    return fmt::format("lxc.payload.{}_{}", project, instance);
}

bool is_container_init(int pid, std::string_view project, std::string_view instance, const std::string& proc_root) {
    if (pid <= 1) return false;
    const auto ids = common::status_field(pid, "NSpid", proc_root);
    if (!ids) return false;
    std::istringstream fields(*ids);
    std::vector<std::string> nspid;
    for (std::string id; fields >> id;) nspid.push_back(id);
    if (nspid != std::vector<std::string>{std::to_string(pid), "1"}) return false;
    // Every hierarchy's line: "ID:CONTROLLERS:/PATH"; the container's cgroup
    // is a top-level one, so one line naming it (or a cgroup below it) is enough.
    const auto top = "/" + container_cgroup(project, instance);
    std::ifstream cgroups(fmt::format("{}/{}/cgroup", proc_root, pid));
    for (std::string line; std::getline(cgroups, line);) {
        const auto colon = line.find(':', line.find(':') + 1);
        if (colon == std::string::npos) continue;
        const std::string_view path = std::string_view(line).substr(colon + 1);
        if (path == top || (path.starts_with(top) && path[top.size()] == '/')) return true;
    }
    return false;
}

}  // namespace agentctl::provider::incus
