/*
 * test_runtime.c - tensors, views, refcounts, eager ops, errors and
 * out-of-memory handling of the runtime.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "check.h"
#include "ember/alloc.h"
#include "ember/atomic_file.h"
#include "ember/ops.h"
#include "ember/parallel.h"
#include "ember/random.h"
#include "../../runtime/device.h"
#include "../../runtime/kernels.h"

static em_tensor *arange_f32(int64_t n) { return em_arange(0, (double)n, 1, EM_DTYPE_F32); }

/* Reshapes and releases the input (keeps the tests free of temporaries). */
static em_tensor *reshaped(em_tensor *t, const int64_t *shape, int n) {
    em_tensor *r = em_reshape(t, shape, n);
    em_tensor_release(t);
    return r;
}

static float at_f32(const em_tensor *t, int64_t i) { return (float)em_tensor_get_f64(t, i); }

static void test_create_and_release(void) {
    int64_t base = em_tensor_live_count(), sbase = em_storage_live_count();
    int64_t shape[2] = {2, 3};
    em_tensor *t = em_zeros(shape, 2, EM_DTYPE_F32);
    CHECK(t && t->ndim == 2 && t->numel == 6);
    CHECK(t->strides[0] == 3 && t->strides[1] == 1);
    CHECK(em_tensor_is_contiguous(t));
    CHECK(em_tensor_live_count() == base + 1);
    em_tensor_retain(t);
    em_tensor_release(t);
    CHECK(em_tensor_live_count() == base + 1);
    em_tensor_release(t);
    CHECK(em_tensor_live_count() == base);
    CHECK(em_storage_live_count() == sbase);
}

static void test_views_share_storage(void) {
    em_tensor *a = arange_f32(6);
    int64_t s23[2] = {2, 3};
    em_tensor *v = em_view(a, s23, 2);
    CHECK(v && v->storage == a->storage);
    em_tensor *t = em_transpose(v, 0, 1);
    CHECK(t && t->shape[0] == 3 && t->shape[1] == 2 && !em_tensor_is_contiguous(t));
    CHECK(at_f32(t, 1) == 3.0f); /* t[0,1] = v[1,0] */
    /* a transposed tensor cannot be viewed flat, but can be reshaped (a copy) */
    int64_t flat[1] = {-1};
    CHECK(em_view(t, flat, 1) == NULL);
    CHECK_STR_CONTAINS(em_last_error(), "reshape(...)");
    em_tensor *r = em_reshape(t, flat, 1);
    CHECK(r && r->storage != a->storage && r->shape[0] == 6);
    CHECK(at_f32(r, 1) == 3.0f && at_f32(r, 2) == 1.0f);
    em_tensor *c = em_contiguous(v);
    CHECK(c == v); /* already contiguous: the same tensor */
    int64_t e[3] = {4, 2, 3};
    em_tensor *x = em_expand(v, e, 3);
    CHECK(x && x->strides[0] == 0 && x->storage == a->storage);
    em_tensor_release(x);
    em_tensor_release(c);
    em_tensor_release(r);
    em_tensor_release(t);
    em_tensor_release(v);
    em_tensor_release(a);
}

/* em_tensor_from_storage checks geometry that may come from a file: sizes
 * and strides whose products overflow int64 are out of bounds, not views
 * that wrap around to seem to fit (UBSan checks the arithmetic itself). */
static void test_views_of_storage_are_bounded(void) {
    em_storage *s = em_storage_new(em_cpu(), 16); /* four float32s */
    int64_t one[1] = {4}, unit[1] = {1};
    em_tensor *ok = em_tensor_from_storage(s, EM_DTYPE_F32, 0, one, unit, 1);
    CHECK(ok && ok->numel == 4);
    int64_t big[2] = {(int64_t)1 << 40, (int64_t)1 << 40}, zero[2] = {0, 0};
    em_tensor *expanded = em_tensor_from_storage(s, EM_DTYPE_F32, 3, big, zero, 2);
    CHECK(expanded == NULL); /* numel 2^80: no tensor can count it */
    int64_t two[2] = {3, 2}, wrap[2] = {INT64_MAX / 2 + 1, 1};
    CHECK(em_tensor_from_storage(s, EM_DTYPE_F32, 0, two, wrap, 2) == NULL);
    CHECK_STR_CONTAINS(em_last_error(), "view out of bounds");
    int64_t neg[1] = {-(INT64_MAX / 2)}, two1[1] = {3};
    CHECK(em_tensor_from_storage(s, EM_DTYPE_F32, 3, two1, neg, 1) == NULL);
    CHECK(em_tensor_from_storage(s, EM_DTYPE_F32, -1, one, unit, 1) == NULL);
    CHECK(em_tensor_from_storage(s, EM_DTYPE_F32, INT64_MAX, one, unit, 1) == NULL);
    int64_t stride0[2] = {0, 0}, shape0[2] = {1 << 20, 1 << 20};
    em_tensor *view = em_tensor_from_storage(s, EM_DTYPE_F32, 2, shape0, stride0, 2);
    CHECK(view && view->numel == (int64_t)1 << 40 && view->offset == 2);
    em_tensor_release(view);
    em_tensor_release(ok);
    em_storage_release(s);
}

/* A failed replacement (a file size limit here) leaves the old file and no
 * temporary; a committed one replaces it whole; a non-regular destination
 * is refused. */
static void test_atomic_file_replaces_whole_or_not_at_all(void) {
    char dir[] = "/tmp/ember-atomic-XXXXXX", path[64], entry[300];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/f", dir);
    em_atomic_file a;
    CHECK(em_atomic_open(&a, path, 0644) == EM_OK && em_atomic_write(&a, "old", 3) == EM_OK);
    CHECK(em_atomic_commit(&a) == EM_OK);
    struct rlimit lim, small = {1 << 16, 1 << 16};
    getrlimit(RLIMIT_FSIZE, &lim);
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &small);
    static char big[1 << 17];
    CHECK(em_atomic_open(&a, path, 0644) == EM_OK);
    CHECK(em_atomic_write(&a, big, sizeof big) == EM_ERR_RUNTIME);
    CHECK(a.err == EFBIG && check_contains(em_last_error(), path));
    em_atomic_abort(&a);
    setrlimit(RLIMIT_FSIZE, &lim);
    signal(SIGXFSZ, was);
    FILE *f = fopen(path, "rb");
    char got[8] = {0};
    CHECK(f && fread(got, 1, sizeof got, f) == 3 && !memcmp(got, "old", 3));
    if (f) fclose(f);
    DIR *d = opendir(dir);
    int files = 0;
    for (struct dirent *e; d && (e = readdir(d));) files += e->d_name[0] != '.' || strstr(e->d_name, "ember-tmp");
    if (d) closedir(d);
    CHECK(files == 1);
    CHECK(em_atomic_open(&a, "/dev/null", 0644) == EM_ERR_VALUE);
    snprintf(entry, sizeof entry, "rm -rf %s", dir);
    CHECK(system(entry) == 0);
}

static void test_broadcast_arith(void) {
    int64_t s[2] = {3, 1};
    em_tensor *a = reshaped(arange_f32(3), s, 2); /* [[0],[1],[2]] */
    em_tensor *b = arange_f32(4);                    /* [0,1,2,3] */
    em_tensor *c = em_add(a, b);
    CHECK(c && c->ndim == 2 && c->shape[0] == 3 && c->shape[1] == 4);
    CHECK(at_f32(c, 0) == 0 && at_f32(c, 5) == 2 && at_f32(c, 11) == 5);
    /* the first operand with fewer dims: [4] * [3,1] -> [3,4] */
    em_tensor *c2 = em_mul(b, a);
    CHECK(c2 && c2->ndim == 2 && c2->shape[0] == 3 && c2->shape[1] == 4);
    CHECK(at_f32(c2, 7) == 3 * 1); /* c2[1,3] = b[3] * a[1,0] */
    em_tensor_release(c2);
    em_tensor *bad = em_arange(0, 5, 1, EM_DTYPE_F32);
    int64_t s2[2] = {2, 3};
    em_tensor *m = em_full(s2, 2, 1.0, EM_DTYPE_F32);
    CHECK(em_add(m, bad) == NULL);
    CHECK(em_last_status() == EM_ERR_SHAPE);
    CHECK_STR_CONTAINS(em_last_error(), "add: cannot broadcast f32[2,3] with f32[5]");
    em_tensor_release(m);
    em_tensor_release(bad);
    em_tensor_release(c);
    em_tensor_release(b);
    em_tensor_release(a);
}

static void test_promotion(void) {
    em_tensor *i = em_arange(0, 4, 1, EM_DTYPE_I64);
    em_tensor *f = em_tensor_scalar(0.5, EM_DTYPE_F32);
    em_tensor *r = em_mul(i, f); /* int tensor * 0-d float -> float32 */
    CHECK(r && r->dtype == EM_DTYPE_F32 && at_f32(r, 3) == 1.5f);
    em_tensor *d = em_div(i, i); /* true division of ints -> float32 */
    CHECK(d && d->dtype == EM_DTYPE_F32);
    em_tensor *e = em_exp(i);
    CHECK(e && e->dtype == EM_DTYPE_F32);
    CHECK(em_scalar_operand_dtype(EM_DTYPE_I64, EM_CAT_FLOAT) == EM_DTYPE_F32);
    CHECK(em_scalar_operand_dtype(EM_DTYPE_F64, EM_CAT_FLOAT) == EM_DTYPE_F64);
    CHECK(em_scalar_operand_dtype(EM_DTYPE_BOOL, EM_CAT_INT) == EM_DTYPE_I64);
    int64_t s[1] = {3};
    em_tensor *b = em_full(s, 1, 1, EM_DTYPE_BOOL);
    CHECK(em_sub(b, b) == NULL && em_last_status() == EM_ERR_DTYPE);
    CHECK(em_neg(b) == NULL);
    em_tensor *bb = em_add(b, b);
    CHECK(bb && bb->dtype == EM_DTYPE_BOOL && em_tensor_get_f64(bb, 0) == 1.0);
    em_tensor_release(bb);
    em_tensor_release(b);
    em_tensor_release(e);
    em_tensor_release(d);
    em_tensor_release(r);
    em_tensor_release(f);
    em_tensor_release(i);
}

static void test_reductions(void) {
    int64_t s[3] = {2, 3, 4};
    em_tensor *a = reshaped(arange_f32(24), s, 3);
    em_tensor *all = em_sum(a, NULL, 0, false);
    CHECK(all && all->ndim == 0 && at_f32(all, 0) == 276.0f);
    int64_t d1[1] = {1};
    em_tensor *s1 = em_sum(a, d1, 1, true);
    CHECK(s1 && s1->ndim == 3 && s1->shape[1] == 1);
    CHECK(at_f32(s1, 0) == 0 + 4 + 8 && at_f32(s1, 7) == 15 + 19 + 23);
    int64_t d0[2] = {0, -1};
    em_tensor *m = em_mean(a, d0, 2, false);
    CHECK(m && m->ndim == 1 && m->shape[0] == 3);
    CHECK_NEAR(at_f32(m, 0), (0 + 1 + 2 + 3 + 12 + 13 + 14 + 15) / 8.0, 1e-6);
    int64_t bad[1] = {3};
    CHECK(em_sum(a, bad, 1, false) == NULL && em_last_status() == EM_ERR_INDEX);
    em_tensor *i = em_arange(0, 10, 1, EM_DTYPE_I64);
    CHECK(em_mean(i, NULL, 0, false) == NULL && em_last_status() == EM_ERR_DTYPE);
    em_tensor *si = em_sum(i, NULL, 0, false);
    CHECK(si && si->dtype == EM_DTYPE_I64 && em_tensor_get_f64(si, 0) == 45);
    /* column strategy: sum over dim 0 of a transposed-free large matrix */
    int64_t big[2] = {1000, 300};
    em_tensor *o = em_ones(big, 2, EM_DTYPE_F32);
    int64_t z[1] = {0};
    em_tensor *cs = em_sum(o, z, 1, false);
    CHECK(cs && cs->shape[0] == 300 && at_f32(cs, 299) == 1000.0f);
    /* many blocks: a long reduction whose partial sums combine in order */
    int64_t n1[1] = {1 << 20};
    em_tensor *l = em_ones(n1, 1, EM_DTYPE_F32);
    em_tensor *ls = em_sum(l, NULL, 0, false);
    CHECK(ls && at_f32(ls, 0) == (float)(1 << 20));
    em_tensor_release(ls);
    em_tensor_release(l);
    em_tensor_release(cs);
    em_tensor_release(o);
    em_tensor_release(si);
    em_tensor_release(i);
    em_tensor_release(m);
    em_tensor_release(s1);
    em_tensor_release(all);
    em_tensor_release(a);
}

static void test_matmul(void) {
    int64_t sa[2] = {2, 3}, sb[2] = {3, 2};
    em_tensor *a = reshaped(arange_f32(6), sa, 2);
    em_tensor *b = reshaped(arange_f32(6), sb, 2);
    em_tensor *c = em_matmul(a, b); /* [[10,13],[28,40]] */
    CHECK(c && c->shape[0] == 2 && c->shape[1] == 2);
    CHECK(at_f32(c, 0) == 10 && at_f32(c, 1) == 13 && at_f32(c, 2) == 28 && at_f32(c, 3) == 40);
    em_tensor *bt = em_transpose(a, 0, 1); /* [3,2] view, no copy needed */
    em_tensor *c2 = em_matmul(a, bt);      /* a @ a.T = [[5,14],[14,50]] */
    CHECK(c2 && at_f32(c2, 0) == 5 && at_f32(c2, 1) == 14 && at_f32(c2, 3) == 50);
    em_tensor *v = arange_f32(3);
    em_tensor *mv = em_matmul(a, v); /* [5, 14] */
    CHECK(mv && mv->ndim == 1 && at_f32(mv, 1) == 14);
    em_tensor *bad = em_matmul(a, a);
    CHECK(bad == NULL && em_last_status() == EM_ERR_SHAPE);
    CHECK_STR_CONTAINS(em_last_error(), "f32[2,3] and f32[2,3] cannot be multiplied");
    int64_t s3[3] = {4, 2, 3};
    em_tensor *ab = em_expand(a, s3, 3);
    em_tensor *cb = em_matmul(ab, b); /* batched with a broadcast batch */
    CHECK(cb && cb->ndim == 3 && at_f32(cb, 3 + 4 * 3) == 40);
    em_tensor_release(cb);
    em_tensor_release(ab);
    em_tensor_release(mv);
    em_tensor_release(v);
    em_tensor_release(c2);
    em_tensor_release(bt);
    em_tensor_release(c);
    em_tensor_release(b);
    em_tensor_release(a);
}

static void test_random_is_reproducible(void) {
    int64_t s[1] = {100000};
    em_manual_seed(7);
    em_tensor *a = em_randn(s, 1, EM_DTYPE_F32);
    em_set_num_threads(1);
    em_manual_seed(7);
    em_tensor *b = em_randn(s, 1, EM_DTYPE_F32);
    em_set_num_threads(2);
    int same = 1;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < s[0]; i++) {
        float x = at_f32(a, i);
        same &= x == at_f32(b, i);
        sum += x;
        sq += (double)x * x;
    }
    CHECK(same);
    CHECK_NEAR(sum / s[0], 0.0, 0.02);
    CHECK_NEAR(sq / s[0], 1.0, 0.02);
    em_tensor *u = em_rand(s, 1, EM_DTYPE_F64);
    double mn = 1, mx = 0;
    for (int64_t i = 0; i < s[0]; i++) {
        double x = em_tensor_get_f64(u, i);
        mn = x < mn ? x : mn;
        mx = x > mx ? x : mx;
    }
    CHECK(mn >= 0 && mx < 1 && mx > 0.99);
    em_tensor_release(u);
    em_tensor_release(b);
    em_tensor_release(a);
}

/* Records which thread ran each piece of a job. */
typedef struct {
    pthread_t caller;
    int others; /* pieces run by another thread (atomic) */
    int64_t covered; /* elements processed (atomic) */
} pieces_seen;

static void note_piece(void *arg, int64_t begin, int64_t end) {
    pieces_seen *s = arg;
    nanosleep(&(struct timespec){0, 200000}, NULL); /* slow pieces: a woken worker would get some */
    if (!pthread_equal(pthread_self(), s->caller)) __atomic_add_fetch(&s->others, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->covered, end - begin, __ATOMIC_RELAXED);
}

/* A heavy item run by the caller waits (up to 2 s) for another thread to
 * take one, so a worker that wakes at all gets its share. */
static void note_heavy_item(void *arg, int64_t begin, int64_t end) {
    pieces_seen *s = arg;
    if (!pthread_equal(pthread_self(), s->caller)) {
        __atomic_add_fetch(&s->others, 1, __ATOMIC_RELAXED);
    } else {
        for (int i = 0; i < 2000 && !__atomic_load_n(&s->others, __ATOMIC_RELAXED); i++)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    __atomic_add_fetch(&s->covered, end - begin, __ATOMIC_RELAXED);
}

/* A job of a few dozen grains does not wake parked workers (after a BLAS
 * call their cores belong to OpenBLAS's spinning threads): it runs on the
 * caller, whole. A bigger one is still split and covered exactly once, and
 * a heavy one is split however few its items. */
static void test_small_jobs_stay_on_the_caller(void) {
    em_set_num_threads(2);
    const int64_t grain = 1024;
    pieces_seen warm = {pthread_self(), 0, 0};
    em_parallel_for(1 << 20, grain, note_piece, &warm); /* starts the worker */
    CHECK(warm.covered == 1 << 20);
    em_parallel_park(); /* as matmul does before calling OpenBLAS */
    pieces_seen small = {pthread_self(), 0, 0};
    em_parallel_for(8 * grain, grain, note_piece, &small);
    CHECK(small.covered == 8 * grain);
    CHECK_MSG(small.others == 0, "%d pieces of a parked 8-grain job ran on a worker", small.others);
    pieces_seen big = {pthread_self(), 0, 0};
    em_parallel_for(256 * grain, grain, note_piece, &big);
    CHECK(big.covered == 256 * grain);
    /* A heavy job (GEMM blocks) wakes the parked worker for only 2 items. */
    em_parallel_park();
    pieces_seen heavy = {pthread_self(), 0, 0};
    em_parallel_for_heavy(2, note_heavy_item, &heavy);
    CHECK(heavy.covered == 2);
    CHECK_MSG(heavy.others >= 1, "%d of a parked 2-item heavy job's items ran on the worker",
              heavy.others);
}

/* Who ran which piece of an 8-piece job on 2 threads (shares [0, 4) and
 * [4, 8) of the pieces). The caller's pieces of its own share wait (up to
 * 2 s) for another thread to start, and that thread's pieces wait for the
 * caller to take one of the second share: the caller must then help the
 * slow thread by claiming what is left of its share. */
#define SHARE_PIECES 8
typedef struct {
    pthread_t caller;
    int64_t piece;
    int runs[SHARE_PIECES];            /* atomic: times each piece ran */
    int by_caller[SHARE_PIECES];       /* atomic */
    int64_t first_other;               /* atomic: the first piece another thread ran, or -1 */
    int other_started;                 /* atomic: another thread has begun a piece */
    int caller_helped;                 /* atomic: the caller ran a piece of the second share */
} shares_seen;

static void wait_for(const int *flag) {
    for (int i = 0; i < 2000 && !__atomic_load_n(flag, __ATOMIC_ACQUIRE); i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
}

static void note_share_piece(void *arg, int64_t begin, int64_t end) {
    shares_seen *s = arg;
    int64_t k = begin / s->piece;
    if (k < 0 || k >= SHARE_PIECES || end - begin != s->piece) return; /* (the coverage check fails) */
    __atomic_add_fetch(&s->runs[k], 1, __ATOMIC_RELAXED);
    if (pthread_equal(pthread_self(), s->caller)) {
        __atomic_store_n(&s->by_caller[k], 1, __ATOMIC_RELAXED);
        if (k < SHARE_PIECES / 2) wait_for(&s->other_started);
        else __atomic_store_n(&s->caller_helped, 1, __ATOMIC_RELEASE);
    } else {
        int64_t none = -1;
        __atomic_compare_exchange_n(&s->first_other, &none, k, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        __atomic_store_n(&s->other_started, 1, __ATOMIC_RELEASE);
        wait_for(&s->caller_helped);
    }
}

/* A job's pieces are dealt in contiguous shares, one per thread, so a
 * thread gets the same rows in every job of a size (they stay in its
 * caches); a thread done with its share claims what is left of the
 * others', so a slow thread is helped. Every piece runs exactly once. */
static void test_pool_shares(void) {
    em_set_num_threads(2);
    const int64_t piece = 1000;
    shares_seen s = {.caller = pthread_self(), .piece = piece, .first_other = -1};
    /* 64 grains: enough to wake a sleeping or parked worker; 4 pieces a thread */
    em_parallel_for(SHARE_PIECES * piece, piece / 8, note_share_piece, &s);
    for (int k = 0; k < SHARE_PIECES; k++) CHECK_MSG(s.runs[k] == 1, "piece %d ran %d times", k, s.runs[k]);
    CHECK_MSG(s.by_caller[0], "the caller did not run the first piece of its own share");
    CHECK_MSG(s.first_other == SHARE_PIECES / 2, "the worker began with piece %lld, not its share's first",
              (long long)s.first_other);
    CHECK_MSG(s.caller_helped, "the caller did not help the slow worker with its share");
}

static void test_cast_table(void) {
    CHECK(em_cast_table_complete());
    em_tensor *f = em_tensor_scalar(-2.7, EM_DTYPE_F64);
    em_tensor *i = em_cast(f, EM_DTYPE_I64);
    CHECK(i && em_tensor_get_f64(i, 0) == -2);
    em_tensor *nan = em_tensor_scalar(0.0 / 0.0, EM_DTYPE_F32);
    em_tensor *ni = em_cast(nan, EM_DTYPE_I64);
    CHECK(ni && em_tensor_get_f64(ni, 0) == 0); /* NaN -> 0, never UB */
    em_tensor_release(ni);
    em_tensor_release(nan);
    em_tensor_release(i);
    em_tensor_release(f);
}

/* Every allocation an op makes can fail: the op must return NULL with
 * EM_ERR_NOMEM, leak nothing and leave its inputs intact. */
/* Every row of the op table has its pieces: a name that finds it again,
 * inference and a CPU kernel; reductions say what they accumulate,
 * elementwise ops which dtypes they compute in, other rows neither. */
static void test_op_table(void) {
    for (int i = 0; i < EM_OP_COUNT; i++) {
        const em_op_info *info = em_op_get((em_op)i);
        em_op back;
        CHECK_MSG(info->name && em_op_from_name(info->name, strlen(info->name), &back) && back == (em_op)i,
                  "op %d", i);
        CHECK_MSG(em_op_has_kernels((em_op)i), "%s", info->name);
        CHECK_MSG((info->kind == EM_KIND_VIEW) == (em_view_rule((em_op)i) != NULL), "%s", info->name);
        bool ew = info->kind == EM_KIND_UNARY || info->kind == EM_KIND_BINARY || info->kind == EM_KIND_TERNARY;
        CHECK_MSG((info->kind == EM_KIND_REDUCE) == (info->reduction != EM_RED_NONE), "%s", info->name);
        CHECK_MSG(!ew || info->dtypes, "%s", info->name);
        CHECK_MSG(ew || info->kind == EM_KIND_CAST || info->dtypes == 0, "%s", info->name);
    }
    CHECK(em_op_get(EM_OP_MEAN)->reduction == EM_RED_SUM && em_op_get(EM_OP_STD)->reduction == EM_RED_SUMSQDEV);
}

/* Dispatch goes through the device table: an op runs on its operands'
 * device, refuses mixed devices in PyTorch's words, and a device this
 * build has no entry for (CUDA here) is refused by name, never run as if
 * it were the host. (Host memory labelled cuda stands in for a CUDA
 * tensor: no kernel may touch it.) */
static void test_device_table(void) {
    CHECK(em_device_impl_of(em_cpu()) == &em_cpu_device && !strcmp(em_cpu_device.name, "cpu"));
    em_device cuda = {EM_DEVICE_CUDA, 0};
    CHECK(em_device_impl_of(cuda) == NULL);
    int64_t s[1] = {4};
    em_tensor *a = em_ones(s, 1, EM_DTYPE_F32);
    float host[4] = {1, 2, 3, 4};
    em_storage *st = em_storage_wrap(host, sizeof host, cuda, NULL, NULL);
    int64_t stride[1] = {1};
    em_tensor *c = st ? em_tensor_from_storage(st, EM_DTYPE_F32, 0, s, stride, 1) : NULL;
    em_storage_release(st);
    CHECK(c != NULL);
    CHECK(em_add(a, c) == NULL && em_last_status() == EM_ERR_DEVICE &&
          check_contains(em_last_error(), "add: Expected all tensors to be on the same device, but found at least "
                                          "two devices, cpu and cuda:0!"));
    CHECK_MSG(em_neg(c) == NULL && em_last_status() == EM_ERR_NOT_IMPLEMENTED &&
                  check_contains(em_last_error(), "neg: this build of ember has no cuda:0 device support yet"),
              "%s", em_last_error());
    CHECK(em_storage_new(cuda, 16) == NULL && em_last_status() == EM_ERR_NOT_IMPLEMENTED);
    /* in-place writes too: none into the labelled memory, none out of it */
    em_attrs at;
    memset(&at, 0, sizeof at);
    em_tensor *cc[2] = {c, c}, *ac[2] = {a, c};
    CHECK_MSG(em_op_run_inplace(EM_OP_ADD, cc, 2, &at, c) == EM_ERR_NOT_IMPLEMENTED &&
                  check_contains(em_last_error(), "add: this build of ember has no cuda:0 device support yet"),
              "%s", em_last_error());
    CHECK(em_op_run_inplace(EM_OP_ADD, ac, 2, &at, a) == EM_ERR_DEVICE);
    at.dtype = EM_DTYPE_F32;
    CHECK(em_op_run_inplace(EM_OP_CAST, &c, 1, &at, a) == EM_ERR_DEVICE);
    CHECK(host[0] == 1 && em_tensor_get_f64(a, 0) == 1);
    em_tensor_release(c);
    em_tensor_release(a);
}

/* em_tensor and em_storage come from a per-thread cache of freed ones: a
 * tensor freed and one made next reuse the memory; a thread's cache goes
 * back to malloc when it exits (the sanitizer build's leak check). */
static void *churn_tensors(void *arg) {
    (void)arg;
    int64_t s[1] = {3};
    for (int i = 0; i < 4 * EM_OBJECT_CACHE; i++) {
        em_tensor *t[3] = {em_zeros(s, 1, EM_DTYPE_F32), em_zeros(s, 1, EM_DTYPE_F32), em_zeros(s, 1, EM_DTYPE_F32)};
        for (int k = 0; k < 3; k++) em_tensor_release(t[k]);
    }
    return NULL;
}

static void test_object_cache(void) {
    int64_t s[1] = {3};
    em_tensor *a = em_zeros(s, 1, EM_DTYPE_F32);
    void *where = a;
    em_tensor_release(a);
    em_tensor *b = em_zeros(s, 1, EM_DTYPE_F32);
    CHECK((void *)b == where);
    em_tensor_release(b);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, churn_tensors, NULL) == 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    em_alloc_fail_after(0); /* (a cached object fails as malloc would) */
    CHECK(em_zeros(s, 1, EM_DTYPE_F32) == NULL && em_last_status() == EM_ERR_NOMEM);
    em_alloc_fail_after(-1);
}

/* The meta device: tensors without data; every op its inference only, in
 * place too; a copy out of it, and an op whose result's shape depends on
 * the data, refused; 0-d CPU tensors join its operands. */
static void test_meta_device(void) {
    CHECK(em_device_impl_of(em_meta()) == &em_meta_device);
    int64_t s[2] = {3, 4};
    em_tensor *c = em_ones(s, 2, EM_DTYPE_F32), *m = em_to_device(c, em_meta());
    CHECK(m && m->device.type == EM_DEVICE_META && !em_tensor_has_data(m) && m->storage->data == NULL);
    em_tensor *two = em_tensor_scalar(2.0, EM_DTYPE_F32);
    em_tensor *r = m ? em_mul(m, two) : NULL, *t = m ? em_transpose(m, 0, 1) : NULL;
    CHECK(r && r->device.type == EM_DEVICE_META && r->shape[1] == 4 && r->storage->data == NULL);
    CHECK(t && t->storage == m->storage && t->strides[0] == 1 && t->strides[1] == 4);
    CHECK(em_add(m, c) == NULL && em_last_status() == EM_ERR_DEVICE);
    CHECK(em_to_device(m, em_cpu()) == NULL && em_last_status() == EM_ERR_NOT_IMPLEMENTED &&
          check_contains(em_last_error(), "Cannot copy out of meta tensor; no data!"));
    CHECK(em_tensor_require_data(m, ".item()") == EM_ERR_NOT_IMPLEMENTED);
    em_attrs at;
    memset(&at, 0, sizeof at);
    at.dtype = EM_DTYPE_F32;
    em_tensor *mm[2] = {m, m};
    CHECK(em_op_run_inplace(EM_OP_ADD, mm, 2, &at, m) == EM_OK);
    CHECK(em_op_run_inplace(EM_OP_CAST, &c, 1, &at, m) == EM_OK); /* meta.copy_(cpu): nothing read */
    CHECK(em_op_run_inplace(EM_OP_CAST, &m, 1, &at, c) == EM_ERR_NOT_IMPLEMENTED);
    em_tensor *nz = NULL;
    CHECK(em_op_run(EM_OP_NONZERO, &m, 1, &at, &nz, 1) == EM_ERR_NOT_IMPLEMENTED &&
          check_contains(em_last_error(), "nonzero: its result's shape depends on the values"));
    em_device was = em_set_default_device(em_meta());
    em_tensor *z = em_zeros(s, 2, EM_DTYPE_F64);
    em_set_default_device(was);
    CHECK(z && z->device.type == EM_DEVICE_META && z->dtype == EM_DTYPE_F64);
    CHECK(em_tensor_get_f64(c, 0) == 1); /* (the copy into meta left the source alone) */
    em_tensor *all[] = {c, m, two, r, t, z};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) em_tensor_release(all[i]);
}

/* A layer's word on a tensor goes to the layer's release when the tensor
 * dies (tensor.c knows no layer), and a layer installed in the
 * interceptor stack sees each op the user runs, may refuse it (the op then
 * leaves nothing behind), and is told when an in-place write it prepared
 * for does not happen. The test stands in the tracer's rank: this program
 * has no tracer. */
static int released_words, seen_ops, seen_writes, aborted_writes;
static bool refuse_ops, refuse_writes;

static void count_release(em_tensor *t, uintptr_t state) {
    (void)t;
    if (state == 42) released_words++;
}
static em_status see_op(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *const *out,
                        int n_out) {
    (void)op, (void)in, (void)n_in, (void)attrs, (void)out, (void)n_out;
    seen_ops++;
    return refuse_ops ? em_error(EM_ERR_RUNTIME, "refused by the test layer") : EM_OK;
}
static em_status prepare_write(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *target,
                               void **state) {
    (void)op, (void)in, (void)n_in, (void)attrs;
    if (refuse_writes) return em_error(EM_ERR_RUNTIME, "write refused by the test layer");
    *state = target;
    return EM_OK;
}
static void see_write(em_op op, em_tensor *const *in, int n_in, const em_attrs *attrs, em_tensor *target,
                      void *state) {
    (void)op, (void)in, (void)n_in, (void)attrs;
    if (state == target) seen_writes++;
}
static void abort_write(void *state) {
    if (state) aborted_writes++;
}

static void test_layers_and_interceptors(void) {
    int64_t s[1] = {4};
    em_tensor_layer_register(EM_LAYER_PYTHON, count_release);
    em_tensor *w = em_ones(s, 1, EM_DTYPE_F32);
    w->layer_state[EM_LAYER_PYTHON] = 42;
    em_tensor_release(w);
    CHECK(released_words == 1);
    em_tensor_layer_register(EM_LAYER_PYTHON, NULL);

    static const em_interceptor layer = {.name = "test", .after_op = see_op, .before_inplace = prepare_write,
                                         .after_inplace = see_write, .abort_inplace = abort_write};
    em_interceptor_install(EM_INTERCEPT_TRACE, &layer);
    em_tensor *a = em_ones(s, 1, EM_DTYPE_F32), *b = em_ones(s, 1, EM_DTYPE_F32);
    int ops_before = seen_ops;
    em_tensor *c = em_add(a, b);
    CHECK(c && seen_ops == ops_before + 1);
    int64_t live = em_tensor_live_count();
    refuse_ops = true;
    CHECK(em_neg(a) == NULL && em_last_status() == EM_ERR_RUNTIME && em_tensor_live_count() == live);
    refuse_ops = false;

    em_attrs at;
    memset(&at, 0, sizeof at);
    em_tensor *ab[2] = {a, b};
    CHECK(em_op_run_inplace(EM_OP_ADD, ab, 2, &at, a) == EM_OK && seen_writes == 1);
    CHECK(em_tensor_get_f64(a, 0) == 2.0);
    uint64_t version = a->storage->version;
    refuse_writes = true;
    CHECK(em_op_run_inplace(EM_OP_ADD, ab, 2, &at, a) == EM_ERR_RUNTIME);
    CHECK(em_tensor_get_f64(a, 0) == 2.0 && a->storage->version == version && seen_writes == 1);
    refuse_writes = false;

    em_tensor *n = em_ones(s, 1, EM_DTYPE_I64), *z = em_zeros(s, 1, EM_DTYPE_I64);
    em_tensor *nz[2] = {n, z};
    CHECK(em_op_run_inplace(EM_OP_FLOOR_DIVIDE, nz, 2, &at, n) == EM_ERR_RUNTIME &&
          check_contains(em_last_error(), "integer division by zero"));
    CHECK(aborted_writes == 1 && seen_writes == 1);
    em_interceptor_install(EM_INTERCEPT_TRACE, NULL);
    int ops_now = seen_ops;
    em_tensor *d = em_add(a, b);
    CHECK(d && seen_ops == ops_now); /* (out of the stack: told nothing) */
    em_tensor_release(d);
    em_tensor_release(n);
    em_tensor_release(z);
    em_tensor_release(c);
    em_tensor_release(a);
    em_tensor_release(b);
}

static void test_out_of_memory(void) {
    int64_t s[2] = {64, 64};
    em_tensor *a = em_ones(s, 2, EM_DTYPE_F32);
    em_tensor *b = em_arange(0, 64, 1, EM_DTYPE_I64);
    int64_t live = em_tensor_live_count();
    int completed = 0;
    for (int64_t n = 0; n < 40 && !completed; n++) {
        em_alloc_fail_after(n);
        em_tensor *r = em_add(a, b); /* needs a cast temporary and a result */
        em_tensor *m = r ? em_matmul(r, r) : NULL;
        int64_t attempts = em_alloc_fail_after(-1);
        if (m) {
            completed = 1;
        } else {
            CHECK_MSG(em_last_status() == EM_ERR_NOMEM, "n=%lld: %s", (long long)n,
                      em_last_error());
        }
        em_tensor_release(m);
        em_tensor_release(r);
        CHECK(em_tensor_live_count() == live);
        (void)attempts;
    }
    CHECK(completed);
    em_tensor_release(b);
    em_tensor_release(a);
}

int main(void) {
    RUN(test_create_and_release);
    RUN(test_views_share_storage);
    RUN(test_views_of_storage_are_bounded);
    RUN(test_atomic_file_replaces_whole_or_not_at_all);
    RUN(test_broadcast_arith);
    RUN(test_promotion);
    RUN(test_reductions);
    RUN(test_matmul);
    RUN(test_random_is_reproducible);
    RUN(test_small_jobs_stay_on_the_caller);
    RUN(test_pool_shares);
    RUN(test_cast_table);
    RUN(test_op_table);
    RUN(test_device_table);
    RUN(test_meta_device);
    RUN(test_object_cache);
    RUN(test_layers_and_interceptors);
    RUN(test_out_of_memory);
    CHECK(em_tensor_live_count() == 0);
    CHECK(em_storage_live_count() == 0);
    return check_report();
}
