/*
 * Fuzz target for the TCP bootstrap's message parsers: the root's hello reader and a rank's
 * handshake and frame reader (core/bootstrap_tcp.c), fed through socketpairs as from TCP.
 * Input: byte 0 picks the parser (even: root, odd: rank); the rest is described at
 * boot_tcp_fuzz_root. Built with -fsanitize=fuzzer it is a libFuzzer target
 * (tests/fuzz/fuzz_boot_libfuzzer.sh); fuzz_boot_main.c drives it without clang.
 */
#include <stddef.h>
#include <stdint.h>

#include "core/bootstrap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (len < 1) return 0;
    if (data[0] & 1)
        boot_tcp_fuzz_rank(data + 1, len - 1);
    else
        boot_tcp_fuzz_root(data + 1, len - 1);
    return 0;
}
