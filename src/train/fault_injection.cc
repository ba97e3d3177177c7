#include "train/fault_injection.h"

namespace trident::train {
namespace {

std::shared_ptr<FaultInjector>& installed() {
  static std::shared_ptr<FaultInjector> injector;
  return injector;
}

}  // namespace

FaultInjector* fault_injector() { return installed().get(); }

void install_fault_injector(std::shared_ptr<FaultInjector> injector) { installed() = std::move(injector); }

}  // namespace trident::train
