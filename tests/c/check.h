/*
 * check.h - a minimal test harness for the C unit tests.
 *
 * CHECK records a failure (with file:line and the expression) and goes on,
 * so one run reports every broken expectation; main returns check_report().
 */
#ifndef EMBER_TEST_CHECK_H
#define EMBER_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_failures, check_count;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        check_count++;                                                                             \
        if (!(cond)) {                                                                             \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);              \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        check_count++;                                                                             \
        if (!(cond)) {                                                                             \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_NEAR(a, b, tol) CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g", \
                                        (double)(a), (double)(b))
static inline int check_contains(const char *hay, const char *needle) {
    return hay && strstr(hay, needle);
}
static inline const char *check_str(const char *s) { return s ? s : "(null)"; }
#define CHECK_STR_CONTAINS(hay, needle)                                                            \
    CHECK_MSG(check_contains((hay), (needle)), "\"%s\" does not contain \"%s\"", check_str(hay),  \
              (needle))

#define RUN(test)                                                                                  \
    do {                                                                                           \
        int before = check_failures;                                                               \
        test();                                                                                    \
        fprintf(stderr, "%s %s\n", check_failures == before ? "ok  " : "FAIL", #test);            \
    } while (0)

static int check_report(void) {
    fprintf(stderr, "%d checks, %d failures\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}

#endif
