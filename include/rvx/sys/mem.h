/* rvx/sys/mem.h: hints for large memory that the adapter will pin. */
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

#endif /* RVX_SYS_MEM_H */
