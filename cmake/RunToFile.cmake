# Run at build time (cmake -P): runs EXE with ARGS (a ;-list) and writes its
# standard output to OUT; fails the build when the command fails.
#   -DEXE=<program> -DARGS=<a;b> -DOUT=<file>
execute_process(COMMAND "${EXE}" ${ARGS} OUTPUT_FILE "${OUT}.tmp" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE "${OUT}.tmp")
  message(FATAL_ERROR "${EXE} ${ARGS} failed (${rc})")
endif()
file(RENAME "${OUT}.tmp" "${OUT}")
