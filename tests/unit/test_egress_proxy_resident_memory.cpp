#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "egress_proxy/resident_memory.hpp"

namespace fs = std::filesystem;

namespace {

constexpr std::size_t k_pages = 16;

// A smaps field (kB) of the mapping that starts at `address`.
std::size_t smaps_field(const void* address, const std::string& field) {
    std::ifstream smaps("/proc/self/smaps");
    bool in_it = false;
    for (std::string line; std::getline(smaps, line);) {
        unsigned long start = 0;
        unsigned long end = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2 && line.find(' ') < 40 &&
            line.find(':') > line.find(' ')) {
            in_it = start == reinterpret_cast<unsigned long>(address);
        } else if (in_it && line.starts_with(field + ":")) {
            return std::stoul(line.substr(field.size() + 1));
        }
    }
    FAIL("no mapping at " << address);
    return 0;
}

struct Mapped {
    Mapped(int fd, int protection, std::size_t bytes) : size(bytes) {
        data = static_cast<char*>(::mmap(nullptr, size, protection, MAP_PRIVATE, fd, 0));
        REQUIRE(data != MAP_FAILED);
    }
    ~Mapped() { ::munmap(data, size); }
    char* data;
    std::size_t size;
};

}  // namespace

TEST_CASE("giving up unwritten file pages unmaps pages only read, keeps the written ones, and reads the same again") {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const auto path = fs::temp_directory_path() / ("agentctl-resident-" + std::to_string(::getpid()));
    {
        std::ofstream out(path, std::ios::binary);
        for (std::size_t i = 0; i < k_pages; ++i) out << std::string(page, static_cast<char>('a' + i));
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    const int rw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // a private writable mapping needs only read access
    REQUIRE(rw >= 0);
    fs::remove(path);  // the mappings keep the file
    {
        const std::size_t size = k_pages * page;
        Mapped read_only(fd, PROT_READ, size);               // like code and constants: read, never written
        Mapped relocated(rw, PROT_READ | PROT_WRITE, size);  // like RELRO: written once, then read-only
        std::size_t sum = 0;
        for (std::size_t i = 0; i < k_pages; ++i) sum += static_cast<unsigned char>(read_only.data[i * page]);
        CHECK(sum > 0);
        for (std::size_t i = 0; i < k_pages; ++i) relocated.data[i * page] = 'X';
        REQUIRE(::mprotect(relocated.data, size, PROT_READ) == 0);
        REQUIRE(smaps_field(read_only.data, "Rss") == size / 1024);
        REQUIRE(smaps_field(relocated.data, "Anonymous") == size / 1024);

        agentctl::egress_proxy::release_unwritten_file_pages();

        CHECK(smaps_field(read_only.data, "Rss") == 0);
        CHECK(smaps_field(relocated.data, "Anonymous") == size / 1024);
        for (std::size_t i = 0; i < k_pages; ++i) {
            CHECK(read_only.data[i * page + 1] == static_cast<char>('a' + i));  // mapped again from the file
            CHECK(relocated.data[i * page] == 'X');                             // what was written is kept
            CHECK(relocated.data[i * page + 1] == static_cast<char>('a' + i));
        }
    }
    ::close(fd);
    ::close(rw);
}
