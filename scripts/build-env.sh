# Sourced from the tree's root by the scripts that build. The compiler cache
# serves a clone of the tree at any path: paths below the root are hashed
# relative to it and the build directory is not hashed (the tests compile in
# their paths in one file only, tests/support/build_paths.cpp).
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
