# Run at build time (cmake -P): runs EXE with ARGS (words separated by spaces)
# and writes its standard output to OUT; fails the build when the command fails.
#   -DEXE=<program> "-DARGS=<a b>" -DOUT=<file>
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND "${EXE}" ${args} OUTPUT_FILE "${OUT}.tmp" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE "${OUT}.tmp")
  message(FATAL_ERROR "${EXE} ${ARGS} failed (${rc})")
endif()
file(RENAME "${OUT}.tmp" "${OUT}")
