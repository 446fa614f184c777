#include "provider/incus/network/nft_kernel.hpp"

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <string_view>
#include <vector>

#include "agentctl/hash.hpp"
#include "core/netlink_socket.hpp"

namespace agentctl::provider::incus {
namespace {

constexpr std::string_view k_prefix = "nl:";

// One attribute of a netlink message: its type (without the nested and
// byte-order flags) and payload.
struct Attribute {
    std::uint16_t type = 0;
    std::string_view payload;
};

std::vector<Attribute> attributes(std::string_view data) {
    std::vector<Attribute> out;
    while (data.size() >= NLA_HDRLEN) {
        nlattr header{};
        std::memcpy(&header, data.data(), sizeof header);
        if (header.nla_len < NLA_HDRLEN || header.nla_len > data.size()) break;
        out.push_back({static_cast<std::uint16_t>(header.nla_type & NLA_TYPE_MASK),
                       data.substr(NLA_HDRLEN, header.nla_len - NLA_HDRLEN)});
        data.remove_prefix(std::min<std::size_t>(NLA_ALIGN(header.nla_len), data.size()));
    }
    return out;
}

void put(std::string& out, std::uint16_t type, std::string_view payload) {
    nlattr header{};
    header.nla_len = static_cast<std::uint16_t>(NLA_HDRLEN + payload.size());
    header.nla_type = type;
    out.append(reinterpret_cast<const char*>(&header), sizeof header);
    out.append(payload);
    out.append(NLA_ALIGN(payload.size()) - payload.size(), '\0');
}

void put_string(std::string& out, std::uint16_t type, const std::string& value) {
    put(out, type, std::string_view(value.c_str(), value.size() + 1));
}

std::string_view as_string(std::string_view payload) {
    while (!payload.empty() && payload.back() == '\0') payload.remove_suffix(1);
    return payload;
}

std::string_view find(std::string_view data, std::uint16_t type) {
    for (const auto& a : attributes(data)) {
        if (a.type == type) return a.payload;
    }
    return {};
}

// `data`'s attributes without the types in `drop`, each passed through
// `nested` when it names one (it rewrites the payload).
using Rewrite = std::function<std::string(std::uint16_t, std::string_view)>;
std::string canonical(std::string_view data, std::initializer_list<std::uint16_t> drop, const Rewrite& nested = {}) {
    std::string out;
    for (const auto& a : attributes(data)) {
        if (std::find(drop.begin(), drop.end(), a.type) != drop.end()) continue;
        put(out, a.type, nested ? nested(a.type, a.payload) : std::string(a.payload));
    }
    return out;
}

// An expression's data without what changes with the traffic it sees: a
// counter's packets and bytes, what a quota has consumed (and its flag that
// it is used up), when a `last` last saw a packet. The rest (a quota's bytes,
// a connlimit's count) is what it enforces.
std::string steady_data(std::string_view expression, std::string_view data) {
    if (expression == "counter") return canonical(data, {NFTA_COUNTER_BYTES, NFTA_COUNTER_PACKETS});
    if (expression == "last") return canonical(data, {NFTA_LAST_SET, NFTA_LAST_MSECS});
    if (expression == "quota") {
        return canonical(data, {NFTA_QUOTA_CONSUMED}, [](std::uint16_t type, std::string_view value) {
            std::uint32_t flags = 0;
            if (type != NFTA_QUOTA_FLAGS || value.size() != sizeof flags) return std::string(value);
            std::memcpy(&flags, value.data(), sizeof flags);
            flags = htonl(ntohl(flags) & ~static_cast<std::uint32_t>(NFT_QUOTA_F_DEPLETED));
            return std::string(reinterpret_cast<const char*>(&flags), sizeof flags);
        });
    }
    return std::string(data);
}

// The set an expression names (a lookup's, a dynset's): its data's attribute.
std::uint16_t set_name_attribute(std::string_view expression) {
    if (expression == "lookup") return NFTA_LOOKUP_SET;
    if (expression == "dynset") return NFTA_DYNSET_SET_NAME;
    return 0;
}

// What a set is called in a digest: its name, or for an anonymous set (one
// written inline in a rule) the order in which the rules first look it up.
// The kernel names those `__setN` with the first N free in the table, so the
// same rules get other names when other sets of the table come and go (as in
// Incus's table, shared by every bridge).
using SetNames = std::map<std::string, std::string, std::less<>>;

std::string alias(const SetNames& names, std::string_view set) {
    const auto found = names.find(set);
    return found == names.end() ? std::string(set) : found->second;
}

std::string with_name(std::string_view name) { return std::string(name) + '\0'; }

// A rule's expressions: each one's name and steady data (none when nothing of
// it is steady, as a counter's), a set by its alias.
std::string canonical_expressions(std::string_view list, const SetNames& names) {
    std::string out;
    for (const auto& element : attributes(list)) {
        const auto name = as_string(find(element.payload, NFTA_EXPR_NAME));
        const auto set_attribute = set_name_attribute(name);
        std::string expression;
        for (const auto& a : attributes(element.payload)) {
            if (a.type != NFTA_EXPR_DATA) {
                put(expression, a.type, a.payload);
                continue;
            }
            auto data = steady_data(name, a.payload);
            if (set_attribute != 0) {
                data = canonical(data, {}, [&](std::uint16_t inner, std::string_view value) {
                    return inner == set_attribute ? with_name(alias(names, as_string(value))) : std::string(value);
                });
            }
            if (!data.empty()) put(expression, a.type, data);
        }
        put(out, element.type, expression);
    }
    return out;
}

std::string canonical_chain(std::string_view data) { return canonical(data, {NFTA_CHAIN_HANDLE, NFTA_CHAIN_COUNTERS}); }

std::string canonical_rule(std::string_view data, const SetNames& names) {
    return canonical(data, {NFTA_RULE_HANDLE, NFTA_RULE_POSITION}, [&](std::uint16_t type, std::string_view payload) {
        return type == NFTA_RULE_EXPRESSIONS ? canonical_expressions(payload, names) : std::string(payload);
    });
}

std::string canonical_set(std::string_view data, const SetNames& names) {
    return canonical(data, {NFTA_SET_HANDLE}, [&](std::uint16_t type, std::string_view payload) {
        return type == NFTA_SET_NAME ? with_name(alias(names, as_string(payload))) : std::string(payload);
    });
}

// A set's elements, each without what changes by itself, sorted: a hash
// set's dump follows its hash, whose seed each set draws anew.
std::vector<std::string> canonical_elements(const std::vector<std::string>& answers) {
    std::vector<std::string> out;
    for (const auto& answer : answers) {
        for (const auto& element : attributes(find(answer, NFTA_SET_ELEM_LIST_ELEMENTS))) {
            out.push_back(
                canonical(element.payload, {NFTA_SET_ELEM_EXPIRATION, NFTA_SET_ELEM_EXPR, NFTA_SET_ELEM_EXPRESSIONS}));
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

// The sets the rules look up (by name), in the order first met.
std::vector<std::string> looked_up_sets(const std::vector<std::string>& rules) {
    std::vector<std::string> sets;
    for (const auto& rule : rules) {
        for (const auto& element : attributes(find(rule, NFTA_RULE_EXPRESSIONS))) {
            const auto attribute = set_name_attribute(as_string(find(element.payload, NFTA_EXPR_NAME)));
            if (attribute == 0) continue;
            const auto set = as_string(find(find(element.payload, NFTA_EXPR_DATA), attribute));
            if (!set.empty() && std::find(sets.begin(), sets.end(), set) == sets.end()) sets.emplace_back(set);
        }
    }
    return sets;
}

// Thrown inside: the ruleset changed during the reading (read it again), or
// the kernel cannot be asked.
struct Interrupted {};
struct Unavailable {};

// An answer's errno where the object must exist: one that went away was
// removed during the reading.
void require(int error) {
    if (error == ENOENT) throw Interrupted{};
    if (error != 0) throw Unavailable{};
}

// The string attributes of a request: (type, value).
using Names = std::initializer_list<std::pair<std::uint16_t, std::string>>;

std::string request_attributes(Names names) {
    std::string out;
    for (const auto& [type, value] : names) put_string(out, type, value);
    return out;
}

class Netlink {
public:
    Netlink() {
        if (!m_socket.is_open()) throw Unavailable{};
    }

    // The payloads (after the nfgenmsg) of the kernel's answers to one
    // request, or the errno it answered with (ENOENT: no such object).
    int ask(int message, bool dump, const std::string& request_attributes, std::vector<std::string>& answers) {
        nfgenmsg family{};
        family.nfgen_family = NFPROTO_INET;
        family.version = NFNETLINK_V0;
        std::string request(NLMSG_ALIGN(sizeof family), '\0');
        std::memcpy(request.data(), &family, sizeof family);
        request += request_attributes;
        const auto collect = [&](const nlmsghdr&, std::string_view body) {
            if (body.size() < NLMSG_ALIGN(sizeof(nfgenmsg))) return;
            answers.emplace_back(body.substr(NLMSG_ALIGN(sizeof(nfgenmsg))));
        };
        const auto type = static_cast<std::uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | message);
        const auto outcome = m_socket.exchange(type, dump ? NLM_F_DUMP : NLM_F_ACK, request, collect);
        if (outcome.interrupted) throw Interrupted{};
        if (!outcome.complete || outcome.error == EPERM || outcome.error == EOPNOTSUPP) throw Unavailable{};
        return outcome.error;
    }

    // The kernel's answers to a dump request naming `names` (attribute, value).
    std::vector<std::string> dump(int message, Names names) {
        std::vector<std::string> answers;
        require(ask(message, true, request_attributes(names), answers));
        return answers;
    }
    // Its answer to a request for one object, nullopt when there is none.
    std::optional<std::vector<std::string>> get(int message, Names names) {
        std::vector<std::string> answers;
        const int error = ask(message, false, request_attributes(names), answers);
        if (error == ENOENT) return std::nullopt;
        require(error);
        return answers;
    }

    // The ruleset's generation: every change of the ruleset makes a new one.
    std::uint32_t generation() {
        std::vector<std::string> answers;
        if (ask(NFT_MSG_GETGEN, false, {}, answers) != 0 || answers.empty()) throw Unavailable{};
        const auto id = find(answers.front(), NFTA_GEN_ID);
        std::uint32_t value = 0;
        if (id.size() != sizeof value) throw Unavailable{};
        std::memcpy(&value, id.data(), sizeof value);
        return value;
    }

private:
    core::NetlinkSocket m_socket{NETLINK_NETFILTER, std::chrono::seconds(5)};
};

// Answers to a request that name `table` (and `chain`, when given) in
// attribute `table_attribute` (`chain_attribute`): a dump may answer with
// other tables' objects on kernels that do not filter it.
std::vector<std::string> only(const std::vector<std::string>& answers, std::uint16_t table_attribute,
                              const std::string& table, std::uint16_t chain_attribute = 0,
                              const std::string& chain = {}) {
    std::vector<std::string> out;
    for (const auto& answer : answers) {
        if (as_string(find(answer, table_attribute)) != table) continue;
        if (chain_attribute != 0 && as_string(find(answer, chain_attribute)) != chain) continue;
        out.push_back(answer);
    }
    return out;
}

class Digest {
public:
    void add(int message, const std::string& canonical_form) {
        m_text += fmt::format("{}:{}:", message, canonical_form.size());
        m_text += canonical_form;
    }
    [[nodiscard]] std::string text() const { return fmt::format("{}{:016x}", k_prefix, fnv1a64(m_text)); }

private:
    std::string m_text;
};

// `rules` of `table` and the sets `names` with their elements, into
// `digest`: the sets after the rules, in the order of `names` (the rules'
// first lookups first), anonymous ones by their alias.
void add_rules_and_sets(Netlink& netlink, const std::string& table, const std::vector<std::string>& rules,
                        const std::vector<std::string>& names, Digest& digest) {
    std::vector<std::string> sets;
    SetNames aliases;
    for (const auto& name : names) {
        const auto set = netlink.get(NFT_MSG_GETSET, {{NFTA_SET_TABLE, table}, {NFTA_SET_NAME, name}});
        if (!set || set->size() != 1) throw Interrupted{};  // removed meanwhile
        std::uint32_t flags = 0;
        if (const auto value = find(set->front(), NFTA_SET_FLAGS); value.size() == sizeof flags) {
            std::memcpy(&flags, value.data(), sizeof flags);
        }
        if ((ntohl(flags) & NFT_SET_ANONYMOUS) != 0) aliases[name] = fmt::format("anonymous set {}", aliases.size());
        sets.push_back(set->front());
    }
    for (const auto& rule : rules) digest.add(NFT_MSG_NEWRULE, canonical_rule(rule, aliases));
    for (std::size_t i = 0; i < names.size(); ++i) {
        digest.add(NFT_MSG_NEWSET, canonical_set(sets[i], aliases));
        const auto elements =
            netlink.dump(NFT_MSG_GETSETELEM, {{NFTA_SET_ELEM_LIST_TABLE, table}, {NFTA_SET_ELEM_LIST_SET, names[i]}});
        for (const auto& e : canonical_elements(elements)) digest.add(NFT_MSG_NEWSETELEM, e);
    }
}

// Reads with `read` between two readings of the ruleset's generation, again
// while they differ (the ruleset changed meanwhile: a reading takes well
// under a millisecond, while Incus rewrites its table for every bridge made
// or removed), for up to 2 s. nullopt when the kernel cannot be asked, or the
// ruleset never held still that long.
std::optional<std::string> consistent(const std::function<std::string(Netlink&)>& read) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    try {
        while (std::chrono::steady_clock::now() < until) {
            try {
                Netlink netlink;
                const auto before = netlink.generation();
                auto digest = read(netlink);
                if (netlink.generation() == before) return digest;
            } catch (const Interrupted&) {
            }
        }
    } catch (const Unavailable&) {
    }
    return std::nullopt;
}

}  // namespace

bool is_kernel_digest(const std::string& digest) { return digest.starts_with(k_prefix); }

std::optional<std::string> nft_inet_table_digest(const std::string& table) {
    return consistent([&](Netlink& netlink) -> std::string {
        const auto tables = netlink.get(NFT_MSG_GETTABLE, {{NFTA_TABLE_NAME, table}});
        if (!tables) return {};
        Digest digest;
        for (const auto& t : *tables) digest.add(NFT_MSG_NEWTABLE, canonical(t, {NFTA_TABLE_HANDLE}));
        for (const auto& c :
             only(netlink.dump(NFT_MSG_GETCHAIN, {{NFTA_CHAIN_TABLE, table}}), NFTA_CHAIN_TABLE, table)) {
            digest.add(NFT_MSG_NEWCHAIN, canonical_chain(c));
        }
        const auto rules = only(netlink.dump(NFT_MSG_GETRULE, {{NFTA_RULE_TABLE, table}}), NFTA_RULE_TABLE, table);
        // Every set of the table, those the rules look up first.
        auto names = looked_up_sets(rules);
        for (const auto& set : only(netlink.dump(NFT_MSG_GETSET, {{NFTA_SET_TABLE, table}}), NFTA_SET_TABLE, table)) {
            const std::string name(as_string(find(set, NFTA_SET_NAME)));
            if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
        }
        add_rules_and_sets(netlink, table, rules, names, digest);
        return digest.text();
    });
}

std::optional<std::string> nft_inet_chain_digest(const std::string& table, const std::string& chain) {
    return consistent([&](Netlink& netlink) -> std::string {
        const auto chains = netlink.get(NFT_MSG_GETCHAIN, {{NFTA_CHAIN_TABLE, table}, {NFTA_CHAIN_NAME, chain}});
        if (!chains) return {};
        Digest digest;
        for (const auto& c : *chains) digest.add(NFT_MSG_NEWCHAIN, canonical_chain(c));
        const auto rules = only(netlink.dump(NFT_MSG_GETRULE, {{NFTA_RULE_TABLE, table}, {NFTA_RULE_CHAIN, chain}}),
                                NFTA_RULE_TABLE, table, NFTA_RULE_CHAIN, chain);
        add_rules_and_sets(netlink, table, rules, looked_up_sets(rules), digest);
        return digest.text();
    });
}

}  // namespace agentctl::provider::incus
