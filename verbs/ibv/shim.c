//go:build rdma

#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include "shim.h"

int app_query_device(struct ibv_context *ctx, struct app_dev_attr *out) {
	struct ibv_device_attr_ex ax;
	memset(&ax, 0, sizeof ax);
	int rc = ibv_query_device_ex(ctx, NULL, &ax);
	if (rc) {
		struct ibv_device_attr a;
		if ((rc = ibv_query_device(ctx, &a)))
			return -rc;
		ax.orig_attr = a;
	}
	struct ibv_device_attr *a = &ax.orig_attr;
	out->node_guid = a->node_guid;
	out->max_mr_size = a->max_mr_size;
	out->max_qp = a->max_qp;
	out->max_qp_wr = a->max_qp_wr;
	out->max_sge = a->max_sge;
	out->max_cqe = a->max_cqe;
	out->max_qp_rd_atom = a->max_qp_rd_atom;
	out->phys_port_cnt = a->phys_port_cnt;
	out->hca_core_clock_khz = ax.hca_core_clock;
	out->ts_mask = ax.completion_timestamp_mask;
	return 0;
}

int app_query_port(struct ibv_context *ctx, int port, struct app_port_attr *out) {
	struct ibv_port_attr pa;
	int rc = ibv_query_port(ctx, port, &pa);
	if (rc)
		return -rc;
	out->state = pa.state;
	out->max_mtu = pa.max_mtu;
	out->active_mtu = pa.active_mtu;
	out->gid_tbl_len = pa.gid_tbl_len;
	out->ngids = 0;
	for (int i = 0; i < pa.gid_tbl_len && out->ngids < APP_MAX_GIDS; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(ctx, port, i, &e, 0))
			continue;
		if (e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		memcpy(out->gids[out->ngids], e.gid.raw, 16);
		out->gid_index[out->ngids] = i;
		out->ngids++;
	}
	return 0;
}

struct ibv_cq_ex *app_create_cq(struct ibv_context *ctx, int cqe, int ts, struct ibv_comp_channel *ch) {
	struct ibv_cq_init_attr_ex a;
	memset(&a, 0, sizeof a);
	a.cqe = cqe;
	a.channel = ch;
	a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
		IBV_WC_EX_WITH_SRC_QP | IBV_WC_STANDARD_FLAGS;
	if (ts)
		a.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &a);
	if (cq && ch && ibv_req_notify_cq(ibv_cq_ex_to_cq(cq), 0)) {
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
		return NULL;
	}
	return cq;
}

static void read_wc(struct ibv_cq_ex *cq, int ts, struct app_wc *w) {
	w->id = cq->wr_id;
	w->status = cq->status;
	w->opcode = ibv_wc_read_opcode(cq);
	w->vendor_err = ibv_wc_read_vendor_err(cq);
	w->byte_len = ibv_wc_read_byte_len(cq);
	w->qpn = ibv_wc_read_qp_num(cq);
	w->src_qp = ibv_wc_read_src_qp(cq);
	w->flags = ibv_wc_read_wc_flags(cq);
	w->imm = (w->flags & IBV_WC_WITH_IMM) ? be32toh(ibv_wc_read_imm_data(cq)) : 0;
	w->ts = ts ? ibv_wc_read_completion_ts(cq) : 0;
}

int app_poll_cq(struct ibv_cq_ex *cq, int ts, struct app_wc *out, int n) {
	struct ibv_poll_cq_attr pa = {0};
	int rc = ibv_start_poll(cq, &pa);
	if (rc == ENOENT)
		return 0;
	if (rc)
		return -rc;
	int got = 0;
	for (;;) {
		read_wc(cq, ts, &out[got++]);
		if (got == n)
			break;
		rc = ibv_next_poll(cq);
		if (rc == ENOENT)
			break;
		if (rc) {
			ibv_end_poll(cq);
			return -rc;
		}
	}
	ibv_end_poll(cq);
	return got;
}

static void fill_ah(struct ibv_ah_attr *ah, struct app_qp_attr *a) {
	memset(ah, 0, sizeof *ah);
	ah->is_global = 1;
	memcpy(ah->grh.dgid.raw, a->dgid, 16);
	ah->grh.sgid_index = a->sgid_index;
	ah->grh.flow_label = a->flow_label;
	ah->grh.hop_limit = a->hop_limit ? a->hop_limit : 64;
	ah->grh.traffic_class = a->traffic_class;
	ah->sl = a->sl;
	ah->port_num = a->ah_port ? a->ah_port : 1;
}

int app_modify_qp(struct ibv_qp *qp, struct app_qp_attr *a, int mask) {
	struct ibv_qp_attr q;
	memset(&q, 0, sizeof q);
	q.qp_state = a->state;
	q.cur_qp_state = a->cur_state;
	q.path_mtu = a->path_mtu;
	q.qkey = a->qkey;
	q.rq_psn = a->rq_psn;
	q.sq_psn = a->sq_psn;
	q.dest_qp_num = a->dest_qpn;
	q.qp_access_flags = a->access;
	fill_ah(&q.ah_attr, a);
	q.pkey_index = a->pkey_index;
	q.max_rd_atomic = a->max_rd_atomic;
	q.max_dest_rd_atomic = a->max_dest_rd_atomic;
	q.min_rnr_timer = a->min_rnr_timer;
	q.port_num = a->port;
	q.timeout = a->timeout;
	q.retry_cnt = a->retry_cnt;
	q.rnr_retry = a->rnr_retry;
	q.en_sqd_async_notify = a->en_sqd_async_notify;
	return -ibv_modify_qp(qp, &q, mask);
}

int app_query_qp(struct ibv_qp *qp, struct app_qp_attr *a) {
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr init;
	int rc = ibv_query_qp(qp, &q, 0x1fffff, &init);
	if (rc)
		return -rc;
	a->state = q.qp_state;
	a->cur_state = q.cur_qp_state;
	a->path_mtu = q.path_mtu;
	a->qkey = q.qkey;
	a->rq_psn = q.rq_psn;
	a->sq_psn = q.sq_psn;
	a->dest_qpn = q.dest_qp_num;
	a->access = q.qp_access_flags;
	memcpy(a->dgid, q.ah_attr.grh.dgid.raw, 16);
	a->sgid_index = q.ah_attr.grh.sgid_index;
	a->flow_label = q.ah_attr.grh.flow_label;
	a->hop_limit = q.ah_attr.grh.hop_limit;
	a->traffic_class = q.ah_attr.grh.traffic_class;
	a->sl = q.ah_attr.sl;
	a->ah_port = q.ah_attr.port_num;
	a->pkey_index = q.pkey_index;
	a->max_rd_atomic = q.max_rd_atomic;
	a->max_dest_rd_atomic = q.max_dest_rd_atomic;
	a->min_rnr_timer = q.min_rnr_timer;
	a->port = q.port_num;
	a->timeout = q.timeout;
	a->retry_cnt = q.retry_cnt;
	a->rnr_retry = q.rnr_retry;
	a->max_send_wr = q.cap.max_send_wr;
	a->max_recv_wr = q.cap.max_recv_wr;
	a->max_send_sge = q.cap.max_send_sge;
	a->max_recv_sge = q.cap.max_recv_sge;
	a->max_inline = q.cap.max_inline_data;
	a->en_sqd_async_notify = q.en_sqd_async_notify;
	a->sq_draining = q.sq_draining;
	return 0;
}

struct ibv_qp *app_create_qp(struct ibv_pd *pd, int type, struct ibv_cq_ex *scq, struct ibv_cq_ex *rcq,
	struct app_qp_attr *cap, int sig_all) {
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof a);
	a.qp_type = type;
	a.send_cq = ibv_cq_ex_to_cq(scq);
	a.recv_cq = ibv_cq_ex_to_cq(rcq);
	a.cap.max_send_wr = cap->max_send_wr;
	a.cap.max_recv_wr = cap->max_recv_wr;
	a.cap.max_send_sge = cap->max_send_sge;
	a.cap.max_recv_sge = cap->max_recv_sge;
	a.cap.max_inline_data = cap->max_inline;
	a.sq_sig_all = sig_all;
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	if (qp) {
		// The provider may round the queues up: report what it made.
		cap->max_send_wr = a.cap.max_send_wr;
		cap->max_recv_wr = a.cap.max_recv_wr;
		cap->max_send_sge = a.cap.max_send_sge;
		cap->max_recv_sge = a.cap.max_recv_sge;
		cap->max_inline = a.cap.max_inline_data;
	}
	return qp;
}

int app_post_send(struct ibv_qp *qp, struct app_wr *wrs, int n, struct ibv_send_wr *s, int *err) {
	for (int i = 0; i < n; i++) {
		struct app_wr *w = &wrs[i];
		struct ibv_send_wr *o = &s[i];
		memset(o, 0, sizeof *o);
		o->wr_id = w->id;
		o->opcode = w->opcode;
		o->send_flags = w->flags;
		o->sg_list = w->sge;
		o->num_sge = w->num_sge;
		o->imm_data = htobe32(w->imm);
		o->next = i + 1 < n ? &s[i + 1] : NULL;
		switch (w->opcode) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM:
		case IBV_WR_RDMA_READ:
			o->wr.rdma.remote_addr = w->remote_addr;
			o->wr.rdma.rkey = w->rkey;
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			o->wr.atomic.remote_addr = w->remote_addr;
			o->wr.atomic.rkey = w->rkey;
			o->wr.atomic.compare_add = w->compare_add;
			o->wr.atomic.swap = w->swap;
			break;
		default:
			break;
		}
		if (w->ah) {
			o->wr.ud.ah = w->ah;
			o->wr.ud.remote_qpn = w->remote_qpn;
			o->wr.ud.remote_qkey = w->remote_qkey;
		}
	}
	struct ibv_send_wr *bad = NULL;
	*err = ibv_post_send(qp, s, &bad);
	if (*err == 0)
		return -1;
	return bad ? (int)(bad - s) : 0;
}

int app_post_recv(struct ibv_qp *qp, struct app_wr *wrs, int n, struct ibv_recv_wr *s, int *err) {
	for (int i = 0; i < n; i++) {
		s[i].wr_id = wrs[i].id;
		s[i].sg_list = wrs[i].sge;
		s[i].num_sge = wrs[i].num_sge;
		s[i].next = i + 1 < n ? &s[i + 1] : NULL;
	}
	struct ibv_recv_wr *bad = NULL;
	*err = ibv_post_recv(qp, s, &bad);
	if (*err == 0)
		return -1;
	return bad ? (int)(bad - s) : 0;
}

struct ibv_ah *app_create_ah(struct ibv_pd *pd, struct app_qp_attr *a) {
	struct ibv_ah_attr ah;
	fill_ah(&ah, a);
	return ibv_create_ah(pd, &ah);
}

// app_wait_cq blocks until the channel's CQ has an event, acknowledges it and
// re-arms the CQ. It returns 0, or -errno when the channel is gone.
int app_wait_cq(struct ibv_comp_channel *ch) {
	struct ibv_cq *cq;
	void *ctx;
	if (ibv_get_cq_event(ch, &cq, &ctx))
		return -errno;
	ibv_ack_cq_events(cq, 1);
	if (ibv_req_notify_cq(cq, 0))
		return -errno;
	return 0;
}

// app_get_async_event waits up to timeout_ms for an asynchronous event on the
// context's async fd (made non-blocking), acknowledges it and flattens its
// union. It returns 1 with an event, 0 on timeout, or -errno.
int app_get_async_event(struct ibv_context *ctx, int timeout_ms, struct app_async_event *out) {
	int fl = fcntl(ctx->async_fd, F_GETFL);
	if (fl >= 0 && !(fl & O_NONBLOCK))
		fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
	int rc = poll(&p, 1, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : -errno;
	if (rc == 0)
		return 0;
	struct ibv_async_event ev;
	if (ibv_get_async_event(ctx, &ev))
		return errno == EAGAIN ? 0 : -errno;
	memset(out, 0, sizeof *out);
	out->type = ev.event_type;
	switch (ev.event_type) {
	case IBV_EVENT_CQ_ERR:
		out->cq = ev.element.cq;
		break;
	case IBV_EVENT_PORT_ACTIVE: case IBV_EVENT_PORT_ERR: case IBV_EVENT_LID_CHANGE: case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE: case IBV_EVENT_CLIENT_REREGISTER: case IBV_EVENT_GID_CHANGE:
		out->port = ev.element.port_num;
		break;
	case IBV_EVENT_DEVICE_FATAL: case IBV_EVENT_SRQ_ERR: case IBV_EVENT_SRQ_LIMIT_REACHED: case IBV_EVENT_WQ_FATAL:
		break;
	default:
		if (ev.element.qp)
			out->qpn = ev.element.qp->qp_num;
	}
	ibv_ack_async_event(&ev);
	return 1;
}
