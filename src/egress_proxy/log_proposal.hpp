// `agentctl policy propose NAME`: what a sandbox used and what it was refused,
// from its decision log (summarise_log), as an allow file or a profile that
// agentctl reads back as it is. Only what an allow rule can open is proposed;
// every entry carries its counts and bytes as a comment, and addresses and
// random-looking names are flagged for a person to look at.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "egress_proxy/log_summary.hpp"

namespace agentctl::egress_proxy {

enum class ProposalForm {
    AllowFile,  // one entry per line: --allow-file, allowFile, `policy add NAME $(grep -v '^#' FILE)`
    Profile,    // a `kind: Profile` document whose network.allow holds the entries
};

struct ProposalOptions {
    std::string sandbox;  // named in the header, and the profile's name (SANDBOX-proposed)
    ProposalForm form = ProposalForm::AllowFile;
    bool wildcards = false;  // two or more names under one parent on one port become `*.parent:port`
};

// Whether a host name looks generated: a label of 12 or more characters
// whose letters and digits are spread like random text (per-session hosts,
// data encoded in names). Addresses are never "generated".
[[nodiscard]] bool looks_generated(std::string_view host);

// The proposal for `rows` as text in `options.form`.
void print_proposal(const std::vector<DestinationSummary>& rows, const ProposalOptions& options, std::ostream& out);

}  // namespace agentctl::egress_proxy
