# Every dependency comes from Debian's packages; nothing is downloaded.
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json 3.11 CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS filesystem)
find_package(Threads REQUIRED)
if(AGENTCTL_TESTS)
  find_package(Catch2 2 CONFIG REQUIRED)
  include(Catch)
endif()

# Adds a static library for one module from every .cpp in its folder, so that a
# module's owner never edits a shared list.
function(agentctl_module target)
  file(GLOB _sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*.cpp")
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
