#include "provider/common/guest_environment.hpp"

#include <fmt/format.h>

#include "agentctl/process.hpp"

namespace agentctl::provider::common {

std::string environment_files_script(std::string_view mark, std::string_view profile_file,
                                     const std::map<std::string, std::string>& environment) {
    std::string env_lines;
    std::string profile_lines;
    for (const auto& [key, value] : environment) {
        env_lines += fmt::format("{}={}\n", key, value);
        profile_lines += fmt::format("export {}={}\n", key, shell_quote(value));
    }
    return fmt::format(R"SH(mark={mark}
touch /etc/environment
sed "/^$mark begin\$/,/^$mark end\$/d" /etc/environment >/etc/environment.agentctl
{{ echo "$mark begin"; printf '%s' {env}; echo "$mark end"; }} >>/etc/environment.agentctl
mv /etc/environment.agentctl /etc/environment
mkdir -p /etc/profile.d
{{ echo "$mark"; printf '%s' {profile}; }} >{file}
)SH",
                       fmt::arg("mark", shell_quote(std::string(mark))), fmt::arg("env", shell_quote(env_lines)),
                       fmt::arg("profile", shell_quote(profile_lines)),
                       fmt::arg("file", shell_quote(std::string(profile_file))));
}

}  // namespace agentctl::provider::common
