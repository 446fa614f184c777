// Sizes as people write them ("4GiB", "512MiB", "20GB", a number of bytes),
// for profiles, flags and configuration keys alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentctl::policy {

// "4GiB", "512MiB", "20GB", "1048576" -> bytes. nullopt when malformed or 0.
[[nodiscard]] std::optional<std::uint64_t> parse_size(std::string_view text);

// The least memory a sandbox can boot with; less is refused before anything is made.
inline constexpr std::uint64_t k_min_memory_bytes = 64ULL << 20;

// What is wrong with `text` as a size (`memory`: also below
// k_min_memory_bytes), as the end of a sentence with a "did you mean" for a
// unit written docker's way ("4G": 4GiB); empty when it is a good size.
[[nodiscard]] std::string size_problem(std::string_view text, bool memory);

}  // namespace agentctl::policy
