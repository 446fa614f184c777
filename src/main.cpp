#include "cli/app.hpp"

int main(int argc, char** argv) { return agentctl::cli::run(argc, argv); }
