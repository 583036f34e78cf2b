#include "parallel/fsdp/engine_trace.h"

namespace megacpp::parallel::fsdp {
namespace {

std::vector<std::string>* g_events = nullptr;

}  // namespace

void set_engine_trace(std::vector<std::string>* events) { g_events = events; }

bool engine_trace_on() { return g_events != nullptr; }

void trace_engine(const std::string& event) {
  if (g_events) g_events->push_back(event);
}

}  // namespace megacpp::parallel::fsdp
