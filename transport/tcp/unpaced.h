// Loopback sockets without a pacing congestion control. BBR (some systems' default) paces a
// socket's sends to the rate it estimates for the path; over loopback there is no path, and the
// pacing only spaces out the sends of two ranks on one host: their ring all-reduce took 1.4-1.8x
// as long from 1 MiB up under bbr as under cubic (bench/RESULTS.md, 2026-12-02 "A tcp
// connection's history"). Congestion control guards a shared network, which loopback is not.
#pragma once

#include <string>

namespace ringlet::transport::tcp {

// Where `fd` (a tcp socket, before it connects or listens) would use bbr, asks for cubic instead
// (reno where cubic is refused), as a process may for itself. Leaves any other algorithm, the
// system's or one chosen for the socket. Returns the algorithm the socket uses afterwards ("" if
// it cannot be read).
std::string unpace(int fd);

}  // namespace ringlet::transport::tcp
