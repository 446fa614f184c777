# What `cmake --install` puts where, and the .deb `cpack -G DEB` builds from it.
#
# The man page and the completion scripts are written by the built binary
# (`agentctl man`, `agentctl completion SHELL`) from its own command tree, so
# they always describe exactly the commands and flags that binary has.
include(GNUInstallDirs)

set(_generated "${CMAKE_BINARY_DIR}/generated/share")
set(_outputs "")
foreach(_item IN ITEMS "agentctl.1|man" "agentctl.bash|completion bash" "_agentctl|completion zsh"
                       "agentctl.fish|completion fish")
  string(REPLACE "|" ";" _parts "${_item}")
  list(GET _parts 0 _file)
  list(GET _parts 1 _args)
  add_custom_command(
    OUTPUT "${_generated}/${_file}"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${_generated}"
    COMMAND "${CMAKE_COMMAND}" "-DEXE=$<TARGET_FILE:agentctl>" "-DARGS=${_args}"
            "-DOUT=${_generated}/${_file}" -P "${PROJECT_SOURCE_DIR}/cmake/RunToFile.cmake"
    DEPENDS agentctl "${PROJECT_SOURCE_DIR}/cmake/RunToFile.cmake"
    COMMENT "Generating ${_file} from agentctl's command tree"
    VERBATIM)
  list(APPEND _outputs "${_generated}/${_file}")
endforeach()
add_custom_target(agentctl_share ALL DEPENDS ${_outputs})

install(TARGETS agentctl RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
install(FILES "${_generated}/agentctl.1" DESTINATION "${CMAKE_INSTALL_MANDIR}/man1")
install(FILES "${_generated}/agentctl.bash" DESTINATION "${CMAKE_INSTALL_DATADIR}/bash-completion/completions"
        RENAME agentctl)
install(FILES "${_generated}/_agentctl" DESTINATION "${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions")
install(FILES "${_generated}/agentctl.fish" DESTINATION "${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d")

set(CPACK_PACKAGE_NAME agentctl)
set(CPACK_PACKAGE_VENDOR "agentctl")
set(CPACK_PACKAGE_CONTACT "agentctl maintainers <agentctl@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "run AI coding agents in sandboxes with default-deny network egress")
set(CPACK_PACKAGE_DESCRIPTION
    "agentctl creates Incus, Lima or Hyper-V sandboxes for AI coding agents, with an egress\n"
    "policy that allows only the destinations you name, a non-root user, and the host\n"
    "directories you choose.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # the shared libraries it links (yaml-cpp, fmt, spdlog, Boost)
# Added to those: OpenSSL, which agentctl opens when an HTTPS remote needs it
# (src/core/openssl_on_demand.hpp), so no linker-derived dependency names it.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libssl3 (>= 3.0)")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "incus (>= 6.0), bash-completion")
set(CPACK_STRIP_FILES ON)
include(CPack)
