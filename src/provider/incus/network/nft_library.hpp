// Reading the host's nftables ruleset in this process, through libnftables
// (libnftables.so.1, the library the nft command is built on, which the
// nftables package installs with it), opened with dlopen(3) on first use.
// `status` reads the digests of `nft list` text that sandboxes verified by an
// earlier agentctl recorded (nft_kernel.hpp has what is recorded now): the
// nft process costs ~20 ms here, the same listing in process ~5 ms, with the
// same text.
#pragma once

#include <optional>
#include <string>

namespace agentctl::provider::incus {

// What `nft COMMAND` prints (e.g. "list table inet agentctl-agc-..."), or ""
// when nft refuses the command (the table does not exist). nullopt when
// libnftables cannot be loaded: run the nft command instead. Calls from
// several threads take turns: libnftables keeps process-wide state besides
// its contexts (a once-only initialisation, its cache of interfaces).
[[nodiscard]] std::optional<std::string> nft_output_in_process(const std::string& command);

}  // namespace agentctl::provider::incus
