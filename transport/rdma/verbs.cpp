#include "transport/rdma/verbs.h"

namespace ringlet::transport::rdma {

const char* qp_state_name(QpState state) {
  switch (state) {
    case QpState::reset: return "RESET";
    case QpState::init: return "INIT";
    case QpState::rtr: return "RTR";
    case QpState::rts: return "RTS";
    case QpState::error: return "ERROR";
  }
  return "?";
}

const char* wc_status_name(WcStatus status) {
  switch (status) {
    case WcStatus::success: return "success";
    case WcStatus::flushed: return "flushed (WR_FLUSH_ERR)";
    case WcStatus::retry_exceeded: return "transport retry counter exceeded (RETRY_EXC_ERR)";
    case WcStatus::rnr_exceeded: return "receiver not ready, retries exceeded (RNR_RETRY_EXC_ERR)";
    case WcStatus::remote_access: return "remote access error (REM_ACCESS_ERR)";
    case WcStatus::local_protection: return "local protection error (LOC_PROT_ERR)";
    case WcStatus::other: return "error";
  }
  return "?";
}

}  // namespace ringlet::transport::rdma
