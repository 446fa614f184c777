// Putting variables into a Linux guest's environment for every session: sh
// lines a provider runs as root inside the guest (Incus through its exec API,
// Lima through `limactl shell`).
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace agentctl::provider::common {

// sh lines (run as root) that put `environment` into /etc/environment (PAM),
// between `MARK begin` and `MARK end` lines, and into `profile_file` (login
// shells), replacing what an earlier run with the same MARK wrote. Sets $mark.
[[nodiscard]] std::string environment_files_script(std::string_view mark, std::string_view profile_file,
                                                   const std::map<std::string, std::string>& environment);

}  // namespace agentctl::provider::common
