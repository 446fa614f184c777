// The policy layer's shared contract: allow rules, the effective policy of a
// sandbox, and the one decision function that the egress proxy, `policy check`
// and the Incus ACL builder all use.
//
// Everything declared here is pure: no sockets, no resolver, no clock.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace agentctl::policy {

// ---------------------------------------------------------------- addresses

// An IPv4 or IPv6 address. IPv4 is stored in the first 4 bytes.
struct IpAddress {
    bool v6 = false;
    std::array<std::uint8_t, 16> bytes{};

    [[nodiscard]] std::string to_string() const;  // canonical text (RFC 5952 for v6)
    friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

// Parses an IP literal in any spelling a resolver or URL parser would accept:
// dotted quad, inet_aton forms (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`),
// IPv6 incl. embedded IPv4 and an optional surrounding [ ]. nullopt if `text` is
// not an IP literal (so it must be treated as a host name).
[[nodiscard]] std::optional<IpAddress> parse_ip_literal(std::string_view text);

// What kind of destination an address is, for the always-refused and LAN checks.
enum class AddressClass {
    Public,
    Loopback,     // 127/8, ::1
    Unspecified,  // 0/8, ::
    Multicast,    // 224/4, ff00::/8
    Broadcast,    // 255.255.255.255
    Reserved,     // 240/4 and other never-routable ranges
    Lan,          // k_lan_ranges
};

// The private, shared-address, link-local and site-local ranges: what
// classify() calls LAN, deny-LAN refuses and --allow-lan opens, wherever it is
// enforced (the proxy's decisions, a provider's firewall rules).
inline constexpr std::array<std::string_view, 8> k_lan_ranges{
    "10.0.0.0/8",    "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
    "100.64.0.0/10", "fc00::/7",      "fe80::/10",      "fec0::/10",
};

// Classifies an address. Addresses that embed an IPv4 address (v4-mapped,
// v4-compatible, NAT64, 6to4, Teredo) are judged by the embedded address.
[[nodiscard]] AddressClass classify(const IpAddress& address);

// "public", "loopback", "unspecified", "multicast", "broadcast", "reserved", "lan".
[[nodiscard]] std::string_view to_string(AddressClass address_class);

// ---------------------------------------------------------------- allow rules

enum class HostKind { Name, Wildcard, Ip };

struct AllowRule {
    HostKind kind = HostKind::Name;
    // Name: lower-case host without trailing dot. Wildcard: the domain after
    // "*." (matches every subdomain, not the apex). Ip: canonical address text.
    std::string host;
    std::vector<std::uint16_t> ports;  // sorted, unique; empty = any TCP port
    // Where the rule came from, for status and `policy check`: "--allow",
    // "preset apt", "agent claude", "profile strict (/etc/agentctl/profiles/strict.yaml:12)",
    // "allow file ./hosts.txt:3".
    std::string origin;
    // When a grant of `policy add --for` ends: seconds since the epoch, UTC
    // (0: never). From then on the rule is no longer in force (in_force_at).
    std::int64_t expires = 0;

    [[nodiscard]] std::string entry() const;  // back to `--allow` form: `*.example.com:80,443`
    friend bool operator==(const AllowRule&, const AllowRule&) = default;
};

// Parses one `--allow` entry (any documented form). Throws agentctl::Error naming
// the entry and what is wrong.
[[nodiscard]] AllowRule parse_allow_entry(std::string_view entry, std::string origin);

// Reads an allow file: one entry per line, `#` comments, blank lines ignored.
// Throws agentctl::Error with `FILE:LINE:` on the first bad line.
[[nodiscard]] std::vector<AllowRule> load_allow_file(const std::string& path);

// ---------------------------------------------------------------- grants that expire

// `90s`, `30m`, `1h`, `2d`, or several (`1h30m`), in seconds; nullopt when
// `text` is not a duration (or one past a hundred years).
[[nodiscard]] std::optional<std::int64_t> duration_seconds(std::string_view text);
// `--for DURATION` of a grant: above 0, at most 366 days. Throws
// agentctl::Error naming the value and the form to write.
[[nodiscard]] std::int64_t parse_grant_duration(std::string_view text);

// ---------------------------------------------------------------- network policy

struct DnsPolicy {
    std::vector<std::string> servers;  // empty: any server on port 53
    bool disabled = false;
};

// An upload budget: at most `bytes` sent by the sandbox to host:port, counted
// by its egress proxy (and kept across the proxy's restarts). Past it, new
// requests there are refused (429) and open connections there end.
struct UploadBudget {
    std::string host;  // a name (lower case) or an IP address, as in AllowRule
    std::uint16_t port = 0;
    std::uint64_t bytes = 0;
};

// `host:port`, or `[v6]:port` for an IPv6 address.
[[nodiscard]] std::string destination_text(std::string_view host, std::uint16_t port);

// `HOST:PORT=SIZE`, e.g. `api.github.com:443=50MiB` (sizes as parse_size:
// B, KiB, MiB, GiB, KB, MB, GB, or bytes); SIZE `none` gives bytes 0 (lift
// the budget). Throws agentctl::Error naming the entry and the expected form.
[[nodiscard]] UploadBudget parse_budget_entry(std::string_view entry);
// The same, for where a budget is set and never lifted (`create --budget`, a
// profile's network.budgets): SIZE `none` is refused.
[[nodiscard]] UploadBudget parse_budget_limit(std::string_view entry);

// Tighten-only layering of budgets: `later` over `into`, per destination the
// lower of the two wins (a destination only `later` names is added).
void tighten_budgets(std::vector<UploadBudget>& into, const std::vector<UploadBudget>& later);

struct NetworkPolicy {
    bool enabled = true;     // false: --no-network-policy (unrestricted, loudly)
    bool deny_lan = true;    // the default; only --allow-lan turns it off
    bool allow_lan = false;  // --allow-lan: every LAN range reachable on any port
    std::vector<AllowRule> allow;
    DnsPolicy dns;
    std::vector<UploadBudget> budgets;  // at most one per destination
    // The budget of every destination without one of its own in `budgets`,
    // each counted on its own (0: none).
    std::uint64_t default_budget = 0;
};

// The policy as it stands at `now` (seconds since the epoch): without the
// rules whose grant has ended (expires <= now).
[[nodiscard]] NetworkPolicy in_force_at(NetworkPolicy policy, std::int64_t now);
// When the next grant still in force at `now` ends; 0 when none does.
[[nodiscard]] std::int64_t next_expiry(const NetworkPolicy& policy, std::int64_t now);

// The policy file the egress proxy reads (JSON, written atomically):
// {"version":1,"enabled":..,"denyLAN":..,"allowLAN":..,"allow":[{"domain":..,"ports":[..],"origin":..,"expires":..}],
//  "dns":{..},
//  "budgets":[{"host":..,"port":..,"bytes":..}],"defaultBudget":bytes} ("budgets" and
//  "defaultBudget" only when set)
[[nodiscard]] nlohmann::json to_policy_file(const NetworkPolicy& policy);
// Throws agentctl::Error on any malformed field (the proxy then denies everything).
[[nodiscard]] NetworkPolicy from_policy_file(const nlohmann::json& document);
// The policy file's text as every writer stores it: to_policy_file indented
// by 2, ending in a newline.
[[nodiscard]] std::string policy_file_text(const NetworkPolicy& policy);
// Reads that text back; throws agentctl::Error when it is not JSON or any
// field is malformed.
[[nodiscard]] NetworkPolicy from_policy_file_text(std::string_view text);

// ---------------------------------------------------------------- the decision

// A host name as every rule, lookup and resolve-file entry compares it:
// lower-cased, one trailing dot removed.
[[nodiscard]] std::string normalise_host(std::string_view host);

// Why a destination is allowed or refused, for machines. Its wire text
// (to_string) is what the proxy's log, its X-Agentctl-Reason header,
// `policy check` and its JSON print.
enum class Reason {
    Allowlisted,        // "allowlisted": an allow rule names the host and port
    AllowLan,           // "allow-lan": a LAN address, and the LAN is open
    PolicyDisabled,     // "policy-disabled": --no-network-policy
    NotAllowlisted,     // "not-allowlisted": no allow rule names the host
    PortNotAllowed,     // "port-not-allowed": a rule names the host, not the port
    BareIpNotListed,    // "bare-ip-not-listed": asked for by address, no rule names it
    Loopback,           // "loopback"
    Unspecified,        // "unspecified"
    Multicast,          // "multicast"
    Broadcast,          // "broadcast"
    Reserved,           // "reserved"
    HostAddress,        // "host-address": one of this machine's own addresses
    SandboxNetwork,     // "sandbox-network": behind a bridge of containers and VMs on this machine (vet_route)
    Lan,                // "lan": a LAN address under deny-LAN
    NoAddress,          // "no-address": the name resolved to nothing
    InvalidHost,        // "invalid-host": not a valid host name
    PolicyUnavailable,  // "policy-unavailable": the proxy has no valid policy (set by the proxy, not decide())
};

// The wire text above, e.g. "port-not-allowed".
[[nodiscard]] std::string_view to_string(Reason reason);

struct Decision {
    bool allowed = false;
    Reason reason = Reason::NotAllowlisted;
    std::string detail;                // one sentence for a person
    std::optional<AllowRule> rule;     // the rule that matched, if any
    std::optional<IpAddress> address;  // when allowed: the exact address to dial
};

// Step 1, before any lookup: may this host:port be asked for at all? Returns a
// refusal, or nullopt when the name must be resolved and its addresses passed
// to decide(). For an IP literal (any spelling) the decision is final.
[[nodiscard]] std::optional<Decision> pre_decide(const NetworkPolicy& policy, std::string_view host, std::uint16_t port,
                                                 std::span<const IpAddress> host_own_addresses = {});

// Step 2: vets every resolved address in order; the first that passes is the
// one to dial. `host_own_addresses` are this machine's own addresses (always refused).
[[nodiscard]] Decision decide(const NetworkPolicy& policy, std::string_view host, std::uint16_t port,
                              std::span<const IpAddress> resolved, std::span<const IpAddress> host_own_addresses = {});

// Where this machine's kernel sends a connection to an address, asked just
// before it is dialled (agentctl/host_network.hpp, RouteTable).
enum class RouteKind {
    Away,            // out of this machine: the LAN or the internet
    HostLocal,       // delivered to this machine itself (a local, anycast or broadcast route)
    SandboxNetwork,  // onto a bridge whose every port is a veth or tap: containers and VMs of this machine
    Unknown,         // the kernel could not be asked
};

struct Route {
    RouteKind kind = RouteKind::Away;
    std::string interface;  // the interface it leaves by, when known ("lo", "agc-...")
};

// Step 3, just before dialling the address decide() chose: refuses it when
// the kernel delivers it to this machine itself (host-address: every address
// the host has at that moment, every bridge's gateway included) or onto a
// bridge of containers and VMs (sandbox-network: other sandboxes), whatever
// the policy, --allow-lan and --no-network-policy included; and when the
// kernel could not be asked (host-address). nullopt: it may be dialled.
[[nodiscard]] std::optional<Decision> vet_route(const IpAddress& address, const Route& route);

}  // namespace agentctl::policy
