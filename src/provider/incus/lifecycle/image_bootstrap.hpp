// `agentctl image build OUT` without --base: agentctl's Debian 12 image built
// from nothing on this host, for a fresh Incus that has no image and no image
// server: debootstrap (minbase), eth0 by DHCP through systemd-networkd (udev
// included, or eth0 stays down; both skipped in containers, whose address LXC
// sets), the default sandbox user, Incus metadata and hostname/hosts
// templates, one zstd tarball (cached), imported with the alias OUT.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentctl/provider.hpp"
#include "provider/incus/client/client.hpp"
#include "provider/incus/guest/guest_scripts.hpp"

namespace agentctl::provider::incus {

// The image property that lists the Debian packages an image built here
// carries (space-separated); create reads it to refuse an agent whose
// installer needs a tool the image lacks before it makes anything.
inline constexpr std::string_view k_image_packages_property = "agentctl.packages";
// The image properties that record its accounts (/etc/passwd and /etc/group
// as they are in the image), set by both ways `image build` makes an image;
// create predicts its sandbox user's uid from them before it makes anything.
inline constexpr std::string_view k_image_passwd_property = "agentctl.passwd";
inline constexpr std::string_view k_image_group_property = "agentctl.group";
// The fingerprint of the image whose accounts those are, set once the image
// exists. `incus publish` copies an instance's image properties into the new
// image, whose accounts may differ: a record is trusted only on the image
// whose fingerprint it names.
inline constexpr std::string_view k_image_accounts_of_property = "agentctl.accounts.of";

// An image property's text; nullopt when the image has none (or not a string).
[[nodiscard]] std::optional<std::string> string_property(const Json& properties, std::string_view key);
// The accounts as image properties.
[[nodiscard]] Json accounts_properties(const ImageAccounts& accounts);
// The PATCH of `image` (GET /1.0/images/FINGERPRINT) that binds the accounts
// it records to it: every property it has, and its fingerprint as
// k_image_accounts_of_property.
[[nodiscard]] Json accounts_binding(const Json& image);
// The accounts `image` records (GET /1.0/images/FINGERPRINT); nullopt when it
// records none, or records them for another image.
[[nodiscard]] std::optional<ImageAccounts> recorded_accounts(const Json& image);

struct BootstrapOptions {
    std::string alias;                  // the image alias to import as
    std::string remote;                 // the incus client's remote to import to; empty: the local daemon
    std::string project;                // the project to import to; empty: the remote's default
    std::vector<std::string> packages;  // extra neutral package names (--package)
    std::string mirror = "http://deb.debian.org/debian";
    std::string suite = "bookworm";
    std::string architecture;  // Incus's name (x86_64, aarch64); empty: this machine's
    std::string cache_dir;     // where the tarball is kept between builds
    long long creation_date = 0;
};

// What the build runs and writes, in order; pure, for tests and --preview.
struct BootstrapPlan {
    std::string work_dir;  // below cache_dir, removed afterwards
    std::string tarball;   // cache_dir/ALIAS-DIGEST.tar.zst (DIGEST: of the build revision and package list)
    std::vector<std::string> debootstrap;
    std::vector<std::string> enable_networkd;
    std::string networkd_unit;          // content of /etc/systemd/network/10-eth0.network
    std::vector<std::string> add_user;  // the default sandbox user, in the chroot
    // systemd drop-ins (path relative to the root file system, content) that
    // skip what a container does not need at boot.
    std::vector<std::pair<std::string, std::string>> dropins;
    std::string architecture;  // Incus's name
    // The image's properties, in order (accounts_properties are added at build time).
    std::vector<std::pair<std::string, std::string>> properties;
    std::vector<std::string> pack;
    std::vector<std::string> import;
};

[[nodiscard]] BootstrapPlan bootstrap_plan(const BootstrapOptions& options);

// metadata.yaml of the plan's image (creation date from `options`), with its
// accounts recorded when given.
[[nodiscard]] std::string image_metadata(const BootstrapOptions& options, const BootstrapPlan& plan,
                                         const ImageAccounts* accounts);

// Runs the plan with a reporter step per stage; an existing cached tarball is
// imported without rebuilding. In preview prints the commands instead. Throws
// agentctl::Error naming the stage that failed and its output.
void build_bootstrap_image(ProviderContext& context, const BootstrapOptions& options);

}  // namespace agentctl::provider::incus
