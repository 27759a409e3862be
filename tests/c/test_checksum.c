/*
 * test_checksum.c - CRC-32 and SHA-256 (runtime/checksum.c) against
 * published check values and a bit-at-a-time reference, over every length
 * and alignment where the carry-less path changes its steps.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ember/checksum.h"

/* The definition: one bit at a time. */
static uint32_t crc_reference(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++) crc = crc & 1 ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
    }
    return ~crc;
}

static void test_crc32_check_value(void) {
    CHECK(em_crc32(0, "123456789", 9) == 0xCBF43926u); /* the CRC-32 catalogue's check */
    CHECK(em_crc32(0, "", 0) == 0);
    CHECK(em_crc32(0x12345678u, "", 0) == 0x12345678u);
}

static void test_crc32_every_length_and_alignment(void) {
    enum { N = 1200 };
    uint8_t *buf = malloc(N + 16);
    uint32_t x = 2463534242u;
    for (int i = 0; i < N + 16; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        buf[i] = (uint8_t)x;
    }
    int bad = 0;
    for (size_t n = 0; n <= N; n += n < 300 ? 1 : 37)
        for (size_t off = 0; off < 16; off += 5)
            for (uint32_t start = 0; start < 2; start++) {
                uint32_t seed = start ? 0xDEADBEEFu : 0;
                if (em_crc32(seed, buf + off, n) != crc_reference(seed, buf + off, n)) bad++;
            }
    CHECK_MSG(bad == 0, "%d lengths/offsets differ from the bitwise CRC", bad);
    /* split anywhere, the same CRC as in one call */
    uint32_t whole = em_crc32(0, buf, N);
    for (size_t cut = 0; cut <= N; cut += 61) CHECK(em_crc32(em_crc32(0, buf, cut), buf + cut, N - cut) == whole);
    free(buf);
}

static void hex(const uint8_t d[32], char out[65]) {
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void sha_of(const void *p, size_t n, size_t step, char out[65]) {
    em_sha256 h;
    uint8_t d[32];
    em_sha256_init(&h);
    for (size_t i = 0; i < n; i += step) em_sha256_update(&h, (const char *)p + i, n - i < step ? n - i : step);
    em_sha256_final(&h, d);
    hex(d, out);
}

static void test_sha256_vectors(void) {
    char out[65];
    sha_of("", 0, 1, out);
    CHECK(!strcmp(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    sha_of("abc", 3, 3, out);
    CHECK(!strcmp(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    for (size_t step = 1; step <= 64; step += 7) {
        sha_of(m, strlen(m), step, out);
        CHECK(!strcmp(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    }
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    sha_of(a, 1000000, 4093, out);
    CHECK(!strcmp(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
    free(a);
}

int main(void) {
    RUN(test_crc32_check_value);
    RUN(test_crc32_every_length_and_alignment);
    RUN(test_sha256_vectors);
    return check_report();
}
