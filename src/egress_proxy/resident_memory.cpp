#include "egress_proxy/resident_memory.hpp"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

// After a standard header, which defines __GLIBC__ where it applies.
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace agentctl::egress_proxy {

// glibc hands freed memory at the top of a heap back to the kernel once more
// than 128 KiB of it is free, and takes it back with the next allocations.
// A proxy serving keep-alive requests frees and allocates that much many
// times a second (coroutine frames, parsers), so at the default it spent a
// fifth of its time in brk(2), madvise(2), the page faults that follow and the
// TLB shootdowns to the other event loop's CPU (docs/benchmarks-history.md, "Seventh
// pass"). Keeping up to 4 MiB per heap stops that; the dynamic threshold is
// off once set, so mmap(2) is kept for blocks of 1 MiB and more, which the
// proxy never allocates per request.
void keep_freed_memory() {
#if defined(__GLIBC__)
    ::mallopt(M_TRIM_THRESHOLD, 4 * 1024 * 1024);
    ::mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
#endif
}

void release_unwritten_file_pages() {
#if defined(__linux__)
    struct Mapping {
        unsigned long start = 0;
        unsigned long end = 0;
        bool candidate = false;  // private, read-only, of a file
        bool written = true;     // until smaps says it has no anonymous page
    };
    std::vector<Mapping> mappings;
    {
        // The whole list first: nothing is unmapped while the kernel walks it.
        std::ifstream smaps("/proc/self/smaps");
        std::string line;
        while (std::getline(smaps, line)) {
            // A mapping's line: "START-END PERMS OFFSET DEV INODE PATH", then "Field: value kB" lines.
            unsigned long start = 0;
            unsigned long end = 0;
            char perms[5] = {};
            unsigned long inode = 0;
            if (std::sscanf(line.c_str(), "%lx-%lx %4s %*x %*s %lu", &start, &end, perms, &inode) == 4) {
                const std::string_view p(perms);
                mappings.push_back({start, end, inode != 0 && (p == "r-xp" || p == "r--p"), true});
            } else if (!mappings.empty() && line.starts_with("Anonymous:")) {
                mappings.back().written = std::strtoul(line.c_str() + 10, nullptr, 10) != 0;
            }
        }
    }
    for (const auto& m : mappings) {
        if (m.candidate && !m.written) ::madvise(reinterpret_cast<void*>(m.start), m.end - m.start, MADV_DONTNEED);
    }
#endif
#if defined(__GLIBC__)
    ::malloc_trim(0);
#endif
}

}  // namespace agentctl::egress_proxy
