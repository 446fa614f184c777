# Warning and sanitizer settings shared by every agentctl target.
add_library(agentctl_options INTERFACE)
target_compile_options(agentctl_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
  -Wcast-align -Wformat=2 -Wimplicit-fallthrough -Wmissing-declarations)
if(AGENTCTL_WERROR)
  target_compile_options(agentctl_options INTERFACE -Werror)
endif()
if(AGENTCTL_SANITIZE)
  target_compile_options(agentctl_options INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  # Not position-independent: UndefinedBehaviorSanitizer's check data fills
  # about 150 MiB of .data, which a PIE binary's relocations would dirty at
  # every start, so each egress proxy and CLI run would carry it as private
  # memory (and a sandbox's host memory limit would count it). Linked at a
  # fixed address those pages stay clean and are touched only when read.
  target_link_options(agentctl_options INTERFACE -fsanitize=address,undefined -no-pie)
endif()
if(AGENTCTL_TSAN)
  if(AGENTCTL_SANITIZE)
    message(FATAL_ERROR "AGENTCTL_TSAN and AGENTCTL_SANITIZE cannot be combined: build them in two trees")
  endif()
  target_compile_options(agentctl_options INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  # Asio's fenced blocks use atomic_thread_fence, which ThreadSanitizer does
  # not model (g++ warns): without them Asio's handler queues still hand work
  # between threads under a mutex, which it does model.
  target_compile_definitions(agentctl_options INTERFACE BOOST_ASIO_DISABLE_FENCED_BLOCK)
  target_link_options(agentctl_options INTERFACE -fsanitize=thread)
endif()
# Fewer, faster dynamic relocations at start-up; no DT_NEEDED for unused
# libraries; full RELRO (binding at start costs ~0.1 ms with libc the only
# shared library left in release builds).
target_link_options(agentctl_options INTERFACE -Wl,-O1 -Wl,--hash-style=gnu -Wl,--as-needed -Wl,-z,relro -Wl,-z,now)
# Relative relocations packed as DT_RELR (binutils >= 2.38, glibc >= 2.36,
# both in Debian 12): the loader walks a 7 KiB bitmap instead of 27k RELA
# entries (646 KiB), which cut the egress proxy's start-up CPU from 2.8 to
# 2.0 ms (docs/benchmarks.md, "Fourth pass"). Omitted where the linker lacks it.
include(CheckLinkerFlag)
check_linker_flag(CXX "-Wl,-z,pack-relative-relocs" AGENTCTL_LINKER_HAS_RELR)
if(AGENTCTL_LINKER_HAS_RELR)
  target_link_options(agentctl_options INTERFACE -Wl,-z,pack-relative-relocs)
endif()
# Asio's coroutine header needs <utility> first on g++ 12; clang 14 needs the
# coroutine feature macros spelled out.
target_compile_definitions(agentctl_options INTERFACE BOOST_ASIO_NO_DEPRECATED)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  target_compile_definitions(agentctl_options INTERFACE BOOST_ASIO_HAS_CO_AWAIT BOOST_ASIO_HAS_STD_COROUTINE)
endif()
