/*
 * source_text.c - the dtype names and conversions the CUDA C generators
 * share (source_text.h).
 */
#include <stdlib.h>

#include "ember/codegen_cuda.h"
#include "source_text.h"

static const char *const sfx_of[EM_DTYPE_COUNT] = {
#define SFX(unused, S, T, sfx) [EM_DTYPE_##S] = #sfx,
    EM_FOR_DTYPES_STORED(SFX, _)
#undef SFX
};

const char *em_cuda_sfx(em_dtype dt) { return sfx_of[dt]; }

const char *em_cuda_ctype(em_dtype dt) {
    switch (dt) {
    case EM_DTYPE_F32: return "float";
    case EM_DTYPE_F64: return "double";
    case EM_DTYPE_I64: return "em_sc_i64";
    case EM_DTYPE_I32: return "em_sc_i32";
    case EM_DTYPE_I16: return "em_sc_i16";
    case EM_DTYPE_I8: return "em_sc_i8";
    case EM_DTYPE_U8: return "em_sc_u8";
    case EM_DTYPE_F16: return "em_sc_f16";
    case EM_DTYPE_BF16: return "em_sc_bf16";
    default: return "bool";
    }
}

void em_cuda_convert(em_strbuf *s, const char *x, em_dtype from, em_dtype to) {
    if (from == to)
        em_strbuf_puts(s, x);
    else
        em_strbuf_printf(s, "sc_cast_%s_%s(%s)", sfx_of[from], sfx_of[to], x);
}

char *em_cuda_source_take(em_strbuf *s) {
    char *text = em_strbuf_take(s);
    if (!text) em_error(EM_ERR_NOMEM, "out of memory generating CUDA C");
    return text;
}

em_status em_cuda_source_ptx(char *src, const char *name, int sm, char **ptx) {
    *ptx = NULL;
    if (!src) return em_last_status();
    em_status st = em_cuda_ptx(src, name, sm, ptx, NULL);
    free(src);
    return st;
}

em_status em_cuda_check_inferred(const char *name, em_dtype in, em_dtype out, em_status inferred, em_dtype got) {
    if (inferred != EM_OK)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "cuda: %s has no kernel for %s: %s", name, em_dtype_long_name(in),
                        em_last_error());
    if (got != out)
        return em_error(EM_ERR_NOT_IMPLEMENTED, "cuda: %s of %s gives %s, not %s (cast the result)", name,
                        em_dtype_long_name(in), em_dtype_long_name(got), em_dtype_long_name(out));
    return EM_OK;
}
