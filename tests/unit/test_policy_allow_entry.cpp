// `--allow` entry forms, their errors, and allow files (real files in a temp dir).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "agentctl/error.hpp"
#include "agentctl/policy.hpp"
#include "support/error_text.hpp"
#include "support/temp_dir.hpp"

using namespace agentctl;
using namespace agentctl::policy;

namespace {

std::string error_of(std::string_view entry) {
    return test::error_of([&] { (void)parse_allow_entry(entry, "--allow"); });
}

std::string hint_of(std::string_view entry) {
    return test::hint_of([&] { (void)parse_allow_entry(entry, "--allow"); });
}

using agentctl::test::TempDir;

void write(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
}

}  // namespace

TEST_CASE("every allow entry form parses to its rule", "[allow]") {
    CHECK(parse_allow_entry("build_01.corp.example:8443", "").entry() == "build_01.corp.example:8443");
    CHECK(parse_allow_entry("*._tcp.example.com", "").entry() == "*._tcp.example.com");
    auto rule = parse_allow_entry("Example.COM.", "--allow");
    CHECK(rule.kind == HostKind::Name);
    CHECK(rule.host == "example.com");
    CHECK(rule.ports.empty());
    CHECK(rule.origin == "--allow");
    CHECK(rule.entry() == "example.com");

    CHECK(parse_allow_entry("example.com:443", "").entry() == "example.com:443");
    CHECK(parse_allow_entry("example.com:443,80,443", "").ports == std::vector<std::uint16_t>{80, 443});
    CHECK(parse_allow_entry("example.com:443,80", "").entry() == "example.com:80,443");

    auto wildcard = parse_allow_entry("*.Example.com:443", "");
    CHECK(wildcard.kind == HostKind::Wildcard);
    CHECK(wildcard.host == "example.com");
    CHECK(wildcard.entry() == "*.example.com:443");

    auto v4 = parse_allow_entry("93.184.216.34:8080", "");
    CHECK(v4.kind == HostKind::Ip);
    CHECK(v4.entry() == "93.184.216.34:8080");
    // any spelling of an IPv4 address becomes the address
    CHECK(parse_allow_entry("1572395042", "").entry() == "93.184.216.34");
    CHECK(parse_allow_entry("0x5d.0xb8.0xd8.0x22:443", "").entry() == "93.184.216.34:443");

    auto v6 = parse_allow_entry("[2606:4700:0::1111]:443", "");
    CHECK(v6.kind == HostKind::Ip);
    CHECK(v6.host == "2606:4700::1111");
    CHECK(v6.entry() == "[2606:4700::1111]:443");
    CHECK(parse_allow_entry("2606:4700::1111", "").entry() == "2606:4700::1111");
    CHECK(parse_allow_entry("[2606:4700::1111]", "").entry() == "2606:4700::1111");
    // a v4-mapped address is kept in its IPv4 form
    CHECK(parse_allow_entry("[::ffff:93.184.216.34]:443", "").entry() == "93.184.216.34:443");
    CHECK(parse_allow_entry("::ffff:5db8:d822", "").entry() == "93.184.216.34");

    CHECK(parse_allow_entry("https://Api.Example.com", "").entry() == "api.example.com:443");
    CHECK(parse_allow_entry("http://example.com", "").entry() == "example.com:80");
    CHECK(parse_allow_entry("https://example.com:8443/", "").entry() == "example.com:8443");
    CHECK(parse_allow_entry("HTTPS://[2606:4700::1111]", "").entry() == "[2606:4700::1111]:443");
    CHECK(parse_allow_entry("  example.com  ", "").entry() == "example.com");
}

TEST_CASE("bad allow entries are refused with the entry named", "[allow]") {
    CHECK(error_of("") == "invalid allow entry: the entry is empty");
    CHECK(error_of("   ") == "invalid allow entry: the entry is empty");
    CHECK(error_of("https://example.com/v1/models") ==
          "invalid allow entry \"https://example.com/v1/models\": a URL with a path, query or fragment cannot be "
          "enforced: filtering is by host and port only");
    CHECK(hint_of("https://example.com/v1/models") == "allow the host instead: example.com:443");
    CHECK(hint_of("http://example.com/x") == "allow the host instead: example.com:80");
    CHECK(error_of("https://example.com?q=1") ==
          "invalid allow entry \"https://example.com?q=1\": a URL with a path, query or fragment cannot be enforced: "
          "filtering is by host and port only");
    CHECK(error_of("https://allowed.com@evil.com") ==
          "invalid allow entry \"https://allowed.com@evil.com\": a URL with user information (user@host) is not "
          "accepted");
    CHECK(error_of("ftp://example.com") ==
          "invalid allow entry \"ftp://example.com\": the scheme \"ftp\" is not supported (only http:// and https://)");
    CHECK(error_of("example.com:0") == "invalid allow entry \"example.com:0\": port 0 is outside 1-65535");
    CHECK(error_of("example.com:65536") == "invalid allow entry \"example.com:65536\": port 65536 is outside 1-65535");
    CHECK(error_of("example.com:99999999999") ==
          "invalid allow entry \"example.com:99999999999\": port \"99999999999\" is not a number");
    CHECK(error_of("example.com:") == "invalid allow entry \"example.com:\": the port list after ':' is empty");
    CHECK(error_of("example.com:80,,443") == "invalid allow entry \"example.com:80,,443\": port \"\" is not a number");
    CHECK(error_of("example.com:http") == "invalid allow entry \"example.com:http\": port \"http\" is not a number");
    CHECK(error_of("example.com:-1") == "invalid allow entry \"example.com:-1\": port \"-1\" is not a number");
    CHECK(error_of("exa mple.com") ==
          "invalid allow entry \"exa mple.com\": it contains a space or a control character");
    CHECK(error_of("exa+mple.com") ==
          "invalid allow entry \"exa+mple.com\": '+' is not allowed in a host name (letters, digits, '-', '_' and "
          "'.')");
    CHECK(error_of("-example.com") ==
          "invalid allow entry \"-example.com\": the label \"-example\" starts or ends with '-'");
    CHECK(
        error_of("example..com") ==
        "invalid allow entry \"example..com\": the host name has an empty label (two dots in a row, or a leading dot)");
    CHECK(error_of("example.com..") ==
          "invalid allow entry \"example.com..\": the host name has an empty label (two dots in a row, or a leading "
          "dot)");
    CHECK(error_of(std::string(64, 'a') + ".com") == "invalid allow entry \"" + std::string(64, 'a') +
                                                         ".com\": the label \"" + std::string(64, 'a') +
                                                         "\" is longer than 63 characters");
    CHECK(error_of("exämple.com") ==
          "invalid allow entry \"exämple.com\": the host name is not ASCII; write an internationalised name in its "
          "xn-- form");
    CHECK(error_of("1.2.3.999") ==
          "invalid allow entry \"1.2.3.999\": it looks like an IP address but is not a valid one");
    CHECK(error_of("*.com") == "invalid allow entry \"*.com\": \"*.com\" would allow a whole top-level domain");
    CHECK(error_of("*") == "invalid allow entry \"*\": '*' is only allowed as the whole first label (*.example.com)");
    CHECK(error_of("a.*.example.com") ==
          "invalid allow entry \"a.*.example.com\": '*' is only allowed as the whole first label (*.example.com)");
    CHECK(error_of("*example.com") ==
          "invalid allow entry \"*example.com\": '*' is only allowed as the whole first label (*.example.com)");
    CHECK(error_of("[2001:db8::1") ==
          "invalid allow entry \"[2001:db8::1\": an IPv6 address opened with '[' is not closed with ']'");
    CHECK(error_of("[example.com]:443") ==
          "invalid allow entry \"[example.com]:443\": the text inside [ ] is not an IPv6 address");
    CHECK(error_of("[2606:4700::1111]443") ==
          "invalid allow entry \"[2606:4700::1111]443\": unexpected text after ']'");
    CHECK(error_of("2606:4700::zz") ==
          "invalid allow entry \"2606:4700::zz\": it has several ':' but is not an IPv6 address");
    CHECK(
        error_of("10.0.0.0/8") ==
        "invalid allow entry \"10.0.0.0/8\": '/' is not allowed: filtering is by host and port only, never by path or "
        "network range");
    CHECK(error_of("a.com b.com") == "invalid allow entry \"a.com b.com\": it contains a space or a control character");
    CHECK(error_of("127.0.0.1") ==
          "invalid allow entry \"127.0.0.1\": 127.0.0.1 is a loopback address, which agentctl always refuses");
    CHECK(error_of("0x7f.1:22") ==
          "invalid allow entry \"0x7f.1:22\": 127.0.0.1 is a loopback address, which agentctl always refuses");
    CHECK(error_of("[::ffff:127.0.0.1]:80") ==
          "invalid allow entry \"[::ffff:127.0.0.1]:80\": 127.0.0.1 is a loopback address, which agentctl always "
          "refuses");
    CHECK(error_of("224.0.0.1") ==
          "invalid allow entry \"224.0.0.1\": 224.0.0.1 is a multicast address, which agentctl always refuses");
    CHECK(error_of(std::string(2000, 'a')) == "invalid allow entry: longer than 1024 characters");
}

TEST_CASE("an allow file is read line by line with comments and blank lines", "[allow][file]") {
    TempDir dir;
    auto file = dir.path / "hosts.txt";
    write(file,
          "# package mirrors\n\ndeb.debian.org:80,443\n  *.pythonhosted.org:443  # wheels\r\n\t\n93.184.216.34\n");
    auto rules = load_allow_file(file.string());
    REQUIRE(rules.size() == 3);
    CHECK(rules[0].entry() == "deb.debian.org:80,443");
    CHECK(rules[0].origin == "allow file " + file.string() + ":3");
    CHECK(rules[1].entry() == "*.pythonhosted.org:443");
    CHECK(rules[1].origin == "allow file " + file.string() + ":4");
    CHECK(rules[2].entry() == "93.184.216.34");
    CHECK(rules[2].origin == "allow file " + file.string() + ":6");
}

TEST_CASE("a bad allow-file line names the file and line", "[allow][file]") {
    TempDir dir;
    auto file = dir.path / "hosts.txt";
    write(file, "example.com\n\n# next is bad\nhttps://example.com/path\n");
    try {
        (void)load_allow_file(file.string());
        FAIL("no error");
    } catch (const Error& error) {
        CHECK(std::string(error.what()) ==
              file.string() +
                  ":4: invalid allow entry \"https://example.com/path\": a URL with a path, query or "
                  "fragment cannot be enforced: filtering is by host and port only");
        CHECK(error.hint() == "allow the host instead: example.com:443");
    }
    try {
        (void)load_allow_file((dir.path / "missing.txt").string());
        FAIL("no error");
    } catch (const Error& error) {
        CHECK(std::string(error.what()) == "allow file " + (dir.path / "missing.txt").string() + " does not exist");
    }
}

TEST_CASE("an allow file starting with a UTF-8 byte-order mark reads its first line", "[allow][file]") {
    TempDir dir;
    auto file = dir.path / "hosts.txt";
    write(file,
          "\xEF\xBB\xBF"
          "example.com:443\r\nbuild_01.corp:22\r\n");
    auto rules = load_allow_file(file.string());
    REQUIRE(rules.size() == 2);
    CHECK(rules[0].entry() == "example.com:443");
    CHECK(rules[0].origin == "allow file " + file.string() + ":1");
    CHECK(rules[1].entry() == "build_01.corp:22");
}

TEST_CASE("every bad allow-file line is reported at once", "[allow][file]") {
    TempDir dir;
    auto file = dir.path / "hosts.txt";
    write(file, "example.com\nbad host\nok.example:443\nexample.com:0\n# comment\n10.0.0.0/8\n");
    try {
        (void)load_allow_file(file.string());
        FAIL("no error");
    } catch (const Error& error) {
        const auto f = file.string();
        CHECK(std::string(error.what()) ==
              f + " has 3 invalid lines:\n  " + f +
                  ":2: invalid allow entry \"bad host\": it contains a space or a control character\n  " + f +
                  ":4: invalid allow entry \"example.com:0\": port 0 is outside 1-65535\n  " + f +
                  ":6: invalid allow entry \"10.0.0.0/8\": '/' is not allowed: filtering is by host and port only, "
                  "never by path or network range");
        CHECK(error.hint() == "give one entry per --allow (or per line)");
    }
}
