/* io/fsutil.h's mp_path_within: a path is inside a directory by what it resolves to (links,
 * "..", a relative start), also where its last parts do not exist yet (their ".." taken as
 * the directories made for them will resolve); a sibling that only shares the directory's name
 * as a prefix is not inside, nor is anything of a directory that does not exist; and
 * mp_path_name_in, a path directly in a directory. */
#include "tests/util/test_util.h"

#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fsutil.h"

static void test_path_within(void **state)
{
    (void)state;
    const char *root = mp_test_dir("fsutil_within");
    char data[1200], p[1400], link[1300];
    snprintf(data, sizeof data, "%s/data", root);
    assert_int_equal(mkdir(data, 0755) == 0 || access(data, F_OK) == 0, 1);
    snprintf(p, sizeof p, "%s/data2", root);
    assert_int_equal(mkdir(p, 0755) == 0 || access(p, F_OK) == 0, 1);
    assert_true(mp_path_within(data, data));
    snprintf(p, sizeof p, "%s/sub/new/m.jsonl", data); /* none of it exists yet */
    assert_true(mp_path_within(data, p));
    snprintf(p, sizeof p, "%s/../data/x", data);
    assert_true(mp_path_within(data, p));
    snprintf(p, sizeof p, "%s/new/../../x/m.jsonl", data); /* ".." past names yet to be made */
    assert_false(mp_path_within(data, p));
    snprintf(p, sizeof p, "%s/new/./../data/./m.jsonl", root);
    assert_true(mp_path_within(data, p));
    snprintf(p, sizeof p, "%s/data2/m.jsonl", root); /* "data" is a prefix of its name only */
    assert_false(mp_path_within(data, p));
    snprintf(p, sizeof p, "%s/../m.jsonl", data);
    assert_false(mp_path_within(data, p));
    snprintf(link, sizeof link, "%s/to-data", root); /* a link from outside into it */
    unlink(link);
    assert_int_equal(symlink("data", link), 0);
    snprintf(p, sizeof p, "%s/trace", link);
    assert_true(mp_path_within(data, p));
    assert_true(mp_path_within(link, data));
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(data), 0); /* relative paths start at the working directory */
    assert_true(mp_path_within(data, "m.jsonl"));
    assert_true(mp_path_within(".", "a/b"));
    assert_false(mp_path_within(data, "../m.jsonl"));
    assert_int_equal(chdir(cwd), 0);
    snprintf(p, sizeof p, "%s/none", root); /* no such directory: nothing is inside it */
    assert_false(mp_path_within(p, p));
    assert_true(mp_path_within("/", data));
    assert_false(mp_path_within(data, ""));
}

/* mp_path_name_in: the name when the path's own directory is dir (by device and inode, so a
 * link or another spelling of it counts), NULL for a deeper path or a missing directory. */
static void test_path_name_in(void **state)
{
    (void)state;
    const char *root = mp_test_dir("fsutil_name_in");
    char p[1300], q[1300];
    snprintf(p, sizeof p, "%s/rank-0.json", root);
    assert_string_equal(mp_path_name_in(root, p), "rank-0.json");
    snprintf(p, sizeof p, "%s/./../%s/m.jsonl", root, strrchr(root, '/') + 1);
    assert_string_equal(mp_path_name_in(root, p), "m.jsonl");
    snprintf(p, sizeof p, "%s/sub/m.jsonl", root);
    assert_null(mp_path_name_in(root, p));
    snprintf(q, sizeof q, "%s/none", root);
    assert_null(mp_path_name_in(q, p));
    assert_string_equal(mp_path_name_in("/", "/x.json"), "x.json");
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(root), 0);
    assert_string_equal(mp_path_name_in(root, "m.jsonl"), "m.jsonl");
    assert_int_equal(chdir(cwd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_within),
        cmocka_unit_test(test_path_name_in),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
