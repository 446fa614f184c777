// Digests of nftables objects read from the kernel over netlink (the
// nf_tables messages the nft command itself reads), in this process. `status`
// compares them with the ones recorded when the sandbox was verified: a
// digest changes when what the kernel enforces changes, and only then.
//
// What a digest covers: the objects' definitions as the kernel reports them,
// with what changes without anyone changing them left out: handles, the
// values of counters (a `counter` expression's packets and bytes, what a quota consumed, a chain's
// counters), the time left to set elements that expire, and the names the
// kernel gives sets written inline in a rule (`__setN`, the first N free in
// the table: they are told by the order the rules look them up in). Set
// elements count in sorted order (a hash set lists them in its hash's). A table's digest
// covers its flags (a dormant table enforces nothing), its chains (type, hook,
// priority, policy), their rules in order, its sets and their elements. A
// chain's digest covers the chain, its rules in order and the elements of the
// sets its rules look up.
//
// The text of `nft list` (nft_library.hpp) says the same, but libnftables
// reads every chain of the table (and more) first: with 100 sandboxes on a
// host, one listing takes ~15 ms, where these requests take well under one.
#pragma once

#include <optional>
#include <string>

namespace agentctl::provider::incus {

// Digests are "nl:" and 16 hex digits; the digests of `nft list` text that
// earlier versions recorded have no prefix (is_kernel_digest tells them apart).
[[nodiscard]] bool is_kernel_digest(const std::string& digest);

// The digest of table `table` of family inet, "" when there is no such table,
// nullopt when the kernel cannot be asked (no CAP_NET_ADMIN, no nf_tables).
[[nodiscard]] std::optional<std::string> nft_inet_table_digest(const std::string& table);

// The digest of chain `chain` of inet table `table`, "" when there is no such
// chain, nullopt as above.
[[nodiscard]] std::optional<std::string> nft_inet_chain_digest(const std::string& table, const std::string& chain);

}  // namespace agentctl::provider::incus
