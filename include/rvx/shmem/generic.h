/* rvx/shmem/generic.h: the C11 generic interfaces (shmem_put, shmem_atomic_fetch_add, ...),
 * selected by the type the destination points to (qualifiers dropped) and by the number of
 * arguments (with or without a context first). C only: C++ has no _Generic. */
#ifndef RVX_SHMEM_GENERIC_H
#define RVX_SHMEM_GENERIC_H

#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L

/* distinct C types per table (the fixed-width types are among them); X(TYPE, NAME, P, S) */
#define RVX__SH_G_RMA(X, P, S)                                                                     \
    X(float, float, P, S) X(double, double, P, S) X(long double, longdouble, P, S)                 \
    X(char, char, P, S) X(signed char, schar, P, S) X(short, short, P, S) X(int, int, P, S)        \
    X(long, long, P, S) X(long long, longlong, P, S) X(unsigned char, uchar, P, S)                 \
    X(unsigned short, ushort, P, S) X(unsigned int, uint, P, S) X(unsigned long, ulong, P, S)      \
    X(unsigned long long, ulonglong, P, S)
#define RVX__SH_G_AMO(X, P, S)                                                                     \
    X(int, int, P, S) X(long, long, P, S) X(long long, longlong, P, S)                             \
    X(unsigned int, uint, P, S) X(unsigned long, ulong, P, S) X(unsigned long long, ulonglong, P, S)
#define RVX__SH_G_EXT(X, P, S) RVX__SH_G_AMO(X, P, S) X(float, float, P, S) X(double, double, P, S)
#define RVX__SH_G_BIT(X, P, S)                                                                     \
    X(unsigned int, uint, P, S) X(unsigned long, ulong, P, S) X(unsigned long long, ulonglong, P, S) \
    X(int, int32, P, S) X(long, int64, P, S)
#define RVX__SH_G_P2P(X, P, S)                                                                     \
    X(short, short, P, S) X(int, int, P, S) X(long, long, P, S) X(long long, longlong, P, S)       \
    X(unsigned short, ushort, P, S) X(unsigned int, uint, P, S) X(unsigned long, ulong, P, S)      \
    X(unsigned long long, ulonglong, P, S)
#define RVX__SH_G_MINMAX(X, P, S)                                                                  \
    X(char, char, P, S) X(signed char, schar, P, S) X(short, short, P, S) X(int, int, P, S)        \
    X(long, long, P, S) X(long long, longlong, P, S) X(unsigned char, uchar, P, S)                 \
    X(unsigned short, ushort, P, S) X(unsigned int, uint, P, S) X(unsigned long, ulong, P, S)      \
    X(unsigned long long, ulonglong, P, S) X(float, float, P, S) X(double, double, P, S)           \
    X(long double, longdouble, P, S)
#define RVX__SH_G_RBIT(X, P, S)                                                                    \
    X(unsigned char, uchar, P, S) X(unsigned short, ushort, P, S) X(unsigned int, uint, P, S)      \
    X(unsigned long, ulong, P, S) X(unsigned long long, ulonglong, P, S)                           \
    X(signed char, int8, P, S) X(short, int16, P, S) X(int, int32, P, S) X(long, int64, P, S)

/* A type with no routine: the call does not compile. */
extern void rvx__sh_generic_bad(void)
    __attribute__((error("no OpenSHMEM routine of this name for this type")));

#define RVX__SH_GENT(T, N, P, S) T: P##N##S,
#define RVX__SH_GSEL(TAB, x, P, S) _Generic((x), TAB(RVX__SH_GENT, P, S) default: rvx__sh_generic_bad)

#define RVX__SH_NARG(...) RVX__SH_NARG_(__VA_ARGS__, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define RVX__SH_NARG_(_1, _2, _3, _4, _5, _6, _7, _8, _9, N, ...) N
#define RVX__SH_CAT(a, b) RVX__SH_CAT_(a, b)
#define RVX__SH_CAT_(a, b) a##b
#define RVX__SH_DISPATCH(name, ...) RVX__SH_CAT(name, RVX__SH_NARG(__VA_ARGS__))(__VA_ARGS__)

/* RMA: (dest, ...) or (ctx, dest, ...) */
#define RVX__SH_G1(TAB, S, x, ...) RVX__SH_GSEL(TAB, *(x), shmem_, S)(x, __VA_ARGS__)
#define RVX__SH_G2(TAB, S, c, x, ...) RVX__SH_GSEL(TAB, *(x), shmem_ctx_, S)(c, x, __VA_ARGS__)

#define rvx__sh_gput4(...) RVX__SH_G1(RVX__SH_G_RMA, _put, __VA_ARGS__)
#define rvx__sh_gput5(...) RVX__SH_G2(RVX__SH_G_RMA, _put, __VA_ARGS__)
#define shmem_put(...) RVX__SH_DISPATCH(rvx__sh_gput, __VA_ARGS__)
#define rvx__sh_gget4(...) RVX__SH_G1(RVX__SH_G_RMA, _get, __VA_ARGS__)
#define rvx__sh_gget5(...) RVX__SH_G2(RVX__SH_G_RMA, _get, __VA_ARGS__)
#define shmem_get(...) RVX__SH_DISPATCH(rvx__sh_gget, __VA_ARGS__)
#define rvx__sh_gputn4(...) RVX__SH_G1(RVX__SH_G_RMA, _put_nbi, __VA_ARGS__)
#define rvx__sh_gputn5(...) RVX__SH_G2(RVX__SH_G_RMA, _put_nbi, __VA_ARGS__)
#define shmem_put_nbi(...) RVX__SH_DISPATCH(rvx__sh_gputn, __VA_ARGS__)
#define rvx__sh_ggetn4(...) RVX__SH_G1(RVX__SH_G_RMA, _get_nbi, __VA_ARGS__)
#define rvx__sh_ggetn5(...) RVX__SH_G2(RVX__SH_G_RMA, _get_nbi, __VA_ARGS__)
#define shmem_get_nbi(...) RVX__SH_DISPATCH(rvx__sh_ggetn, __VA_ARGS__)
#define rvx__sh_gp3(...) RVX__SH_G1(RVX__SH_G_RMA, _p, __VA_ARGS__)
#define rvx__sh_gp4(...) RVX__SH_G2(RVX__SH_G_RMA, _p, __VA_ARGS__)
#define shmem_p(...) RVX__SH_DISPATCH(rvx__sh_gp, __VA_ARGS__)
#define rvx__sh_gg2(...) RVX__SH_G1(RVX__SH_G_RMA, _g, __VA_ARGS__)
#define rvx__sh_gg3(...) RVX__SH_G2(RVX__SH_G_RMA, _g, __VA_ARGS__)
#define shmem_g(...) RVX__SH_DISPATCH(rvx__sh_gg, __VA_ARGS__)
#define rvx__sh_giput6(...) RVX__SH_G1(RVX__SH_G_RMA, _iput, __VA_ARGS__)
#define rvx__sh_giput7(...) RVX__SH_G2(RVX__SH_G_RMA, _iput, __VA_ARGS__)
#define shmem_iput(...) RVX__SH_DISPATCH(rvx__sh_giput, __VA_ARGS__)
#define rvx__sh_giget6(...) RVX__SH_G1(RVX__SH_G_RMA, _iget, __VA_ARGS__)
#define rvx__sh_giget7(...) RVX__SH_G2(RVX__SH_G_RMA, _iget, __VA_ARGS__)
#define shmem_iget(...) RVX__SH_DISPATCH(rvx__sh_giget, __VA_ARGS__)
#define rvx__sh_gps7(...) RVX__SH_G1(RVX__SH_G_RMA, _put_signal, __VA_ARGS__)
#define rvx__sh_gps8(...) RVX__SH_G2(RVX__SH_G_RMA, _put_signal, __VA_ARGS__)
#define shmem_put_signal(...) RVX__SH_DISPATCH(rvx__sh_gps, __VA_ARGS__)
#define rvx__sh_gpsn7(...) RVX__SH_G1(RVX__SH_G_RMA, _put_signal_nbi, __VA_ARGS__)
#define rvx__sh_gpsn8(...) RVX__SH_G2(RVX__SH_G_RMA, _put_signal_nbi, __VA_ARGS__)
#define shmem_put_signal_nbi(...) RVX__SH_DISPATCH(rvx__sh_gpsn, __VA_ARGS__)

/* AMOs */
#define rvx__sh_gaf2(...) RVX__SH_G1(RVX__SH_G_EXT, _atomic_fetch, __VA_ARGS__)
#define rvx__sh_gaf3(...) RVX__SH_G2(RVX__SH_G_EXT, _atomic_fetch, __VA_ARGS__)
#define shmem_atomic_fetch(...) RVX__SH_DISPATCH(rvx__sh_gaf, __VA_ARGS__)
#define rvx__sh_gas3(...) RVX__SH_G1(RVX__SH_G_EXT, _atomic_set, __VA_ARGS__)
#define rvx__sh_gas4(...) RVX__SH_G2(RVX__SH_G_EXT, _atomic_set, __VA_ARGS__)
#define shmem_atomic_set(...) RVX__SH_DISPATCH(rvx__sh_gas, __VA_ARGS__)
#define rvx__sh_gasw3(...) RVX__SH_G1(RVX__SH_G_EXT, _atomic_swap, __VA_ARGS__)
#define rvx__sh_gasw4(...) RVX__SH_G2(RVX__SH_G_EXT, _atomic_swap, __VA_ARGS__)
#define shmem_atomic_swap(...) RVX__SH_DISPATCH(rvx__sh_gasw, __VA_ARGS__)
#define rvx__sh_gacs4(...) RVX__SH_G1(RVX__SH_G_AMO, _atomic_compare_swap, __VA_ARGS__)
#define rvx__sh_gacs5(...) RVX__SH_G2(RVX__SH_G_AMO, _atomic_compare_swap, __VA_ARGS__)
#define shmem_atomic_compare_swap(...) RVX__SH_DISPATCH(rvx__sh_gacs, __VA_ARGS__)
#define rvx__sh_gafi2(...) RVX__SH_G1(RVX__SH_G_AMO, _atomic_fetch_inc, __VA_ARGS__)
#define rvx__sh_gafi3(...) RVX__SH_G2(RVX__SH_G_AMO, _atomic_fetch_inc, __VA_ARGS__)
#define shmem_atomic_fetch_inc(...) RVX__SH_DISPATCH(rvx__sh_gafi, __VA_ARGS__)
#define rvx__sh_gai2(...) RVX__SH_G1(RVX__SH_G_AMO, _atomic_inc, __VA_ARGS__)
#define rvx__sh_gai3(...) RVX__SH_G2(RVX__SH_G_AMO, _atomic_inc, __VA_ARGS__)
#define shmem_atomic_inc(...) RVX__SH_DISPATCH(rvx__sh_gai, __VA_ARGS__)
#define rvx__sh_gafa3(...) RVX__SH_G1(RVX__SH_G_AMO, _atomic_fetch_add, __VA_ARGS__)
#define rvx__sh_gafa4(...) RVX__SH_G2(RVX__SH_G_AMO, _atomic_fetch_add, __VA_ARGS__)
#define shmem_atomic_fetch_add(...) RVX__SH_DISPATCH(rvx__sh_gafa, __VA_ARGS__)
#define rvx__sh_gaa3(...) RVX__SH_G1(RVX__SH_G_AMO, _atomic_add, __VA_ARGS__)
#define rvx__sh_gaa4(...) RVX__SH_G2(RVX__SH_G_AMO, _atomic_add, __VA_ARGS__)
#define shmem_atomic_add(...) RVX__SH_DISPATCH(rvx__sh_gaa, __VA_ARGS__)
#define rvx__sh_gafand3(...) RVX__SH_G1(RVX__SH_G_BIT, _atomic_fetch_and, __VA_ARGS__)
#define rvx__sh_gafand4(...) RVX__SH_G2(RVX__SH_G_BIT, _atomic_fetch_and, __VA_ARGS__)
#define shmem_atomic_fetch_and(...) RVX__SH_DISPATCH(rvx__sh_gafand, __VA_ARGS__)
#define rvx__sh_gaand3(...) RVX__SH_G1(RVX__SH_G_BIT, _atomic_and, __VA_ARGS__)
#define rvx__sh_gaand4(...) RVX__SH_G2(RVX__SH_G_BIT, _atomic_and, __VA_ARGS__)
#define shmem_atomic_and(...) RVX__SH_DISPATCH(rvx__sh_gaand, __VA_ARGS__)
#define rvx__sh_gafor3(...) RVX__SH_G1(RVX__SH_G_BIT, _atomic_fetch_or, __VA_ARGS__)
#define rvx__sh_gafor4(...) RVX__SH_G2(RVX__SH_G_BIT, _atomic_fetch_or, __VA_ARGS__)
#define shmem_atomic_fetch_or(...) RVX__SH_DISPATCH(rvx__sh_gafor, __VA_ARGS__)
#define rvx__sh_gaor3(...) RVX__SH_G1(RVX__SH_G_BIT, _atomic_or, __VA_ARGS__)
#define rvx__sh_gaor4(...) RVX__SH_G2(RVX__SH_G_BIT, _atomic_or, __VA_ARGS__)
#define shmem_atomic_or(...) RVX__SH_DISPATCH(rvx__sh_gaor, __VA_ARGS__)
#define rvx__sh_gafxor3(...) RVX__SH_G1(RVX__SH_G_BIT, _atomic_fetch_xor, __VA_ARGS__)
#define rvx__sh_gafxor4(...) RVX__SH_G2(RVX__SH_G_BIT, _atomic_fetch_xor, __VA_ARGS__)
#define shmem_atomic_fetch_xor(...) RVX__SH_DISPATCH(rvx__sh_gafxor, __VA_ARGS__)
#define rvx__sh_gaxor3(...) RVX__SH_G1(RVX__SH_G_BIT, _atomic_xor, __VA_ARGS__)
#define rvx__sh_gaxor4(...) RVX__SH_G2(RVX__SH_G_BIT, _atomic_xor, __VA_ARGS__)
#define shmem_atomic_xor(...) RVX__SH_DISPATCH(rvx__sh_gaxor, __VA_ARGS__)
/* the nbi fetching forms: (fetch, dest, ...) or (ctx, fetch, dest, ...), selected by dest */
#define RVX__SH_GN1(TAB, S, f, x, ...) RVX__SH_GSEL(TAB, *(x), shmem_, S)(f, x, __VA_ARGS__)
#define RVX__SH_GN2(TAB, S, c, f, x, ...) RVX__SH_GSEL(TAB, *(x), shmem_ctx_, S)(c, f, x, __VA_ARGS__)
#define rvx__sh_gafan4(...) RVX__SH_GN1(RVX__SH_G_AMO, _atomic_fetch_add_nbi, __VA_ARGS__)
#define rvx__sh_gafan5(...) RVX__SH_GN2(RVX__SH_G_AMO, _atomic_fetch_add_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_add_nbi(...) RVX__SH_DISPATCH(rvx__sh_gafan, __VA_ARGS__)
#define rvx__sh_gacsn5(...) RVX__SH_GN1(RVX__SH_G_AMO, _atomic_compare_swap_nbi, __VA_ARGS__)
#define rvx__sh_gacsn6(...) RVX__SH_GN2(RVX__SH_G_AMO, _atomic_compare_swap_nbi, __VA_ARGS__)
#define shmem_atomic_compare_swap_nbi(...) RVX__SH_DISPATCH(rvx__sh_gacsn, __VA_ARGS__)
#define rvx__sh_gaswn4(...) RVX__SH_GN1(RVX__SH_G_EXT, _atomic_swap_nbi, __VA_ARGS__)
#define rvx__sh_gaswn5(...) RVX__SH_GN2(RVX__SH_G_EXT, _atomic_swap_nbi, __VA_ARGS__)
#define shmem_atomic_swap_nbi(...) RVX__SH_DISPATCH(rvx__sh_gaswn, __VA_ARGS__)

#define rvx__sh_gafn3(...) RVX__SH_GN1(RVX__SH_G_EXT, _atomic_fetch_nbi, __VA_ARGS__)
#define rvx__sh_gafn4(...) RVX__SH_GN2(RVX__SH_G_EXT, _atomic_fetch_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_nbi(...) RVX__SH_DISPATCH(rvx__sh_gafn, __VA_ARGS__)
#define rvx__sh_gafin3(...) RVX__SH_GN1(RVX__SH_G_AMO, _atomic_fetch_inc_nbi, __VA_ARGS__)
#define rvx__sh_gafin4(...) RVX__SH_GN2(RVX__SH_G_AMO, _atomic_fetch_inc_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_inc_nbi(...) RVX__SH_DISPATCH(rvx__sh_gafin, __VA_ARGS__)
#define rvx__sh_gafandn4(...) RVX__SH_GN1(RVX__SH_G_BIT, _atomic_fetch_and_nbi, __VA_ARGS__)
#define rvx__sh_gafandn5(...) RVX__SH_GN2(RVX__SH_G_BIT, _atomic_fetch_and_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_and_nbi(...) RVX__SH_DISPATCH(rvx__sh_gafandn, __VA_ARGS__)
#define rvx__sh_gafsorn4(...) RVX__SH_GN1(RVX__SH_G_BIT, _atomic_fetch_or_nbi, __VA_ARGS__)
#define rvx__sh_gafsorn5(...) RVX__SH_GN2(RVX__SH_G_BIT, _atomic_fetch_or_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_or_nbi(...) RVX__SH_DISPATCH(rvx__sh_gafsorn, __VA_ARGS__)
#define rvx__sh_gafxorn4(...) RVX__SH_GN1(RVX__SH_G_BIT, _atomic_fetch_xor_nbi, __VA_ARGS__)
#define rvx__sh_gafxorn5(...) RVX__SH_GN2(RVX__SH_G_BIT, _atomic_fetch_xor_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_xor_nbi(...) RVX__SH_DISPATCH(rvx__sh_gafxorn, __VA_ARGS__)

/* point-to-point synchronization: (ivar(s), ...) */
#define RVX__SH_GW(TAB, S, x, ...) RVX__SH_GSEL(TAB, *(x), shmem_, S)(x, __VA_ARGS__)
#define shmem_wait_until(...) RVX__SH_GW(RVX__SH_G_P2P, _wait_until, __VA_ARGS__)
#define shmem_test(...) RVX__SH_GW(RVX__SH_G_P2P, _test, __VA_ARGS__)
#define shmem_wait_until_all(...) RVX__SH_GW(RVX__SH_G_P2P, _wait_until_all, __VA_ARGS__)
#define shmem_wait_until_any(...) RVX__SH_GW(RVX__SH_G_P2P, _wait_until_any, __VA_ARGS__)
#define shmem_wait_until_some(...) RVX__SH_GW(RVX__SH_G_P2P, _wait_until_some, __VA_ARGS__)
#define shmem_test_all(...) RVX__SH_GW(RVX__SH_G_P2P, _test_all, __VA_ARGS__)
#define shmem_test_any(...) RVX__SH_GW(RVX__SH_G_P2P, _test_any, __VA_ARGS__)
#define shmem_test_some(...) RVX__SH_GW(RVX__SH_G_P2P, _test_some, __VA_ARGS__)
#define shmem_wait_until_all_vector(...) RVX__SH_GW(RVX__SH_G_P2P, _wait_until_all_vector, __VA_ARGS__)
#define shmem_wait_until_any_vector(...) RVX__SH_GW(RVX__SH_G_P2P, _wait_until_any_vector, __VA_ARGS__)
#define shmem_wait_until_some_vector(...) RVX__SH_GW(RVX__SH_G_P2P, _wait_until_some_vector, __VA_ARGS__)
#define shmem_test_all_vector(...) RVX__SH_GW(RVX__SH_G_P2P, _test_all_vector, __VA_ARGS__)
#define shmem_test_any_vector(...) RVX__SH_GW(RVX__SH_G_P2P, _test_any_vector, __VA_ARGS__)
#define shmem_test_some_vector(...) RVX__SH_GW(RVX__SH_G_P2P, _test_some_vector, __VA_ARGS__)

/* collectives on teams: (team, dest, ...) */
#define RVX__SH_GT(TAB, S, t, x, ...) RVX__SH_GSEL(TAB, *(x), shmem_, S)(t, x, __VA_ARGS__)
#define shmem_broadcast(...) RVX__SH_GT(RVX__SH_G_RMA, _broadcast, __VA_ARGS__)
#define shmem_collect(...) RVX__SH_GT(RVX__SH_G_RMA, _collect, __VA_ARGS__)
#define shmem_fcollect(...) RVX__SH_GT(RVX__SH_G_RMA, _fcollect, __VA_ARGS__)
#define shmem_alltoall(...) RVX__SH_GT(RVX__SH_G_RMA, _alltoall, __VA_ARGS__)
#define shmem_alltoalls(...) RVX__SH_GT(RVX__SH_G_RMA, _alltoalls, __VA_ARGS__)
#define shmem_and_reduce(...) RVX__SH_GT(RVX__SH_G_RBIT, _and_reduce, __VA_ARGS__)
#define shmem_or_reduce(...) RVX__SH_GT(RVX__SH_G_RBIT, _or_reduce, __VA_ARGS__)
#define shmem_xor_reduce(...) RVX__SH_GT(RVX__SH_G_RBIT, _xor_reduce, __VA_ARGS__)
#define shmem_max_reduce(...) RVX__SH_GT(RVX__SH_G_MINMAX, _max_reduce, __VA_ARGS__)
#define shmem_min_reduce(...) RVX__SH_GT(RVX__SH_G_MINMAX, _min_reduce, __VA_ARGS__)
#define shmem_sum_reduce(...) RVX__SH_GT(RVX__SH_G_MINMAX, _sum_reduce, __VA_ARGS__)
#define shmem_prod_reduce(...) RVX__SH_GT(RVX__SH_G_MINMAX, _prod_reduce, __VA_ARGS__)

#endif /* C11 */
#endif /* RVX_SHMEM_GENERIC_H */
