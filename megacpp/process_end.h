// Note [Ending a process]
// A program of megacpp ends with end_process once its work is done and its objects are gone:
// it flushes the loggers and the standard streams and leaves with std::_Exit, skipping the
// static destructors of the libraries. Those of libtorch deregister every operator one by one,
// a tenth of the CPU time of a short run (0.1 s a process with Debian's libtorch 1.13), which a
// process about to end has no use for; the kernel frees its memory and closes its files and
// sockets either way. What megacpp writes goes through RAII objects closed before this call,
// the loggers (spdlog) and the standard streams, so nothing written is lost.
#pragma once

namespace megacpp {

[[noreturn]] void end_process(int exit_code);

}  // namespace megacpp
