/* The last-error message (engine/status.h) and the stop request (engine/stop.h): a message
 * longer than its buffer keeps its head and the end that says why (a 100 KB path once left
 * only its own first kilobyte); a message built from the last one, and one whose arguments
 * hold control characters, kept one line; the stop request's first signal stays, and
 * mp_stop_check names it and what was stopped. */
#include "tests/util/test_util.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "engine/status.h"
#include "engine/stop.h"

static void test_long_message_keeps_its_end(void **state)
{
    (void)state;
    size_t n = 100000;
    char *path = malloc(n + 1);
    assert_non_null(path);
    memset(path, 'a', n);
    path[0] = '/';
    path[n] = '\0';
    assert_int_equal(mp_fail(MP_ECKPT, "%s: cannot open the checkpoint (%s)", path, "No such "
                             "file or directory"), MP_ECKPT);
    const char *m = mp_error_message();
    assert_int_equal(strlen(m), 1023);
    assert_memory_equal(m, path, 400);
    assert_memory_equal(m + 400, " [...] aaa", 10);
    const char *end = ": cannot open the checkpoint (No such file or directory)";
    assert_string_equal(m + strlen(m) - strlen(end), end);
    free(path);
}

static void test_short_and_chained_messages(void **state)
{
    (void)state;
    mp_fail(MP_EDATA, "%s: token %d", "shard.bin", 7);
    assert_string_equal(mp_error_message(), "shard.bin: token 7");
    mp_fail(MP_EDATA, "loading: %s", mp_error_message());
    assert_string_equal(mp_error_message(), "loading: shard.bin: token 7");
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mp_fail(MP_EDATA, "%s", big);
    mp_fail(MP_EDATA, "context: %s", mp_error_message()); /* long, built from itself */
    assert_int_equal(strlen(mp_error_message()), 1023);
    assert_memory_equal(mp_error_message(), "context: xxx", 12);
    mp_error_clear();
    assert_string_equal(mp_error_message(), "");
    mp_fail(MP_EUSAGE, "%s: bad", "dir\nname\twith\x7f\x1b[31m"); /* one line, always */
    assert_string_equal(mp_error_message(), "dir?name?with??[31m: bad");
}

static void test_stop_request(void **state)
{
    (void)state;
    assert_int_equal(mp_stop_requested(), 0);
    assert_int_equal(mp_stop_check("loading"), MP_OK);
    mp_stop_request(SIGUSR1);
    mp_stop_request(SIGTERM); /* the first stays */
    assert_int_equal(mp_stop_requested(), SIGUSR1);
    assert_int_equal(mp_stop_check("listing /data"), MP_ESTOPPED);
    assert_string_equal(mp_error_message(), "stopped by SIGUSR1 while listing /data");
    assert_string_equal(mp_stop_name(SIGTERM), "SIGTERM");
    assert_string_equal(mp_stop_name(SIGHUP), "signal 1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_message_keeps_its_end),
        cmocka_unit_test(test_short_and_chained_messages),
        cmocka_unit_test(test_stop_request),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
