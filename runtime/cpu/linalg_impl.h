/*
 * linalg_impl.h - the LAPACK calls of each linalg op over a range of
 * matrices of a batch; included by linalg.c once per element type.
 *
 * The includer defines REAL (float or double) and LP(name), the LAPACK or
 * CBLAS routine of that type (LP(getrf_) is sgetrf_ or dgetrf_). Matrices
 * are copied into column-major scratch (LAPACK's order) from any strides,
 * and results copied out into the contiguous results. A failure is
 * recorded in the context with the batch element it happened in; the
 * lowest such element wins, so the message does not depend on threads.
 */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, REAL)

/* m x n matrix number b of t (its last two dims) into column-major buf. */
static void FN(load_)(const la_ctx *c, const em_tensor *t, int64_t b, REAL *buf, int64_t m, int64_t n) {
    const REAL *p = (const REAL *)em_tensor_data(t) + batch_offset(c, t, b);
    int64_t s0 = t->strides[t->ndim - 2], s1 = t->strides[t->ndim - 1];
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) buf[i + j * m] = p[i * s0 + j * s1];
}

/* column-major buf (leading dim ld) into matrix b of the contiguous t. */
static void FN(store_)(em_tensor *t, int64_t b, const REAL *buf, int64_t m, int64_t n, int64_t ld) {
    REAL *p = (REAL *)em_tensor_data(t) + b * m * n;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) p[i * n + j] = buf[i + j * ld];
}

/* Any NaN or infinity among the n values? (LAPACK's iterative routines may
 * not come back from them.) */
static bool FN(nonfinite_)(const REAL *a, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return true;
    return false;
}

/* LAPACK's workspace size from a query's answer (a REAL). */
static blasint FN(work_size_)(REAL w) { return w > 1 ? (blasint)w : 1; }

/* Scratch for one thread's matrices: the matrix (room for a square of its
 * larger side: complete QR), a second (B, U), a third (Vh), a vector
 * (eigenvalues, singular values, tau), pivots, and LAPACK's workspaces. */
typedef struct {
    REAL *a, *b2, *v3, *vec, *work;
    blasint *piv, *iwork, lwork, liwork;
} FN(scratch_);

static void FN(scratch_free_)(FN(scratch_) *s) {
    em_free(s->a);
    em_free(s->b2);
    em_free(s->v3);
    em_free(s->vec);
    em_free(s->piv);
    em_free(s->work);
    em_free(s->iwork);
}

/* Allocates the scratch, asking LAPACK how much workspace the op needs. */
static bool FN(scratch_init_)(const la_ctx *c, FN(scratch_) *s) {
    memset(s, 0, sizeof *s);
    blasint m = (blasint)c->m, n = (blasint)c->n, k = (blasint)c->k, info = 0, q = -1, iwq = 0;
    int64_t mn = c->m < c->n ? c->m : c->n, big = c->m > c->n ? c->m : c->n;
    size_t sq = (size_t)(big * big + 1), rhs = (size_t)(big * (c->k > 0 ? c->k : 1) + 1);
    s->a = em_malloc(sq * sizeof *s->a);
    s->b2 = em_malloc((sq > rhs ? sq : rhs) * sizeof *s->b2);
    s->v3 = em_malloc(sq * sizeof *s->v3);
    s->vec = em_malloc((size_t)(big + 1) * sizeof *s->vec);
    s->piv = em_malloc((size_t)(8 * big + 1) * sizeof *s->piv);
    if (!s->a || !s->b2 || !s->v3 || !s->vec || !s->piv) return false;
    blasint lda = m > 1 ? m : 1, ldb = big > 1 ? (blasint)big : 1;
    REAL wq = 0;
    switch (c->op) {
    case EM_OP_INV: LP(getri_)(&n, s->a, &lda, s->piv, &wq, &q, &info); break;
    case EM_OP_QR: {
        blasint qc = c->full ? m : (blasint)mn, r = (blasint)mn;
        REAL w2 = 0;
        LP(geqrf_)(&m, &n, s->a, &lda, s->vec, &wq, &q, &info);
        LP(orgqr_)(&m, &qc, &r, s->a, &lda, s->vec, &w2, &q, &info);
        wq = w2 > wq ? w2 : wq;
        break;
    }
    case EM_OP_EIGH:
        LP(syevd_)("V", c->upper ? "U" : "L", &n, s->a, &lda, s->vec, &wq, &q, &iwq, &q, &info, 1, 1);
        break;
    case EM_OP_SVD: {
        blasint ldvt = c->full ? n : (blasint)mn;
        if (ldvt < 1) ldvt = 1;
        LP(gesdd_)(c->full ? "A" : "S", &m, &n, s->a, &lda, s->vec, s->b2, &lda, s->v3, &ldvt, &wq, &q, s->piv,
                   &info, 1);
        break;
    }
    case EM_OP_LDL_FACTOR: LP(sytrf_)("L", &n, s->a, &lda, s->piv, &wq, &q, &info, 1); break;
    case EM_OP_LSTSQ: {
        REAL rc = -1;
        blasint rank = 0;
        LP(gelsd_)(&m, &n, &k, s->a, &lda, s->b2, &ldb, s->vec, &rc, &rank, &wq, &q, &iwq, &info);
        break;
    }
    default: break;
    }
    s->lwork = FN(work_size_)(wq);
    s->liwork = iwq > 1 ? iwq : 1;
    s->work = em_malloc((size_t)s->lwork * sizeof *s->work);
    s->iwork = em_malloc((size_t)(s->liwork + 8 * big + 1) * sizeof *s->iwork);
    return s->work && s->iwork;
}

/* det and slogdet from the LU factors: the product of U's diagonal,
 * negated per row swap; a zero pivot makes it 0 (sign 0, log -inf). */
static void FN(det_one_)(la_ctx *c, FN(scratch_) *s, int64_t bi) {
    blasint n = (blasint)c->n, lda = n > 1 ? n : 1, info = 0;
    FN(load_)(c, c->in[0], bi, s->a, n, n);
    if (n > 0) LP(getrf_)(&n, &n, s->a, &lda, s->piv, &info);
    REAL det = 1, logabs = 0, sign = 1;
    for (blasint i = 0; i < n; i++) {
        REAL u = s->a[i + (int64_t)i * n];
        if (s->piv[i] != i + 1) {
            det = -det;
            sign = -sign;
        }
        det *= u;
        sign = u < 0 ? -sign : u == 0 ? 0 : sign;
        logabs += (REAL)log(fabs((double)u));
    }
    if (c->op == EM_OP_DET) {
        ((REAL *)em_tensor_data(c->out[0]))[bi] = det;
    } else {
        ((REAL *)em_tensor_data(c->out[0]))[bi] = sign;
        ((REAL *)em_tensor_data(c->out[1]))[bi] = logabs;
    }
}

static void FN(qr_one_)(la_ctx *c, FN(scratch_) *s, int64_t bi) {
    blasint m = (blasint)c->m, n = (blasint)c->n, lda = m > 1 ? m : 1, info = 0;
    int64_t mn = c->m < c->n ? c->m : c->n;
    blasint qc = c->full ? m : (blasint)mn, r = (blasint)mn;
    FN(load_)(c, c->in[0], bi, s->a, m, n);
    if (m > 0 && n > 0) LP(geqrf_)(&m, &n, s->a, &lda, s->vec, s->work, &s->lwork, &info);
    int64_t rr = c->full ? c->m : mn; /* R: the upper triangle of the first rows */
    for (int64_t j = 0; j < c->n; j++)
        for (int64_t i = 0; i < rr; i++) s->b2[i + j * rr] = i <= j && i < c->m ? s->a[i + j * c->m] : 0;
    FN(store_)(c->out[1], bi, s->b2, rr, c->n, rr);
    /* (complete Q of a tall A: orgqr builds all m columns from the n
     * reflectors; it reads only the first n) */
    if (m > 0 && qc > 0) LP(orgqr_)(&m, &qc, &r, s->a, &lda, s->vec, s->work, &s->lwork, &info);
    FN(store_)(c->out[0], bi, s->a, c->m, qc, c->m);
}

static void FN(svd_one_)(la_ctx *c, FN(scratch_) *s, int64_t bi) {
    blasint m = (blasint)c->m, n = (blasint)c->n, lda = m > 1 ? m : 1, info = 0;
    int64_t mn = c->m < c->n ? c->m : c->n;
    blasint ucols = c->full ? m : (blasint)mn, vrows = c->full ? n : (blasint)mn, ldvt = vrows > 1 ? vrows : 1;
    FN(load_)(c, c->in[0], bi, s->a, m, n);
    if (FN(nonfinite_)(s->a, c->m * c->n)) {
        la_fail(c, bi, LA_NONFINITE, 0);
        return;
    }
    if (m > 0 && n > 0) {
        LP(gesdd_)(c->full ? "A" : "S", &m, &n, s->a, &lda, s->vec, s->b2, &lda, s->v3, &ldvt, s->work, &s->lwork,
                   s->iwork, &info, 1);
    } else { /* an empty matrix: full U and Vh are identities */
        for (int64_t i = 0; i < (int64_t)ucols * c->m; i++) s->b2[i] = i % (c->m + 1) == 0;
        for (int64_t i = 0; i < (int64_t)vrows * c->n; i++) s->v3[i] = i % (vrows + 1) == 0;
    }
    if (info > 0) {
        la_fail(c, bi, LA_NO_CONVERGENCE, info);
        return;
    }
    FN(store_)(c->out[0], bi, s->b2, m, ucols, m);
    memcpy((REAL *)em_tensor_data(c->out[1]) + bi * mn, s->vec, (size_t)mn * sizeof *s->vec);
    FN(store_)(c->out[2], bi, s->v3, vrows, n, ldvt);
}

static void FN(lstsq_one_)(la_ctx *c, FN(scratch_) *s, int64_t bi) {
    blasint m = (blasint)c->m, n = (blasint)c->n, k = (blasint)c->k, lda = m > 1 ? m : 1, info = 0;
    int64_t big = c->m > c->n ? c->m : c->n;
    blasint ldb = big > 1 ? (blasint)big : 1;
    FN(load_)(c, c->in[0], bi, s->a, m, n);
    FN(load_)(c, c->in[1], bi, s->b2, m, k);
    for (int64_t j = k - 1; j >= 0 && ldb != m; j--) /* B's columns ldb = max(m, n) apart */
        for (int64_t i = m - 1; i >= 0; i--) s->b2[i + j * ldb] = s->b2[i + j * m];
    if (FN(nonfinite_)(s->a, c->m * c->n)) {
        la_fail(c, bi, LA_NONFINITE, 0);
        return;
    }
    REAL rc = -1;
    blasint rank = 0;
    if (m > 0 && n > 0 && k > 0)
        LP(gelsd_)(&m, &n, &k, s->a, &lda, s->b2, &ldb, s->vec, &rc, &rank, s->work, &s->lwork, s->iwork, &info);
    else
        for (int64_t i = 0; i < (int64_t)ldb * k; i++) s->b2[i] = 0;
    if (info > 0) {
        la_fail(c, bi, LA_NO_CONVERGENCE, info);
        return;
    }
    FN(store_)(c->out[0], bi, s->b2, n, k, ldb);
    ((int64_t *)em_tensor_data(c->out[1]))[bi] = rank;
}

/* Bunch-Kaufman LDL^T (sytrf on the lower triangle): LD with the upper
 * triangle zeroed, the pivots as LAPACK gives them (1-based, negative for
 * 2 x 2 blocks), info > 0 where D has an exact zero (not an error: the
 * factorization is complete, as PyTorch's ldl_factor_ex reports it). */
static void FN(ldl_one_)(la_ctx *c, FN(scratch_) *s, int64_t bi) {
    blasint n = (blasint)c->n, lda = n > 1 ? n : 1, info = 0;
    FN(load_)(c, c->in[0], bi, s->a, n, n);
    if (n > 0) LP(sytrf_)("L", &n, s->a, &lda, s->piv, s->work, &s->lwork, &info, 1);
    for (int64_t j = 1; j < n; j++)
        for (int64_t i = 0; i < j; i++) s->a[i + j * n] = 0;
    FN(store_)(c->out[0], bi, s->a, n, n, n);
    int32_t *piv = (int32_t *)em_tensor_data(c->out[1]) + bi * c->n;
    for (int64_t i = 0; i < n; i++) piv[i] = (int32_t)s->piv[i];
    ((int32_t *)em_tensor_data(c->out[2]))[bi] = (int32_t)(info > 0 ? info : 0);
}

/* Matrix bi of the batch. */
static void FN(one_)(la_ctx *c, FN(scratch_) *s, int64_t bi) {
    blasint m = (blasint)c->m, n = (blasint)c->n, k = (blasint)c->k, lda = m > 1 ? m : 1, info = 0;
    switch (c->op) {
    case EM_OP_INV:
        FN(load_)(c, c->in[0], bi, s->a, m, n);
        LP(getrf_)(&n, &n, s->a, &lda, s->piv, &info);
        if (info == 0) LP(getri_)(&n, s->a, &lda, s->piv, s->work, &s->lwork, &info);
        if (info > 0) la_fail(c, bi, LA_SINGULAR, info);
        else FN(store_)(c->out[0], bi, s->a, m, n, m);
        break;
    case EM_OP_SOLVE:
        FN(load_)(c, c->in[0], bi, s->a, m, m);
        FN(load_)(c, c->in[1], bi, s->b2, m, k);
        LP(gesv_)(&n, &k, s->a, &lda, s->piv, s->b2, &lda, &info);
        if (info > 0) la_fail(c, bi, LA_SINGULAR, info);
        else FN(store_)(c->out[0], bi, s->b2, m, k, m);
        break;
    case EM_OP_SOLVE_TRIANGULAR: /* no test for a zero diagonal: infs and NaNs, as PyTorch */
        FN(load_)(c, c->in[0], bi, s->a, m, m);
        FN(load_)(c, c->in[1], bi, s->b2, m, k);
        if (m > 0 && k > 0)
            TRSM(CblasColMajor, CblasLeft, c->upper ? CblasUpper : CblasLower, CblasNoTrans, CblasNonUnit, m, k, 1,
                 s->a, lda, s->b2, lda);
        FN(store_)(c->out[0], bi, s->b2, m, k, m);
        break;
    case EM_OP_DET:
    case EM_OP_SLOGDET: FN(det_one_)(c, s, bi); break;
    case EM_OP_CHOLESKY:
        FN(load_)(c, c->in[0], bi, s->a, m, m);
        if (m > 0) LP(potrf_)("L", &n, s->a, &lda, &info, 1);
        if (info > 0) {
            la_fail(c, bi, LA_NOT_PD, info);
            break;
        }
        for (int64_t j = 1; j < m; j++) /* L: the lower triangle */
            for (int64_t i = 0; i < j; i++) s->a[i + j * m] = 0;
        FN(store_)(c->out[0], bi, s->a, m, m, m);
        break;
    case EM_OP_QR: FN(qr_one_)(c, s, bi); break;
    case EM_OP_EIGH:
        FN(load_)(c, c->in[0], bi, s->a, m, m);
        if (FN(nonfinite_)(s->a, c->m * c->m)) {
            la_fail(c, bi, LA_NONFINITE, 0);
            break;
        }
        if (m > 0)
            LP(syevd_)("V", c->upper ? "U" : "L", &n, s->a, &lda, s->vec, s->work, &s->lwork, s->iwork, &s->liwork,
                       &info, 1, 1);
        if (info > 0) {
            la_fail(c, bi, LA_NO_CONVERGENCE, info);
            break;
        }
        memcpy((REAL *)em_tensor_data(c->out[0]) + bi * c->m, s->vec, (size_t)c->m * sizeof *s->vec);
        FN(store_)(c->out[1], bi, s->a, m, m, m);
        break;
    case EM_OP_SVD: FN(svd_one_)(c, s, bi); break;
    case EM_OP_LSTSQ: FN(lstsq_one_)(c, s, bi); break;
    case EM_OP_LDL_FACTOR: FN(ldl_one_)(c, s, bi); break;
    case EM_OP_LDL_SOLVE: {
        FN(load_)(c, c->in[0], bi, s->a, m, m);
        FN(load_)(c, c->in[2], bi, s->b2, m, k);
        const int32_t *p = (const int32_t *)em_tensor_data(c->in[1]) + batch_offset(c, c->in[1], bi);
        for (int64_t i = 0; i < m; i++) { /* (pivots out of range would make sytrs read outside the matrix) */
            int32_t v = p[i * c->in[1]->strides[c->in[1]->ndim - 1]];
            if (v == 0 || v > m || v < -m) {
                la_fail(c, bi, LA_BAD_PIVOTS, i + 1);
                return;
            }
            s->piv[i] = v;
        }
        if (m > 0 && k > 0) LP(sytrs_)("L", &n, &k, s->a, &lda, s->piv, s->b2, &lda, &info, 1);
        FN(store_)(c->out[0], bi, s->b2, m, k, m);
        break;
    }
    default: break;
    }
}

static void FN(task_)(void *arg, int64_t begin, int64_t end) {
    la_ctx *c = arg;
    FN(scratch_) s;
    if (!FN(scratch_init_)(c, &s)) {
        FN(scratch_free_)(&s);
        la_fail(c, begin, LA_NOMEM, 0);
        return;
    }
    for (int64_t bi = begin; bi < end; bi++) FN(one_)(c, &s, bi);
    FN(scratch_free_)(&s);
}

#undef FN
#undef CAT
#undef CAT_
