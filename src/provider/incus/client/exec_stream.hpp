// Streaming a command's output out of an Incus exec operation.
//
// POST /1.0/instances/NAME/exec with "wait-for-websocket": true (and no
// record-output) returns an operation whose metadata.fds holds one secret per
// stream: "0" (stdin), "1" (stdout), "2" (stderr) and "control". The command
// starts once a websocket is connected for each
// (GET /1.0/operations/ID/websocket?secret=S; Incus client/incus_instances.go,
// ExecInstance). Its output arrives as binary messages, each stream ending
// with a close frame; the exit code is the operation's metadata.return.
#pragma once

#include <string>

#include "provider/incus/client/client.hpp"

namespace agentctl::provider::incus {

// The secrets of an exec operation's websockets, from the operation's
// metadata. Throws agentctl::Error when one of the four is missing.
struct ExecSecrets {
    std::string control, in, out, err;
};
[[nodiscard]] ExecSecrets parse_exec_secrets(const Json& operation_metadata);

// The request target of one websocket of operation `operation` (its path or ID).
[[nodiscard]] std::string websocket_target(std::string_view operation, const std::string& secret);

// Connects the four websockets through `transport` (unix socket or TLS),
// copies `in_fd` to the command's stdin until end-of-file (then the command
// reads end-of-file; `in_fd` -1: at once), and copies stdout to `out_fd` and
// stderr to `err_fd` as the messages arrive, through one 64 KiB buffer per
// stream: memory stays bounded whatever the size. Returns when both output
// streams have ended, whether or not stdin was read to its end. Throws
// agentctl::Error when a websocket cannot be opened.
void stream_exec(Transport& transport, std::string_view operation, const ExecSecrets& secrets, int in_fd, int out_fd,
                 int err_fd);

}  // namespace agentctl::provider::incus
