// The Debian image built from nothing (`image build OUT` without --base): the
// commands and files of the plan.
#include <catch2/catch.hpp>

#include <algorithm>

#include <yaml-cpp/yaml.h>

#include "provider/incus/lifecycle/image_bootstrap.hpp"

using namespace agentctl;
using namespace agentctl::provider::incus;

namespace {

BootstrapOptions options() {
    BootstrapOptions o;
    o.alias = "agentctl-debian-12";
    o.packages = {"git", "procps"};
    o.cache_dir = "/var/cache/agentctl/images";
    o.architecture = "x86_64";
    o.creation_date = 1700000000;
    return o;
}

}  // namespace

TEST_CASE("the bootstrap plan: debootstrap minbase, networkd, metadata, a zstd tarball, import", "[image]") {
    auto plan = bootstrap_plan(options());
    // The cached tarball is named after the package list: another list is built anew.
    CHECK(plan.tarball.starts_with("/var/cache/agentctl/images/agentctl-debian-12-"));
    CHECK(plan.tarball.ends_with(".tar.zst"));
    auto other = options();
    other.packages.clear();
    CHECK(bootstrap_plan(other).tarball != plan.tarball);
    // git is in every image; a package the base list has is included once.
    CHECK(bootstrap_plan(other).debootstrap[2] ==
          "--include=systemd-sysv,udev,curl,python3-minimal,iproute2,sudo,ca-certificates,git");
    CHECK(plan.work_dir == "/var/cache/agentctl/images/build-agentctl-debian-12");
    CHECK(plan.debootstrap ==
          std::vector<std::string>{"debootstrap", "--variant=minbase",
                                   "--include=systemd-sysv,udev,curl,python3-minimal,iproute2,sudo,ca-certificates,"
                                   "git,procps",
                                   "bookworm", plan.work_dir + "/rootfs", "http://deb.debian.org/debian"});
    CHECK(plan.enable_networkd ==
          std::vector<std::string>{"chroot", plan.work_dir + "/rootfs", "systemctl", "enable", "systemd-networkd"});
    CHECK(plan.networkd_unit.find("Name=eth0") != std::string::npos);
    CHECK(plan.networkd_unit.find("DHCP=ipv4") != std::string::npos);
    const auto metadata = image_metadata(options(), plan, nullptr);
    CHECK(metadata.starts_with("architecture: x86_64\ncreation_date: 1700000000\n"));
    CHECK(metadata.find("  architecture: \"amd64\"\n") != std::string::npos);
    // What it carries, for create's check of an agent's tools.
    CHECK(metadata.find("  agentctl.packages: \"systemd-sysv udev curl python3-minimal iproute2 sudo "
                        "ca-certificates git procps\"\n") != std::string::npos);
    CHECK(metadata.find("/etc/hostname: {when: [create, copy], template: hostname.tpl}") != std::string::npos);
    CHECK(plan.pack.back() == "rootfs");
    CHECK(plan.pack[6] == plan.tarball + ".tmp");
    CHECK(plan.import ==
          std::vector<std::string>{"incus", "image", "import", plan.tarball, "--alias", "agentctl-debian-12"});
}

TEST_CASE("the image has the default sandbox user, and boots containers without udev and networkd", "[image]") {
    auto plan = bootstrap_plan(options());
    REQUIRE(plan.add_user.size() == 5);
    CHECK(plan.add_user[0] == "chroot");
    CHECK(plan.add_user[1] == plan.work_dir + "/rootfs");
    CHECK(plan.add_user[4] ==
          "groupadd -g 1500 agent && useradd -m -u 1500 -g agent -c 'agentctl sandbox user' -s /bin/bash agent");
    std::vector<std::string> units;
    for (const auto& [path, content] : plan.dropins) {
        CHECK(path.starts_with("etc/systemd/system/"));
        CHECK(path.ends_with(".d/agentctl-container.conf"));
        // Skipped in containers only: a VM from the same tree still runs them.
        CHECK(content == "[Unit]\nConditionVirtualization=!container\n");
        units.push_back(path.substr(19, path.find(".d/") - 19));
    }
    for (const auto* unit :
         {"systemd-udevd.service", "systemd-udev-trigger.service", "systemd-networkd.service", "modprobe@.service"}) {
        CAPTURE(unit);
        CHECK(std::find(units.begin(), units.end(), unit) != units.end());
    }
    CHECK(std::find(units.begin(), units.end(), "systemd-journald.service") == units.end());
}

TEST_CASE("the image records its accounts as properties that read back exactly, trusted on that image only",
          "[image]") {
    const auto plan = bootstrap_plan(options());
    // Text that YAML would misread unquoted: colons, quotes, a backslash, '#', newlines.
    const ImageAccounts accounts{
        "root:x:0:0:root:/root:/bin/bash\nagent:x:1500:1500:agentctl sandbox user:/home/agent:"
        "/bin/bash\nodd:x:7:7:\"q\" \\ # x:/:/bin/sh\n",
        "root:x:0:\nagent:x:1500:\n"};
    const auto yaml = YAML::Load(image_metadata(options(), plan, &accounts));
    CHECK(yaml["properties"]["agentctl.passwd"].as<std::string>() == accounts.passwd);
    CHECK(yaml["properties"]["agentctl.group"].as<std::string>() == accounts.group);
    CHECK(yaml["properties"]["description"].as<std::string>() == "Debian 12 minbase (agentctl)");
    CHECK(yaml["templates"]["/etc/hosts"]["template"].as<std::string>() == "hosts.tpl");
    // As Incus answers them: read back into the accounts; without them, nothing.
    Json properties = Json::object();
    for (const auto& entry : yaml["properties"]) {
        properties[entry.first.as<std::string>()] = entry.second.as<std::string>();
    }
    const Json image{{"fingerprint", "f00d"}, {"properties", properties}};
    // Not yet bound to the image: not trusted.
    CHECK_FALSE(recorded_accounts(image));
    const auto patch = accounts_binding(image);
    CHECK(patch.size() == 1);
    CHECK(patch["properties"]["agentctl.accounts.of"] == "f00d");
    CHECK(patch["properties"]["description"] == "Debian 12 minbase (agentctl)");  // the others stay
    Json bound = image;
    bound["properties"] = patch["properties"];
    const auto read = recorded_accounts(bound);
    REQUIRE(read);
    CHECK(read->passwd == accounts.passwd);
    CHECK(read->group == accounts.group);
    // An image published from an instance of it carries the record, bound to another image.
    Json copy = bound;
    copy["fingerprint"] = "beef";
    CHECK_FALSE(recorded_accounts(copy));
    CHECK_FALSE(recorded_accounts(
        Json{{"fingerprint", "f00d"},
             {"properties", {{"agentctl.passwd", accounts.passwd}, {"agentctl.accounts.of", "f00d"}}}}));
    CHECK_FALSE(recorded_accounts(Json{
        {"fingerprint", ""},
        {"properties",
         {{"agentctl.passwd", accounts.passwd}, {"agentctl.group", accounts.group}, {"agentctl.accounts.of", ""}}}}));
    CHECK_FALSE(recorded_accounts(
        Json{{"fingerprint", "f00d"},
             {"properties", {{"agentctl.passwd", 1}, {"agentctl.group", ""}, {"agentctl.accounts.of", "f00d"}}}}));
}
