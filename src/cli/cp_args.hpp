// `agentctl cp SRC DEST`: which side is the sandbox, read the way docker cp
// reads its arguments. Pure, for tests.
#pragma once

#include <string>

namespace agentctl::cli {

struct CopyRequest {
    bool to_sandbox = false;  // true: host -> sandbox; false: sandbox -> host
    std::string sandbox;
    std::string guest_path;  // absolute, or relative to the sandbox user's home
    std::string host_path;   // "-": a tar archive on stdin (to the sandbox) or stdout (from it)
};

// SRC and DEST: exactly one is NAME:PATH. An argument that starts with '/' or
// '.' (or is "-") is a host path even when it holds a ':'. Throws
// agentctl::Error naming the argument and what to write instead.
[[nodiscard]] CopyRequest parse_copy_args(const std::string& source, const std::string& destination);

}  // namespace agentctl::cli
