/*
 * sort_items.h - sorting and selecting items that carry an order key and
 * the index they came from; included by sort.c once per item layout.
 *
 * The includer defines
 *   ITEM             the item type
 *   SFX              the suffix of the functions made here
 *   DIGITS(it)       the uint64_t whose bytes LO_BYTE..HI_BYTE radix sorts
 *   LESS(a, b)       the total order: by key, then by index
 * Items are made in index order and every sort here keeps ties in that
 * order (LESS breaks them by index), which is PyTorch's stable=True.
 */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX)

/* Short runs: insertion, which is stable. */
static void FN(insertion_)(ITEM *a, int64_t n) {
    for (int64_t i = 1; i < n; i++) {
        ITEM v = a[i];
        int64_t j = i;
        for (; j > 0 && LESS(v, a[j - 1]); j--) a[j] = a[j - 1];
        a[j] = v;
    }
}

/* Runs of 32 by insertion, then merges between a and t; returns which holds
 * the result. */
static ITEM *FN(merge_sort_)(ITEM *a, ITEM *t, int64_t n) {
    const int64_t run = 32;
    for (int64_t b = 0; b < n; b += run) FN(insertion_)(a + b, n - b < run ? n - b : run);
    ITEM *src = a, *dst = t;
    for (int64_t w = run; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) dst[o++] = LESS(src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[o++] = src[i++];
            while (j < hi) dst[o++] = src[j++];
        }
        ITEM *s = src;
        src = dst;
        dst = s;
    }
    return src;
}

/* Least significant digit first, a byte at a time; the histograms of all
 * bytes come from one pass, and a byte that is the same in every item (the
 * high bytes of small integers) costs no pass. */
static ITEM *FN(radix_sort_)(ITEM *a, ITEM *t, int64_t n, int lo, int hi) {
    int64_t count[8][256];
    memset(count, 0, sizeof count);
    for (int64_t i = 0; i < n; i++) {
        uint64_t d = DIGITS(a[i]);
        for (int b = lo; b <= hi; b++) count[b][(d >> (8 * b)) & 255]++;
    }
    ITEM *src = a, *dst = t;
    for (int b = lo; b <= hi; b++) {
        int64_t *c = count[b], sum = 0;
        if (c[(DIGITS(src[0]) >> (8 * b)) & 255] == n) continue;
        for (int d = 0; d < 256; d++) {
            int64_t k = c[d];
            c[d] = sum;
            sum += k;
        }
        for (int64_t i = 0; i < n; i++) dst[c[(DIGITS(src[i]) >> (8 * b)) & 255]++] = src[i];
        ITEM *s = src;
        src = dst;
        dst = s;
    }
    return src;
}

/* Sorts a[0, n) (t: scratch of n); returns a or t, whichever holds it. */
static ITEM *FN(sort_)(ITEM *a, ITEM *t, int64_t n, int lo, int hi) {
    if (n <= 1) return a;
    return n < 1024 ? FN(merge_sort_)(a, t, n) : FN(radix_sort_)(a, t, n, lo, hi);
}

/* The item k places from the smallest (0 <= k < n), by radix selection:
 * the most significant byte first, keeping only the bucket the k-th falls
 * in, so it runs in linear time whatever the data. a is left as it was (t:
 * scratch of n). Candidates keep index order, so among equal keys the k-th
 * is the one at position k. */
static ITEM FN(select_)(const ITEM *a, ITEM *t, int64_t n, int64_t k, int lo, int hi) {
    const ITEM *c = a;
    int64_t m = n;
    for (int b = hi; b >= lo && m > 1; b--) {
        int64_t count[256] = {0};
        for (int64_t i = 0; i < m; i++) count[(DIGITS(c[i]) >> (8 * b)) & 255]++;
        int d = 0;
        while (k >= count[d]) k -= count[d++];
        if (count[d] == m) continue;
        int64_t w = 0;
        for (int64_t i = 0; i < m; i++) /* t may be c: w <= i */
            if ((int)((DIGITS(c[i]) >> (8 * b)) & 255) == d) t[w++] = c[i];
        c = t;
        m = w;
    }
    return c[k];
}

#undef FN
#undef CAT
#undef CAT_
