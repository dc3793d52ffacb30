// Flat structs and helpers between Go and libibverbs: Go fills arrays of
// plain structs and makes one call per burst; the unions, inline functions
// and macros of verbs.h stay on this side.
#ifndef APPLIANCE_IBV_SHIM_H
#define APPLIANCE_IBV_SHIM_H

#include <stdint.h>
#include <infiniband/verbs.h>

#define APP_MAX_SGE 4
#define APP_MAX_GIDS 64

struct app_dev_attr {
	uint64_t node_guid, max_mr_size, hca_core_clock_khz, ts_mask;
	int32_t max_qp, max_qp_wr, max_sge, max_cqe, max_qp_rd_atom, phys_port_cnt;
};

struct app_port_attr {
	int32_t state, max_mtu, active_mtu, gid_tbl_len, speed_mbps, ngids;
	uint8_t gids[APP_MAX_GIDS][16];
	int32_t gid_index[APP_MAX_GIDS];
};

struct app_qp_attr {
	uint32_t state, cur_state, path_mtu, qkey, rq_psn, sq_psn, dest_qpn, access;
	uint8_t dgid[16];
	uint32_t sgid_index, flow_label, hop_limit, traffic_class, sl, ah_port;
	uint32_t pkey_index, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, port, timeout, retry_cnt, rnr_retry;
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline;
	uint32_t en_sqd_async_notify, sq_draining;
};

struct app_async_event {
	int32_t type, port;
	uint32_t qpn;
	struct ibv_cq *cq;
};

struct app_wr {
	uint64_t id, remote_addr, compare_add, swap;
	uint32_t opcode, flags, imm, num_sge, rkey, remote_qpn, remote_qkey, pad;
	struct ibv_ah *ah;
	struct ibv_sge sge[APP_MAX_SGE];
};

struct app_wc {
	uint64_t id, ts;
	uint32_t status, opcode, flags, byte_len, imm, qpn, src_qp, vendor_err;
};

int app_query_device(struct ibv_context *ctx, struct app_dev_attr *out);
int app_query_port(struct ibv_context *ctx, int port, struct app_port_attr *out);
struct ibv_cq_ex *app_create_cq(struct ibv_context *ctx, int cqe, int ts, struct ibv_comp_channel *ch);
int app_poll_cq(struct ibv_cq_ex *cq, int ts, struct app_wc *out, int n);
int app_modify_qp(struct ibv_qp *qp, struct app_qp_attr *a, int mask);
int app_query_qp(struct ibv_qp *qp, struct app_qp_attr *a);
struct ibv_qp *app_create_qp(struct ibv_pd *pd, int type, struct ibv_cq_ex *scq, struct ibv_cq_ex *rcq,
	struct app_qp_attr *cap, int sig_all);
int app_post_send(struct ibv_qp *qp, struct app_wr *wrs, int n, struct ibv_send_wr *scratch, int *err);
int app_post_recv(struct ibv_qp *qp, struct app_wr *wrs, int n, struct ibv_recv_wr *scratch, int *err);
struct ibv_ah *app_create_ah(struct ibv_pd *pd, struct app_qp_attr *a);
int app_wait_cq(struct ibv_comp_channel *ch);
int app_get_async_event(struct ibv_context *ctx, int timeout_ms, struct app_async_event *out);

#endif
