// The whole command line of `trident` as a function: what main() does (trident_cli.cc), for
// programs that are `trident` with something installed first (a test's fault injector:
// tests/support/trident_with_faults.cc). Returns the exit status; may exit (Note [Preemption]:
// a stopped run's 75, errors' 1).
#pragma once

namespace trident::cli {

int trident_main(int argc, char** argv);

}  // namespace trident::cli
