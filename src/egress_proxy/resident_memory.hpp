// What an idle proxy keeps resident. A host runs one proxy per sandbox, most
// of them idle most of the time, so what each keeps mapped while it waits
// adds up (docs/benchmarks.md, "Many sandboxes on one host").
#pragma once

namespace agentctl::egress_proxy {

// Sets the allocator's thresholds for a proxy's pattern of allocations
// (glibc's trim and mmap thresholds; why: resident_memory.cpp).
void keep_freed_memory();

// Gives up this process's mappings of file-backed pages it has never written:
// read-only (`r-xp` code, `r--p` data) private mappings of files with no
// anonymous (copied-on-write) page, which MADV_DONTNEED only unmaps (a later
// use maps the same page-cache pages again, from the unchanged file: a running
// executable cannot be written). Mappings with a page written (relocated RELRO
// data, a debugger's breakpoint) and every writable mapping are left alone.
// Then the heap's free memory goes back as well. Most of such pages were run
// or read once (start-up, or the code a burst of connections ran), and each
// fault maps 64 KiB around the page it needs, so an idle proxy otherwise keeps
// megabytes of them mapped.
void release_unwritten_file_pages();

}  // namespace agentctl::egress_proxy
