/* rvx/sys/mem.h: large memory that the adapter will pin: its huge-page hint and its mapping. */
#ifndef RVX_SYS_MEM_H
#define RVX_SYS_MEM_H

#include <sys/mman.h>

/* In a large buffer (receive buffers, bounce rings, OpenSHMEM's heap) every whole 2 MiB page is
 * asked for as a transparent huge page: registration pins every page, and one 2 MiB entry instead
 * of 512 makes faulting them in, the adapter's translation and unmapping them that much cheaper.
 * The buffer keeps its own alignment (aligning it to 2 MiB would reserve up to 2 MiB more); its
 * ends stay in small pages. A hint: THP may be off. */
#define RVX__HUGE_PAGE ((uintptr_t)2 << 20)

static inline void rvx__huge_hint(void *p, size_t len)
{
    uintptr_t lo = ((uintptr_t)p + RVX__HUGE_PAGE - 1) & ~(RVX__HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + len) & ~(RVX__HUGE_PAGE - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

/* Large zeroed memory straight from the kernel (anonymous pages, with the hint above): no page
 * is touched before its first use, so a buffer mostly idle costs neither the zeroing nor, at
 * the end, the freeing of its pages (registration alone touches none on rvxsim); and valgrind
 * takes it as defined, as it is, which a buffer the NIC writes behind its back needs. NULL on
 * failure. Given back with rvx__unmap and the same length. */
static inline void *rvx__map(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    rvx__huge_hint(p, len);
    return p;
}

static inline void rvx__unmap(void *p, size_t len)
{
    if (p) (void)munmap(p, len);
}

#endif /* RVX_SYS_MEM_H */
