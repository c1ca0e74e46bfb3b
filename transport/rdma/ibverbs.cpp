// The libibverbs provider: verbs.h over real InfiniBand and RoCE devices. The thinnest layer
// the transport has: each call is the verbs call of the same name, its failures turned into
// core errors naming the device. Built with -Drdma (libibverbs-dev); not run on a machine
// without an RDMA device (tests/transport/test_rdma.cpp skips its hardware case there).
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <system_error>
#include <thread>

#include "core/error.h"
#include "transport/rdma/verbs.h"

namespace ringlet::transport::rdma {
namespace {

ibv_mtu mtu_enum(int bytes) {
  if (bytes >= 4096) return IBV_MTU_4096;
  if (bytes >= 2048) return IBV_MTU_2048;
  if (bytes >= 1024) return IBV_MTU_1024;
  if (bytes >= 512) return IBV_MTU_512;
  return IBV_MTU_256;
}

int mtu_bytes(ibv_mtu mtu) { return 128 << static_cast<int>(mtu); }

WcStatus status_of(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return WcStatus::success;
    case IBV_WC_WR_FLUSH_ERR: return WcStatus::flushed;
    case IBV_WC_RETRY_EXC_ERR: return WcStatus::retry_exceeded;
    case IBV_WC_RNR_RETRY_EXC_ERR: return WcStatus::rnr_exceeded;
    case IBV_WC_REM_ACCESS_ERR: return WcStatus::remote_access;
    case IBV_WC_LOC_PROT_ERR: return WcStatus::local_protection;
    default: return WcStatus::other;
  }
}

class IbvRegion : public MemoryRegion {
 public:
  explicit IbvRegion(ibv_mr* mr) : mr_(mr) {}
  ~IbvRegion() override { ibv_dereg_mr(mr_); }
  void* addr() const override { return mr_->addr; }
  std::size_t bytes() const override { return mr_->length; }
  std::uint32_t lkey() const override { return mr_->lkey; }
  std::uint32_t rkey() const override { return mr_->rkey; }

 private:
  ibv_mr* mr_;
};

class IbvCq : public CompletionQueue {
 public:
  explicit IbvCq(ibv_cq* cq) : cq_(cq) {}
  ~IbvCq() override { ibv_destroy_cq(cq_); }
  ibv_cq* get() const { return cq_; }

  int poll(WorkCompletion* out, int max) override {
    ibv_wc wc[16];
    const int n = ibv_poll_cq(cq_, std::min(max, 16), wc);
    RINGLET_CHECK(n >= 0, Error, "rdma: ibv_poll_cq failed");
    if (n > 0) idle_ = std::chrono::microseconds(0);
    for (int i = 0; i < n; ++i) {
      out[i].wr_id = wc[i].wr_id;
      out[i].status = status_of(wc[i].status);
      out[i].opcode =
          (wc[i].opcode & IBV_WC_RECV) != 0 ? WcOpcode::recv_rdma_with_imm : WcOpcode::rdma_write;
      out[i].byte_len = wc[i].byte_len;
      out[i].imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) != 0 ? ntohl(wc[i].imm_data) : 0;
      out[i].detail =
          wc[i].status == IBV_WC_SUCCESS
              ? ""
              : core::str(ibv_wc_status_str(wc[i].status), ", vendor error ", wc[i].vendor_err);
    }
    return n;
  }

  // Backs off from 10 us to 1 ms while nothing comes (a completion channel would let the thread
  // sleep in the kernel; polling keeps the latency of a busy connection at the adapter's).
  void wait(std::chrono::microseconds max_wait) override {
    idle_ = std::min(std::max(idle_ * 2, std::chrono::microseconds(10)),
                     std::chrono::microseconds(1000));
    std::this_thread::sleep_for(std::min(max_wait, idle_));
  }

 private:
  ibv_cq* cq_;
  std::chrono::microseconds idle_{0};
};

class IbvQp : public QueuePair {
 public:
  IbvQp(ibv_qp* qp, int port, int gid_index, std::string device)
      : qp_(qp), port_(port), gid_index_(gid_index), device_(std::move(device)) {}
  ~IbvQp() override { ibv_destroy_qp(qp_); }

  std::uint32_t qp_num() const override { return qp_->qp_num; }
  QpState state() const override { return state_; }

  void to_init() override {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = static_cast<std::uint8_t>(port_);
    attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    modify(attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
    state_ = QpState::init;
  }

  void to_rtr(const QpEndpoint& remote) override {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = mtu_enum(std::min(remote.mtu_bytes, local_mtu_));
    attr.dest_qp_num = remote.qp_num;
    attr.rq_psn = remote.psn;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 28;  // 164 ms between receiver-not-ready retries
    attr.ah_attr.port_num = static_cast<std::uint8_t>(port_);
    attr.ah_attr.dlid = remote.lid;
    if (remote.lid == 0) {  // RoCE (or routed InfiniBand): address by GID
      attr.ah_attr.is_global = 1;
      std::copy(remote.gid.begin(), remote.gid.end(), attr.ah_attr.grh.dgid.raw);
      attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index_);
      attr.ah_attr.grh.hop_limit = 64;
    }
    modify(attr,
           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
           "RTR");
    state_ = QpState::rtr;
  }

  void to_rts(std::uint32_t local_psn) override {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 14;  // 4.096 us * 2^14 = 67 ms per try, 7 tries: a dead peer in ~0.5 s
    attr.retry_cnt = 7;
    attr.rnr_retry = 6;  // 7 would retry forever: a peer that stops posting receives fails in ~1 s
    attr.sq_psn = local_psn;
    attr.max_rd_atomic = 1;
    modify(attr,
           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
               IBV_QP_MAX_QP_RD_ATOMIC,
           "RTS");
    state_ = QpState::rts;
  }

  void to_error() override {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    modify(attr, IBV_QP_STATE, "ERROR");
    state_ = QpState::error;
  }

  void post_write(const WriteRequest& request) override {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uint64_t>(request.local);
    sge.length = static_cast<std::uint32_t>(request.bytes);
    sge.lkey = request.lkey;
    ibv_send_wr wr{};
    wr.wr_id = request.wr_id;
    wr.sg_list = &sge;
    wr.num_sge = request.bytes > 0 ? 1 : 0;
    wr.opcode = request.with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = request.signaled ? IBV_SEND_SIGNALED : 0;
    wr.imm_data = htonl(request.imm);
    wr.wr.rdma.remote_addr = request.remote_addr;
    wr.wr.rdma.rkey = request.rkey;
    ibv_send_wr* bad = nullptr;
    const int error = ibv_post_send(qp_, &wr, &bad);
    RINGLET_CHECK(error == 0, Error, "rdma: ibv_post_send on ", device_, " QP ", qp_->qp_num, ": ",
                  core::errno_text(error));
  }

  void post_recv(std::uint64_t wr_id) override {
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    ibv_recv_wr* bad = nullptr;
    const int error = ibv_post_recv(qp_, &wr, &bad);
    RINGLET_CHECK(error == 0, Error, "rdma: ibv_post_recv on ", device_, " QP ", qp_->qp_num, ": ",
                  core::errno_text(error));
  }

  void set_local_mtu(int bytes) { local_mtu_ = bytes; }

 private:
  void modify(ibv_qp_attr& attr, int mask, const char* to) {
    const int error = ibv_modify_qp(qp_, &attr, mask);
    RINGLET_CHECK(error == 0, Error, "rdma: moving ", device_, " QP ", qp_->qp_num, " to ", to,
                  ": ", core::errno_text(error));
  }

  ibv_qp* qp_;
  int port_;
  int gid_index_;
  std::string device_;
  int local_mtu_ = 4096;
  QpState state_ = QpState::reset;
};

class IbvContext : public Context {
 public:
  IbvContext(ibv_context* context, std::string name, int port)
      : context_(context), name_(std::move(name)), port_(port) {
    pd_ = ibv_alloc_pd(context_);
    if (pd_ == nullptr) {
      ibv_close_device(context_);
      RINGLET_THROW(DeviceError, "rdma: ibv_alloc_pd on ", name_, " failed");
    }
    if (ibv_query_port(context_, static_cast<std::uint8_t>(port_), &attr_) != 0 ||
        attr_.state != IBV_PORT_ACTIVE) {
      ibv_dealloc_pd(pd_);
      ibv_close_device(context_);
      RINGLET_THROW(DeviceError, "rdma: port ", port_, " of ", name_,
                    " is not active (RINGLET_IB_DEVICE=NAME:PORT picks another)");
    }
  }
  ~IbvContext() override {
    ibv_dealloc_pd(pd_);
    ibv_close_device(context_);
  }

  std::string device_name() const override { return name_; }
  bool emulated() const override { return false; }
  int port() const override { return port_; }
  PortInfo port_info() const override {
    return PortInfo{
        attr_.state == IBV_PORT_ACTIVE,
        attr_.link_layer == IBV_LINK_LAYER_ETHERNET ? LinkLayer::ethernet : LinkLayer::infiniband,
        attr_.lid, mtu_bytes(attr_.active_mtu)};
  }
  Gid gid(int index) const override {
    ibv_gid gid{};
    RINGLET_CHECK(index >= 0 && index < attr_.gid_tbl_len &&
                      ibv_query_gid(context_, static_cast<std::uint8_t>(port_), index, &gid) == 0,
                  ValueError, "rdma: ", name_, " port ", port_, " has no GID index ", index,
                  " (RINGLET_IB_GID_INDEX; the table has ", attr_.gid_tbl_len, ")");
    Gid out{};
    std::copy(std::begin(gid.raw), std::end(gid.raw), out.begin());
    return out;
  }
  int default_gid_index() const override {
    if (attr_.link_layer != IBV_LINK_LAYER_ETHERNET) return 0;
    for (int i = 0; i < attr_.gid_tbl_len; ++i) {
      std::ifstream type(
          core::str("/sys/class/infiniband/", name_, "/ports/", port_, "/gid_attrs/types/", i));
      std::string line;
      if (!std::getline(type, line) || line.find("v2") == std::string::npos) continue;
      const Gid g = gid(i);
      const bool ipv4_mapped =
          std::all_of(g.begin(), g.begin() + 10, [](auto b) { return b == 0; }) && g[10] == 0xff &&
          g[11] == 0xff;
      if (ipv4_mapped) return i;
    }
    return 0;
  }
  void* allocate(std::size_t bytes) override {
    void* memory = nullptr;
    const int error = posix_memalign(&memory, 4096, bytes);
    RINGLET_CHECK(error == 0, OutOfMemoryError, "rdma: allocating ", bytes,
                  " bytes: ", core::errno_text(error));
    return memory;
  }
  void release(void* memory) override { std::free(memory); }
  std::unique_ptr<MemoryRegion> register_memory(void* addr, std::size_t bytes,
                                                bool remote_write) override {
    const int access = IBV_ACCESS_LOCAL_WRITE | (remote_write ? IBV_ACCESS_REMOTE_WRITE : 0);
    ibv_mr* mr = ibv_reg_mr(pd_, addr, bytes, access);
    RINGLET_CHECK(mr != nullptr, Error, "rdma: registering ", bytes, " bytes with ", name_, ": ",
                  core::errno_text(errno), " (is the locked-memory limit, ulimit -l, too low?)");
    return std::make_unique<IbvRegion>(mr);
  }
  std::unique_ptr<CompletionQueue> create_cq(int depth) override {
    ibv_cq* cq = ibv_create_cq(context_, depth, nullptr, nullptr, 0);
    RINGLET_CHECK(cq != nullptr, Error, "rdma: ibv_create_cq on ", name_, ": ",
                  core::errno_text(errno));
    return std::make_unique<IbvCq>(cq);
  }
  std::unique_ptr<QueuePair> create_qp(CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                       const QpCaps& caps) override {
    ibv_qp_init_attr init{};
    init.send_cq = dynamic_cast<IbvCq&>(send_cq).get();
    init.recv_cq = dynamic_cast<IbvCq&>(recv_cq).get();
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = static_cast<std::uint32_t>(caps.max_send_wr);
    init.cap.max_recv_wr = static_cast<std::uint32_t>(caps.max_recv_wr);
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    ibv_qp* qp = ibv_create_qp(pd_, &init);
    RINGLET_CHECK(qp != nullptr, Error, "rdma: ibv_create_qp on ", name_, ": ",
                  core::errno_text(errno));
    auto out = std::make_unique<IbvQp>(qp, port_, caps.gid_index, name_);
    out->set_local_mtu(mtu_bytes(attr_.active_mtu));
    return out;
  }

 private:
  ibv_context* context_;
  ibv_pd* pd_ = nullptr;
  std::string name_;
  int port_;
  ibv_port_attr attr_{};
};

class IbvProvider : public Provider {
 public:
  const char* name() const override { return "libibverbs"; }
  std::vector<std::string> devices() override {
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    std::vector<std::string> names;
    for (int i = 0; list != nullptr && i < count; ++i)
      names.emplace_back(ibv_get_device_name(list[i]));
    if (list != nullptr) ibv_free_device_list(list);
    return names;
  }
  std::unique_ptr<Context> open(const std::string& device, int port) override {
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    ibv_context* context = nullptr;
    for (int i = 0; list != nullptr && i < count; ++i) {
      if (device == ibv_get_device_name(list[i])) context = ibv_open_device(list[i]);
    }
    if (list != nullptr) ibv_free_device_list(list);
    RINGLET_CHECK(context != nullptr, DeviceError, "rdma: cannot open device '", device, "'");
    return std::make_unique<IbvContext>(context, device, port);
  }
};

}  // namespace

Provider* ibverbs_provider() {
  static IbvProvider provider;
  return &provider;
}

}  // namespace ringlet::transport::rdma
