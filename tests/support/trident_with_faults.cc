// `trident` with the end-to-end tests' fault injector installed (support/env_fault_injector.h:
// TRIDENT_TEST_NAN_BATCH and the sleeps): what the tests of the alert rules, the hang watchdog
// and rollbacks run. The `trident` users run reads no such variable (train/fault_injection.h).
#include <cstdio>

#include "core/check.h"
#include "support/env_fault_injector.h"
#include "trident_main.h"

int main(int argc, char** argv) {
  try {
    trident::train::install_fault_injector(trident::testing::EnvFaultInjector::from_env());
  } catch (const trident::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return trident::cli::trident_main(argc, argv);
}
