/* t_debug_tag: an RVX_DEBUG=1 build checks the tag API's arguments as it does put and AM's:
 * a NULL request, endpoint, worker or buffer is RVX_ERR_INVALID_PARAM, not a crash. */
#define RVX_DEBUG 1
#define RVX_TAG 1
#include <rvx/rvx.h>
#include "testlib.h"

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx_request_t req;
    char buf[64];
    int me;

    t_spawn(argc, argv, 2, 60);
    me = t_start(&ctx, &w);
    T_OK(rvx_ep_create(w, 1 - me, &ep));
    T_OK(rvx_barrier(ctx));
    /* receives: the request is required; a buffer unless the length is 0 */
    T_STATUS(rvx_tag_recv(w, buf, sizeof(buf), 1, ~0ull, NULL, NULL), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_tag_recv(w, NULL, sizeof(buf), 1, ~0ull, &req, NULL), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_tag_recv(NULL, buf, sizeof(buf), 1, ~0ull, &req, NULL), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_tag_recv_from(w, 1 - me, buf, sizeof(buf), 1, ~0ull, NULL, NULL), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_tag_recv_from(NULL, 1 - me, buf, sizeof(buf), 1, ~0ull, &req, NULL), RVX_ERR_INVALID_PARAM);
    /* sends: an endpoint, and a buffer unless the length is 0 */
    T_STATUS(rvx_tag_send(NULL, buf, 8, 1, &req), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_tag_send(ep, NULL, 8, 1, &req), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_tag_cancel(w, NULL), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_tag_cancel(NULL, &req), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_tag_probe(NULL, 1, ~0ull, NULL), RVX_ERR_INVALID_PARAM);
    /* nothing was posted or sent: a real exchange still matches first time */
    rvx_request_init(&req);
    T_STATUS(rvx_tag_recv(w, buf, sizeof(buf), 2, ~0ull, &req, NULL), RVX_INPROGRESS);
    T_OK(rvx_barrier(ctx));
    {
        rvx_request_t sreq;
        char msg[8] = "abcdefg";
        rvx_status_t st = rvx_tag_send(ep, msg, 8, 2, &sreq);
        if (st == RVX_INPROGRESS) st = t_wait_req(w, &sreq, "send", 8);
        T_OK(st);
    }
    T_OK(t_wait_req(w, &req, "recv", 8));
    T_CHECK(memcmp(buf, "abcdefg", 8) == 0, "wrong data");
    T_OK(rvx_barrier(ctx));
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return t_exit();
}
