// Fuzzes the profile and spec loaders from a byte buffer. The allow-file
// reader is replaced so that a fuzzed allowFile never touches the disk.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "agentctl/error.hpp"
#include "policy/profile.hpp"

using namespace agentctl;
using namespace agentctl::policy;

namespace {

std::optional<std::string> no_files(const std::string& path) {
    if (path.ends_with("hosts.txt")) return std::string("example.com:443\n# comment\n*.example.org\n");
    return std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    LoadContext context;
    context.home = "/home/fuzz";
    context.read_file = &no_files;
    auto diagnostics = profile_diagnostics(text, "/fuzz/profile.yaml", context);
    for (const auto& diagnostic : diagnostics) (void)diagnostic.render();
    try {
        (void)parse_profile(text, "/fuzz/profile.yaml", ProfileSource::File, context);
    } catch (const Error&) {
    }
    try {
        (void)parse_spec_document(text, "/fuzz/spec.yaml", context);
    } catch (const Error&) {
    }
    return 0;
}
