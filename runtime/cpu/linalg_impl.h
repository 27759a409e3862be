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

static void FN(task_)(void *arg, int64_t begin, int64_t end) {
    la_ctx *c = arg;
    em_tensor *const *in = c->in;
    blasint m = (blasint)c->m, n = (blasint)c->n, k = (blasint)c->k, info = 0, lwork = -1, liwork = -1;
    int64_t mn = c->m < c->n ? c->m : c->n, big = c->m > c->n ? c->m : c->n;
    /* one scratch for every op: the matrix (room for a square of its larger
     * side: complete QR), a second (B, U), a third (Vh), vectors */
    size_t sq = (size_t)(big * big + 1), rhs = (size_t)(big * (c->k > 0 ? c->k : 1) + 1);
    REAL *a = em_malloc(sq * sizeof *a), *b2 = em_malloc((sq > rhs ? sq : rhs) * sizeof *b2);
    REAL *v3 = em_malloc(sq * sizeof *v3), *vec = em_malloc((size_t)(big + 1) * sizeof *vec);
    blasint *piv = em_malloc((size_t)(8 * big + 1) * sizeof *piv);
    REAL *work = NULL, wq = 0;
    blasint *iwork = NULL, iwq = 0;
    if (!a || !b2 || !v3 || !vec || !piv) goto nomem;
    blasint lda = m > 1 ? m : 1, ldb = big > 1 ? (blasint)big : 1;
    /* workspace queries */
    switch (c->op) {
    case EM_OP_INV: LP(getri_)(&n, a, &lda, piv, &wq, &lwork, &info); break;
    case EM_OP_QR: {
        blasint qc = c->full ? m : (blasint)mn, r = (blasint)mn;
        REAL w2 = 0;
        LP(geqrf_)(&m, &n, a, &lda, vec, &wq, &lwork, &info);
        LP(orgqr_)(&m, &qc, &r, a, &lda, vec, &w2, &lwork, &info);
        wq = w2 > wq ? w2 : wq;
        break;
    }
    case EM_OP_EIGH: LP(syevd_)("V", c->upper ? "U" : "L", &n, a, &lda, vec, &wq, &lwork, &iwq, &liwork, &info, 1, 1); break;
    case EM_OP_SVD: {
        blasint ldu = lda, ldvt = c->full ? n : (blasint)mn;
        if (ldvt < 1) ldvt = 1;
        LP(gesdd_)(c->full ? "A" : "S", &m, &n, a, &lda, vec, b2, &ldu, v3, &ldvt, &wq, &lwork, piv, &info, 1);
        break;
    }
    case EM_OP_LSTSQ: {
        REAL rc = -1;
        blasint rank = 0;
        LP(gelsd_)(&m, &n, &k, a, &lda, b2, &ldb, vec, &rc, &rank, &wq, &lwork, &iwq, &info);
        break;
    }
    default: break;
    }
    lwork = FN(work_size_)(wq);
    liwork = iwq > 1 ? iwq : 1;
    if (c->op == EM_OP_LSTSQ && liwork < 1) liwork = 1;
    work = em_malloc((size_t)lwork * sizeof *work);
    iwork = em_malloc((size_t)(liwork + 8 * big + 1) * sizeof *iwork);
    if (!work || !iwork) goto nomem;

    for (int64_t bi = begin; bi < end; bi++) {
        info = 0;
        switch (c->op) {
        case EM_OP_INV:
            FN(load_)(c, in[0], bi, a, m, n);
            LP(getrf_)(&n, &n, a, &lda, piv, &info);
            if (info == 0) LP(getri_)(&n, a, &lda, piv, work, &lwork, &info);
            if (info > 0) la_fail(c, bi, LA_SINGULAR, info);
            else FN(store_)(c->out[0], bi, a, m, n, m);
            break;
        case EM_OP_SOLVE:
            FN(load_)(c, in[0], bi, a, m, m);
            FN(load_)(c, in[1], bi, b2, m, k);
            LP(gesv_)(&n, &k, a, &lda, piv, b2, &lda, &info);
            if (info > 0) la_fail(c, bi, LA_SINGULAR, info);
            else FN(store_)(c->out[0], bi, b2, m, k, m);
            break;
        case EM_OP_SOLVE_TRIANGULAR: /* no test for a zero diagonal: infs and NaNs, as PyTorch */
            FN(load_)(c, in[0], bi, a, m, m);
            FN(load_)(c, in[1], bi, b2, m, k);
            if (m > 0 && k > 0)
                TRSM(CblasColMajor, CblasLeft, c->upper ? CblasUpper : CblasLower, CblasNoTrans,
                                 CblasNonUnit, m, k, 1, a, lda, b2, lda);
            FN(store_)(c->out[0], bi, b2, m, k, m);
            break;
        case EM_OP_DET:
        case EM_OP_SLOGDET: {
            FN(load_)(c, in[0], bi, a, m, m);
            if (m > 0) LP(getrf_)(&n, &n, a, &lda, piv, &info);
            /* det: the product of U's diagonal, negated per row swap; a
             * zero pivot (info > 0) makes it 0 (sign 0, log -inf) */
            REAL det = 1, logabs = 0, sign = 1;
            for (blasint i = 0; i < n; i++) {
                REAL u = a[i + (int64_t)i * m];
                if (piv[i] != i + 1) {
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
            break;
        }
        case EM_OP_CHOLESKY:
            FN(load_)(c, in[0], bi, a, m, m);
            if (m > 0) LP(potrf_)("L", &n, a, &lda, &info, 1);
            if (info > 0) {
                la_fail(c, bi, LA_NOT_PD, info);
                break;
            }
            for (int64_t j = 1; j < m; j++) /* L: the lower triangle */
                for (int64_t i = 0; i < j; i++) a[i + j * m] = 0;
            FN(store_)(c->out[0], bi, a, m, m, m);
            break;
        case EM_OP_QR: {
            blasint qc = c->full ? m : (blasint)mn, r = (blasint)mn;
            FN(load_)(c, in[0], bi, a, m, n);
            if (m > 0 && n > 0) LP(geqrf_)(&m, &n, a, &lda, vec, work, &lwork, &info);
            /* R: the upper triangle of the first rows */
            int64_t rr = c->full ? c->m : mn;
            for (int64_t j = 0; j < c->n; j++)
                for (int64_t i = 0; i < rr; i++) b2[i + j * rr] = i <= j && i < c->m ? a[i + j * c->m] : 0;
            FN(store_)(c->out[1], bi, b2, rr, c->n, rr);
            /* (complete Q of a tall A: orgqr builds all m columns from the
             * n reflectors; it only reads the first n) */
            if (m > 0 && qc > 0) LP(orgqr_)(&m, &qc, &r, a, &lda, vec, work, &lwork, &info);
            FN(store_)(c->out[0], bi, a, c->m, qc, c->m);
            break;
        }
        case EM_OP_EIGH:
            FN(load_)(c, in[0], bi, a, m, m);
            if (FN(nonfinite_)(a, c->m * c->m)) {
                la_fail(c, bi, LA_NONFINITE, 0);
                break;
            }
            if (m > 0) LP(syevd_)("V", c->upper ? "U" : "L", &n, a, &lda, vec, work, &lwork, iwork, &liwork, &info, 1, 1);
            if (info > 0) {
                la_fail(c, bi, LA_NO_CONVERGENCE, info);
                break;
            }
            memcpy((REAL *)em_tensor_data(c->out[0]) + bi * c->m, vec, (size_t)c->m * sizeof *vec);
            FN(store_)(c->out[1], bi, a, m, m, m);
            break;
        case EM_OP_SVD: {
            blasint ucols = c->full ? m : (blasint)mn, vrows = c->full ? n : (blasint)mn;
            blasint ldu = lda, ldvt = vrows > 1 ? vrows : 1;
            FN(load_)(c, in[0], bi, a, m, n);
            if (FN(nonfinite_)(a, c->m * c->n)) {
                la_fail(c, bi, LA_NONFINITE, 0);
                break;
            }
            if (m > 0 && n > 0)
                LP(gesdd_)(c->full ? "A" : "S", &m, &n, a, &lda, vec, b2, &ldu, v3, &ldvt, work, &lwork, iwork, &info, 1);
            else { /* an empty matrix: full U and Vh are identities */
                for (int64_t i = 0; i < (int64_t)ucols * c->m; i++) b2[i] = i % (c->m + 1) == 0;
                for (int64_t i = 0; i < (int64_t)vrows * c->n; i++) v3[i] = i % (vrows + 1) == 0;
            }
            if (info > 0) {
                la_fail(c, bi, LA_NO_CONVERGENCE, info);
                break;
            }
            FN(store_)(c->out[0], bi, b2, m, ucols, m);
            memcpy((REAL *)em_tensor_data(c->out[1]) + bi * mn, vec, (size_t)mn * sizeof *vec);
            FN(store_)(c->out[2], bi, v3, vrows, n, ldvt);
            break;
        }
        case EM_OP_LSTSQ: {
            FN(load_)(c, in[0], bi, a, m, n);
            FN(load_)(c, in[1], bi, b2, m, k); /* (ldb = max(m, n): moved below) */
            for (int64_t j = k - 1; j >= 0 && ldb != m; j--)
                for (int64_t i = m - 1; i >= 0; i--) b2[i + j * ldb] = b2[i + j * m];
            if (FN(nonfinite_)(a, c->m * c->n)) {
                la_fail(c, bi, LA_NONFINITE, 0);
                break;
            }
            REAL rc = -1;
            blasint rank = 0;
            if (m > 0 && n > 0 && k > 0)
                LP(gelsd_)(&m, &n, &k, a, &lda, b2, &ldb, vec, &rc, &rank, work, &lwork, iwork, &info);
            else
                for (int64_t i = 0; i < (int64_t)ldb * k; i++) b2[i] = 0;
            if (info > 0) {
                la_fail(c, bi, LA_NO_CONVERGENCE, info);
                break;
            }
            FN(store_)(c->out[0], bi, b2, n, k, ldb);
            break;
        }
        default: break;
        }
    }
    em_free(a);
    em_free(b2);
    em_free(v3);
    em_free(vec);
    em_free(piv);
    em_free(work);
    em_free(iwork);
    return;
nomem:
    em_free(a);
    em_free(b2);
    em_free(v3);
    em_free(vec);
    em_free(piv);
    em_free(work);
    em_free(iwork);
    la_fail(c, begin, LA_NOMEM, 0);
}

#undef FN
#undef CAT
#undef CAT_
