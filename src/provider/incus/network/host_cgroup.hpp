// A cgroup of its own for each sandbox's host processes (its egress proxy and
// its resolver), with limits, so that one sandbox cannot take the host's
// memory, TCP memory or process table through them, and what they use is
// charged to that sandbox.
//
// Where the memory and pids controllers live decides the layout:
//   v2 (a unified hierarchy at the root with those controllers):
//       ROOT/agentctl/NAME with memory.max (socket memory included) and pids.max;
//   v1 (or a hybrid host, whose unified hierarchy has no controllers):
//       ROOT/memory/agentctl/NAME with memory.limit_in_bytes and, where the
//       kernel has it, memory.kmem.tcp.limit_in_bytes (v1 charges socket
//       memory to a cgroup only once that limit is set), and
//       ROOT/pids/agentctl/NAME with pids.max.
// A process joins before it runs (SpawnOptions::cgroups), so every socket it
// opens is charged there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace agentctl::provider::incus {

struct CgroupLimits {
    std::uint64_t memory_bytes = 0;         // the processes' memory (v2: socket memory too)
    std::uint64_t socket_memory_bytes = 0;  // v1: their TCP socket memory
    std::uint64_t processes = 0;            // processes and threads
};

// The cgroup directories of `name` under `root`, whether they exist or not.
[[nodiscard]] std::vector<std::string> cgroup_dirs(const std::string& name, const std::string& root = "/sys/fs/cgroup");

// The names that have a cgroup `agentctl/NAME` under `root` (in any of its
// hierarchies).
[[nodiscard]] std::vector<std::string> cgroup_names(const std::string& root = "/sys/fs/cgroup");

struct PreparedCgroup {
    std::vector<std::string> procs;  // the cgroup.procs files a process joins
    // A limit lowered below what the cgroup still holds (sockets a stopped
    // proxy left closing) is refused by the kernel: the old limit stays until
    // the next start, and this says so.
    std::vector<std::string> kept;
};

// Creates the cgroup `agentctl/NAME` (or updates its limits). Throws
// agentctl::Error naming the file it could not write.
[[nodiscard]] PreparedCgroup prepare_cgroup(const std::string& name, const CgroupLimits& limits,
                                            const std::string& root = "/sys/fs/cgroup");

// Removes it, with any process still in it (SIGKILL: what stop left, such
// as a resolver's child serving a TCP query). Never throws.
void remove_cgroup(const std::string& name, const std::string& root = "/sys/fs/cgroup");

}  // namespace agentctl::provider::incus
