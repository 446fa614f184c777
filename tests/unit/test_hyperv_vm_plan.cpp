// The hyperv provider's VM plans: create, start, stop, delete, and the layout
// they share. Each expected script is checked against the cmdlet's documented
// parameters (links beside the builders in src/provider/hyperv/vm_plan.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>

#include "agentctl/error.hpp"
#include "provider/hyperv/plan.hpp"
#include "provider/hyperv/powershell.hpp"

using namespace agentctl;
using namespace agentctl::provider::hyperv;

namespace {

constexpr const char* k_config_dir = "C:\\Users\\me\\.config\\agentctl";

SandboxSpec sample_spec() {
    SandboxSpec spec;
    spec.name = "tbox";
    spec.image = "C:\\Images\\ubuntu 24.04.vhdx";
    spec.resources = {2, 4ull << 30, 20ull << 30};
    spec.mounts = {Mount{"C:\\Users\\me\\My Project's \"src\"", "/workspace", true, "--mount"},
                   Mount{"C:\\data", "/data", false, "--mount"}};
    spec.ports = {PortForward{"127.0.0.1", 8080, 80, "tcp"}};
    spec.network.allow = {policy::AllowRule{policy::HostKind::Name, "api.github.com", {443}, "--allow"}};
    return spec;
}

int error_code_of(const std::function<void()>& action) {
    try {
        action();
    } catch (const Error& error) {
        return error.code();
    }
    return -1;
}

}  // namespace

TEST_CASE("layout_for derives names, paths and addresses from the sandbox name", "[hyperv][plan]") {
    const auto layout = layout_for("tbox", k_config_dir);
    CHECK(layout.vm_name == "tbox");
    CHECK(layout.switch_name == "agentctl-tbox");
    CHECK(layout.host_interface == "vEthernet (agentctl-tbox)");
    CHECK(layout.state_dir == "C:\\Users\\me\\.config\\agentctl\\hyperv\\tbox");
    CHECK(layout.disk_path == "C:\\Users\\me\\.config\\agentctl\\hyperv\\tbox\\disk.vhdx");
    CHECK(layout.subnet_index == 165);  // FNV-1a("tbox") % 254 + 1
    CHECK(layout.subnet == "172.30.165.0/24");
    CHECK(layout.gateway == "172.30.165.1");
    CHECK(layout.guest_address == "172.30.165.2");
    CHECK(layout.firewall_group == "agentctl-tbox");
    CHECK(layout.share_prefix == "agentctl-tbox-");
    CHECK(layout.smb_account == "agentctl-tbox");

    // A POSIX config directory keeps slashes.
    CHECK(layout_for("tbox", "/home/me/.config/agentctl").disk_path ==
          "/home/me/.config/agentctl/hyperv/tbox/disk.vhdx");
    // Stable: the same name always gets the same subnet; every name lands in 1..254.
    CHECK(layout_for("tbox", "/x").subnet == layout.subnet);
    for (const auto* name : {"a", "b", "sandbox-1", "sandbox-2", "a-very-long-name-that-is-still-valid"}) {
        const auto index = layout_for(name, "/x").subnet_index;
        CHECK(index >= 1);
        CHECK(index <= 254);
    }
}

TEST_CASE("layout_for keeps the SMB account within Windows' 20-character limit", "[hyperv][plan]") {
    const std::string long_name(63, 'a');
    const auto account = layout_for(long_name, "/x").smb_account;
    CHECK(account.size() <= 20);
    CHECK(account.rfind("agentctl-", 0) == 0);
    CHECK(account != layout_for(std::string(62, 'a'), "/x").smb_account);
    CHECK(layout_for("abcdefghijk", "/x").smb_account == "agentctl-abcdefghijk");  // exactly 20
}

TEST_CASE("layout_for refuses names Hyper-V would read as wildcards", "[hyperv][plan]") {
    for (const auto* name : {"", "tb*ox", "tbox?", "[tbox]", "tb ox", "tbox'"}) {
        INFO(name);
        CHECK_THROWS_AS(layout_for(name, "/x"), Error);
    }
}

TEST_CASE("create_plan for a sample spec", "[hyperv][plan]") {
    const auto plan = create_plan(sample_spec(), layout_for("tbox", k_config_dir));
    const std::vector<std::string> expected{
        "if (Get-VM -Name 'tbox' -ErrorAction SilentlyContinue) { throw 'a VM named tbox already exists' }; "
        "if (Get-VMSwitch -Name 'agentctl-tbox' -ErrorAction SilentlyContinue) { throw 'a switch named agentctl-tbox "
        "already exists' }; "
        "if (Get-NetIPAddress -IPAddress 172.30.165.1 -ErrorAction SilentlyContinue) "
        "{ throw '172.30.165.1 is already in use on this host: another sandbox has subnet 172.30.165.0/24' }",
        "New-Item -ItemType Directory -Force -Path 'C:\\Users\\me\\.config\\agentctl\\hyperv\\tbox' | Out-Null",
        "New-VHD -Path 'C:\\Users\\me\\.config\\agentctl\\hyperv\\tbox\\disk.vhdx' "
        "-ParentPath 'C:\\Images\\ubuntu 24.04.vhdx' -Differencing -SizeBytes 21474836480",
        "New-VMSwitch -Name 'agentctl-tbox' -SwitchType Internal",
        "New-NetIPAddress -InterfaceAlias 'vEthernet (agentctl-tbox)' -IPAddress 172.30.165.1 -PrefixLength 24",
        "if (-not (Get-NetNat -Name 'agentctl' -ErrorAction SilentlyContinue)) "
        "{ New-NetNat -Name 'agentctl' -InternalIPInterfaceAddressPrefix '172.30.0.0/16' }",
        "New-VM -Name 'tbox' -Generation 2 -Path 'C:\\Users\\me\\.config\\agentctl\\hyperv\\tbox' "
        "-VHDPath 'C:\\Users\\me\\.config\\agentctl\\hyperv\\tbox\\disk.vhdx' -SwitchName 'agentctl-tbox'",
        "Set-VMFirmware -VMName 'tbox' -EnableSecureBoot On -SecureBootTemplate MicrosoftUEFICertificateAuthority",
        "Set-VMProcessor -VMName 'tbox' -Count 2",
        "Set-VMMemory -VMName 'tbox' -DynamicMemoryEnabled $false -StartupBytes 4294967296",
        "Set-VMNetworkAdapter -VMName 'tbox' -MacAddressSpoofing Off -DhcpGuard On -RouterGuard On",
        "New-NetFirewallRule -DisplayName 'agentctl tbox: sandbox to host, TCP' -Group 'agentctl-tbox' -Direction "
        "Inbound "
        "-InterfaceAlias 'vEthernet (agentctl-tbox)' -Protocol TCP -LocalPort '1-444','446-65535' -Action Block",
        "New-NetFirewallRule -DisplayName 'agentctl tbox: sandbox to host, UDP' -Group 'agentctl-tbox' -Direction "
        "Inbound "
        "-InterfaceAlias 'vEthernet (agentctl-tbox)' -Protocol UDP -Action Block",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Deny -Direction Outbound -RemoteIPAddress "
        "172.30.0.0/16 -Weight 50000",
        "$w = 50001; foreach ($a in (Get-NetIPAddress).IPAddress) { Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' "
        "-Action Deny -Direction Outbound -RemoteIPAddress ($a -replace '%.*$', '') -Weight $w; $w++ }",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Allow -Direction Outbound -RemoteIPAddress ANY "
        "-RemotePort 53 -Protocol UDP -Weight 45000 -Stateful $true",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Allow -Direction Outbound -RemoteIPAddress ANY "
        "-RemotePort 53 -Protocol TCP -Weight 45001 -Stateful $true",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Deny -Direction Outbound -RemoteIPAddress 10.0.0.0/8 "
        "-Weight 40000",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Deny -Direction Outbound -RemoteIPAddress "
        "172.16.0.0/12 -Weight 40001",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Deny -Direction Outbound -RemoteIPAddress "
        "192.168.0.0/16 -Weight 40002",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Deny -Direction Outbound -RemoteIPAddress "
        "169.254.0.0/16 -Weight 40003",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Deny -Direction Outbound -RemoteIPAddress "
        "100.64.0.0/10 -Weight 40004",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Deny -Direction Outbound -RemoteIPAddress fc00::/7 "
        "-Weight 40005",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Deny -Direction Outbound -RemoteIPAddress fe80::/10 "
        "-Weight 40006",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Deny -Direction Outbound -RemoteIPAddress fec0::/10 "
        "-Weight 40007",
        "$w = 20000; foreach ($a in (Resolve-DnsName -Name 'api.github.com' -Type A_AAAA -DnsOnly -ErrorAction Stop | "
        "Where-Object { $_.IPAddress } | Select-Object -ExpandProperty IPAddress -First 100)) { foreach ($p in '443') "
        "{ Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Allow -Direction Outbound -RemoteIPAddress $a "
        "-RemotePort $p -Protocol TCP -Weight $w -Stateful $true; $w++ } }",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Deny -Direction Outbound -RemoteIPAddress ANY -Weight "
        "1",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Deny -Direction Inbound -RemoteIPAddress ANY -Weight 1",
        "New-SmbShare -Name 'agentctl-tbox-0' -Path 'C:\\Users\\me\\My Project''s \"src\"' -ChangeAccess "
        "'agentctl-tbox' -EncryptData $true",
        "New-SmbShare -Name 'agentctl-tbox-1' -Path 'C:\\data' -ReadAccess 'agentctl-tbox' -EncryptData $true",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Allow -Direction Outbound -RemoteIPAddress "
        "172.30.165.1 -RemotePort 445 -Protocol TCP -Weight 60000 -Stateful $true",
        "netsh interface portproxy add v4tov4 listenaddress=127.0.0.1 listenport=8080 connectaddress=172.30.165.2 "
        "connectport=80",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Allow -Direction Inbound -RemoteIPAddress 172.30.165.1 "
        "-LocalPort 80 -Protocol TCP -Weight 61000 -Stateful $true",
    };
    REQUIRE(plan.scripts.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        INFO("script " << i);
        CHECK(plan.scripts[i] == expected[i]);
    }
    // The path with a space, an apostrophe and double quotes, as the preview prints it.
    CHECK(preview_line(plan.scripts[28]) ==
          "powershell.exe -NoProfile -NonInteractive -Command 'New-SmbShare -Name '\\''agentctl-tbox-0'\\'' -Path "
          "'\\''C:\\Users\\me\\My Project'\\'''\\''s \"src\"'\\'' -ChangeAccess '\\''agentctl-tbox'\\'' -EncryptData "
          "$true'");

    const std::vector<std::string> expected_notes{
        "the host's own addresses are read when the policy is applied; one it gets later is refused only by the host "
        "firewall rules, not by the port ACL",
        "allowlisted names are resolved to addresses when the policy is applied; if a name moves to new addresses the "
        "entry goes stale until the policy is applied again",
        "in the guest, as root: mount -t cifs //172.30.165.1/agentctl-tbox-0 /workspace -o "
        "rw,vers=3.1.1,seal,username=agentctl-tbox",
        "in the guest, as root: mount -t cifs //172.30.165.1/agentctl-tbox-1 /data -o "
        "ro,vers=3.1.1,seal,username=agentctl-tbox",
        "the shares are granted to the local Windows account 'agentctl-tbox', which agentctl does not create: create "
        "it (New-LocalUser) and give its password to the guest's mount yourself",
        "not in this plan: provisioning inside the guest (user agent, address 172.30.165.2/24 via 172.30.165.1, DNS, "
        "packages) — it needs a cloud-init seed disk that is not built yet",
    };
    CHECK(plan.notes == expected_notes);
}

TEST_CASE("create_plan leaves Hyper-V's defaults alone when the spec does not set resources", "[hyperv][plan]") {
    auto spec = sample_spec();
    spec.resources = {};
    spec.mounts.clear();
    spec.ports.clear();
    const auto plan = create_plan(spec, layout_for("tbox", "/x"));
    for (const auto& script : plan.scripts) {
        CHECK(script.find("Set-VMProcessor") == std::string::npos);
        CHECK(script.find("Set-VMMemory") == std::string::npos);
        CHECK(script.find("-SizeBytes") == std::string::npos);
        CHECK(script.find("New-SmbShare") == std::string::npos);
        CHECK(script.find("portproxy") == std::string::npos);
    }
}

TEST_CASE("create_plan rounds memory up to Hyper-V's 2 MiB granule", "[hyperv][plan]") {
    auto spec = sample_spec();
    spec.resources.memory_bytes = 1001ull << 20;  // 1001 MiB
    const auto plan = create_plan(spec, layout_for("tbox", "/x"));
    const auto memory = std::find_if(plan.scripts.begin(), plan.scripts.end(),
                                     [](const auto& s) { return s.rfind("Set-VMMemory", 0) == 0; });
    REQUIRE(memory != plan.scripts.end());
    CHECK(*memory == "Set-VMMemory -VMName 'tbox' -DynamicMemoryEnabled $false -StartupBytes 1050673152");  // 1002 MiB
}

TEST_CASE("create_plan refuses what Hyper-V cannot express", "[hyperv][plan]") {
    const auto layout = layout_for("tbox", "/x");
    auto no_image = sample_spec();
    no_image.image.clear();
    CHECK(error_code_of([&] { (void)create_plan(no_image, layout); }) == exit_code::k_error);

    auto container = sample_spec();
    container.isolation = Isolation::Container;
    CHECK(error_code_of([&] { (void)create_plan(container, layout); }) == exit_code::k_not_available);

    auto udp = sample_spec();
    udp.ports = {PortForward{"127.0.0.1", 5353, 53, "udp"}};
    CHECK(error_code_of([&] { (void)create_plan(udp, layout); }) == exit_code::k_not_available);
    CHECK_THROWS_WITH(create_plan(udp, layout), Catch::Contains("--port 5353:53/udp"));

    for (const auto* address : {"::1", "localhost", "127.0.0.01", "256.1.1.1", "1.2.3", "1.2.3.4.5", ""}) {
        INFO(address);
        auto bad = sample_spec();
        bad.ports = {PortForward{address, 8080, 80, "tcp"}};
        CHECK(error_code_of([&] { (void)create_plan(bad, layout); }) == exit_code::k_error);
    }
}

TEST_CASE("create_plan notes a port published beyond loopback", "[hyperv][plan]") {
    auto spec = sample_spec();
    spec.ports = {PortForward{"0.0.0.0", 8080, 80, "tcp"}};
    const auto plan = create_plan(spec, layout_for("tbox", "/x"));
    CHECK(std::find(plan.notes.begin(), plan.notes.end(),
                    "port 8080 listens on 0.0.0.0: reachable from other machines, not only this one") !=
          plan.notes.end());
}

TEST_CASE("start_plan", "[hyperv][plan]") {
    const auto layout = layout_for("tbox", "/x");
    CHECK(start_plan(layout, {}).scripts == std::vector<std::string>{"Start-VM -Name 'tbox'"});

    StartRequest remount;
    remount.mounts = std::vector<Mount>{Mount{"/srv/code", "/code", false, "--mount"}};
    const std::vector<std::string> expected{
        "Get-SmbShare | Where-Object { $_.Name -match ('^' + [regex]::Escape('agentctl-tbox-') + '\\d+$') } | "
        "Remove-SmbShare -Force",
        "Remove-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Weight 60000 -Direction Outbound -ErrorAction "
        "SilentlyContinue",
        "New-SmbShare -Name 'agentctl-tbox-0' -Path '/srv/code' -ReadAccess 'agentctl-tbox' -EncryptData $true",
        "Add-VMNetworkAdapterExtendedAcl -VMName 'tbox' -Action Allow -Direction Outbound -RemoteIPAddress "
        "172.30.165.1 -RemotePort 445 -Protocol TCP -Weight 60000 -Stateful $true",
        "Start-VM -Name 'tbox'",
    };
    CHECK(start_plan(layout, remount).scripts == expected);

    StartRequest none;
    none.mounts = std::vector<Mount>{};
    CHECK(start_plan(layout, none).scripts.size() == 3);  // remove shares, remove the SMB entry, start
}

TEST_CASE("stop_plan", "[hyperv][plan]") {
    const auto layout = layout_for("tbox", "/x");
    CHECK(stop_plan(layout, {}).scripts == std::vector<std::string>{"Stop-VM -Name 'tbox' -Force"});
    StopRequest force;
    force.force = true;
    CHECK(stop_plan(layout, force).scripts == std::vector<std::string>{"Stop-VM -Name 'tbox' -TurnOff"});
    StopRequest timed;
    timed.timeout_seconds = 30;
    CHECK(stop_plan(layout, timed).scripts ==
          std::vector<std::string>{
              "$job = Stop-VM -Name 'tbox' -Force -AsJob; if (-not (Wait-Job -Job $job -Timeout 30)) "
              "{ Stop-VM -Name 'tbox' -TurnOff }"});
}

TEST_CASE("remove_plan removes everything create made, tolerating missing pieces", "[hyperv][plan]") {
    const auto layout = layout_for("tbox", "C:\\cfg");
    const std::vector<std::string> tail{
        "Get-VM -Name 'tbox' -ErrorAction SilentlyContinue | Remove-VM -Force",
        "Remove-Item -LiteralPath 'C:\\cfg\\hyperv\\tbox' -Recurse -Force -ErrorAction SilentlyContinue",
        "Get-SmbShare | Where-Object { $_.Name -match ('^' + [regex]::Escape('agentctl-tbox-') + '\\d+$') } | "
        "Remove-SmbShare -Force",
        "netsh interface portproxy show v4tov4 | ForEach-Object { if ($_ -match "
        "'^\\s*(\\S+)\\s+(\\d+)\\s+172\\.30\\.165\\.2\\s+\\d+\\s*$') { netsh interface portproxy delete v4tov4 "
        "listenaddress=$($Matches[1]) listenport=$($Matches[2]) } }",
        "Remove-NetFirewallRule -Group 'agentctl-tbox' -ErrorAction SilentlyContinue",
        "Get-VMSwitch -Name 'agentctl-tbox' -ErrorAction SilentlyContinue | Remove-VMSwitch -Force",
        "if (-not (Get-VMSwitch -Name 'agentctl-*' -ErrorAction SilentlyContinue)) "
        "{ Get-NetNat -Name 'agentctl' -ErrorAction SilentlyContinue | Remove-NetNat -Confirm:$false }",
    };
    auto expected = std::vector<std::string>{
        "if ((Get-VM -Name 'tbox' -ErrorAction SilentlyContinue).State -eq 'Running') "
        "{ throw 'sandbox tbox is running: stop it first or pass --force' }"};
    expected.insert(expected.end(), tail.begin(), tail.end());
    CHECK(remove_plan(layout, false).scripts == expected);

    expected.front() =
        "Get-VM -Name 'tbox' -ErrorAction SilentlyContinue | Where-Object { $_.State -ne 'Off' } | Stop-VM -TurnOff";
    CHECK(remove_plan(layout, true).scripts == expected);
}
