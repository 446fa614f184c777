#include "support/build_paths.hpp"

namespace agentctl::test {

const char* source_dir() { return AGENTCTL_SOURCE_DIR; }
const char* agentctl_binary() { return AGENTCTL_BINARY; }

}  // namespace agentctl::test
