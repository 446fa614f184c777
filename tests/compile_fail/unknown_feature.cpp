// Must NOT compile: a capability feature name with a typo. The test
// "core: a misspelt capability feature does not build" compiles this file
// and expects the compiler to reject the consteval Feature constructor.
#include "agentctl/capability.hpp"

agentctl::Capability lookup(const agentctl::CapabilityMatrix& matrix) { return matrix.get("fs.mnt"); }
