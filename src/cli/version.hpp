// agentctl's version, written at build time by cmake/GitVersion.cmake.
#pragma once

namespace agentctl::cli {

// `git describe` of the source tree (1.2.3-4-gHASH[-dirty]), or the project
// version (plus -gHASH) when there is no release tag, or the bare project
// version when the tree is not a git checkout.
extern const char* const k_version;
// The commit (12 hex digits), or "unknown" outside git.
extern const char* const k_commit;

}  // namespace agentctl::cli
