// Checks on the host before Incus is asked to publish a port.
#pragma once

#include "agentctl/sandbox.hpp"

namespace agentctl::provider::incus {

// Incus fails ~6 s into a start with a misleading "Failed to receive fd from
// listener process" when a proxy device's host port is taken, so agentctl
// binds the address and port itself first. Throws agentctl::Error naming the
// address and port when it is in use.
void check_host_port_free(const PortForward& port);

}  // namespace agentctl::provider::incus
