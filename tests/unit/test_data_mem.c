/* Data sizes against memory (io/memcheck.h): the shared check multiplies with overflow checks
 * and refuses, with MP_EDATA and the numbers, a block larger than the process's memory ceiling
 * less the data already held; the ceiling reads cgroup v1 and v2 limits along the cgroup path;
 * the synthetic dataset of issue 18 ([4096, 4096, 3] x 50000 samples, about 2.5 TB) and one
 * whose size overflows are refused before anything is allocated (both used to abort). */
#include "tests/util/test_util.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/alloc.h"
#include "io/dataset.h"
#include "io/memcheck.h"

static void write_text(const char *path, const char *text)
{
    mp_test_write_file(path, text, strlen(text), 0);
}

static void make_dirs(const char *root, const char *rel)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    mkdir(path, 0755);
}

static void test_check_fits(void **state)
{
    (void)state;
    int64_t bytes = -1;
    int64_t small[3] = {60000, 28, 28};
    assert_int_equal(mp_data_mem_check("here", "images", 3, small, &bytes), MP_OK);
    assert_int_equal(bytes, 60000 * 784);
    int64_t zero[2] = {0, 1000};
    assert_int_equal(mp_data_mem_check("here", "nothing", 2, zero, &bytes), MP_OK);
    assert_int_equal(bytes, 0);
    /* Exactly the room left is accepted, one byte more is not. */
    int64_t room = mp_mem_limit(NULL, 0) - mp_mem_current(MP_MEM_DATA);
    int64_t exact[1] = {room}, over[1] = {room + 1};
    assert_int_equal(mp_data_mem_check("here", "all of it", 1, exact, &bytes), MP_OK);
    assert_int_equal(bytes, room);
    assert_int_equal(mp_data_mem_check("here", "too much", 1, over, &bytes), MP_EDATA);
    assert_int_equal(bytes, 0);
}

static void test_check_too_big(void **state)
{
    (void)state;
    char source[4400];
    int64_t limit = mp_mem_limit(source, sizeof source);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    assert_true(limit > 0 && limit <= (int64_t)pages * page);
    assert_true(strcmp(source, "physical memory") == 0 || strncmp(source, "cgroup limit ", 13) == 0);

    int64_t huge[2] = {1ll << 40, 1ll << 20}, bytes = -1;
    mp_error_clear();
    assert_int_equal(mp_data_mem_check("/data/x", "many images", 2, huge, &bytes), MP_EDATA);
    assert_int_equal(bytes, 0);
    const char *msg = mp_error_message();
    assert_null(strchr(msg, '\n'));
    char want[256];
    snprintf(want, sizeof want, "/data/x: many images needs 1099511627776 x 1048576 = "
                                "1152921504606846976 bytes (1073741824.0 GiB), more than the "
                                "%lld bytes",
             (long long)limit);
    if (!strstr(msg, want))
        fail_msg("\"%s\" lacks \"%s\"", msg, want);
    assert_non_null(strstr(msg, source));
    assert_non_null(strstr(msg, "already held for data"));

    int64_t wrap[3] = {1ll << 32, 1ll << 31, 2}; /* 2^64: wraps to 0 in unchecked arithmetic */
    assert_int_equal(mp_data_mem_check("/data/x", "wrapping", 3, wrap, &bytes), MP_EDATA);
    assert_non_null(strstr(mp_error_message(),
                           "/data/x: wrapping: 4294967296 x 2147483648 x 2 bytes overflows"));
    int64_t neg[2] = {-1, 5};
    assert_int_equal(mp_data_mem_check("/data/x", "negative", 2, neg, &bytes), MP_EDATA);
    assert_non_null(strstr(mp_error_message(), "invalid size -1 x 5"));
}

/* Data already held counts against the ceiling. */
static void test_check_counts_held(void **state)
{
    (void)state;
    int64_t room = mp_mem_limit(NULL, 0) - mp_mem_current(MP_MEM_DATA);
    int64_t exact[1] = {room};
    mp_mem_count(MP_MEM_HOST, MP_MEM_DATA, 4096);
    assert_int_equal(mp_data_mem_check("here", "all of it", 1, exact, NULL), MP_EDATA);
    assert_non_null(strstr(mp_error_message(), "less 4096 bytes already held for data"));
    mp_mem_count(MP_MEM_HOST, MP_MEM_DATA, -4096);
    assert_int_equal(mp_data_mem_check("here", "all of it", 1, exact, NULL), MP_OK);
}

static void test_cgroup_v2(void **state)
{
    (void)state;
    char root[1024], self[1100], path[2048], source[4400];
    snprintf(root, sizeof root, "%s", mp_test_dir("memcheck_v2"));
    snprintf(self, sizeof self, "%s/self_cgroup", root);
    /* The job's cgroup sets the limit; its step below says "max"; the root has no file. */
    make_dirs(root, "sys/system.slice/job_7/step_0");
    snprintf(path, sizeof path, "%s/sys/system.slice/job_7/memory.max", root);
    write_text(path, "1073741824\n");
    snprintf(path, sizeof path, "%s/sys/system.slice/job_7/step_0/memory.max", root);
    write_text(path, "max\n");
    snprintf(path, sizeof path, "%s/sys", root);
    write_text(self, "0::/system.slice/job_7/step_0\n");
    assert_int_equal(mp_cgroup_mem_limit(self, path, source, sizeof source), 1073741824);
    char want[2200];
    snprintf(want, sizeof want, "cgroup limit %s/sys/system.slice/job_7/memory.max", root);
    assert_string_equal(source, want);
    /* A smaller limit on the root (a container's) wins. */
    snprintf(path, sizeof path, "%s/sys/memory.max", root);
    write_text(path, "65536\n");
    snprintf(path, sizeof path, "%s/sys", root);
    assert_int_equal(mp_cgroup_mem_limit(self, path, source, sizeof source), 65536);
    /* The root path "/" reads the root's file; no file and no memory line mean no limit. */
    write_text(self, "0::/\n");
    assert_int_equal(mp_cgroup_mem_limit(self, path, NULL, 0), 65536);
    write_text(self, "3:cpu:/a\n");
    assert_int_equal(mp_cgroup_mem_limit(self, path, NULL, 0), -1);
    snprintf(path, sizeof path, "%s/nothing", root);
    assert_int_equal(mp_cgroup_mem_limit(path, root, NULL, 0), -1);
}

static void test_cgroup_v1(void **state)
{
    (void)state;
    char root[1024], self[1100], path[2048], source[4400];
    snprintf(root, sizeof root, "%s", mp_test_dir("memcheck_v1"));
    snprintf(self, sizeof self, "%s/self_cgroup", root);
    make_dirs(root, "sys/memory/process_api/abc");
    snprintf(path, sizeof path, "%s/sys/memory/memory.limit_in_bytes", root);
    write_text(path, "9223372036854771712\n"); /* v1's "unlimited" */
    snprintf(path, sizeof path, "%s/sys/memory/process_api/abc/memory.limit_in_bytes", root);
    write_text(path, "2147483648\n");
    write_text(self, "9:name=systemd:/\n5:devices:/\n4:cpuacct,memory:/process_api/abc\n0::/\n");
    snprintf(path, sizeof path, "%s/sys", root);
    assert_int_equal(mp_cgroup_mem_limit(self, path, source, sizeof source), 2147483648ll);
    assert_non_null(strstr(source, "process_api/abc/memory.limit_in_bytes"));
}

/* Issue 18: data.synthetic_shape = [4096, 4096, 3] with the default 50000 training samples
 * aborted in mp_alloc; it is a data error with the numbers, and nothing stays allocated. */
static void test_synthetic_too_big(void **state)
{
    (void)state;
    int64_t base = mp_mem_current(MP_MEM_DATA);
    mp_dataset d;
    memset(&d, 0x5a, sizeof d);
    mp_error_clear();
    assert_int_equal(mp_synthetic_make(&d, "train", 4096, 4096, 3, 50000, 10, 1), MP_EDATA);
    const char *msg = mp_error_message();
    assert_null(strchr(msg, '\n'));
    if (!strstr(msg, "synthetic data: train split: 50000 images of 4096x4096x3 with labels needs "
                     "50000 x 50331652 = 2516582600000 bytes"))
        fail_msg("unexpected message \"%s\"", msg);
    mp_dataset zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(&d, &zero, sizeof d);
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
    /* A shape whose byte count overflows 64 bits (2^90 per image) is refused as such. */
    assert_int_equal(mp_synthetic_make(&d, "test", 1 << 30, 1 << 30, 1 << 30, 100, 10, 1),
                     MP_EDATA);
    assert_non_null(strstr(mp_error_message(), "overflows"));
    assert_int_equal(mp_mem_current(MP_MEM_DATA), base);
    /* A small one still works. */
    assert_int_equal(mp_synthetic_make(&d, "test", 8, 8, 3, 20, 10, 1), MP_OK);
    assert_int_equal(d.count, 20);
    mp_dataset_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_fits),        cmocka_unit_test(test_check_too_big),
        cmocka_unit_test(test_check_counts_held), cmocka_unit_test(test_cgroup_v2),
        cmocka_unit_test(test_cgroup_v1),         cmocka_unit_test(test_synthetic_too_big),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
