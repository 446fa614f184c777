// Where the tests find the source tree and the built agentctl. Only
// build_paths.cpp is compiled with these paths: every other test file compiles
// to the same thing wherever the tree is checked out, so a compiler cache
// serves a clone at another path.
#pragma once

namespace agentctl::test {

[[nodiscard]] const char* source_dir();
[[nodiscard]] const char* agentctl_binary();

}  // namespace agentctl::test
