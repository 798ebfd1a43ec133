/* tests/shmem/f_peer_exit.c: a PE that dies ends the job, never hangs it. PE 1 leaves without
 * shmem_finalize after a barrier; PE 0 waits in shmem_long_wait_until for a flag nobody will set,
 * the others in shmem_barrier_all, which PE 1 never joins. Each must find the failure and end with
 * a line naming the dead PE (tests/t_shmem.sh checks PE 0's line and that the job ends before
 * rvxrun's grace period would stop it). */
#include <shmem.h>
#include <stdio.h>
#include <unistd.h>

static long flag;

int main(void)
{
    int me;
    shmem_init();
    me = shmem_my_pe();
    if (shmem_n_pes() < 2) {
        printf("SKIP: needs 2 or more PEs\n");
        return 77;
    }
    shmem_barrier_all();
    if (me == 1) {
        fflush(NULL);
        _exit(3);
    }
    if (me == 0) shmem_long_wait_until(&flag, SHMEM_CMP_NE, 0);
    else shmem_barrier_all();
    printf("PE %d: the wait returned, which it must not\n", me);
    return 0;
}
