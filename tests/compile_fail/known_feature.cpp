// The control for unknown_feature.cpp: the same code with a real feature name
// compiles, so the other file fails for its typo and nothing else.
#include "agentctl/capability.hpp"

agentctl::Capability lookup(const agentctl::CapabilityMatrix& matrix) { return matrix.get("fs.mount"); }
