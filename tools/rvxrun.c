/* rvxrun: start N processes of an rvx program on this machine.
 *
 *   rvxrun -n N [--nodes K] [-t SECONDS] [-g SECONDS] [-q] [--] program [args...]
 *   rvxrun --help
 *
 * Each process gets RVX_RANK, RVX_SIZE and RVX_BOOT_DIR (a fresh private directory in $TMPDIR, else
 * in /dev/shm, else in /tmp, removed at the end). --nodes K (1..N) runs the job as K emulated
 * nodes of consecutive ranks: rank r gets RVX_NODE = r * K / N, its index among its node's ranks
 * RVX_LOCAL_RANK and their number RVX_LOCAL_SIZE, and every rank RVX_NODES = K, so a build that
 * pairs shared memory with the network sends between "nodes" through the network (rvxsim here).
 * RVXRUN_NODES=K in rvxrun's environment is a default for --nodes (so a test that starts itself
 * under rvxrun can be run as K nodes from outside). Without either, RVX_NODE, RVX_NODES,
 * RVX_LOCAL_RANK and RVX_LOCAL_SIZE are passed on as the caller set them. rvxrun waits for all of
 * them and exits with the first non-zero status. When a rank fails
 * (non-zero exit or a signal), the others get -g seconds (default 10) to finish on their own, then
 * SIGTERM, then SIGKILL. -t bounds the whole job: after that many seconds everything is killed and
 * rvxrun exits with 124. SIGINT and SIGTERM are passed on to the ranks. */
#define _GNU_SOURCE 1
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pid_t *pids;
static int nranks;
static volatile sig_atomic_t got_signal;

static void on_signal(int sig) { got_signal = sig; }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void kill_all(int sig)
{
    for (int r = 0; r < nranks; r++)
        if (pids[r] > 0) kill(pids[r], sig);
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    if (!d) return;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static void usage(FILE *to, int status)
{
    fprintf(to, "usage: rvxrun -n N [--nodes K] [-t timeout_s] [-g grace_s] [-q] [--] program [args...]\n"
                "  -n N       start N ranks of program, each with RVX_RANK, RVX_SIZE and RVX_BOOT_DIR\n"
                "  --nodes K  run the N ranks as K emulated nodes (1 <= K <= N): rank r gets\n"
                "             RVX_NODE=r*K/N, RVX_LOCAL_RANK and RVX_LOCAL_SIZE (its place\n"
                "             on that node), all get RVX_NODES=K (default: RVXRUN_NODES)\n"
                "  -t S       kill every rank after S seconds and exit 124\n"
                "  -g S       after a rank fails, give the others S seconds (default 10)\n"
                "  -q         do not report failing ranks\n"
                "  -h, --help this text\n");
    exit(status);
}

int main(int argc, char **argv)
{
    double timeout = 0, grace = 10, deadline = 0, fail_at = 0;
    int opt, quiet = 0, status_out = 0, left, termed = 0, nodes = 0;
    static const struct option longopts[] = {{"nodes", required_argument, NULL, 'N'},
                                                {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    char dir[] = "/tmp/rvx-boot-XXXXXX", num[32];
    const char *tmp = getenv("TMPDIR");
    char dirbuf[4096];
    struct sigaction sa;

    while ((opt = getopt_long(argc, argv, "+n:t:g:qh", longopts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 'n': nranks = (int)strtol(optarg, &end, 10); if (*end || nranks < 1) usage(stderr, 2); break;
        case 'N':
            nodes = (int)strtol(optarg, &end, 10);
            if (*end || !*optarg || nodes < 1) {
                fprintf(stderr, "rvxrun: --nodes takes a number of nodes, 1 to N\n");
                usage(stderr, 2);
            }
            break;
        case 't': timeout = strtod(optarg, &end); if (*end || timeout < 0) usage(stderr, 2); break;
        case 'g': grace = strtod(optarg, &end); if (*end || grace < 0) usage(stderr, 2); break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout, 0); break;
        default: usage(stderr, 2);
        }
    }
    if (!nranks || optind >= argc) usage(stderr, 2);
    if (!nodes && getenv("RVXRUN_NODES") && *getenv("RVXRUN_NODES")) {
        char *end;
        nodes = (int)strtol(getenv("RVXRUN_NODES"), &end, 10);
        if (*end || nodes < 1) {
            fprintf(stderr, "rvxrun: RVXRUN_NODES=%s is not a number of nodes, 1 to N\n",
                    getenv("RVXRUN_NODES"));
            usage(stderr, 2);
        }
    }
    if (nodes > nranks) {
        fprintf(stderr, "rvxrun: --nodes (or RVXRUN_NODES) %d is more nodes than ranks (-n %d): "
                "each node runs at least one rank\n", nodes, nranks);
        usage(stderr, 2);
    }

    /* TMPDIR if set, else /dev/shm where it is a directory we may write (each collective of the
     * bootstrap creates a file per rank: on a disk's file system that took a quarter of the CPU
     * while 16 of 32 ranks destroyed their workers), else /tmp */
    if (tmp && *tmp && strlen(tmp) < 4000) snprintf(dirbuf, sizeof(dirbuf), "%s/rvx-boot-XXXXXX", tmp);
    else if (access("/dev/shm", W_OK | X_OK) == 0) snprintf(dirbuf, sizeof(dirbuf), "/dev/shm/rvx-boot-XXXXXX");
    else snprintf(dirbuf, sizeof(dirbuf), "%s", dir);
    if (!mkdtemp(dirbuf)) { perror("rvxrun: mkdtemp"); return 1; }

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    pids = calloc((size_t)nranks, sizeof(*pids));
    snprintf(num, sizeof(num), "%d", nranks);
    setenv("RVX_SIZE", num, 1);
    setenv("RVX_BOOT_DIR", dirbuf, 1);
    if (nodes) {
        snprintf(num, sizeof(num), "%d", nodes);
        setenv("RVX_NODES", num, 1);
    }
    for (int r = 0; r < nranks; r++) {
        pid_t pid = fork();
        if (pid < 0) { perror("rvxrun: fork"); kill_all(SIGKILL); return 1; }
        if (pid == 0) {
            snprintf(num, sizeof(num), "%d", r);
            setenv("RVX_RANK", num, 1);
            if (nodes) { /* blocks of consecutive ranks, as a launcher fills one node, then the next */
                long node = (long)r * nodes / nranks;
                /* the node's first rank is the least r with r * nodes / nranks == node */
                long first = (node * nranks + nodes - 1) / nodes;
                long next = ((node + 1) * nranks + nodes - 1) / nodes;
                snprintf(num, sizeof(num), "%ld", node);
                setenv("RVX_NODE", num, 1);
                snprintf(num, sizeof(num), "%ld", r - first);
                setenv("RVX_LOCAL_RANK", num, 1);
                snprintf(num, sizeof(num), "%ld", next - first);
                setenv("RVX_LOCAL_SIZE", num, 1);
            }
            execvp(argv[optind], argv + optind);
            fprintf(stderr, "rvxrun: cannot run %s: %s\n", argv[optind], strerror(errno));
            _exit(127);
        }
        pids[r] = pid;
    }

    if (timeout > 0) deadline = now() + timeout;
    left = nranks;
    while (left > 0) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid > 0) {
            int r;
            for (r = 0; r < nranks && pids[r] != pid; r++) {}
            if (r == nranks) continue;
            pids[r] = 0;
            left--;
            if (WIFEXITED(st) && WEXITSTATUS(st)) {
                if (!quiet) fprintf(stderr, "rvxrun: rank %d exited with status %d\n", r, WEXITSTATUS(st));
                if (!status_out) status_out = WEXITSTATUS(st);
            } else if (WIFSIGNALED(st)) {
                if (!quiet) fprintf(stderr, "rvxrun: rank %d killed by signal %d (%s)\n", r,
                                    WTERMSIG(st), strsignal(WTERMSIG(st)));
                if (!status_out) status_out = 128 + WTERMSIG(st);
            }
            if (status_out && !fail_at) fail_at = now();
            continue;
        }
        if (got_signal) { kill_all(got_signal); got_signal = 0; }
        if (deadline && now() > deadline) {
            fprintf(stderr, "rvxrun: job exceeded %.0f s; killing %d remaining rank(s)\n", timeout, left);
            kill_all(SIGKILL);
            while (waitpid(-1, NULL, 0) > 0) {}
            remove_dir(dirbuf);
            return 124;
        }
        if (fail_at && now() > fail_at + grace) {
            if (!termed) {
                if (!quiet) fprintf(stderr, "rvxrun: a rank failed; stopping %d remaining rank(s)\n", left);
                kill_all(SIGTERM);
                termed = 1;
            } else if (now() > fail_at + grace + 2) {
                kill_all(SIGKILL);
            }
        }
        usleep(2000);
    }
    remove_dir(dirbuf);
    return status_out;
}
