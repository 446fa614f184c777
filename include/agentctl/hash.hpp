// FNV-1a: a stable, non-cryptographic hash for names and for digests that
// only tell "changed" (the same on every platform and run).
#pragma once

#include <cstdint>
#include <string_view>

namespace agentctl {

[[nodiscard]] constexpr std::uint32_t fnv1a32(std::string_view text) {
    std::uint32_t hash = 2166136261U;
    for (const char c : text) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 16777619U;
    }
    return hash;
}

[[nodiscard]] constexpr std::uint64_t fnv1a64(std::string_view text) {
    std::uint64_t hash = 0xcbf29ce484222325ULL;
    for (const char c : text) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 0x100000001b3ULL;
    }
    return hash;
}

}  // namespace agentctl
