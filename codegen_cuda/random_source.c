/*
 * random_source.c - rand and randn for the CUDA device as CUDA C, from
 * ops_random.h: the Philox generator and transforms the CPU's kernels run.
 * Element i comes from lane i % per_block of Philox block offset + i /
 * per_block, as on the CPU (runtime/random.c), so a seed and offset give
 * the same float32 numbers on both devices. Each thread draws whole blocks
 * (a grid-stride loop over them) and writes their elements.
 */
#include <stdio.h>

#include "ember/codegen_cuda.h"
#include "ember/strbuf.h"

typedef struct {
    const char *name;
    int per_block;
    const char *type;
    bool normal_pair;    /* a and b hold the block's float32 normal pair */
    const char *element; /* element l of the block w[] */
} random_kernel;

static const random_kernel kernels[] = {
    {"rand_f32", 4, "float", false, "em_sc_u24(w[l])"},
    {"rand_f64", 2, "double", false, "em_sc_u53(w[2 * l], w[2 * l + 1])"},
    {"randn_f32", 2, "float", true, "(l ? b : a)"},
    {"randn_f64", 2, "double", false, "em_sc_normal_f64(w, l)"},
};

int em_cuda_random_kernels(const char **names, int max) {
    int n = (int)(sizeof kernels / sizeof *kernels);
    for (int i = 0; i < n && i < max; i++) names[i] = kernels[i].name;
    return n;
}

char *em_cuda_random_source(void) {
    em_strbuf s;
    em_strbuf_init(&s);
    em_strbuf_puts(&s, "/* ember: rand and randn (generated from ops_random.h) */\n"
                       "#include \"ember/ops_math.h\"\n"
                       "#include \"ember/ops_random.h\"\n");
    for (size_t k = 0; k < sizeof kernels / sizeof *kernels; k++) {
        const random_kernel *r = &kernels[k];
        em_strbuf_printf(&s,
                         "extern \"C\" __global__ void em_cuda_%s(long long n, unsigned long long seed, "
                         "unsigned long long offset, %s *__restrict__ out) {\n"
                         "    long long blocks = (n + %d) / %d;\n"
                         "    long long step = (long long)gridDim.x * blockDim.x;\n"
                         "    for (long long blk = (long long)blockIdx.x * blockDim.x + threadIdx.x; blk < blocks; "
                         "blk += step) {\n"
                         "        em_sc_u32 w[4];\n"
                         "        em_sc_philox(seed, offset + (unsigned long long)blk, w);\n",
                         r->name, r->type, r->per_block - 1, r->per_block);
        if (r->normal_pair) em_strbuf_puts(&s, "        float a, b;\n        em_sc_normal_pair_f32(w[0], w[1], &a, &b);\n");
        em_strbuf_printf(&s,
                         "        for (int l = 0; l < %d; l++) {\n"
                         "            long long i = blk * %d + l;\n"
                         "            if (i < n) out[i] = %s;\n"
                         "        }\n"
                         "    }\n"
                         "}\n",
                         r->per_block, r->per_block, r->element);
    }
    char *text = em_strbuf_take(&s);
    if (!text) em_error(EM_ERR_NOMEM, "out of memory generating CUDA C");
    return text;
}
