/* rvx/tl/mlx5/wait.h: a call that waits for a request of its own (a get, a fetching atomic or a
 * transfer without a request), once for both mlx5 transports: it polls the CQ through the
 * transport's RVX__MLX5_NET(poll_blocking)(ifc) (nonzero: it found something), backing off while
 * nothing comes. Included by rc/send.h and dc/rma.h. */
#ifndef RVX_TL_MLX5_WAIT_H
#define RVX_TL_MLX5_WAIT_H

RVX_COLD rvx_status_t rvx__mlx5_wait_req(RVX__MLX5_NET(iface_t) *ifc, rvx_request_t *req)
{
    unsigned spins = 0;
    while (req->status == RVX_INPROGRESS) {
        if (RVX__MLX5_NET(poll_blocking)(ifc)) spins = 0;
        else rvx__backoff(&spins);
    }
    return (rvx_status_t)req->status;
}

#endif /* RVX_TL_MLX5_WAIT_H */
