// Transport-level errors (defined in core so every layer's RINGLET_THROW can name them).
// PeerError: a peer died or broke the protocol (EOF, reset, a bad frame); its message names the
// local rank, the peer rank, the transport and the bytes moved. HandshakeError: a connection
// refused by the other side (wrong job, version, or an unexpected rank).
#pragma once

#include "core/error.h"

namespace ringlet::transport {

using core::HandshakeError;
using core::PeerError;

}  // namespace ringlet::transport
