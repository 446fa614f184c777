#include "provider/lima/guest_probe.hpp"

#include <sstream>

#include <fmt/format.h>

namespace agentctl::provider::lima {
namespace {

constexpr const char* k_marker = "agentctl-probe: ";

// One line (so that --preview prints one command per line); `h` and `p` are
// set in front of it.
constexpr const char* k_script_body =
    "unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY ftp_proxy FTP_PROXY; "
    "if command -v curl >/dev/null 2>&1; then "
    "curl --noproxy '*' -s -o /dev/null --connect-timeout 5 --max-time 8 \"http://$h:$p/\"; rc=$?; "
    "case $rc in 7) echo 'agentctl-probe: refused curl';; "
    "28) echo 'agentctl-probe: inconclusive curl exit 28 (timed out)';; "
    "*) echo \"agentctl-probe: connected curl exit $rc\";; esac; "
    "elif command -v bash >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1; then "
    "timeout 8 bash -c 'exec 3<>\"/dev/tcp/$0/$1\"' \"$h\" \"$p\" 2>/dev/null; rc=$?; "
    "case $rc in 0) echo 'agentctl-probe: connected bash';; "
    "124) echo 'agentctl-probe: inconclusive bash timed out';; "
    "*) echo 'agentctl-probe: refused bash';; esac; "
    "elif command -v python3 >/dev/null 2>&1; then "
    "python3 -c \"import errno, socket, sys; s = socket.socket(); s.settimeout(8); "
    "r = s.connect_ex((sys.argv[1], int(sys.argv[2]))); "
    "print('agentctl-probe: ' + ('connected python3' if r == 0 else 'refused python3' if r == errno.ECONNREFUSED "
    "else 'inconclusive python3 errno %d' % r))\" \"$h\" \"$p\"; "
    "else echo 'agentctl-probe: no-tool'; fi";

std::string first_word(const std::string& text) { return text.substr(0, text.find(' ')); }

}  // namespace

std::string probe_script(const std::string& host, const std::string& port) {
    return fmt::format("h={}; p={}; ", host, port) + k_script_body;
}

ProbeOutcome parse_probe_output(const std::string& out, int exit_code) {
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.rfind(k_marker, 0) != 0) continue;
        std::string rest = line.substr(std::string(k_marker).size());
        std::string verb = first_word(rest);
        std::string after = rest.size() > verb.size() ? rest.substr(verb.size() + 1) : "";
        ProbeOutcome o;
        o.tool = first_word(after);
        o.detail = after;
        if (verb == "refused")
            o.kind = ProbeKind::Refused;
        else if (verb == "connected")
            o.kind = ProbeKind::Connected;
        else if (verb == "no-tool")
            o.kind = ProbeKind::NoTool, o.tool.clear();
        else
            o.kind = ProbeKind::Inconclusive;
        return o;
    }
    return {ProbeKind::Inconclusive, "", fmt::format("the check printed no result (exit code {})", exit_code)};
}

Confinement judge_probe(const ProbeOutcome& outcome, bool canary_connected, const std::string& host,
                        std::uint16_t port) {
    const std::string target = fmt::format("{}:{}", host, port);
    if (canary_connected || outcome.kind == ProbeKind::Connected) {
        return {Verdict::Escaped,
                fmt::format("the guest connected directly to {} ({}), bypassing the egress proxy", target,
                            canary_connected ? "agentctl's listener saw the connection" : outcome.detail)};
    }
    switch (outcome.kind) {
        case ProbeKind::Refused:
            return {
                Verdict::Verified,
                fmt::format("a direct connection from the guest to {} (a port agentctl listens on) was refused ({})",
                            target, outcome.tool)};
        case ProbeKind::NoTool:
            return {Verdict::NotVerified,
                    "the guest has none of curl, bash with timeout, or python3 to try a direct connection with; the "
                    "sandbox-exec profile is still in place, only the in-guest proof is missing (install curl in the "
                    "image to get it)"};
        default:
            return {
                Verdict::NotVerified,
                fmt::format("the in-guest check was inconclusive ({}); no connection reached agentctl's listener and "
                            "the sandbox-exec profile is still in place",
                            outcome.detail)};
    }
}

}  // namespace agentctl::provider::lima
