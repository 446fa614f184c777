// Checks on the host before Incus is asked to publish a port.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "agentctl/sandbox.hpp"
#include "core/files.hpp"

namespace agentctl::provider::incus {

// Incus fails ~6 s into a start with a misleading "Failed to receive fd from
// listener process" when a proxy device's host port is taken, so agentctl
// binds the address and port itself first. Throws agentctl::Error naming the
// address and port when it is in use.
void check_host_port_free(const PortForward& port);

// A host port is free until the sandbox that publishes it has started (its
// proxy device listens only then): two creates or starts that publish the
// same port at once would both find it free, and the second would fail in
// Incus. So each holds the host-wide lock of every port it publishes
// (LOCK_DIR/agentctl-incus-port-PROTOCOL-PORT.lock, whatever the address:
// 0.0.0.0 and 127.0.0.1 clash too) from before check_host_port_free until its
// instance started; the second waits (`on_wait` says so), then finds the port
// taken. Taken in one order (protocol, port), so two sandboxes with the same
// ports never wait for each other.
[[nodiscard]] std::vector<std::unique_ptr<core::FileLock>> reserve_host_ports(
    const std::string& lock_dir, const std::vector<PortForward>& ports,
    const std::function<void(const PortForward&)>& on_wait);

}  // namespace agentctl::provider::incus
