// A header that breaks docs/architecture.md twice: the layers test expects
// scripts/check-layers.sh to name both lines.
#pragma once
#include "provider/incus/lifecycle/naming.hpp"
#include "policy/yaml_decoder.hpp"
#include "agentctl/policy.hpp"
