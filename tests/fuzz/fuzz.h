/* SPDX-License-Identifier: MIT */
/*
 * Fuzz targets (libFuzzer entry points) and their seed corpora.  Built with
 * clang -fsanitize=fuzzer,address by `make fuzz` (tests/fuzz/CMakeLists.txt),
 * and replayed on their seeds by the unit test unit_fuzz_wire_replay in
 * every build.
 */
#ifndef SOFTHCA_FUZZ_H
#define SOFTHCA_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Seed i of the wire fuzzer into buf: its length, 0 past the last seed. */
size_t fuzz_wire_seed(unsigned int i, uint8_t *buf, size_t cap);

#endif
