/* rvx/sys/compiler.h: attributes, branch hints, barriers named by what they order, byte order.
 *
 * Everything here compiles as C11 and as C++17; rvx's headers use only these spellings. */
#ifndef RVX_SYS_COMPILER_H
#define RVX_SYS_COMPILER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RVX_INLINE      static inline __attribute__((always_inline))
#define RVX_NOINLINE    __attribute__((noinline))
/* Error handling, connection set-up, queue-full: out of line so the hot path keeps its registers. */
#define RVX_COLD        static __attribute__((cold, noinline, unused))
#define RVX_UNUSED      __attribute__((unused))
#define RVX_LIKELY(x)   __builtin_expect(!!(x), 1)
#define RVX_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* A branch whose code belongs with the cold code, even where it holds a compiler barrier (which
 * would otherwise keep it among the hot blocks, and the registers arranged for it). */
#if defined(__clang__) ? __clang_major__ >= 11 : __GNUC__ >= 9
#define RVX_COLD_BRANCH(x) __builtin_expect_with_probability(!!(x), 1, 0.0)
#else
#define RVX_COLD_BRANCH(x) RVX_UNLIKELY(x)
#endif
#define RVX_CACHELINE   64
#define RVX_PRINTF(a, b) __attribute__((format(printf, a, b)))

#ifdef __cplusplus
#define RVX_ALIGNAS(n)        alignas(n)
#define RVX_STATIC_ASSERT(c, m) static_assert(c, m)
#define RVX_CAST(T, v)        static_cast<T>(v)
#define RVX_RESTRICT          __restrict__
#else
#define RVX_ALIGNAS(n)        _Alignas(n)
#define RVX_STATIC_ASSERT(c, m) _Static_assert(c, m)
#define RVX_CAST(T, v)        ((T)(v))
#define RVX_RESTRICT          restrict
#endif

/* Eight bytes from any address: one load, no alignment assumed. */
static inline uint64_t rvx__load_u64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* Pointer to the enclosing struct of a member (the tl hands the protocols its own ep type). */
#define RVX_CONTAINER_OF(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ---- barriers, named by the ordering they provide ---------------------------------------- */

/* Keep the compiler from moving memory accesses across this point; emits nothing. */
#define rvx_compiler_barrier() __asm__ __volatile__("" ::: "memory")

/* Payload stores become visible to another process before the store that publishes them. */
#define rvx_store_release_u64(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define rvx_store_release_u32(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
/* A flag or index read from another process is read before the data it guards. */
#define rvx_load_acquire_u64(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define rvx_load_acquire_u32(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
/* All earlier stores are ordered before later ones as seen by other processes (a put flush). */
#define rvx_release_fence() __atomic_thread_fence(__ATOMIC_RELEASE)

/* WQE stores in write-back memory reach the device before the doorbell record says they exist
 * (x86-64: a compiler barrier suffices; other architectures need a store barrier). */
#if defined(__x86_64__) || defined(__i386__)
#define rvx_to_device_barrier()   rvx_compiler_barrier()
#define rvx_from_device_barrier() __asm__ __volatile__("lfence" ::: "memory")
#define rvx_wc_start()            __asm__ __volatile__("sfence" ::: "memory")
#define rvx_wc_flush()            __asm__ __volatile__("sfence" ::: "memory")
#define rvx_cpu_relax()           __asm__ __volatile__("pause" ::: "memory")
#elif defined(__aarch64__)
#define rvx_to_device_barrier()   __asm__ __volatile__("dmb oshst" ::: "memory")
#define rvx_from_device_barrier() __asm__ __volatile__("dmb oshld" ::: "memory")
#define rvx_wc_start()            __asm__ __volatile__("dsb st" ::: "memory")
#define rvx_wc_flush()            __asm__ __volatile__("dsb st" ::: "memory")
#define rvx_cpu_relax()           __asm__ __volatile__("yield" ::: "memory")
#else
#define rvx_to_device_barrier()   __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define rvx_from_device_barrier() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define rvx_wc_start()            __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define rvx_wc_flush()            __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define rvx_cpu_relax()           rvx_compiler_barrier()
#endif

/* ---- byte order: NIC structures are big-endian ------------------------------------------- */
RVX_INLINE uint16_t rvx_htobe16(uint16_t v) { return __builtin_bswap16(v); }
RVX_INLINE uint32_t rvx_htobe32(uint32_t v) { return __builtin_bswap32(v); }
RVX_INLINE uint64_t rvx_htobe64(uint64_t v) { return __builtin_bswap64(v); }
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rvx: only little-endian hosts are supported (x86-64, aarch64)"
#endif

RVX_INLINE int rvx_is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

#endif /* RVX_SYS_COMPILER_H */
