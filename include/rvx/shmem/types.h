/* rvx/shmem/types.h: the OpenSHMEM 1.5 type tables, as X-macros X(TYPE, TYPENAME), from which
 * every typed routine is generated. */
#ifndef RVX_SHMEM_TYPES_H
#define RVX_SHMEM_TYPES_H

/* Standard RMA types (spec table 5) */
#define RVX__SH_RMA_TYPES(X)                                                                      \
    X(float, float) X(double, double) X(long double, longdouble) X(char, char)                    \
    X(signed char, schar) X(short, short) X(int, int) X(long, long) X(long long, longlong)        \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint)                       \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16)    \
    X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16)                     \
    X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) X(ptrdiff_t, ptrdiff)

/* Sized RMA: shmem_put8 ... shmem_put128 (X(bits, bytes)) */
#define RVX__SH_SIZES(X) X(8, 1) X(16, 2) X(32, 4) X(64, 8) X(128, 16)

/* Standard AMO types (table 6): every AMO */
#define RVX__SH_AMO_STD(X)                                                                        \
    X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint)                        \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32)                    \
    X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)                     \
    X(ptrdiff_t, ptrdiff)
/* Extended AMO types: fetch, set, swap (standard plus float and double) */
#define RVX__SH_AMO_EXT(X) RVX__SH_AMO_STD(X) X(float, float) X(double, double)
/* Bitwise AMO types: and, or, xor */
#define RVX__SH_AMO_BIT(X)                                                                        \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong)                \
    X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)

/* Point-to-point synchronization types (table 10) */
#define RVX__SH_P2P_TYPES(X)                                                                      \
    X(short, short) X(int, int) X(long, long) X(long long, longlong) X(unsigned short, ushort)     \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong)                \
    X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)                   \
    X(size_t, size) X(ptrdiff_t, ptrdiff)

/* Reduction types (table 11): bitwise (and, or, xor), min/max, sum/prod */
#define RVX__SH_RED_BIT(X)                                                                        \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint)                       \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16)    \
    X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16)                     \
    X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)
#define RVX__SH_RED_MINMAX(X)                                                                     \
    X(char, char) X(signed char, schar) X(short, short) X(int, int) X(long, long)                 \
    X(long long, longlong) X(ptrdiff_t, ptrdiff) X(unsigned char, uchar)                          \
    X(unsigned short, ushort) X(unsigned int, uint) X(unsigned long, ulong)                       \
    X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16) X(int32_t, int32)          \
    X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16) X(uint32_t, uint32)                   \
    X(uint64_t, uint64) X(size_t, size) X(float, float) X(double, double)                         \
    X(long double, longdouble)
#define RVX__SH_RED_ARITH(X)                                                                      \
    RVX__SH_RED_MINMAX(X) X(float _Complex, complexf) X(double _Complex, complexd)

/* The distinct C types the _Generic interfaces select on (fixed-width types are these) */
#define RVX__SH_GEN_TYPES(X)                                                                      \
    X(float, float) X(double, double) X(long double, longdouble) X(char, char)                    \
    X(signed char, schar) X(short, short) X(int, int) X(long, long) X(long long, longlong)        \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint)                       \
    X(unsigned long, ulong) X(unsigned long long, ulonglong)

#endif /* RVX_SHMEM_TYPES_H */
