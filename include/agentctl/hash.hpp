// FNV-1a: a stable, non-cryptographic hash for names and for digests that
// only tell "changed" (the same on every platform and run).
#pragma once

#include <cstdint>
#include <string_view>

namespace agentctl {

template <typename Hash, Hash Offset, Hash Prime>
[[nodiscard]] constexpr Hash fnv1a(std::string_view text) {
    Hash hash = Offset;
    for (const char c : text) {
        hash ^= static_cast<unsigned char>(c);
        hash *= Prime;
    }
    return hash;
}

[[nodiscard]] constexpr std::uint32_t fnv1a32(std::string_view text) {
    return fnv1a<std::uint32_t, 2166136261U, 16777619U>(text);
}

[[nodiscard]] constexpr std::uint64_t fnv1a64(std::string_view text) {
    return fnv1a<std::uint64_t, 0xcbf29ce484222325ULL, 0x100000001b3ULL>(text);
}

}  // namespace agentctl
