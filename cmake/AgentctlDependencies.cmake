# Every dependency comes from Debian's packages; nothing is downloaded.
find_package(Threads REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json 3.11 CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
# Release builds link the C++ runtime, yaml-cpp and Boost.Filesystem (Debian
# ships static archives for them) and fmt and spdlog (from their headers) into
# the binary, leaving only libc and libm shared: the egress proxy is started once
# per sandbox, and each shared library costs start-up time (see
# docs/benchmarks.md). Sanitizer and fuzz builds keep everything shared.
if(AGENTCTL_SANITIZE OR AGENTCTL_TSAN OR AGENTCTL_FUZZ)
  set(_static_default OFF)
else()
  set(_static_default ON)
endif()
option(AGENTCTL_STATIC_LINK "Link the C++ runtime, yaml-cpp, Boost.Filesystem, fmt and spdlog into the binary" ${_static_default})
if(AGENTCTL_STATIC_LINK)
  set(Boost_USE_STATIC_LIBS ON)
  target_link_options(agentctl_options INTERFACE -static-libstdc++ -static-libgcc)
endif()
find_package(Boost 1.74 REQUIRED COMPONENTS filesystem)
# fmt and spdlog: Debian ships no static archives, so static builds compile
# them in from their headers (fmt's header-only mode; spdlog without
# SPDLOG_COMPILED_LIB) instead of loading libfmt.so and libspdlog.so.
add_library(agentctl_fmt INTERFACE)
add_library(agentctl_spdlog INTERFACE)
if(AGENTCTL_STATIC_LINK)
  target_link_libraries(agentctl_fmt INTERFACE fmt::fmt-header-only)
  target_compile_definitions(agentctl_spdlog INTERFACE SPDLOG_FMT_EXTERNAL)
  target_link_libraries(agentctl_spdlog INTERFACE agentctl_fmt Threads::Threads)
else()
  target_link_libraries(agentctl_fmt INTERFACE fmt::fmt)
  target_link_libraries(agentctl_spdlog INTERFACE spdlog::spdlog)
endif()
add_library(agentctl_yaml_cpp INTERFACE)
if(AGENTCTL_STATIC_LINK)
  find_library(AGENTCTL_YAML_CPP_ARCHIVE NAMES libyaml-cpp.a REQUIRED)
  get_target_property(_yaml_includes yaml-cpp INTERFACE_INCLUDE_DIRECTORIES)
  if(_yaml_includes)
    target_include_directories(agentctl_yaml_cpp SYSTEM INTERFACE ${_yaml_includes})
  endif()
  target_link_libraries(agentctl_yaml_cpp INTERFACE ${AGENTCTL_YAML_CPP_ARCHIVE})
else()
  target_link_libraries(agentctl_yaml_cpp INTERFACE yaml-cpp)
endif()
if(AGENTCTL_TESTS)
  find_package(Catch2 2 CONFIG REQUIRED)
  include(Catch)
endif()

# Adds a static library for one module from every .cpp in its folder, so that a
# module's owner never edits a shared list.
function(agentctl_module target)
  # The module's sources: its folder's, and those of each subfolder that is not
  # a module of its own (has no CMakeLists.txt).
  file(GLOB _sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*.cpp")
  file(GLOB _folders LIST_DIRECTORIES true "${CMAKE_CURRENT_SOURCE_DIR}/*")
  foreach(_folder IN LISTS _folders)
    if(IS_DIRECTORY "${_folder}" AND NOT EXISTS "${_folder}/CMakeLists.txt")
      file(GLOB _more CONFIGURE_DEPENDS "${_folder}/*.cpp")
      list(APPEND _sources ${_more})
    endif()
  endforeach()
  if(_sources)
    add_library(${target} STATIC ${_sources})
    set(_scope PUBLIC)
  else()
    add_library(${target} INTERFACE)  # a module whose sources have not landed yet
    set(_scope INTERFACE)
  endif()
  target_include_directories(${target} ${_scope} "${PROJECT_SOURCE_DIR}/include" "${PROJECT_SOURCE_DIR}/src")
  target_link_libraries(${target} ${_scope} agentctl_options ${ARGN})
endfunction()
